"""The RQ job: claim, generate, complete or fail. All state lives in the database."""

import logging
import os
import shutil
import socket
from pathlib import Path

from django.conf import settings
from redis.exceptions import RedisError
from rq import get_current_job
from rq.timeouts import JobTimeoutException

from reports import semaphore
from reports.errors import PermanentError
from reports.kinds import get_kind
from reports.kinds.base import RunContext
from reports.models import AttemptOutcome
from reports.services import ClaimDeferred, FailureInfo, claim_task, complete_task, record_attempt_failure

logger = logging.getLogger(__name__)


def _worker_name() -> str:
    job = get_current_job()
    name = getattr(job, "worker_name", None) if job else None
    return f"{name or socket.gethostname()} pid {os.getpid()}"


def attempt_output_dir(public_id: str, attempt: int) -> Path:
    return Path(settings.MEDIA_ROOT) / "reports" / public_id / f"attempt-{attempt}"


def run_report_task(task_id=None, attempt=None, *args, **kwargs) -> str:
    if args or kwargs or type(task_id) is not int or type(attempt) is not int or attempt < 1:
        # Someone pushed a job we did not write; dropping it keeps the worker alive.
        logger.error("dropped malformed report job payload task_id=%r attempt=%r", task_id, attempt)
        return "malformed"
    task = claim_task(task_id=task_id, attempt=attempt, worker=_worker_name())
    if isinstance(task, ClaimDeferred):
        logger.info("task %s attempt %s deferred: %s", task_id, attempt, task.reason)
        return "deferred"
    if task is None:
        logger.info("phantom delivery of task %s attempt %s ignored", task_id, attempt)
        return "phantom"
    try:
        return _run_claimed(task, task_id, attempt)
    finally:
        # Only after the row left `running`, so the cap holds in the database too.
        try:
            semaphore.release_and_wake(kind=task.kind, task_id=task_id, attempt=attempt)
        except RedisError as exc:  # the lease frees the slot; the reaper loop wakes the waiters
            logger.error("could not release the concurrency slot of task %s: %s", task_id, exc)


def fan_out_batch(batch_id=None) -> str:
    if type(batch_id) is not int:
        logger.error("dropped malformed batch fan-out payload batch_id=%r", batch_id)
        return "malformed"
    from reports.batches import enqueue_batch_tasks

    return f"enqueued {enqueue_batch_tasks(batch_id=batch_id)}"


def _run_claimed(task, task_id: int, attempt: int) -> str:
    public_id = str(task.public_id)
    ctx = RunContext(
        task_id=task.pk,
        public_id=public_id,
        attempt=attempt,
        output_dir=attempt_output_dir(public_id, attempt),
    )
    try:
        kind = get_kind(task.kind)
        if kind is None:
            raise PermanentError(f"report kind {task.kind!r} is not installed on this worker")
        path = kind.generate(task.params, ctx)
    except JobTimeoutException as exc:
        record_attempt_failure(
            task_id=task_id,
            attempt=attempt,
            failure=FailureInfo.from_exception(exc),
            outcome=AttemptOutcome.TIMEOUT,
        )
        return "timeout"
    except Exception as exc:  # classified by is_retriable; the timeout is handled above
        record_attempt_failure(task_id=task_id, attempt=attempt, failure=FailureInfo.from_exception(exc))
        return "failed"
    relative = str(Path(path).relative_to(settings.MEDIA_ROOT)) if path else ""
    try:
        completed = complete_task(
            task_id=task_id, attempt=attempt, output_file=relative, started_at=task.started_at
        )
    except BaseException:
        # Not recorded as done (database gone, timeout alarm): the file must not outlive the
        # attempt, or a later attempt's output would stand beside it.
        _remove_output(path)
        raise
    if not completed:
        # A newer attempt owns the task: this late output must not stand beside its file.
        _remove_output(path)
        return "fenced"
    _remove_other_attempts_output(public_id, keep=attempt)
    return "done"


def _remove_output(path) -> None:
    if path:
        Path(path).unlink(missing_ok=True)


def _remove_other_attempts_output(public_id: str, *, keep: int) -> None:
    """Attempts killed between writing and recording (SIGKILL, OOM) leave files behind; the
    attempt that completed is the task's only output, so the others go. Best effort."""
    task_dir = Path(settings.MEDIA_ROOT) / "reports" / public_id
    for attempt_dir in task_dir.glob("attempt-*"):
        if attempt_dir.name != f"attempt-{keep}":
            shutil.rmtree(attempt_dir, ignore_errors=True)
