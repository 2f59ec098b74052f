"""The RQ jobs of the pipeline and the run of a report kind. All state lives in the database.

Under ReportWorker (reports/worker/worker.py) the worker process claims the attempt itself and a
horse runs only the kind (run_kind), reporting a RunResult that the worker records. Under any
other RQ worker (a plain rq.Worker) the job does the whole attempt itself (run_report_task): claim
with a lease of the job timeout plus REPORT_LEASE_GRACE (nothing renews it), run, record."""

import json
import logging
import os
import socket
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

from django.utils import translation
from redis.exceptions import RedisError
from rq import get_current_job
from rq.timeouts import JobTimeoutException

from config.observability import error_capture, log_context, span
from reports.errors import PermanentError
from reports.kinds import get_kind
from reports.kinds.base import RunContext
from reports.kinds.masking import masked_failure
from reports.models import AttemptOutcome, ReportTask
from reports.outputs import remove_other_attempts_output, remove_output, scratch_dir, store_output
from reports.services import (
    ClaimDeferred,
    FailureInfo,
    claim_task,
    complete_task,
    concurrency,
    record_attempt_failure,
)
from reports.services.batches import enqueue_batch_tasks

logger = logging.getLogger(__name__)

DONE, FAILED, TIMEOUT = "done", "failed", "timeout"
ABANDONED = "abandoned"  # the horse died: said by its worker, never by a horse


@dataclass(frozen=True)
class RunResult:
    """What running the kind produced, as the work-horse reports it to its worker."""

    status: str  # DONE, FAILED or TIMEOUT
    output_file: str = ""  # the name in the output storage; "" when the kind wrote no file
    failure: FailureInfo | None = None

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "RunResult | None":
        """None for anything but a whole result (a horse killed while writing leaves a torn one)."""
        try:
            raw = json.loads(data)
            failure = raw["failure"] and FailureInfo(**raw["failure"])
            result = cls(status=raw["status"], output_file=raw["output_file"], failure=failure or None)
        except (ValueError, TypeError, KeyError):
            return None
        if result.status not in (DONE, FAILED, TIMEOUT) or not isinstance(result.output_file, str):
            return None
        if (result.status == DONE) == (result.failure is not None):
            return None
        return result


@dataclass(frozen=True)
class HandedOver:
    """An attempt the worker claimed: what the job needs to run it, and where its result goes."""

    task_id: int
    attempt: int
    kind: str
    params: dict
    public_id: str
    trace: dict | None = None  # the submit's trace context, carried in the job (config/observability.py)

    @classmethod
    def of(cls, task: ReportTask, meta: dict | None = None) -> "HandedOver":
        return cls(task.pk, task.attempt, task.kind, task.params, str(task.public_id),
                   (meta or {}).get("trace"))


def run_report_task(task_id=None, attempt=None, *args, **kwargs) -> str:
    if args or kwargs or type(task_id) is not int or type(attempt) is not int or attempt < 1:
        # Someone pushed a job we did not write; dropping it keeps the worker alive.
        logger.error("dropped malformed report job payload task_id=%r attempt=%r", task_id, attempt)
        return "malformed"
    return _run_whole_attempt(task_id, attempt)


def run_kind(handed: HandedOver, *, scratch: Path | None = None) -> RunResult:
    """Generate the report; every way it can end becomes a RunResult (the timeout included:
    JobTimeoutException subclasses Exception, so it is classified first). The kind writes into a
    local scratch directory; its file is uploaded to the output storage before the result says
    DONE, so a result never names a file the store does not hold. `scratch`: a directory of the
    caller's (which empties it) instead of one made and removed for this attempt."""
    directory = scratch_dir(handed.public_id, handed.attempt) if scratch is None else nullcontext(scratch)
    ids = log_context(task_id=handed.task_id, attempt=handed.attempt, kind=handed.kind)
    with ids, span("report.attempt", carrier=handed.trace), directory as scratch:
        ctx = RunContext(
            task_id=handed.task_id, public_id=handed.public_id, attempt=handed.attempt, output_dir=scratch
        )
        try:
            kind = get_kind(handed.kind)
            if kind is None:
                raise PermanentError(f"report kind {handed.kind!r} is not installed on this worker")
            # A report's errors are stored, grouped into causes by their text and read by API
            # clients: one language for all of them, whatever LANGUAGE_CODE the console speaks.
            with translation.override("en"):
                path = kind.generate(handed.params, ctx)
            output_file = store_output(path, handed.public_id, handed.attempt) if path else ""
        except JobTimeoutException as exc:
            return RunResult(TIMEOUT, failure=_failure(exc, handed))
        except Exception as exc:  # classified by is_retriable when the worker records it
            error_capture(exc)  # Sentry, when SENTRY_DSN is set: one event, tagged with the ids
            return RunResult(FAILED, failure=_failure(exc, handed))
    return RunResult(DONE, output_file=output_file)


def _failure(exc: BaseException, handed: HandedOver) -> FailureInfo:
    """The error as it is stored: the kind had the real params, the record masks the sensitive ones."""
    return masked_failure(FailureInfo.from_exception(exc), handed.params, handed.kind)


def fan_out_batch(batch_id=None) -> str:
    if type(batch_id) is not int:
        logger.error("dropped malformed batch fan-out payload batch_id=%r", batch_id)
        return "malformed"
    return f"enqueued {enqueue_batch_tasks(batch_id=batch_id)}"


# --- the whole attempt in the job, for RQ workers that are not ours -------------------------


def _worker_name() -> str:
    job = get_current_job()
    name = getattr(job, "worker_name", None) if job else None
    return f"{name or socket.gethostname()} pid {os.getpid()}"


def _run_whole_attempt(task_id: int, attempt: int) -> str:
    task = claim_task(task_id=task_id, attempt=attempt, worker=_worker_name())
    if isinstance(task, ClaimDeferred):
        logger.info("task %s attempt %s deferred: %s", task_id, attempt, task.reason)
        return "deferred"
    if task is None:
        logger.info("phantom delivery of task %s attempt %s ignored", task_id, attempt)
        return "phantom"
    try:
        return _record_here(task, run_kind(HandedOver.of(task)))
    finally:
        # Only after the row left `running`, so the cap holds in the database too.
        try:
            concurrency.release_and_wake(kind=task.kind, task_id=task_id, attempt=attempt)
        except RedisError as exc:  # the lease frees the slot; the reaper loop wakes the waiters
            logger.error("could not release the concurrency slot of task %s: %s", task_id, exc)


def _record_here(task: ReportTask, result: RunResult) -> str:
    if result.status != DONE:
        outcome = AttemptOutcome.TIMEOUT if result.status == TIMEOUT else AttemptOutcome.FAILED
        record_attempt_failure(task_id=task.pk, attempt=task.attempt, failure=result.failure, outcome=outcome)
        return result.status
    try:
        completed = complete_task(
            task_id=task.pk, attempt=task.attempt, output_file=result.output_file, started_at=task.started_at
        )
    except BaseException:
        # Not recorded as done (database gone, timeout alarm): the file must not outlive the
        # attempt, or a later attempt's output would stand beside it.
        remove_output(result.output_file)
        raise
    if not completed:
        # A newer attempt owns the task: this late output must not stand beside its file.
        remove_output(result.output_file)
        return "fenced"
    remove_other_attempts_output(str(task.public_id), keep=task.attempt)
    return DONE
