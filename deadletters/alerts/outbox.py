"""The alert outbox: one Alert row per event and channel that takes it, written inside the
transaction of the event (a task's death, a batch that finished, a notice), and a send pass
kicked once that transaction commits. An event no channel sends gets one row without a channel:
`muted` (its cause or kind is snoozed, or the kind paused) or `skipped` (no channel configured),
so every death is counted somewhere. Delivery is deadletters.alerts.sender."""

import uuid
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from deadletters.alerts.channels import routed_channels
from deadletters.alerts.text import one_line
from deadletters.alerts.threshold import threshold_crossing
from deadletters.models import Alert, AlertCategory, AlertSnooze, AlertStatus
from reports.models import BatchStatus, PausedKind, ReportBatch
from reports.services.batches import batch_progress
from transport.connection import redis_connection
from transport.queues import enqueue_job

KICK_KEY = "alerts:sender:kick"
KICK_TTL_SECONDS = 30
SEND_ALERTS_JOB_FUNC = "deadletters.alerts.jobs.send_alerts_job"
_EVENTS = {
    AlertCategory.DEAD_LETTER: "death",
    AlertCategory.BATCH_SUMMARY: "batch",
    AlertCategory.RESOLVED: "resolved",
    AlertCategory.TEST: "test",
}


def write_alert(*, category: str, payload: dict, fingerprint: str = "", muted: str = "", **event) -> Alert:
    """The event's rows, one per channel routed to; returns the first. `event` holds the
    dead_letter or batch it is about."""
    kind, new = str(payload.get("kind", "")), bool(payload.get("new") or payload.get("lifecycle"))
    channels = [] if muted else routed_channels(event=_EVENTS[category], kind=kind, new=new)
    common = dict(category=category, payload=payload, fingerprint=fingerprint, **event)
    if not channels:
        status = AlertStatus.MUTED if muted else AlertStatus.SKIPPED
        return Alert.objects.create(channel="", status=status, **common)
    rows = Alert.objects.bulk_create([Alert(channel=c.name, **common) for c in channels])
    transaction.on_commit(kick_sender, robust=True)
    return rows[0]


def mute_reason(dead_letter, marks: dict) -> str:
    """ "snooze:<id>" when an operator snoozed the death's cause or kind (deadletters.alerts.snooze),
    "paused" when its kind is paused, or "" when its alert goes out. A mute until a threshold
    counts the death; the death that crosses it ends it and gets the crossing in `marks`."""
    scope = Q(fingerprint=dead_letter.fingerprint, kind="") | Q(kind=dead_letter.kind, fingerprint="")
    snoozes = list(AlertSnooze.objects.filter(scope, ended_at__isnull=True, until__gt=timezone.now()))
    muted = [f"snooze:{s.pk}" for s in snoozes if not (s.per_minute or s.total)]
    for snooze in (s for s in snoozes if s.per_minute or s.total):
        crossing = threshold_crossing(snooze, dead_letter)
        if crossing is None:
            muted.append(f"snooze:{snooze.pk}")
        else:
            marks["lifecycle"] = crossing
    if muted:
        return muted[0]
    return "paused" if PausedKind.objects.filter(kind=dead_letter.kind).exists() else ""


def dead_letter_payload(dead_letter) -> dict:
    """The snapshot an alert keeps, so rendering needs no joins and survives later edits."""
    return {
        "dead_letter_id": dead_letter.pk,
        "task_id": str(dead_letter.task.public_id),
        "kind": dead_letter.kind,
        "error_type": dead_letter.error_type,
        "message": one_line(dead_letter.error_message, 300),
        "attempts": dead_letter.attempts,
        # Died with attempts to spare: a permanent error (or reaped too often), so the same params fail alike.
        "permanent": dead_letter.attempts < dead_letter.task.max_attempts,
        "created_at": dead_letter.created_at.isoformat(),
    }


def enqueue_dead_letter_alert(*, dead_letter, cause: dict | None = None) -> Alert:
    """`cause` marks a new cause ({"new": True, "release": ...}) or a regression ({"lifecycle": ...})."""
    marks = dict(cause or {})
    muted = mute_reason(dead_letter, marks)
    payload = {**dead_letter_payload(dead_letter), **marks, **({"muted": muted} if muted else {})}
    return write_alert(
        category=AlertCategory.DEAD_LETTER,
        payload=payload,
        fingerprint=dead_letter.fingerprint,
        muted=muted,
        dead_letter=dead_letter,
    )


def enqueue_batch_summary_alert(
    *, batch, total: int, done: int, dead: int, finished_at: datetime | None = None
) -> Alert:
    """A batch finished: one alert linking to the console list filtered by the batch."""
    batch_id = str(batch.public_id)
    finished_at = finished_at or batch.finished_at
    payload = {
        "batch_id": batch_id,
        "name": batch.name,
        "total": total,
        "done": done,
        "dead": dead,
        "finished_at": finished_at.isoformat() if finished_at else None,
    }
    return write_alert(
        category=AlertCategory.BATCH_SUMMARY,
        payload=payload,
        fingerprint=f"batch:{uuid.UUID(batch_id).hex}",
        batch=batch,
    )


def batch_summaries_write(*, limit: int = 500) -> int:
    """One summary alert per completed batch that has dead tasks, the first time it completes
    (a replay may reopen it; it completes again silently). summary_alerted_at marks each completed
    batch as decided, with or without dead tasks, by a conditional UPDATE that one caller wins."""
    written = 0
    batches = ReportBatch.objects.filter(status=BatchStatus.COMPLETED, summary_alerted_at__isnull=True)
    for batch in batches.order_by("pk")[:limit]:
        with transaction.atomic():
            if not batches.filter(pk=batch.pk).update(summary_alerted_at=timezone.now()):
                continue
            progress = batch_progress(batch=batch)
            if progress.dead:
                enqueue_batch_summary_alert(batch=batch, total=progress.total, done=progress.done,
                                            dead=progress.dead)
                written += 1
    return written


def notice(payload: dict, *, fingerprint: str = "") -> Alert:
    """A notice (a cause resolved, a kind resumed, a snooze ended, a bulk run's news), written in
    the caller's transaction like any alert."""
    return write_alert(category=AlertCategory.RESOLVED, payload=payload, fingerprint=fingerprint)


def kick_sender() -> str | None:
    """Enqueue one send pass on the `high` queue. Kicks within KICK_TTL_SECONDS of a queued pass
    are one SET NX each (cheap); the job deletes the key when it starts, so an alert committed
    during a pass gets a pass of its own. The housekeeper's duty is the backstop for lost jobs."""
    conn = redis_connection()
    if not conn.set(KICK_KEY, "1", nx=True, ex=KICK_TTL_SECONDS):
        return None
    return enqueue_job(
        SEND_ALERTS_JOB_FUNC,
        queue="high",
        job_id=f"alerts-send-{uuid.uuid4().hex[:16]}",
        timeout=int(settings.DINGTALK_TIMEOUT * settings.DINGTALK_RATE_PER_MINUTE * 2 + 60),
        result_ttl=60,
        description="send pending alerts",
    )
