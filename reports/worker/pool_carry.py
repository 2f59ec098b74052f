"""What a pool worker holds between a report's result and its next claim: the attempts in flight
(InFlight), and at most one completion waiting to go in the next claim's statement (Carry)."""

import logging
from dataclasses import dataclass

from rq.executions import Execution
from rq.job import Job
from rq.queue import Queue

from reports.models import ReportTask
from reports.services import attempt_sql
from reports.worker import pool_rq, report_job
from reports.worker.pool_horses import Horse

logger = logging.getLogger("reports.worker")


@dataclass
class InFlight:
    job: Job
    queue: Queue
    task: ReportTask
    horse: Horse
    execution: Execution | None
    overrun_at: float | None
    killed_for_overrun: bool = False
    taken_back: bool = False


class Carry:
    """A finished attempt's completion, kept from the database until the worker's next claim so
    that both go in one statement: one round trip and one WAL flush where there were two of each
    (PostgreSQL; reports/services/attempt_sql.py). It waits no longer than the next dequeue and
    claim: an empty queue, a job that is not a report, RQ's bookkeeping or a shutdown settles it
    first, and whatever the claim did not carry is recorded the ordinary way. Its concurrency slot
    is released only once it is settled, the row having left `running`."""

    def __init__(self):
        self._held: tuple[InFlight, report_job.RunResult, attempt_sql.CarriedCompletion] | None = None

    @property
    def completion(self) -> "attempt_sql.CarriedCompletion | None":
        return self._held[2] if self._held is not None else None

    def hold(self, inflight: InFlight, result: report_job.RunResult) -> bool:
        task = inflight.task
        if (
            self._held is not None
            or result.status != report_job.DONE
            or task.started_at is None
            or not attempt_sql.carries_completions()
        ):
            return False
        completion = attempt_sql.CarriedCompletion(task.pk, task.attempt, result.output_file, task.started_at)
        self._held = (inflight, result, completion)
        return True

    def settle(self, recorder) -> "pool_rq.Ended | None":
        """The held completion, carried by a claim or recorded now; its Ended for RQ's bookkeeping."""
        if self._held is None:
            return None
        inflight, result, completion = self._held
        self._held = None
        task = inflight.task
        if completion.done is None:
            # A carrying statement that failed may have committed before its answer was lost.
            recorder.record(task, result, release_slot=False, answer_may_be_lost=True)
        else:
            if not completion.done:
                logger.warning("late finisher fenced: task %s attempt %s no longer owns the task", task.pk,
                               task.attempt)
            recorder.completed(task, result, completion.done)
        return pool_rq.Ended(inflight, result.status, task)
