"""The database side of our workers (reports/worker/process.py): the lease heartbeat and the recording of
an attempt's outcome, each logged when the database is slow and retried when it fails, so a
database outage never wedges a worker silently. Whatever cannot be recorded in the end is left
to the reaper, which takes the attempt back once its lease lapses."""

import logging
import threading
import time

from django.conf import settings
from django.db import DatabaseError, connection, connections
from redis.exceptions import RedisError
from rq.timeouts import JobTimeoutException

from reports.errors import WorkHorseKilled, error_type_name
from reports.models import AttemptOutcome, ReportTask, TaskStatus
from reports.outputs import remove_attempt_output, remove_other_attempts_output, remove_output, remove_scratch
from reports.services import (
    FailureInfo,
    complete_task,
    concurrency,
    promote_due_retries,
    record_attempt_failure,
    renew_lease,
)
from reports.worker import report_job
from reports.worker.horse import describe_exit

logger = logging.getLogger("reports.worker")

ABANDONED = "abandoned"
SLOW_SECONDS = 1.0
RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0)
_OUTCOMES = {report_job.FAILED: AttemptOutcome.FAILED, report_job.TIMEOUT: AttemptOutcome.TIMEOUT, ABANDONED: AttemptOutcome.ABANDONED}


def horse_exit_result(data: bytes, status: int | None, *, overrun: bool, timeout: int | None = None) -> "report_job.RunResult":
    """The result the horse reported, or, when it reported none, why it ended without one."""
    result = report_job.RunResult.from_bytes(data) if data else None
    if result is not None:
        return result
    if overrun:
        message = f"the work-horse overran its timeout of {timeout}s and was killed by its worker"
        failure = FailureInfo(error_type_name(JobTimeoutException()), message, "", retriable=True)
        return report_job.RunResult(report_job.TIMEOUT, failure=failure)
    message = describe_exit(status)
    if "SIGKILL" in message:
        message += " (out of memory? the kernel log says)"
    return report_job.RunResult(ABANDONED, failure=FailureInfo(error_type_name(WorkHorseKilled()), message, "", True))


class AttemptRecorder:
    def renew(self, task: ReportTask) -> bool | None:
        """Heartbeat. None: the database could not say (logged; the next beat tries again)."""
        try:
            return self._timed(
                "heartbeat",
                task,
                lambda: renew_lease(
                    task_id=task.pk, attempt=task.attempt, lease_seconds=settings.REPORT_LEASE_SECONDS
                ),
            )
        except DatabaseError as exc:
            logger.error("heartbeat of task %s attempt %s failed: %s", task.pk, task.attempt, exc)
            connection.close()
            return None

    def record(
        self, task: ReportTask, result: "report_job.RunResult", *, release_slot: bool = True,
        answer_may_be_lost: bool = False,
    ) -> None:
        """`release_slot=False`: the caller releases the attempt's concurrency slot itself (the
        pool worker does it in the pipeline that ends the RQ job). `answer_may_be_lost`: a
        completion that finds the task done by this very attempt is not a fenced one."""
        if result.status == report_job.DONE:
            self._complete(task, result, answer_may_be_lost=answer_may_be_lost)
        else:
            self._fail(task, result)
        if release_slot and concurrency.limit_for(task.kind) is not None:
            try:  # only now: the row left `running`, so the cap holds in the database too
                concurrency.release_and_wake(kind=task.kind, task_id=task.pk, attempt=task.attempt)
            except RedisError as exc:  # the slot's lease frees it; the reaper loop wakes the waiters
                logger.error("could not release the concurrency slot of task %s: %s", task.pk, exc)

    def record_interrupted(self, task: ReportTask, exc: BaseException) -> None:
        """The worker is going down mid-attempt (a cold shutdown, a fork that failed): say so now
        rather than leave the attempt to the reaper. Best effort: the process is exiting."""
        message = f"the worker stopped while the attempt ran ({type(exc).__name__}: {exc})"[:500]
        failure = FailureInfo(error_type_name(WorkHorseKilled()), message, "", retriable=True)
        try:
            self._fail(task, report_job.RunResult(ABANDONED, failure=failure), tries=1)
        except Exception:
            logger.exception("could not record the interrupted attempt %s of task %s", task.attempt, task.pk)

    def _complete(self, task: ReportTask, result: "report_job.RunResult", *, answer_may_be_lost: bool) -> None:
        def complete(retrying: bool) -> bool:
            done = complete_task(
                task_id=task.pk, attempt=task.attempt, output_file=result.output_file, started_at=task.started_at
            )
            if not done and (retrying or answer_may_be_lost):  # a commit whose answer was lost, or fenced?
                done = ReportTask.objects.filter(
                    pk=task.pk, status=TaskStatus.DONE, attempt=task.attempt, output_file=result.output_file
                ).exists()
            return done

        done = self._with_retries("completion", task, complete)
        if done is not None:  # else left to the reaper, which removes the attempt's files when it takes it back
            self.completed(task, result, done)

    @staticmethod
    def completed(task: ReportTask, result: "report_job.RunResult", done: bool) -> None:
        """The files a completion leaves, once it ran (here, or carried by the next claim)."""
        if not done:
            remove_output(result.output_file)  # fenced: a newer attempt owns the task
        elif task.attempt > 1:
            remove_other_attempts_output(str(task.public_id), keep=task.attempt)

    def _fail(self, task: ReportTask, result: "report_job.RunResult", tries: int = len(RETRY_DELAYS) + 1) -> None:
        def fail(retrying: bool) -> str:
            return record_attempt_failure(
                task_id=task.pk, attempt=task.attempt, failure=result.failure, outcome=_OUTCOMES[result.status]
            )

        if result.status == ABANDONED:
            logger.warning("task %s attempt %s: %s", task.pk, task.attempt, result.failure.message)
        status = self._with_retries("failure record", task, fail, tries=tries)
        if status is not None:
            # Nothing a failed attempt wrote is kept (a killed horse may leave a whole file).
            remove_attempt_output(str(task.public_id), task.attempt)
            if result.status == ABANDONED:
                remove_scratch(str(task.public_id), task.attempt)
        if status == TaskStatus.RETRYING:
            self.promote_due()  # a retry due at once (no backoff) runs without waiting for a loop

    def promote_due(self) -> int:
        """Enqueue the retries that are due (reports/services/due_retries.py); never raises."""
        try:
            return promote_due_retries()
        except DatabaseError as exc:
            logger.error("promoting due retries failed: %s", exc)
            connection.close()
        except Exception:
            logger.exception("promoting due retries failed")
        return 0

    def _with_retries(self, what: str, task: ReportTask, step, tries: int = len(RETRY_DELAYS) + 1):
        for n in range(tries):
            if n:
                time.sleep(RETRY_DELAYS[n - 1])
            try:
                return self._timed(what, task, lambda retrying=n > 0: step(retrying))
            except DatabaseError as exc:
                logger.error("%s of task %s attempt %s failed (try %s of %s): %s", what, task.pk, task.attempt,
                             n + 1, tries, exc)
                connection.close()
            except Exception:
                logger.exception("%s of task %s attempt %s failed", what, task.pk, task.attempt)
                break
        logger.error("gave up the %s of task %s attempt %s; the reaper takes the attempt back when its "
                     "lease lapses", what, task.pk, task.attempt)
        return None

    @staticmethod
    def _timed(what: str, task: ReportTask, step):
        started = time.monotonic()
        try:
            return step()
        finally:
            took = time.monotonic() - started
            if took > SLOW_SECONDS:
                logger.warning("%s of task %s attempt %s took %.1fs: database slow?", what, task.pk,
                               task.attempt, took)


class LeaseKeeper:
    """SimpleReportWorker's heartbeat: a thread that renews the running attempt's lease. It holds
    no connection between beats, so nothing of it is inherited by a process forked meanwhile."""

    def __init__(self, recorder: AttemptRecorder):
        self._recorder = recorder
        self._task: ReportTask | None = None
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self, task: ReportTask) -> None:
        self._task = task
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)
            self._thread.start()

    def release(self) -> None:
        self._task = None

    def _run(self) -> None:
        while True:
            self._wake.wait(settings.REPORT_HEARTBEAT_SECONDS)
            task = self._task
            if task is None:
                continue
            try:
                if self._recorder.renew(task) is False and self._task is task:  # not merely ended
                    logger.warning("task %s attempt %s was taken back; its result will be fenced", task.pk,
                                   task.attempt)
            finally:
                connections.close_all()
