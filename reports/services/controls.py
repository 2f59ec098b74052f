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
from django.utils.translation import gettext as _

from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus
from reports.services.counters import CANCELLATIONS, STOPS, bump_counter
from reports.services.enqueue import enqueue_next_attempt_on_commit
from reports.wording import status_word

logger = logging.getLogger("reports.services")

CANCELLABLE = (TaskStatus.PENDING, TaskStatus.RETRYING)
# What becomes of a task whose running attempt an operator stops.
STOP_THEN_CANCEL = "cancel"
STOP_THEN_RETRY = "retry"
STOP_CHOICES = (STOP_THEN_CANCEL, STOP_THEN_RETRY)
STOPPED = "stopped by an operator"


class TaskNotControllable(Exception):
    """The task is not (or no longer) in a state this control applies to. The message is in the
    language active where it is raised: the console page's, the API client's, a command's."""

    def __init__(self, task: ReportTask, message: str, *, action: str = ""):
        self.task = task
        self.action = action
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
            raise _refused(
                task_id,
                "cancel",
                lambda values: _(
                    "cannot cancel task %(id)s: it is %(status)s; only a pending or retrying task can be cancelled"
                )
                % values,
            )
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
                task_id,
                "retry now",
                lambda values: _(
                    "cannot retry task %(id)s now: it is %(status)s; only a retrying task (waiting on its "
                    "backoff) can be retried now"
                )
                % values,
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
        message = stopped_message(note)
        if not running.update(lease_expires_at=None, updated_at=now, last_error=message, **changes):
            raise _refused(
                task_id,
                "stop",
                lambda values: _("cannot stop task %(id)s: it is %(status)s; attempt %(attempt)s is not running")
                % {**values, "attempt": attempt},
            )
        task = ReportTask.objects.get(pk=task_id)
        _close_stopped_attempt(task_id=task_id, attempt=attempt, now=now, message=message)
        bump_counter(kind=task.kind, event=STOPS)
        if then == STOP_THEN_CANCEL:
            bump_counter(kind=task.kind, event=CANCELLATIONS)
        else:
            enqueue_next_attempt_on_commit(task)
    logger.info("task %s attempt %s stopped; then %s", task.public_id, attempt, then)
    return Controlled(task=task, attempt=attempt)


def stopped_message(note: str = "") -> str:
    """What a stopped attempt and its task record as their error: stored in English, like every
    error (the API and the logs read it); stopped_words gives it in the active language."""
    return f"{STOPPED}{': ' + note if note else ''}"[:500]


def stopped_words(stored: str) -> str:
    """A stored error in the active language when it is a stop's; any other error as it is."""
    stored = stored or ""
    if stored == STOPPED:
        return _("stopped by an operator")
    if stored.startswith(STOPPED + ": "):
        return _("stopped by an operator: %(note)s") % {"note": stored[len(STOPPED) + 2 :]}
    return stored


def without_note(stored: str) -> str:
    """A stored error as a client reads it: a stop's without the operator's note (the console shows it)."""
    return STOPPED if stored.startswith(STOPPED + ": ") else stored


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


def _refused(task_id: int, action: str, sentence) -> TaskNotControllable:
    """`sentence` words the refusal from the task's id and status (translated where it is raised)."""
    task = ReportTask.objects.filter(pk=task_id).first()
    if task is None:
        return TaskNotControllable(ReportTask(pk=task_id), _("no task %(id)s") % {"id": task_id}, action=action)
    values = {"id": task.public_id, "status": status_word(task.status)}
    return TaskNotControllable(task, sentence(values), action=action)
