"""The worker's side of the engine (reports/services/engine.py): the lease heartbeat and the
recording of an attempt's outcome, each logged when the database is slow and retried when it
fails (waits of config.backoff), so a database outage never wedges a worker silently. Whatever
cannot be recorded in the end is left to the lease: the housekeeper takes the attempt back."""

import logging
import os
import time

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.backends.signals import connection_created

from config.backoff import backoff_delay, doubling
from config.observability import log_context
from reports.errors import FailureInfo, WorkHorseKilled, error_type_name
from reports.models import AttemptOutcome, ReportTask, TaskStatus
from reports.outputs import remove_attempt_output, remove_other_attempts_output, remove_output, remove_scratch
from reports.services import complete_task, record_attempt_failure, renew_lease
from reports.worker import report_job

logger = logging.getLogger("reports.worker")

SLOW_SECONDS = 1.0
_worker_pid = 0  # the worker process's; its horses (and RQ's scheduler) are other pids
RETRY_STEPS = doubling(0.5, 4.0)  # a record's tries wait 0.5, 1, 2, 4 s
_OUTCOMES = {
    report_job.FAILED: AttemptOutcome.FAILED,
    report_job.TIMEOUT: AttemptOutcome.TIMEOUT,
    report_job.ABANDONED: AttemptOutcome.ABANDONED,
}


def renew(task: ReportTask) -> bool | None:
    """Heartbeat. None: the database could not say (logged; the next beat tries again)."""
    try:
        return _timed("heartbeat", task, lambda: renew_lease(
            task_id=task.pk, attempt=task.attempt, lease_seconds=settings.REPORT_LEASE_SECONDS))
    except DatabaseError as exc:
        logger.error("heartbeat of task %s attempt %s failed: %s", task.pk, task.attempt, exc)
        connection.close()
        return None


def record(task: ReportTask, result: "report_job.RunResult", *, tries: int = len(RETRY_STEPS) + 1) -> None:
    """The attempt's outcome through the engine: complete, or fail (retry or die); then the files
    of the attempt (a fenced or failed one's go; a done one's other attempts' go). What it logs
    carries the attempt's ids (config/observability.py)."""
    with log_context(task_id=task.pk, attempt=task.attempt, kind=task.kind):
        _record(task, result, tries)


def _record(task: ReportTask, result: "report_job.RunResult", tries: int) -> None:
    if result.status == report_job.DONE:
        def complete(retrying: bool) -> bool:
            done = complete_task(task_id=task.pk, attempt=task.attempt, output_file=result.output_file,
                                 started_at=task.started_at)
            if not done and retrying:  # did the try whose answer was lost commit, or is it fenced?
                done = ReportTask.objects.filter(pk=task.pk, status=TaskStatus.DONE, attempt=task.attempt,
                                                 output_file=result.output_file).exists()
            return done

        done = _with_retries("completion", task, complete, tries)
        if done is False:
            remove_output(result.output_file)  # fenced: a newer attempt owns the task
        elif done and task.attempt > 1:
            remove_other_attempts_output(str(task.public_id), keep=task.attempt)
        return  # None: left to the lease; taken back, its files go
    if result.status == report_job.ABANDONED:
        logger.warning("task %s attempt %s: %s", task.pk, task.attempt, result.failure.message)

    def fail(retrying: bool) -> str:
        return record_attempt_failure(task_id=task.pk, attempt=task.attempt, failure=result.failure,
                                      outcome=_OUTCOMES[result.status])

    status = _with_retries("failure record", task, fail, tries)
    if status is not None:
        # Nothing a failed attempt wrote is kept (a killed horse may leave a whole file).
        remove_attempt_output(str(task.public_id), task.attempt)
        if result.status == report_job.ABANDONED:
            remove_scratch(str(task.public_id), task.attempt)


def record_interrupted(task: ReportTask, exc: BaseException) -> None:
    """The worker is going down mid-attempt (a cold shutdown): say so now rather than leave the
    attempt to its lease. Best effort: the process is exiting."""
    message = f"the worker stopped while the attempt ran ({type(exc).__name__}: {exc})"[:500]
    failure = FailureInfo(error_type_name(WorkHorseKilled()), message, "", retriable=True)
    record(task, report_job.RunResult(report_job.ABANDONED, failure=failure), tries=1)


def _with_retries(what: str, task: ReportTask, step, tries: int):
    for n in range(tries):
        if n:
            time.sleep(backoff_delay(n, RETRY_STEPS))
        try:
            return _timed(what, task, lambda retrying=n > 0: step(retrying))
        except DatabaseError as exc:
            logger.error("%s of task %s attempt %s failed (try %s of %s): %s", what, task.pk, task.attempt,
                         n + 1, tries, exc)
            connection.close()
        except Exception:
            logger.exception("%s of task %s attempt %s failed", what, task.pk, task.attempt)
            break
    logger.error("gave up the %s of task %s attempt %s; it is taken back when its lease lapses", what,
                 task.pk, task.attempt)
    return None


def _timed(what: str, task: ReportTask, step):
    started = time.monotonic()
    try:
        return step()
    finally:
        took = time.monotonic() - started
        if took > SLOW_SECONDS:
            logger.warning("%s of task %s attempt %s took %.1fs: database slow?", what, task.pk, task.attempt,
                           took)


def limit_statements_of_this_process() -> None:
    """Statements of the worker process (not of its horses, whose reports may query for long) give
    up after REPORT_WORKER_DB_TIMEOUT: PostgreSQL cancels them, SQLite stops waiting for its lock."""
    global _worker_pid
    _worker_pid = os.getpid()
    connection_created.connect(_limit_statements, dispatch_uid="reports.worker.statement_timeout")


def _limit_statements(sender, connection, **kwargs) -> None:
    if os.getpid() != _worker_pid:
        return
    milliseconds = int(settings.REPORT_WORKER_DB_TIMEOUT * 1000)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT set_config('statement_timeout', %s, false)", [str(milliseconds)])
        elif connection.vendor == "sqlite":
            cursor.execute(f"PRAGMA busy_timeout = {milliseconds}")
