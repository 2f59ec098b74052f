"""What a pool worker holds between a report's result and its next claim: the attempts in flight
(InFlight), and the completions waiting to go in the next claims' statements (Carry)."""

from dataclasses import dataclass

from rq.executions import Execution
from rq.job import Job
from rq.queue import Queue

from reports.models import ReportTask
from reports.services import attempt_sql
from reports.worker import pool_rq, report_job
from reports.worker.pool_horses import Horse


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
    """Finished attempts' completions, kept from the database until the worker's next claims so
    that each goes in a claim's statement: one round trip and one WAL flush where there were two
    of each (PostgreSQL; reports/services/attempt_sql.py). Results that arrive together (several
    horses done while the worker was busy) are carried by the claims that follow, oldest first,
    one each. None waits longer than those dequeues and claims: an empty queue, a job that is not a
    report, RQ's bookkeeping, a claim that did not carry or a shutdown settles all of them first,
    and whatever no claim carried is recorded the ordinary way. A concurrency slot is released only
    once its completion is settled, the row having left `running`.

    On SQLite, where a claim is no single statement to carry one, a completion waits for the next
    hand-over only: it is recorded while the horse runs the next report, not before its claim."""

    def __init__(self):
        self._held: list[tuple[InFlight, report_job.RunResult, attempt_sql.CarriedCompletion]] = []

    @property
    def completion(self) -> "attempt_sql.CarriedCompletion | None":
        """The oldest held completion that no claim has carried yet."""
        return next((completion for _, _, completion in self._held if completion.done is None), None)

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def hold(self, inflight: InFlight, result: report_job.RunResult) -> bool:
        task = inflight.task
        if result.status != report_job.DONE or task.started_at is None:
            return False
        completion = attempt_sql.CarriedCompletion(task.pk, task.attempt, result.output_file, task.started_at)
        self._held.append((inflight, result, completion))
        return True

    def settle(self, recorder, *, carried_only: bool = False) -> "list[pool_rq.Ended]":
        """The held completions that claims carried, and unless `carried_only` the others too,
        recorded now; their Ended for RQ's bookkeeping."""
        settled = []
        kept = []
        for inflight, result, completion in self._held:
            task = inflight.task
            if completion.done is None:
                if carried_only:
                    kept.append((inflight, result, completion))
                    continue
                # A carrying statement that failed may have committed before its answer was lost.
                recorder.record(task, result, release_slot=False, answer_may_be_lost=True)
            else:  # the claim that carried it noted a fenced one (claim_task)
                recorder.completed(task, result, completion.done)
            settled.append(pool_rq.Ended(inflight, result.status, task))
        self._held = kept
        return settled
