"""Dead-letter workflow: creation (inside the task's death transaction), replay marks, audit."""

from django.db import transaction
from django.utils import timezone

from deadletters.fingerprints import fingerprint
from deadletters.models import AuditEntry, DeadLetter, DeadLetterStatus
from reports.models import ReportTask

REPLAYABLE_STATUSES = (DeadLetterStatus.OPEN, DeadLetterStatus.ARCHIVED, DeadLetterStatus.DISCARDED)


def create_dead_letter(*, task: ReportTask, failure) -> DeadLetter:
    """Called by reports.services.record_attempt_failure inside the transaction that kills the task."""
    assert transaction.get_connection().in_atomic_block, "a dead letter is born with its task's death"
    dead_letter = DeadLetter.objects.create(
        task=task,
        kind=task.kind,
        params=task.params,
        error_type=failure.error_type,
        error_message=failure.message,
        traceback=failure.traceback,
        attempts=task.attempt,
        fingerprint=fingerprint(failure.error_type, failure.message),
    )
    from deadletters.services.alerts import enqueue_dead_letter_alert

    enqueue_dead_letter_alert(dead_letter=dead_letter)  # outbox row, same transaction
    return dead_letter


def mark_replayed(*, task: ReportTask, actor: str, now=None) -> list[DeadLetter]:
    """Mark the task's not-yet-replayed dead letters replayed; returns them newest first."""
    now = now or timezone.now()
    letters = list(task.dead_letters.filter(status__in=REPLAYABLE_STATUSES).order_by("-created_at", "-id"))
    if letters:
        DeadLetter.objects.filter(pk__in=[dl.pk for dl in letters], status__in=REPLAYABLE_STATUSES).update(
            status=DeadLetterStatus.REPLAYED, replayed_at=now, replayed_by=actor[:150]
        )
    return letters


def record_audit(
    *,
    action: str,
    actor: str = "",
    source: str = "console",
    ip_address: str | None = None,
    task: ReportTask | None = None,
    dead_letter: DeadLetter | None = None,
    item_count: int = 1,
    reason: str = "",
    details: dict | None = None,
) -> AuditEntry:
    return AuditEntry.objects.create(
        action=action,
        actor=actor[:150],
        source=source[:20],
        ip_address=ip_address,
        task=task,
        dead_letter=dead_letter,
        item_count=item_count,
        reason=reason[:2000],
        details=details or {},
    )
