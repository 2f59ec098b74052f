"""A dead letter is born in the transaction that kills its task, and resolved by a replay."""

from django.db import transaction
from django.utils import timezone

from deadletters.alerts.causes import record_death
from deadletters.alerts.outbox import enqueue_dead_letter_alert
from deadletters.fingerprints import fingerprint
from deadletters.models import DeadLetter, DeadLetterStatus
from reports.models import ReportTask

REPLAYABLE_STATUSES = (DeadLetterStatus.OPEN, DeadLetterStatus.ARCHIVED, DeadLetterStatus.DISCARDED,
                       DeadLetterStatus.SUPERSEDED)


class DeadLetterNotFound(Exception):
    pass


def create_dead_letter(*, task: ReportTask, failure) -> DeadLetter:
    """The letter and its alert's outbox row, inside the transaction that moves the task to dead
    (deadletters.receivers hears reports.signals.task_died)."""
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
    enqueue_dead_letter_alert(dead_letter=dead_letter, cause=record_death(dead_letter=dead_letter))
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
