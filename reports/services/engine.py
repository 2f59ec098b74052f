"""A task's life, every transition named once (as Oban's engine):

    claim_task           pending|retrying -> running (attempt n-1 -> n), with the attempt row
    renew_lease          a running attempt's lease, renewed by its worker's heartbeat
    complete_task        running -> done
    record_attempt_failure  running -> retrying (due by its row; our outages uncharged) or dead (task_died)
    take_back_lapsed     running -> retrying or dead, for attempts whose lease lapsed (abandoned)
    promote_due_retries  retrying -> pending once due, and the next attempt enqueued
    requeue_dead_task(s) dead -> pending, with a fresh attempt budget (what a replay is built on)
    cancel_task          pending|retrying -> cancelled
    retry_task_now       retrying -> due now
    stop_attempt         running -> cancelled, or retrying due now

Each is one conditional UPDATE fenced by the state (and the attempt number of a running task), so
a duplicate delivery, a late finisher or a lost race changes nothing; RQ hears of it after commit."""

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone
from django.utils.translation import gettext as _
from redis.exceptions import RedisError

import reports.services.breakers as breakers
import reports.services.concurrency as concurrency
import reports.services.controls as controls
from config.backoff import backoff_delay
from reports.errors import ERROR_MESSAGE_MAX, FailureInfo, LeaseExpired, WorkHorseKilled, error_type_name
from reports.models import AttemptOutcome, PausedKind, ReportTask, TaskAttempt, TaskStatus
from reports.outputs import remove_attempt_output
from reports.services.counters import CANCELLATIONS, DEATHS, STOPS, bump_counter
from reports.services.engine_sql import claimed_task, statements
from reports.services.enqueue import enqueue_attempts_on_commit, enqueue_next_attempt_on_commit
from reports.services.infra_waits import NOT_WAITING, charged_wait, infra_wait, waits_event
from reports.services.submission import params_digest, validate_submission
from reports.signals import task_died

logger = logging.getLogger("reports.services")

CLAIMABLE = (TaskStatus.PENDING, TaskStatus.RETRYING)
PAUSED_REASON = "kind paused"
CAP_REASON = "concurrency cap reached"


@dataclass(frozen=True)
class ClaimDeferred:
    """Not claimed, the kind being paused or at its cap: no attempt used; resume_kind or a freed
    slot enqueues the task again."""

    reason: str


# --- claim, renew, complete -------------------------------------------------------------------


def claim_task(
    *, task_id: int, attempt: int, worker: str, lease_seconds: float | None = None, kind: str | None = None
) -> "ReportTask | ClaimDeferred | None":
    """pending/retrying -> running for exactly this attempt; None: a phantom delivery;
    ClaimDeferred: a paused kind or a full concurrency cap (pausing.py, concurrency.py).
    `lease_seconds`: until a heartbeat must renew it (None, for a caller that cannot heartbeat:
    the job timeout plus REPORT_LEASE_GRACE). `kind`: the caller holds a concurrency slot of this
    kind for this attempt (taken with the job that delivered it): claim only a task of that kind."""
    outcome = _claim(task_id, attempt, worker, lease_seconds or settings.REPORT_LEASE_SECONDS, kind)
    if isinstance(outcome, tuple):  # no slot: wait in the room, then try once more (a slot freed
        waiter = dict(zip(("kind", "priority", "timeout"), outcome, strict=True))  # before we were
        concurrency.park(task_id=task_id, attempt=attempt, **waiter)  # in the room woke nobody)
        outcome = _claim(task_id, attempt, worker, lease_seconds or settings.REPORT_LEASE_SECONDS, None)
        if isinstance(outcome, tuple):
            return ClaimDeferred(CAP_REASON)
        concurrency.unpark(task_id=task_id, attempt=attempt, **waiter)
    if lease_seconds is None and isinstance(outcome, ReportTask):
        lease_seconds = outcome.timeout_seconds + settings.REPORT_LEASE_GRACE
        renew_lease(task_id=task_id, attempt=attempt, lease_seconds=lease_seconds)
    return outcome


def _claim(task_id, attempt, worker, lease_seconds, kind) -> "ReportTask | ClaimDeferred | tuple | None":
    now = timezone.now()
    lease_until = now + timedelta(seconds=lease_seconds)
    claim = dict(task_id=task_id, attempt=attempt, worker=worker, now=now, lease_until=lease_until)
    if kind is not None or not concurrency.any_capped():
        row = statements().claim(**claim, kind=kind)
        if row is not None and kind is not None and attempt > 1:
            try:  # attempt n is claimed, so the task's earlier attempts ended: their slots are stale
                concurrency.evict_earlier(kind=kind, task_id=task_id, attempt=attempt)
            except RedisError as exc:  # the stale slots' own leases free them
                logger.error("could not evict the stale slots of task %s: %s", task_id, exc)
    else:
        # The slot is taken only by a real claim (never by a phantom), and the claim is undone
        # when there is none: the row stays pending/retrying with its attempt number unused.
        with transaction.atomic():
            row = statements().claim(**claim)
            if row is not None:
                slot = dict(kind=row[0], task_id=task_id, attempt=attempt)
                if not concurrency.acquire(**slot, lease_seconds=row[4] + settings.REPORT_LEASE_GRACE):
                    transaction.set_rollback(True)
                    return row[0], row[3], row[4]  # kind, priority, timeout: for the waiting room
    if row is None:
        return _why_not_claimed(task_id, attempt)
    return claimed_task(row, task_id=task_id, attempt=attempt, now=now, lease_until=lease_until)


def _why_not_claimed(task_id: int, attempt: int) -> "ClaimDeferred | None":
    """Rare path: tell a paused kind (defer, no attempt used) from a phantom delivery."""
    row = ReportTask.objects.filter(pk=task_id).values("status", "attempt", "kind").first()
    if row and row["status"] in CLAIMABLE and row["attempt"] == attempt - 1:
        if PausedKind.objects.filter(kind=row["kind"]).exists():
            return ClaimDeferred(PAUSED_REASON)
    return None


def renew_lease(*, task_id: int, attempt: int, lease_seconds: float) -> bool:
    """The heartbeat. False: the attempt no longer runs (taken back, stopped, ended): fenced."""
    running = ReportTask.objects.filter(pk=task_id, status=TaskStatus.RUNNING, attempt=attempt)
    return bool(running.update(lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds)))


def complete_task(*, task_id: int, attempt: int, output_file: str, started_at: datetime | None = None):
    """running -> done; False: fenced (a newer attempt owns the task). `started_at`: the claim's."""
    now = timezone.now()
    if started_at is None:
        started_at = TaskAttempt.objects.filter(task_id=task_id, number=attempt).values_list(
            "started_at", flat=True).first()
    duration = (now - started_at).total_seconds() if started_at else None
    done = statements().complete(task_id=task_id, attempt=attempt, output_file=output_file, now=now,
                                 duration=duration)
    if not done:
        logger.warning("late finisher fenced: task %s attempt %s no longer owns the task", task_id, attempt)
    return done


# --- fail, take back --------------------------------------------------------------------------


def record_attempt_failure(
    *, task_id: int, attempt: int, failure: FailureInfo, outcome: str = AttemptOutcome.FAILED
) -> str:
    """running -> retrying or dead: the new status, or "fenced". A death is announced (task_died)
    inside this transaction: the dead letter and its alert are born with it or not at all."""
    now = timezone.now()
    with transaction.atomic():
        task = ReportTask.objects.filter(pk=task_id).first()
        if task is None or task.status != TaskStatus.RUNNING or task.attempt != attempt:
            logger.warning("failure of task %s attempt %s fenced: the task moved on", task_id, attempt)
            return "fenced"
        wait = infra_wait(task, failure, now)  # None: charged
        free = wait is None and breakers.absorbs_failure(kind=task.kind, failure=failure, now=now)
        retry = wait is not None or free or (failure.retriable and attempt < task.max_attempts)
        if not retry and outcome == AttemptOutcome.ABANDONED:
            failure = _repeated_abandonment(task, attempt, failure)
        last_error = f"{failure.error_type}: {failure.message}"[:ERROR_MESSAGE_MAX]
        if wait is not None:
            outcome, updates = AttemptOutcome.INFRA, wait
        elif retry:
            # Counted within the run, so a replayed task climbs the ladder from its first step.
            delay = backoff_delay(attempt - task.attempts_before_run, settings.REPORT_RETRY_BACKOFF,
                                  jitter=settings.REPORT_RETRY_JITTER)
            updates = {"status": TaskStatus.RETRYING, "next_retry_at": now + timedelta(seconds=delay)}
            if free:  # an upstream outage its breaker holds (breakers.py): uncharged, due once the kind runs
                updates.update(next_retry_at=now, max_attempts=F("max_attempts") + 1)
        else:
            updates = {"status": TaskStatus.DEAD, "finished_at": now, "next_retry_at": None}
        changed = ReportTask.objects.filter(pk=task_id, status=TaskStatus.RUNNING, attempt=attempt).update(
            last_error=last_error, lease_expires_at=None, updated_at=now, **(charged_wait(failure) | updates))
        if not changed:
            return "fenced"
        _close_attempt(task_id, attempt, outcome, now, task.started_at, failure)
        task.refresh_from_db()
        if wait is not None:
            bump_counter(kind=task.kind, event=waits_event(failure.origin))
        if retry:
            # Due by its row: whatever runs promote_due_retries enqueues it then, so no process
            # that may die holds the due time.
            logger.info("task %s attempt %s failed (%s); retry at %s", task_id, attempt, outcome,
                        updates["next_retry_at"])
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
        task_id=task.pk, number__gt=task.attempts_before_run, number__lt=attempt,
        outcome=AttemptOutcome.ABANDONED, error_type=failure.error_type,
    ).count()
    if not earlier:
        return failure
    message = f"{template.format(n=earlier + 1)} Last: {failure.message}"[:ERROR_MESSAGE_MAX]
    return FailureInfo(failure.error_type, message, failure.traceback, failure.retriable)


def _close_attempt(task_id, attempt, outcome, now, started_at, failure: FailureInfo | None = None, **fields):
    fields.update(outcome=outcome, finished_at=now)
    if started_at is not None:
        fields["duration_seconds"] = (now - started_at).total_seconds()
    if failure is not None:
        fields.update(error_type=failure.error_type, error_message=failure.message,
                      traceback=failure.traceback)
    running = TaskAttempt.objects.filter(task_id=task_id, number=attempt, outcome=AttemptOutcome.RUNNING)
    running.update(**fields)


def take_back_lapsed(*, now: datetime | None = None, limit: int = 500) -> int:
    """Running attempts whose lease lapsed (their worker stopped renewing it: killed, out of
    memory, cut off from the database) count as abandoned, and the retry/dead policy applies;
    what they wrote goes, and so do their concurrency slots. Returns how many were taken back."""
    now = now or timezone.now()
    lapsed = ReportTask.objects.filter(status=TaskStatus.RUNNING, lease_expires_at__lt=now).order_by(
        "lease_expires_at").values_list("pk", "attempt", "lease_expires_at", "kind", "public_id")[:limit]
    taken_back = 0
    for task_id, attempt, lease_expires_at, kind, public_id in list(lapsed):
        error = LeaseExpired(
            f"lease expired at {lease_expires_at:%Y-%m-%d %H:%M:%S} UTC: the worker stopped renewing it "
            "(killed, out of memory, restarted, or cut off from the database) before finishing"
        )
        failure = FailureInfo(error_type_name(error), str(error), "", retriable=True)
        if record_attempt_failure(task_id=task_id, attempt=attempt, failure=failure,
                                  outcome=AttemptOutcome.ABANDONED) == "fenced":
            continue
        taken_back += 1
        remove_attempt_output(str(public_id), attempt)  # never recorded now: its file must not outlive it
        try:
            concurrency.release(kind=kind, task_id=task_id, attempt=attempt)
        except RedisError as exc:  # the slot's own lease frees it later
            logger.error("could not release the concurrency slot of task %s: %s", task_id, exc)
    return taken_back


# --- promote, requeue -------------------------------------------------------------------------


def promote_due_retries(*, now: datetime | None = None, limit: int = 500) -> int:
    """retrying -> pending for the tasks whose retry is due (up to `limit`, paused kinds left alone),
    enqueued once this commits; one caller wins each task. Returns how many."""
    with transaction.atomic():
        rows = statements().promote_due(now=now or timezone.now(), limit=limit)
        enqueue_attempts_on_commit([(pk, attempt + 1, priority, timeout, kind)
                                    for pk, attempt, priority, timeout, kind in rows])
    if rows:
        logger.info("%s retr%s due: enqueued", len(rows), "y" if len(rows) == 1 else "ies")
    return len(rows)


def _fresh_run(now: datetime) -> dict:
    """dead -> pending: a fresh budget from the attempts used so far, no retry, lease or finish."""
    return {
        "status": TaskStatus.PENDING, "attempts_before_run": F("attempt"), **NOT_WAITING,
        "max_attempts": F("attempt") + settings.REPORT_MAX_ATTEMPTS,
        "next_retry_at": None, "lease_expires_at": None, "finished_at": None, "updated_at": now,
    }


@dataclass(frozen=True)
class Requeued:
    task: ReportTask
    params_diff: dict | None  # {"before": ..., "after": ...} when edited params changed them


@dataclass(frozen=True)
class RequeuedTask:
    """A task a set-based requeue moved from dead to pending (what its enqueue needs)."""
    task_id: int
    attempt: int  # the attempt counter now; the enqueued attempt is attempt + 1
    priority: str
    timeout_seconds: int


def requeue_dead_task(*, task_id: int, params: dict | None = None) -> Requeued:
    """dead -> pending with a fresh attempt budget and, optionally, edited params, enqueued once
    the caller's transaction commits; one of concurrent calls wins, the others get
    TaskNotReplayable. Raises TaskNotFound, TaskNotReplayable, or InvalidParams."""
    with transaction.atomic():
        task = ReportTask.objects.filter(pk=task_id).first()
        if task is None:
            raise controls.TaskNotFound(task_id)
        updates, diff = {}, None
        if params is not None:
            cleaned = validate_submission(kind=task.kind, params=params, priority=task.priority)[1]
            if cleaned != task.params:
                updates.update(params=cleaned, params_digest=params_digest(task.kind, cleaned, task.owner_id))
                diff = {"before": task.params, "after": cleaned}
        requeued = ReportTask.objects.filter(pk=task_id, status=TaskStatus.DEAD).update(
            **_fresh_run(timezone.now()), **updates
        )
        task.refresh_from_db()
        if not requeued:
            raise controls.TaskNotReplayable(task)
        enqueue_next_attempt_on_commit(task)
    logger.info("task %s requeued after death", task.public_id)
    return Requeued(task=task, params_diff=diff)


def requeue_dead_tasks(task_ids: Iterable[int], *, now: datetime | None = None) -> list[RequeuedTask]:
    """requeue_dead_task for a set, in one UPDATE ... RETURNING, enqueued with one pipeline per
    queue after commit. Returns the tasks that changed, in id order (the others were skipped)."""
    ids = sorted({int(pk) for pk in task_ids})
    if not ids:
        return []
    with transaction.atomic():
        rows = statements().requeue_dead(ids=ids, changes=_fresh_run(now or timezone.now()))
        requeued = sorted((RequeuedTask(*row) for row in rows), key=lambda row: row.task_id)
        enqueue_attempts_on_commit([(row.task_id, row.attempt + 1, row.priority, row.timeout_seconds)
                                    for row in requeued])
    if requeued:
        logger.info("%s tasks requeued after death", len(requeued))
    return requeued


# --- an operator's (or the owning client's) controls ------------------------------------------


def cancel_task(*, task_id: int) -> controls.Controlled:
    """pending|retrying -> cancelled. A queued or scheduled job of it then claims nothing."""
    now = timezone.now()
    with transaction.atomic():
        changed = ReportTask.objects.filter(pk=task_id, status__in=CLAIMABLE).update(
            status=TaskStatus.CANCELLED, finished_at=now, next_retry_at=None, lease_expires_at=None,
            updated_at=now,
        )
        if not changed:
            raise controls.refusal(task_id, "cancel", lambda values: _(
                "cannot cancel task %(id)s: it is %(status)s; only a pending or retrying task can be "
                "cancelled"
            ) % values)
        task = ReportTask.objects.get(pk=task_id)
        bump_counter(kind=task.kind, event=CANCELLATIONS)
    logger.info("task %s cancelled", task.public_id)
    return controls.Controlled(task=task)


def retry_task_now(*, task_id: int) -> controls.Controlled:
    """retrying -> due now, enqueued once this commits (a scheduled job of it is a phantom)."""
    now = timezone.now()
    with transaction.atomic():
        if not ReportTask.objects.filter(pk=task_id, status=TaskStatus.RETRYING).update(
            next_retry_at=now, updated_at=now
        ):
            raise controls.refusal(task_id, "retry now", lambda values: _(
                "cannot retry task %(id)s now: it is %(status)s; only a retrying task (waiting on its "
                "backoff) can be retried now"
            ) % values)
        task = ReportTask.objects.get(pk=task_id)
        enqueue_next_attempt_on_commit(task)
    logger.info("task %s: retry %s brought forward", task.public_id, task.attempt + 1)
    return controls.Controlled(task=task)


def stop_attempt(*, task_id: int, attempt: int, then: str, note: str = "") -> controls.Controlled:
    """(running, attempt = n) -> cancelled, or retrying due now (`then`; an attempt of its own even
    when the budget is spent), the attempt recorded as stopped. Its worker learns of it at its
    next heartbeat (renew_lease: False) and kills the horse, whose result is fenced."""
    if then not in controls.STOP_CHOICES:
        raise ValueError(f"then must be one of {', '.join(controls.STOP_CHOICES)}")
    now = timezone.now()
    if then == controls.STOP_THEN_CANCEL:
        changes = {"status": TaskStatus.CANCELLED, "finished_at": now, "next_retry_at": None}
    else:
        changes = {"status": TaskStatus.RETRYING, "next_retry_at": now,
                   "max_attempts": Greatest(F("max_attempts"), F("attempt") + 1)}
    message = controls.stopped_message(note)
    with transaction.atomic():
        running = ReportTask.objects.filter(pk=task_id, status=TaskStatus.RUNNING, attempt=attempt)
        if not running.update(lease_expires_at=None, updated_at=now, last_error=message, **changes):
            raise controls.refusal(task_id, "stop", lambda values: _(
                "cannot stop task %(id)s: it is %(status)s; attempt %(attempt)s is not running"
            ) % {**values, "attempt": attempt})
        task = ReportTask.objects.get(pk=task_id)
        started_at = TaskAttempt.objects.filter(task_id=task_id, number=attempt).values_list(
            "started_at", flat=True).first()
        _close_attempt(task_id, attempt, AttemptOutcome.STOPPED, now, started_at,
                       error_type="stopped", error_message=message)
        bump_counter(kind=task.kind, event=STOPS)
        if then == controls.STOP_THEN_CANCEL:
            bump_counter(kind=task.kind, event=CANCELLATIONS)
        else:
            enqueue_next_attempt_on_commit(task)
    logger.info("task %s attempt %s stopped; then %s", task.public_id, attempt, then)
    return controls.Controlled(task=task, attempt=attempt)
