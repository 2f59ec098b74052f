"""An operator's (or the owning client's) hold on a live task: cancel it before it runs, run a
retry now instead of after its backoff, stop a running attempt. Each is one conditional UPDATE on
the task row, so a task that moved on meanwhile (claimed, finished, died) is refused with
TaskNotControllable and nothing changes: never a double effect.

Stopping a running attempt changes only the database. The attempt's worker learns of it at its
next lease heartbeat (renew_lease finds no running row for its attempt number) and kills the
work-horse; whatever the horse reports afterwards is fenced by the attempt number."""

import logging
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus
from reports.services.counters import CANCELLATIONS, STOPS, bump_counter
from reports.services.enqueue import enqueue_next_attempt_on_commit

logger = logging.getLogger("reports.services")

CANCELLABLE = (TaskStatus.PENDING, TaskStatus.RETRYING)
# What becomes of a task whose running attempt an operator stops.
STOP_THEN_CANCEL = "cancel"
STOP_THEN_RETRY = "retry"
STOP_CHOICES = (STOP_THEN_CANCEL, STOP_THEN_RETRY)


class TaskNotControllable(Exception):
    """The task is not (or no longer) in a state this control applies to."""

    def __init__(self, task: ReportTask, message: str):
        self.task = task
        super().__init__(message)


@dataclass(frozen=True)
class Controlled:
    task: ReportTask
    attempt: int | None = None  # the stopped attempt's number


def cancel_task(*, task_id: int) -> Controlled:
    """pending|retrying -> cancelled. A queued or scheduled RQ job of it then finds nothing to
    claim (the claim is a compare-and-set on pending|retrying) and does nothing."""
    now = timezone.now()
    with transaction.atomic():
        task = ReportTask.objects.filter(pk=task_id).first()
        changed = ReportTask.objects.filter(pk=task_id, status__in=CANCELLABLE).update(
            status=TaskStatus.CANCELLED,
            finished_at=now,
            next_retry_at=None,
            lease_expires_at=None,
            updated_at=now,
        )
        if not changed:
            raise _refused(task_id, "cancel", f"only a {' or '.join(CANCELLABLE)} task can be cancelled")
        bump_counter(kind=task.kind, event=CANCELLATIONS)
        task.refresh_from_db()
    logger.info("task %s cancelled", task.public_id)
    return Controlled(task=task)


def retry_task_now(*, task_id: int) -> Controlled:
    """A retrying task waiting on its backoff becomes due now and its next attempt is enqueued
    once the transaction commits. The scheduled job, should it still arrive later, is a phantom."""
    now = timezone.now()
    with transaction.atomic():
        changed = ReportTask.objects.filter(pk=task_id, status=TaskStatus.RETRYING).update(
            next_retry_at=now, updated_at=now
        )
        if not changed:
            raise _refused(
                task_id, "retry now", "only a retrying task (waiting on its backoff) can be retried now"
            )
        task = ReportTask.objects.get(pk=task_id)
        enqueue_next_attempt_on_commit(task)
    logger.info("task %s: retry %s brought forward", task.public_id, task.attempt + 1)
    return Controlled(task=task)


def stop_attempt(*, task_id: int, attempt: int, then: str, note: str = "") -> Controlled:
    """(running, attempt = n) -> cancelled, or -> retrying due now (`then`), recording the attempt
    as stopped. A retry after a stop gets an attempt of its own even when the budget is spent: the
    stop was the operator's doing, not the report's."""
    if then not in STOP_CHOICES:
        raise ValueError(f"then must be one of {', '.join(STOP_CHOICES)}")
    now = timezone.now()
    with transaction.atomic():
        running = ReportTask.objects.filter(pk=task_id, status=TaskStatus.RUNNING, attempt=attempt)
        if then == STOP_THEN_CANCEL:
            changes = {"status": TaskStatus.CANCELLED, "finished_at": now, "next_retry_at": None}
        else:
            changes = {
                "status": TaskStatus.RETRYING,
                "next_retry_at": now,
                "max_attempts": Greatest(F("max_attempts"), F("attempt") + 1),
            }
        message = f"stopped by an operator{': ' + note if note else ''}"[:500]
        if not running.update(lease_expires_at=None, updated_at=now, last_error=message, **changes):
            raise _refused(task_id, "stop", f"attempt {attempt} is not running")
        task = ReportTask.objects.get(pk=task_id)
        _close_stopped_attempt(task_id=task_id, attempt=attempt, now=now, message=message)
        bump_counter(kind=task.kind, event=STOPS)
        if then == STOP_THEN_CANCEL:
            bump_counter(kind=task.kind, event=CANCELLATIONS)
        else:
            enqueue_next_attempt_on_commit(task)
    logger.info("task %s attempt %s stopped; then %s", task.public_id, attempt, then)
    return Controlled(task=task, attempt=attempt)


def _close_stopped_attempt(*, task_id: int, attempt: int, now, message: str) -> None:
    row = TaskAttempt.objects.filter(task_id=task_id, number=attempt, outcome=AttemptOutcome.RUNNING).first()
    if row is None:
        return
    duration = (now - row.started_at).total_seconds() if row.started_at else None
    TaskAttempt.objects.filter(pk=row.pk, outcome=AttemptOutcome.RUNNING).update(
        outcome=AttemptOutcome.STOPPED,
        finished_at=now,
        duration_seconds=duration,
        error_type="stopped",
        error_message=message,
    )


def _refused(task_id: int, action: str, rule: str) -> TaskNotControllable:
    task = ReportTask.objects.filter(pk=task_id).first()
    if task is None:
        return TaskNotControllable(ReportTask(pk=task_id), f"no task {task_id}")
    return TaskNotControllable(task, f"cannot {action} task {task.public_id}: it is {task.status}; {rule}")
