"""Mutes of a cause that last until a threshold (deadletters.alerts.snooze makes them): while its
deaths stay at or under `per_minute` in the last minute and `total` since the mute began, each
is counted, not sent; the death that goes over ends the mute (one conditional UPDATE, so one
death does, audited as the system) and its alert goes out saying so."""

from datetime import timedelta

from django.db.models import F
from django.utils import timezone

from deadletters.audit import record_audit
from deadletters.models import AlertSnooze, DeadLetter

WINDOW = timedelta(minutes=1)


def last_minute(snooze: AlertSnooze, dead_letter) -> int:
    """The cause's deaths in the minute up to this one since the mute began, counted no further
    than one over the threshold."""
    since = max(snooze.created_at, dead_letter.created_at - WINDOW)
    deaths = DeadLetter.objects.filter(fingerprint=dead_letter.fingerprint, created_at__gt=since)
    return deaths.values("pk")[: snooze.per_minute + 1].count()


def threshold_crossing(snooze: AlertSnooze, dead_letter) -> dict | None:
    """Count the death under the mute: None while it stays muted, else the crossing's marks for
    its alert (the mute has ended)."""
    rows = AlertSnooze.objects.filter(pk=snooze.pk, ended_at__isnull=True)
    rows.update(deaths=F("deaths") + 1)
    recent = last_minute(snooze, dead_letter) if snooze.per_minute else 0
    if recent <= (snooze.per_minute or 0):
        if not snooze.total:
            return None
        rows = rows.filter(deaths__gt=snooze.total)
    now = timezone.now()
    if not rows.update(ended_at=now, until=now, ended_by=""):
        return None
    snooze.refresh_from_db()
    marks = {"event": "threshold", "per_minute": snooze.per_minute, "total": snooze.total,
             "last_minute": recent, "deaths": snooze.deaths, "reason": snooze.reason,
             "since": snooze.created_at.isoformat()}
    record_audit(action="mute_threshold_crossed", source="system", dead_letter=dead_letter,
                 item_count=0, details={"snooze": snooze.pk, "fingerprint": snooze.fingerprint, **marks})
    return marks
