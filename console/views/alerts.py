"""Snoozed alerts: mute a cause or a kind for a time with a reason (from the causes page or a dead
letter's page), list the snoozes that run, lift one. Audited by deadletters.alerts.snooze.
A cause's runbook note, written from a dead letter's page (deadletters.services.cause_notes)."""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from console.access import REPLAY_PERMISSION, console_view
from console.views.common import actor, render_conflict
from deadletters.alerts.snooze import MAX_MINUTES, SnoozeError, active_snoozes, lift_snooze, snooze_alerts
from deadletters.audit import REASON_MAX, client_ip
from deadletters.models import CauseState
from deadletters.services.cause_notes import NOTE_LANGUAGES, cause_note_save
from reports.errors import InvalidParams


def _next(request) -> str:
    target = request.POST.get("next", "")
    safe = target and url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure())
    return target if safe else ""


def redirect_back(request, fallback: str = "console:alert-snoozes"):
    return redirect(_next(request) or fallback)


@console_view(REPLAY_PERMISSION)
def snooze_list(request, *, error: str = "", status: int = 200):
    context = {
        "snoozes": list(active_snoozes()[:500]),
        "error": error,
        "reason_max": REASON_MAX,
        "max_minutes": MAX_MINUTES,
    }
    return render(request, "console/snoozes.html", context, status=status)


@require_POST
@console_view(REPLAY_PERMISSION)
def snooze_create(request):
    try:
        snooze = snooze_alerts(
            fingerprint=request.POST.get("fingerprint", ""),
            kind=request.POST.get("kind", ""),
            minutes=request.POST.get("minutes", ""),
            reason=request.POST.get("reason", "")[:REASON_MAX],
            actor=actor(request),
            ip_address=client_ip(request),
            per_minute=request.POST.get("per_minute"),
            total=request.POST.get("total"),
        )
    except SnoozeError as exc:
        return snooze_list(request, error=_("Alerts were not muted: %(why)s.") % {"why": exc}, status=400)
    target = snooze.kind or snooze.fingerprint[:12]
    if snooze.per_minute or snooze.total:
        said = _("Alerts of %(target)s are muted until it crosses its threshold.")
    else:
        said = _("Alerts of %(target)s are muted until %(until)s.")
    messages.success(request, said % {"target": target, "until": f"{snooze.until:%Y-%m-%d %H:%M %Z}"})
    return redirect_back(request)


@require_POST
@console_view(REPLAY_PERMISSION)
def snooze_lift(request, snooze_id: int):
    lifted = lift_snooze(snooze_id=snooze_id, actor=actor(request), ip_address=client_ip(request))
    if lifted is None:
        messages.info(request, _("That snooze had already ended."))
    else:
        messages.success(request, _("Snooze lifted: its summary goes out with the next send pass."))
    return redirect("console:alert-snoozes")


@require_POST
@console_view(REPLAY_PERMISSION)
def cause_note(request, fingerprint: str):
    clear = "clear" in request.POST
    try:
        saved = cause_note_save(
            fingerprint=fingerprint,
            texts={} if clear else {code: request.POST.get(f"text_{code}", "").replace("\r\n", "\n")
                                  for code in NOTE_LANGUAGES},
            links=[] if clear else request.POST.get("links", "").split(),
            actor=actor(request),
            ip_address=client_ip(request),
        )
    except CauseState.DoesNotExist:
        raise Http404("No dead letter ever had this cause.") from None
    except InvalidParams as exc:
        return render_conflict(request, title=_("Note not saved"), message=str(exc), status=400,
                               back_url=_next(request))
    messages.success(request, _("Runbook note saved.") if saved else _("Runbook note cleared."))
    return redirect_back(request, "console:deadletter-groups")
