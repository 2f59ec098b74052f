"""A cause marked "fixed in the next release", or unmarked, from the causes page or a letter's page
(deadletters/services/cause_lifecycle.py audits it). Its mute until a threshold is a snooze
(console/views/alerts.py)."""

from django.contrib import messages
from django.http import Http404
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from console.access import REPLAY_PERMISSION, console_view
from console.views.alerts import redirect_back
from console.views.common import actor
from deadletters.audit import client_ip
from deadletters.services.cause_lifecycle import CauseError, CauseNotFound, cause_mark_fixed


@require_POST
@console_view(REPLAY_PERMISSION)  # marking it fixed replays its letters under the next release
def cause_fixed(request, fingerprint: str):
    undo = bool(request.POST.get("undo"))
    try:
        _cause, changed = cause_mark_fixed(
            fingerprint=fingerprint, actor=actor(request), undo=undo, ip_address=client_ip(request)
        )
    except CauseNotFound:
        raise Http404("No such cause.") from None
    except CauseError as exc:
        messages.error(request, _("The cause was not marked: %(why)s.") % {"why": exc})
        return redirect_back(request, "console:deadletter-groups")
    if undo:
        messages.success(request, _("The cause is no longer marked fixed.") if changed
                         else _("The cause was not marked fixed."))
    elif changed:
        messages.success(request, _("Marked fixed in the next release: its open letters are replayed with "
                                    "a canary once another release runs."))
    else:
        messages.info(request, _("The cause was marked fixed already."))
    return redirect_back(request, "console:deadletter-groups")
