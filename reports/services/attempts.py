"""An attempt's life: claim (pending/retrying -> running), then complete (-> done) or fail
(-> retrying or dead). Every transition is one conditional UPDATE on the task row, fenced by
the attempt number, so a duplicate delivery or a late finisher changes nothing.

While it runs, the attempt holds a lease that its worker renews (renew_lease); the reaper takes
back an attempt whose lease lapsed. Claim and completion take the lean statements of
reports/services/attempt_sql.py where the database can UPDATE ... RETURNING."""

import logging
import traceback as traceback_module
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from redis.exceptions import RedisError

import reports.services.attempt_sql as attempt_sql
from config.backoff import backoff_delay
from reports.errors import LeaseExpired, WorkHorseKilled, error_type_name, escape_controls, is_retriable
from reports.models import AttemptOutcome, PausedKind, ReportTask, TaskAttempt, TaskStatus
from reports.services.counters import DEATHS, bump_counter
from reports.signals import task_died
from reports.worker import concurrency

logger = logging.getLogger("reports.services")

ERROR_MESSAGE_MAX = 10_000
TRACEBACK_MAX = 10 * 1024 * 1024
CLAIMABLE = (TaskStatus.PENDING, TaskStatus.RETRYING)
PAUSED_REASON = "kind paused"
CAP_REASON = "concurrency cap reached"


@dataclass(frozen=True)
class ClaimDeferred:
    """The claim did not run: the kind is paused or at its concurrency cap. No attempt number
    was used and the task stays pending/retrying; resume_kind or a freed slot enqueues it again."""

    reason: str


@dataclass(frozen=True)
class _NoSlot:
    kind: str
    priority: str
    timeout: int


@dataclass(frozen=True)
class FailureInfo:
    error_type: str
    message: str
    traceback: str
    retriable: bool

    @classmethod
    def from_exception(cls, exc: BaseException) -> "FailureInfo":
        text = "".join(traceback_module.format_exception(exc))
        return cls(
            error_type=error_type_name(exc),
            # One line, whatever the exception quotes (a source's cell, a client's param).
            message=escape_controls(str(exc) or type(exc).__name__)[:ERROR_MESSAGE_MAX],
            traceback=text[:TRACEBACK_MAX],
            retriable=is_retriable(exc),
        )


# --- claim --------------------------------------------------------------------


def claim_task(
    *, task_id: int, attempt: int, worker: str, lease_seconds: float | None = None,
    slot: "tuple[str, bytes] | None" = None, completing: "attempt_sql.CarriedCompletion | None" = None,
) -> "ReportTask | ClaimDeferred | None":
    """pending/retrying -> running for exactly this attempt; None means a phantom delivery,
    ClaimDeferred a paused kind or a full concurrency cap (reports/services/pausing.py, reports/worker/concurrency.py).

    `lease_seconds`: how long the claim holds before a heartbeat must renew it (the worker's
    REPORT_LEASE_SECONDS). None, for a caller that cannot heartbeat: the job timeout plus
    REPORT_LEASE_GRACE.

    `slot`: (kind, score) of a concurrency slot the caller took for this attempt before the claim
    (a pool worker, in the round trip that dequeued the job, from the kind its job names). The
    claim is then one statement that matches only a task of that kind; when it matches none (a
    phantom, a paused kind, a job naming another kind), the slot is given back and the claim
    runs the ordinary way.

    `completing`: a finished attempt's completion to carry in the claim's statement where the
    claim is one statement (PostgreSQL; with a slot, or no cap); its `done` is left None where not."""
    outcome = _claim_task(task_id=task_id, attempt=attempt, worker=worker, lease_seconds=lease_seconds, slot=slot,
                          completing=completing)
    if completing is not None and completing.done is False:
        _note_fenced(completing.task_id, completing.attempt)
    return outcome


def _claim_task(*, task_id, attempt, worker, lease_seconds, slot, completing) -> "ReportTask | ClaimDeferred | None":
    if slot is not None:
        task = _claim_holding_slot(task_id=task_id, attempt=attempt, worker=worker, lease_seconds=lease_seconds,
                                   slot=slot, completing=completing)
        if task is not None:
            return task
    outcome = _claim_once(task_id=task_id, attempt=attempt, worker=worker, lease_seconds=lease_seconds,
                          completing=completing)
    if not isinstance(outcome, _NoSlot):
        return outcome
    # Wait in the room, then try once more: a slot freed before we were in the room woke nobody.
    waiter = dict(
        kind=outcome.kind, task_id=task_id, attempt=attempt, priority=outcome.priority, timeout=outcome.timeout
    )
    concurrency.park(**waiter)
    outcome = _claim_once(task_id=task_id, attempt=attempt, worker=worker, lease_seconds=lease_seconds)
    if isinstance(outcome, _NoSlot):
        return ClaimDeferred(CAP_REASON)
    concurrency.unpark(**waiter)
    return outcome


def _claim_holding_slot(*, task_id, attempt, worker, lease_seconds, slot, completing=None) -> "ReportTask | None":
    kind, score = slot
    task = None
    try:
        if lease_seconds is not None and attempt_sql.available():
            now = timezone.now()
            task = attempt_sql.claim(
                task_id=task_id, attempt=attempt, worker=worker, now=now,
                lease_until=now + timedelta(seconds=lease_seconds), in_transaction=False, kind=kind,
                completing=completing,
            )
    finally:
        if task is None:  # not claimed, or the database failed: the slot must not wait for its lease
            concurrency.give_back(kind=kind, task_id=task_id, attempt=attempt, score=score)
    if task is not None and attempt > 1:
        try:
            concurrency.evict_earlier(kind=kind, task_id=task_id, attempt=attempt)
        except RedisError as exc:  # the stale slots' own leases free them
            logger.error("could not evict the stale slots of task %s: %s", task_id, exc)
    return task


def _claim_once(
    *, task_id, attempt, worker, lease_seconds, completing=None
) -> "ReportTask | ClaimDeferred | _NoSlot | None":
    if lease_seconds is not None and attempt_sql.available():
        return _claim_lean(
            task_id=task_id, attempt=attempt, worker=worker, lease_seconds=lease_seconds, completing=completing
        )
    return _claim_orm(task_id=task_id, attempt=attempt, worker=worker, lease_seconds=lease_seconds)


def _claim_lean(
    *, task_id, attempt, worker, lease_seconds, completing=None
) -> "ReportTask | ClaimDeferred | _NoSlot | None":
    now = timezone.now()
    lease_until = now + timedelta(seconds=lease_seconds)
    claim = dict(task_id=task_id, attempt=attempt, worker=worker, now=now, lease_until=lease_until)
    if not concurrency.any_capped():
        task = attempt_sql.claim(**claim, in_transaction=False, completing=completing)
        return task if task is not None else _why_not_claimed(task_id, attempt)
    with transaction.atomic():
        task = attempt_sql.claim(**claim, in_transaction=True)
        if task is not None:
            slot_lease = task.timeout_seconds + settings.REPORT_LEASE_GRACE
            if not concurrency.acquire(kind=task.kind, task_id=task_id, attempt=attempt, lease_seconds=slot_lease):
                transaction.set_rollback(True)
                return _NoSlot(kind=task.kind, priority=task.priority, timeout=task.timeout_seconds)
            if not attempt_sql.claim_inserts_attempt():
                with connection.cursor() as cursor:
                    params = attempt_sql.attempt_params(attempt=attempt, worker=worker, now=now)
                    attempt_sql.insert_attempt(cursor, task_id=task_id, attempt_params=params)
    return task if task is not None else _why_not_claimed(task_id, attempt)


def _why_not_claimed(task_id: int, attempt: int) -> "ClaimDeferred | None":
    """Rare path: tell a paused kind (defer, no attempt used) from a phantom delivery."""
    row = ReportTask.objects.filter(pk=task_id).values("status", "attempt", "kind").first()
    if row and row["status"] in CLAIMABLE and row["attempt"] == attempt - 1:
        if PausedKind.objects.filter(kind=row["kind"]).exists():
            return ClaimDeferred(PAUSED_REASON)
    return None


def _claim_orm(*, task_id, attempt, worker, lease_seconds) -> "ReportTask | ClaimDeferred | _NoSlot | None":
    now = timezone.now()
    with transaction.atomic():
        task = ReportTask.objects.filter(pk=task_id).first()
        if task is None or task.status not in CLAIMABLE or task.attempt != attempt - 1:
            return None  # phantom: a duplicate or stale delivery, decided without a write
        slot_lease = task.timeout_seconds + settings.REPORT_LEASE_GRACE
        lease_seconds = slot_lease if lease_seconds is None else lease_seconds
        claimed = (
            ReportTask.objects.filter(pk=task_id, status__in=CLAIMABLE, attempt=attempt - 1)
            .exclude(kind__in=PausedKind.objects.values("kind"))
            .update(
                status=TaskStatus.RUNNING,
                attempt=attempt,
                started_at=now,
                finished_at=None,
                next_retry_at=None,
                lease_expires_at=now + timedelta(seconds=lease_seconds),
                updated_at=now,
            )
        )
        if not claimed:
            # Rare path: tell a paused kind (defer, no attempt used) from a lost race (phantom).
            if PausedKind.objects.filter(kind=task.kind).exists():
                return ClaimDeferred(PAUSED_REASON)
            return None
        # The slot is taken only by a real claim (never by a phantom), and the claim is undone
        # when there is none: the row stays pending/retrying with its attempt number unused.
        if not concurrency.acquire(kind=task.kind, task_id=task_id, attempt=attempt, lease_seconds=slot_lease):
            transaction.set_rollback(True)
            return _NoSlot(kind=task.kind, priority=task.priority, timeout=task.timeout_seconds)
        TaskAttempt.objects.create(task_id=task_id, number=attempt, worker=worker[:200], started_at=now)
    # The row as the UPDATE left it, without reading it again.
    task.status, task.attempt, task.started_at = TaskStatus.RUNNING, attempt, now
    task.finished_at = task.next_retry_at = None
    task.lease_expires_at = now + timedelta(seconds=lease_seconds)
    task.updated_at = now
    return task


# --- complete -------------------------------------------------------------------


def renew_lease(*, task_id: int, attempt: int, lease_seconds: float) -> bool:
    """The heartbeat: extend a running attempt's lease. False: the attempt is no longer running
    (the reaper took it back, or it ended), so whatever it produces now will be fenced."""
    until = timezone.now() + timedelta(seconds=lease_seconds)
    return bool(
        ReportTask.objects.filter(pk=task_id, status=TaskStatus.RUNNING, attempt=attempt).update(
            lease_expires_at=until
        )
    )


def _note_fenced(task_id: int, attempt: int) -> None:
    logger.warning("late finisher fenced: task %s attempt %s no longer owns the task", task_id, attempt)


def complete_task(*, task_id: int, attempt: int, output_file: str, started_at: datetime | None = None) -> bool:
    """running -> done, fenced by the attempt number. False: a newer attempt owns the task.

    `started_at` (from the claim) spares a read when the attempt row is closed."""
    now = timezone.now()
    if started_at is not None and attempt_sql.available():
        done = attempt_sql.complete(
            task_id=task_id,
            attempt=attempt,
            output_file=output_file,
            now=now,
            duration=(now - started_at).total_seconds(),
        )
        if not done:
            _note_fenced(task_id, attempt)
        return done
    with transaction.atomic():
        done = ReportTask.objects.filter(pk=task_id, status=TaskStatus.RUNNING, attempt=attempt).update(
            status=TaskStatus.DONE,
            output_file=output_file,
            finished_at=now,
            lease_expires_at=None,
            last_error="",
            updated_at=now,
        )
        if done:
            _close_attempt(task_id, attempt, AttemptOutcome.SUCCEEDED, now, started_at=started_at)
    if not done:
        _note_fenced(task_id, attempt)
    return bool(done)


# --- fail -----------------------------------------------------------------------


def record_attempt_failure(
    *, task_id: int, attempt: int, failure: FailureInfo, outcome: str = AttemptOutcome.FAILED
) -> str:
    """running -> retrying or dead. Returns the new status, or "fenced" when the attempt is stale.

    A death is announced (reports.signals.task_died) inside this transaction, so whatever the
    layers above keep of it (the dead letter, its alert) is born with it or not at all."""
    now = timezone.now()
    with transaction.atomic():
        task = ReportTask.objects.filter(pk=task_id).first()
        if task is None or task.status != TaskStatus.RUNNING or task.attempt != attempt:
            logger.warning("failure of task %s attempt %s fenced: the task moved on", task_id, attempt)
            return "fenced"
        retry = failure.retriable and attempt < task.max_attempts
        if not retry and outcome == AttemptOutcome.ABANDONED:
            failure = _repeated_abandonment(task, attempt, failure)
        last_error = f"{failure.error_type}: {failure.message}"[:ERROR_MESSAGE_MAX]
        if retry:
            # Counted within the run, so a replayed task climbs the ladder from its first step.
            steps, jitter = settings.REPORT_RETRY_BACKOFF, settings.REPORT_RETRY_JITTER
            delay = backoff_delay(attempt - task.attempts_before_run, steps, jitter=jitter)
            next_retry_at = now + timedelta(seconds=delay)
            updates = {"status": TaskStatus.RETRYING, "next_retry_at": next_retry_at}
        else:
            updates = {"status": TaskStatus.DEAD, "finished_at": now, "next_retry_at": None}
        changed = ReportTask.objects.filter(pk=task_id, status=TaskStatus.RUNNING, attempt=attempt).update(
            last_error=last_error, lease_expires_at=None, updated_at=now, **updates
        )
        if not changed:
            return "fenced"
        _close_attempt(task_id, attempt, outcome, now, failure, started_at=task.started_at)
        task.refresh_from_db()
        if retry:
            # Due by its row: whatever runs promote_due_retries (every worker of ours, the reaper)
            # enqueues it then, so no process that may die holds the due time.
            logger.info("task %s attempt %s failed (%s); retry at %s", task_id, attempt, outcome, next_retry_at)
            return TaskStatus.RETRYING
        bump_counter(kind=task.kind, event=DEATHS)
        task_died.send(sender=ReportTask, task=task, failure=failure)
        logger.warning("task %s is dead after attempt %s: %s", task_id, attempt, last_error[:200])
        return TaskStatus.DEAD


_REPEATED = {
    error_type_name(WorkHorseKilled("")): "the work-horse was killed {n} times: out of memory?",
    error_type_name(LeaseExpired("")): (
        "the worker stopped heartbeating {n} times: killed, out of memory, or cut off from the database?"
    ),
}


def _repeated_abandonment(task: ReportTask, attempt: int, failure: FailureInfo) -> FailureInfo:
    """A task that dies of being abandoned says how often it was, so a poison pill (a report that
    kills its worker every time) reads as one in the dead letter and its alert."""
    template = _REPEATED.get(failure.error_type)
    if template is None:
        return failure
    earlier = TaskAttempt.objects.filter(
        task_id=task.pk,
        number__gt=task.attempts_before_run,
        number__lt=attempt,
        outcome=AttemptOutcome.ABANDONED,
        error_type=failure.error_type,
    ).count()
    if not earlier:
        return failure
    message = f"{template.format(n=earlier + 1)} Last: {failure.message}"[:ERROR_MESSAGE_MAX]
    return FailureInfo(
        error_type=failure.error_type, message=message, traceback=failure.traceback, retriable=failure.retriable
    )


def _close_attempt(task_id, attempt, outcome, now, failure: FailureInfo | None = None, *, started_at=None) -> None:
    if started_at is None:
        row = TaskAttempt.objects.filter(task_id=task_id, number=attempt).only("started_at").first()
        started_at = row.started_at if row else None
    fields = {"outcome": outcome, "finished_at": now}
    if started_at is not None:
        fields["duration_seconds"] = (now - started_at).total_seconds()
    if failure is not None:
        fields.update(error_type=failure.error_type, error_message=failure.message, traceback=failure.traceback)
    TaskAttempt.objects.filter(task_id=task_id, number=attempt, outcome=AttemptOutcome.RUNNING).update(**fields)
