"""Whether a death's alert is muted: its cause or its kind is snoozed (deadletters.alerts.snooze),
or its kind is paused. A muted alert is kept and counted (status "muted"), never sent on its own;
the snooze's end, or the kind's resume, sends one summary."""

from django.db.models import Q
from django.utils import timezone

from deadletters.models import AlertSnooze
from reports.models import PausedKind


def active_snooze(*, fingerprint: str, kind: str, now=None) -> AlertSnooze | None:
    now = now or timezone.now()
    return (
        AlertSnooze.objects.filter(ended_at__isnull=True, until__gt=now)
        .filter(Q(fingerprint=fingerprint, kind="") | Q(kind=kind, fingerprint=""))
        .order_by("-until")
        .first()
    )


def mute_reason(dead_letter) -> str:
    """ "snooze:<id>", "paused", or "" when the death's alert goes out."""
    snooze = active_snooze(fingerprint=dead_letter.fingerprint, kind=dead_letter.kind)
    if snooze is not None:
        return f"snooze:{snooze.pk}"
    if PausedKind.objects.filter(kind=dead_letter.kind).exists():
        return "paused"
    return ""
