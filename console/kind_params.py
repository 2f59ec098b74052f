"""A report kind's parameters as the edit-and-replay page lists them, in the page's language.

reports.kinds declares them (marked for translation with gettext_noop); this only words them.
"""

from django.utils.translation import gettext, ngettext


def _number(value) -> str:
    if value is None:
        return gettext("any")
    return str(int(value)) if float(value).is_integer() else str(value)


def allowed_words(param) -> str:
    if param.choices:
        return gettext("one of %(choices)s") % {"choices": ", ".join(param.choices)}
    if param.minimum is not None or param.maximum is not None:
        return gettext("%(minimum)s to %(maximum)s") % {
            "minimum": _number(param.minimum),
            "maximum": _number(param.maximum),
        }
    if param.type == "date":
        return "YYYY-MM-DD"
    if param.max_length is not None:
        return ngettext("at most %(n)d character", "at most %(n)d characters", param.max_length) % {
            "n": param.max_length
        }
    return ""


def param_rows(kind) -> list[dict]:
    return [
        {
            "name": param.name,
            "type_label": gettext(param.type_label),
            "default_value": param.default_value(),
            "allowed_label": allowed_words(param),
            "description": gettext(param.description) if param.description else "",
        }
        for param in kind.params
    ]
