"""The alert outbox: an Alert row is written inside the transaction of the event it reports
(a task's death, a batch that finished with dead tasks), and a send pass is kicked once that
transaction commits. Delivery is deadletters.alerts.sender."""

import logging
import uuid
from datetime import datetime

from django.conf import settings
from django.db import transaction

from deadletters.alerts import messages
from deadletters.alerts.channels.outbox import fan_out
from deadletters.alerts.muting import mute_reason
from deadletters.models import Alert, AlertCategory, AlertStatus
from transport.connection import redis_connection
from transport.queues import enqueue_job

logger = logging.getLogger("deadletters.alerts")

KICK_KEY = "alerts:sender:kick"
KICK_TTL_SECONDS = 30
SEND_ALERTS_JOB_FUNC = "deadletters.alerts.jobs.send_alerts_job"


def enqueue_dead_letter_alert(*, dead_letter, cause: dict | None = None) -> Alert:
    """Write the outbox row beside the dead letter (and its channel deliveries); the sender is
    kicked once the death commits. `cause` marks a new cause ({"new": True, "release": ...})."""
    configured = bool(settings.DINGTALK_WEBHOOK)
    muted = mute_reason(dead_letter)
    alert = Alert.objects.create(
        category=AlertCategory.DEAD_LETTER,
        dead_letter=dead_letter,
        fingerprint=dead_letter.fingerprint,
        payload={
            **messages.dead_letter_payload(dead_letter),
            **(cause or {}),
            **({"muted": muted} if muted else {}),
        },
        status=AlertStatus.MUTED if muted else AlertStatus.PENDING if configured else AlertStatus.SKIPPED,
    )
    if muted:
        return alert
    if fan_out([alert]) or configured:
        transaction.on_commit(kick_sender, robust=True)
    return alert


def enqueue_batch_summary_alert(
    *, batch, total: int, done: int, dead: int, finished_at: datetime | None = None
) -> Alert:
    """A batch finished: one alert linking to the console list filtered by the batch."""
    configured = bool(settings.DINGTALK_WEBHOOK)
    batch_id = str(batch.public_id)
    finished_at = finished_at or batch.finished_at
    alert = Alert.objects.create(
        category=AlertCategory.BATCH_SUMMARY,
        batch=batch,
        fingerprint=f"batch:{uuid.UUID(batch_id).hex}",
        payload={
            "batch_id": batch_id,
            "name": batch.name,
            "total": total,
            "done": done,
            "dead": dead,
            "finished_at": finished_at.isoformat() if finished_at else None,
        },
        status=AlertStatus.PENDING if configured else AlertStatus.SKIPPED,
    )
    if fan_out([alert]) or configured:
        transaction.on_commit(kick_sender, robust=True)
    return alert


def kick_sender() -> str | None:
    """Enqueue one send pass on the `high` queue. Kicks within KICK_TTL_SECONDS of a queued pass
    are one SET NX each (cheap); the job deletes the key when it starts, so an alert committed
    during a pass gets a pass of its own. `send_alerts --loop` is the backstop for lost jobs."""
    conn = redis_connection()
    if not conn.set(KICK_KEY, "1", nx=True, ex=KICK_TTL_SECONDS):
        return None
    return enqueue_job(
        SEND_ALERTS_JOB_FUNC,
        queue="high",
        job_id=f"alerts-send-{uuid.uuid4().hex[:16]}",
        timeout=int(settings.DINGTALK_TIMEOUT * settings.DINGTALK_RATE_PER_MINUTE * 2 + 60),
        result_ttl=60,
        description="send pending alerts (DingTalk and ALERT_CHANNELS)",
    )
