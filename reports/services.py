"""Report-task workflow. Every state change is one conditional UPDATE on the task row;
RQ is only told about a change after the transaction that made it commits."""

import json
import logging
import random
import traceback as traceback_module
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from reports import queueing
from reports.errors import InvalidParams, LeaseExpired, error_type_name, is_retriable
from reports.kinds import KINDS, get_kind
from reports.models import AttemptOutcome, PausedKind, Priority, ReportTask, TaskAttempt, TaskStatus

logger = logging.getLogger(__name__)

IDEMPOTENCY_KEY_MAX = 200
ERROR_MESSAGE_MAX = 10_000
TRACEBACK_MAX = 10 * 1024 * 1024


class TaskNotFound(Exception):
    pass


class IdempotencyConflict(Exception):
    """The key was used before for a different kind or different params."""

    def __init__(self, task: ReportTask):
        super().__init__(f"idempotency key already used for task {task.public_id} with other params")
        self.task = task


class TaskNotReplayable(Exception):
    """Replay asked for a task that is not dead (already replayed, running, done)."""

    def __init__(self, task: ReportTask, replayed_by: str = "", replayed_at: datetime | None = None):
        detail = f"task {task.public_id} is {task.status}, not dead"
        if replayed_by:
            detail += f"; already replayed by {replayed_by}"
        super().__init__(detail)
        self.task = task
        self.replayed_by = replayed_by
        self.replayed_at = replayed_at


@dataclass(frozen=True)
class SubmitResult:
    task: ReportTask
    created: bool


# --- submit -------------------------------------------------------------------


def validate_submission(*, kind: object, params: object, priority: object = None) -> tuple[str, dict, str]:
    """Check kind, params and priority; return them cleaned or raise InvalidParams naming the field."""
    if not isinstance(kind, str) or not kind:
        raise InvalidParams("kind", "is required")
    report_kind = get_kind(kind)
    if report_kind is None:
        raise InvalidParams("kind", f"unknown report kind {kind[:64]!r}; known: {', '.join(sorted(KINDS))}")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise InvalidParams("params", "must be a JSON object")
    size = len(json.dumps(params, ensure_ascii=False).encode())
    if size > settings.REPORT_PARAMS_MAX_BYTES:
        raise InvalidParams("params", f"is {size} bytes; the limit is {settings.REPORT_PARAMS_MAX_BYTES}")
    if priority is None or priority == "":
        priority = settings.REPORT_KIND_PRIORITIES.get(kind, report_kind.default_priority)
    if priority not in Priority.values:
        raise InvalidParams("priority", f"must be one of {', '.join(Priority.values)}")
    cleaned = report_kind.validate(params)
    return kind, cleaned, priority


def _validate_idempotency_key(key: object) -> str | None:
    if key is None or key == "":
        return None
    if not isinstance(key, str) or len(key) > IDEMPOTENCY_KEY_MAX or not key.isprintable():
        raise InvalidParams(
            "idempotency_key", f"must be printable text of at most {IDEMPOTENCY_KEY_MAX} characters"
        )
    return key


def _enqueue_after_commit(task: ReportTask, *, at: datetime | None = None) -> None:
    # robust: a Redis outage at commit time is logged, and the reaper enqueues the task later.
    transaction.on_commit(
        partial(
            queueing.enqueue_attempt,
            task_id=task.pk,
            attempt=task.attempt + 1,
            priority=task.priority,
            timeout=task.timeout_seconds,
            at=at,
        ),
        robust=True,
    )


def submit_task(
    *,
    kind: object,
    params: object,
    priority: object = None,
    idempotency_key: object = None,
    submitted_by: str = "",
) -> SubmitResult:
    kind, cleaned, priority = validate_submission(kind=kind, params=params, priority=priority)
    key = _validate_idempotency_key(idempotency_key)
    if key:
        existing = ReportTask.objects.filter(idempotency_key=key).first()
        if existing is not None:
            return _idempotent_repeat(existing, kind, cleaned)
    try:
        with transaction.atomic():
            task = ReportTask.objects.create(
                kind=kind,
                params=cleaned,
                priority=priority,
                max_attempts=settings.REPORT_MAX_ATTEMPTS,
                timeout_seconds=settings.REPORT_JOB_TIMEOUT,
                idempotency_key=key,
                submitted_by=submitted_by[:150],
            )
            _enqueue_after_commit(task)
    except IntegrityError:
        if not key:
            raise
        # Lost the race to a concurrent submit with the same key: theirs is the task.
        existing = ReportTask.objects.filter(idempotency_key=key).first()
        if existing is None:
            raise
        return _idempotent_repeat(existing, kind, cleaned)
    logger.info("submitted task %s kind=%s priority=%s", task.public_id, kind, priority)
    return SubmitResult(task=task, created=True)


def _idempotent_repeat(existing: ReportTask, kind: str, cleaned: dict) -> SubmitResult:
    if existing.kind != kind or existing.params != cleaned:
        raise IdempotencyConflict(existing)
    return SubmitResult(task=existing, created=False)


# --- claim, complete, fail ----------------------------------------------------


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


def claim_task(*, task_id: int, attempt: int, worker: str) -> "ReportTask | ClaimDeferred | None":
    """pending/retrying -> running for exactly this attempt; None means a phantom delivery,
    ClaimDeferred a paused kind or a full concurrency cap (reports/pausing.py, reports/semaphore.py)."""
    from reports import semaphore

    outcome = _claim_once(task_id=task_id, attempt=attempt, worker=worker)
    if not isinstance(outcome, _NoSlot):
        return outcome
    # Wait in the room, then try once more: a slot freed before we were in the room woke nobody.
    waiter = dict(
        kind=outcome.kind,
        task_id=task_id,
        attempt=attempt,
        priority=outcome.priority,
        timeout=outcome.timeout,
    )
    semaphore.park(**waiter)
    outcome = _claim_once(task_id=task_id, attempt=attempt, worker=worker)
    if isinstance(outcome, _NoSlot):
        return ClaimDeferred(CAP_REASON)
    semaphore.unpark(**waiter)
    return outcome


def _claim_once(*, task_id: int, attempt: int, worker: str) -> "ReportTask | ClaimDeferred | _NoSlot | None":
    from reports import semaphore

    now = timezone.now()
    with transaction.atomic():
        task = ReportTask.objects.filter(pk=task_id).first()
        if task is None or task.status not in CLAIMABLE or task.attempt != attempt - 1:
            return None  # phantom: a duplicate or stale delivery, decided without a write
        lease_seconds = task.timeout_seconds + settings.REPORT_LEASE_GRACE
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
        if not semaphore.acquire(
            kind=task.kind, task_id=task_id, attempt=attempt, lease_seconds=lease_seconds
        ):
            transaction.set_rollback(True)
            return _NoSlot(kind=task.kind, priority=task.priority, timeout=task.timeout_seconds)
        TaskAttempt.objects.create(task_id=task_id, number=attempt, worker=worker[:200], started_at=now)
    # The row as the UPDATE left it, without reading it again.
    task.status, task.attempt, task.started_at = TaskStatus.RUNNING, attempt, now
    task.finished_at = task.next_retry_at = None
    task.lease_expires_at = now + timedelta(seconds=lease_seconds)
    task.updated_at = now
    return task


def complete_task(
    *, task_id: int, attempt: int, output_file: str, started_at: datetime | None = None
) -> bool:
    """running -> done, fenced by the attempt number. False: a newer attempt owns the task.

    `started_at` (from the claim) spares a read when the attempt row is closed."""
    now = timezone.now()
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
        logger.warning("late finisher fenced: task %s attempt %s no longer owns the task", task_id, attempt)
    return bool(done)


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
            message=(str(exc) or type(exc).__name__)[:ERROR_MESSAGE_MAX],
            traceback=text[:TRACEBACK_MAX],
            retriable=is_retriable(exc),
        )


def retry_delay(attempt: int) -> float:
    """Backoff before the attempt after `attempt`: the configured step, plus up to JITTER of it."""
    steps = settings.REPORT_RETRY_BACKOFF
    base = steps[min(attempt - 1, len(steps) - 1)]
    return base * (1 + random.uniform(0, settings.REPORT_RETRY_JITTER))


def record_attempt_failure(
    *, task_id: int, attempt: int, failure: FailureInfo, outcome: str = AttemptOutcome.FAILED
) -> str:
    """running -> retrying or dead. Returns the new status, or "fenced" when the attempt is stale."""
    from deadletters.services import create_dead_letter

    now = timezone.now()
    with transaction.atomic():
        task = ReportTask.objects.filter(pk=task_id).first()
        if task is None or task.status != TaskStatus.RUNNING or task.attempt != attempt:
            logger.warning("failure of task %s attempt %s fenced: the task moved on", task_id, attempt)
            return "fenced"
        last_error = f"{failure.error_type}: {failure.message}"[:ERROR_MESSAGE_MAX]
        retry = failure.retriable and attempt < task.max_attempts
        if retry:
            next_retry_at = now + timedelta(seconds=retry_delay(attempt))
            updates = {"status": TaskStatus.RETRYING, "next_retry_at": next_retry_at}
        else:
            updates = {"status": TaskStatus.DEAD, "finished_at": now, "next_retry_at": None}
        changed = ReportTask.objects.filter(pk=task_id, status=TaskStatus.RUNNING, attempt=attempt).update(
            last_error=last_error, lease_expires_at=None, updated_at=now, **updates
        )
        if not changed:
            return "fenced"
        _close_attempt(task_id, attempt, outcome, now, failure, started_at=task.started_at)
        if retry:
            task.refresh_from_db()
            delay_is_due = next_retry_at <= timezone.now()
            _enqueue_after_commit(task, at=None if delay_is_due else next_retry_at)
            logger.info(
                "task %s attempt %s failed (%s); retry at %s", task_id, attempt, outcome, next_retry_at
            )
            return TaskStatus.RETRYING
        task.refresh_from_db()
        create_dead_letter(task=task, failure=failure)
        logger.warning("task %s is dead after attempt %s: %s", task_id, attempt, last_error[:200])
        return TaskStatus.DEAD


def _close_attempt(
    task_id, attempt, outcome, now, failure: FailureInfo | None = None, *, started_at=None
) -> None:
    if started_at is None:
        row = TaskAttempt.objects.filter(task_id=task_id, number=attempt).only("started_at").first()
        started_at = row.started_at if row else None
    fields = {"outcome": outcome, "finished_at": now}
    if started_at is not None:
        fields["duration_seconds"] = (now - started_at).total_seconds()
    if failure is not None:
        fields.update(
            error_type=failure.error_type, error_message=failure.message, traceback=failure.traceback
        )
    TaskAttempt.objects.filter(task_id=task_id, number=attempt, outcome=AttemptOutcome.RUNNING).update(
        **fields
    )


# --- replay -------------------------------------------------------------------


def replay_task(
    *,
    task_id: int,
    actor: str = "",
    source: str = "console",
    reason: str = "",
    ip_address: str | None = None,
    params: dict | None = None,
    audit_details: dict | None = None,
) -> ReportTask:
    """dead -> pending with a fresh attempt budget, enqueued once however often this is called.

    Raises TaskNotFound, TaskNotReplayable, or InvalidParams for edited params.
    """
    from deadletters.services import mark_replayed, record_audit

    now = timezone.now()
    with transaction.atomic():
        task = ReportTask.objects.filter(pk=task_id).first()
        if task is None:
            raise TaskNotFound(task_id)
        updates = {}
        diff = None
        if params is not None:
            _, cleaned, _ = validate_submission(kind=task.kind, params=params, priority=task.priority)
            if cleaned != task.params:
                updates["params"] = cleaned
                diff = {"before": task.params, "after": cleaned}
        replayed = ReportTask.objects.filter(pk=task_id, status=TaskStatus.DEAD).update(
            status=TaskStatus.PENDING,
            max_attempts=F("attempt") + settings.REPORT_MAX_ATTEMPTS,
            next_retry_at=None,
            lease_expires_at=None,
            finished_at=None,
            updated_at=now,
            **updates,
        )
        if not replayed:
            task.refresh_from_db()
            last = task.dead_letters.exclude(replayed_at=None).order_by("-replayed_at").first()
            raise TaskNotReplayable(
                task,
                replayed_by=last.replayed_by if last else "",
                replayed_at=last.replayed_at if last else None,
            )
        task.refresh_from_db()
        letters = mark_replayed(task=task, actor=actor, now=now)
        details = dict(audit_details or {})
        if diff:
            details["params_diff"] = diff
        record_audit(
            action="replay",
            actor=actor,
            source=source,
            ip_address=ip_address,
            task=task,
            dead_letter=letters[0] if letters else None,
            reason=reason,
            details=details,
        )
        _enqueue_after_commit(task)
    logger.info("task %s replayed by %s via %s", task.public_id, actor or "system", source)
    return task


# --- reaper -------------------------------------------------------------------


@dataclass
class ReapReport:
    abandoned: int = 0
    reenqueued: int = 0
    skipped_locked: bool = False


def reap_tasks(*, now: datetime | None = None, batch_size: int = 500, use_lock: bool = True) -> ReapReport:
    """Recover what crashed workers and lost Redis jobs left behind. Idempotent; safe in parallel."""
    report = ReapReport()
    lock = None
    if use_lock:
        # Correctness comes from the conditional UPDATEs; the lock only spares
        # Redis duplicate enqueues when several reapers wake together.
        lock = queueing.redis_connection().lock("reports:reaper-lock", timeout=120, blocking=False)
        if not lock.acquire():
            report.skipped_locked = True
            return report
    try:
        report.abandoned = _recover_expired_leases(now or timezone.now(), batch_size)
        report.reenqueued = _reenqueue_lost_jobs(now or timezone.now(), batch_size)
    finally:
        if lock is not None and lock.owned():
            lock.release()
    return report


def _recover_expired_leases(now: datetime, batch_size: int) -> int:
    expired = list(
        ReportTask.objects.filter(status=TaskStatus.RUNNING, lease_expires_at__lt=now)
        .order_by("lease_expires_at")
        .values_list("pk", "attempt", "lease_expires_at")[:batch_size]
    )
    recovered = 0
    for task_id, attempt, lease_expires_at in expired:
        error = LeaseExpired(
            f"lease expired at {lease_expires_at:%Y-%m-%d %H:%M:%S} UTC: the worker stopped "
            "(killed, out of memory or restarted) before finishing"
        )
        failure = FailureInfo(
            error_type=error_type_name(error), message=str(error), traceback="", retriable=True
        )
        outcome = record_attempt_failure(
            task_id=task_id, attempt=attempt, failure=failure, outcome=AttemptOutcome.ABANDONED
        )
        recovered += outcome != "fenced"
    return recovered


def _reenqueue_lost_jobs(now: datetime, batch_size: int, max_chunks: int = 200) -> int:
    """Walk every overdue pending/retrying task in id order, a chunk at a time, so a long
    legitimate backlog cannot hide a lost task behind it."""
    cutoff = now - timedelta(seconds=settings.REPORT_REENQUEUE_AFTER)
    # Paused kinds' tasks wait on purpose (resume_kind enqueues them).
    paused = PausedKind.objects.values("kind")
    overdue = (
        ReportTask.objects.filter(
            Q(status=TaskStatus.PENDING, updated_at__lt=cutoff)
            | Q(status=TaskStatus.RETRYING, next_retry_at__lt=cutoff)
        )
        .exclude(kind__in=paused)
        .order_by("pk")
    )
    waiting: dict[str, set[str]] = {}  # queue lists, read at most once per pass
    reenqueued = 0
    last_pk = 0
    for _ in range(max_chunks):
        chunk = list(
            overdue.filter(pk__gt=last_pk).values_list("pk", "attempt", "priority", "timeout_seconds")[
                :batch_size
            ]
        )
        if not chunk:
            break
        last_pk = chunk[-1][0]
        reenqueued += _reenqueue_chunk(chunk, waiting)
    return reenqueued


def _reenqueue_chunk(chunk, waiting: dict[str, set[str]]) -> int:
    from reports.pausing import parked_task_ids  # tasks waiting for a concurrency slot

    parked = parked_task_ids(chunk)
    candidates = [row for row in chunk if row[0] not in parked]
    states = queueing.job_states([queueing.job_id_for(pk, attempt + 1) for pk, attempt, _, _ in candidates])
    reenqueued = 0
    for pk, attempt, priority, timeout in candidates:
        job_id = queueing.job_id_for(pk, attempt + 1)
        state = states.get(job_id)
        if state in ("started", "deferred"):
            continue
        # A job hash marked queued may still be lost: popped by a worker that died before
        # registering it. Only its presence in the queue list proves it waits.
        if state == "queued":
            if priority not in waiting:
                waiting[priority] = queueing.job_ids_waiting([priority])
            if job_id in waiting[priority]:
                continue
        queueing.enqueue_attempt(task_id=pk, attempt=attempt + 1, priority=priority, timeout=timeout)
        reenqueued += 1
        logger.warning(
            "re-enqueued task %s attempt %s (RQ job state: %s)", pk, attempt + 1, state or "missing"
        )
    return reenqueued
