"""Forms of the console's actions."""

import json

from django import forms
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from deadletters.audit import REASON_MAX


class ReasonForm(forms.Form):
    reason = forms.CharField(label=pgettext_lazy("operator note", "Reason"), required=False,
                             max_length=REASON_MAX, widget=forms.Textarea(attrs={"rows": 2}))


class ReplayEditForm(ReasonForm):
    params = forms.CharField(
        label=_("Params (JSON object)"),
        max_length=1024 * 1024,
        widget=forms.Textarea(attrs={"rows": 14, "class": "mono", "spellcheck": "false"}),
    )

    def clean_params(self):
        raw = self.cleaned_data["params"]
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            # Where, not Python's English wording of what.
            raise forms.ValidationError(
                gettext("Not valid JSON (line %(line)d, column %(column)d).")
                % {"line": exc.lineno, "column": exc.colno}
            ) from None
        except ValueError:
            raise forms.ValidationError(_("Not valid JSON.")) from None
        except RecursionError:
            raise forms.ValidationError(_("Not valid JSON: nested too deeply.")) from None
        if not isinstance(value, dict):
            raise forms.ValidationError(_("Must be a JSON object ({...})."))
        return value
