"""PoolReportWorker: the default worker. A pool of long-lived work-horses, forked once and reused
(as Celery's prefork pool), REPORT_WORKER_CONCURRENCY of them, with RQ as the transport.

The worker process dequeues (RQ's queues, registries and job statuses kept as rq.Worker keeps
them), claims the attempt (the database), hands it to an idle horse over a pipe, renews the
leases of the attempts in flight, receives the results and records them. It keeps the forking
worker's guarantees:
- a horse that dies (the OOM killer, SIGKILL) is recorded at once as abandoned (WorkHorseKilled)
  and replaced; one that overruns its timeout is killed and recorded as a timeout;
- a lease the reaper took back (renew_lease returns False) kills that attempt's horse;
- a horse is recycled after REPORT_HORSE_MAX_TASKS attempts, past REPORT_HORSE_MAX_RSS_MB, and
  after a timeout (a kind interrupted by an alarm may have left anything behind).
Jobs that are not report attempts (alert sends, bulk actions, batch fan-outs) run the old way,
in a horse forked for the job, while the worker keeps beating and recording for its pool."""

import logging
import os
import time
from dataclasses import dataclass

from django.conf import settings
from redis.exceptions import RedisError
from rq.exceptions import StopRequested
from rq.executions import Execution
from rq.job import Job
from rq.queue import Queue
from rq.suspension import is_suspended
from rq.utils import now as rq_now
from rq.worker import WorkerStatus

from reports.kinds import get_kind
from reports.models import ReportTask
from reports.outputs import prepare_attempt_dir
from reports.services.enqueue import job_id_for
from reports.worker import pool_horses, pool_rq, report_job
from reports.worker.pool_forked import OwnHorseForOtherJobs
from reports.worker.pool_horses import Horse
from reports.worker.pool_taken import JobsForHorses
from reports.worker.process import PROMOTE_EVERY_SECONDS, ReportWorker, report_attempt_of
from reports.worker.records import horse_exit_result

logger = logging.getLogger("reports.worker")

POLL_SECONDS = 0.02  # an idle horse and an empty queue: how often to look again
SUSPENSION_CHECK_SECONDS = 1.0


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


class PoolReportWorker(JobsForHorses, OwnHorseForOtherJobs, ReportWorker):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._idle: list[Horse] = []
        self._inflight: dict[int, InFlight] = {}  # by horse pid
        self._retiring: list[Horse] = []
        self._chosen: Horse | None = None
        self._cold = False
        self._next_beat = 0.0
        self._ended: list[pool_rq.Ended] = []  # recorded; RQ not told yet
        self._starting: list[InFlight] = []  # with their horses; RQ not told yet
        self._next_suspension_check = 0.0

    # --- the loop's hooks ---------------------------------------------------------------

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        self._fill_pool()
        while True:
            if self._stop_requested:
                self._put_back_taken()
                self._drain()
                return None
            if self._idle or not self._inflight:
                # A job waiting now is taken at once; the RQ bookkeeping of the attempts recorded
                # meanwhile goes with its hand-over.
                result = self._dequeue_now()
                if result is not None:
                    return result
            self._tell_rq()
            if not self._inflight:  # RQ's blocking wait is for an empty queue
                self._next_suspension_check = 0.0  # the job it returns is followed by the question
                return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
            if not self._idle:
                self._take_ahead()
            waiting_for_jobs = self._idle and timeout is not None
            self._service(POLL_SECONDS if waiting_for_jobs else self._beat_wait(), tell_rq=False)
            self._put_back_if_waited_too_long()

    def execute_job(self, job, queue):
        if report_attempt_of(job) is not None:
            if not self._idle:
                self._fill_pool()
            self._chosen = self._idle.pop()
            self.attempt_worker_name = f"{self.name} horse {self._chosen.pid} pid {os.getpid()}"
            try:
                return super().execute_job(job, queue)
            finally:
                if self._chosen is not None:  # not handed over (a phantom, a deferred claim)
                    self._idle.append(self._chosen)
                    self._chosen = None
                    self._tell_rq()
        slot = pool_rq.taken_slot(job)
        if slot is not None:  # its id and meta looked like a report attempt's; its payload is not one
            pool_rq.give_back_slot(job.id, slot)
        self._tell_rq()
        return super().execute_job(job, queue)

    def _slot_taken_for(self, job, task_id: int, attempt: int):
        slot = pool_rq.taken_slot(job)
        if slot is not None and job.id != job_id_for(task_id, attempt):  # not the attempt it was taken for
            pool_rq.give_back_slot(job.id, slot)
            return None
        return slot

    def _give_back_slot(self, task_id: int, attempt: int, slot) -> None:
        try:
            pool_rq.give_back_slot(job_id_for(task_id, attempt), slot)
        except RedisError as exc:  # the slot's own lease frees it
            logger.error("could not give back the concurrency slot of task %s: %s", task_id, exc)

    def check_for_suspension(self, burst):
        """RQ asks Redis before every job and, while suspended, sleeps in its loop: a pool's attempts
        in flight would go unrecorded and their leases unrenewed until the reaper took them back.
        Here the question is asked at most once a second while jobs keep coming (and always after
        a wait for one), and a suspended worker serves its pool, taking no new job, until resumed."""
        if time.monotonic() < self._next_suspension_check:
            return
        self._next_suspension_check = time.monotonic() + SUSPENSION_CHECK_SECONDS
        if self._stop_requested or not is_suspended(self.connection):
            return
        if burst:
            self.log.info("Worker %s: suspended in burst mode, exiting", self.name)
            raise StopRequested
        self.log.info("Worker %s: suspended, run `rq resume` to resume", self.name)
        self._put_back_taken()
        self._tell_rq()
        before = self.get_state()
        self.set_state(WorkerStatus.SUSPENDED)
        while not self._stop_requested and is_suspended(self.connection):
            self._service(1.0)
        self.set_state(before)

    def set_state(self, state, pipeline=None):
        if state == WorkerStatus.IDLE and self._inflight:
            state = WorkerStatus.BUSY  # a warm shutdown waits for the pool, as for a forked horse
        super().set_state(state, pipeline)

    def request_force_stop(self, signum, frame):
        try:
            super().request_force_stop(signum, frame)
        except SystemExit:
            self._cold = True
            raise

    def teardown(self):
        try:
            self._put_back_taken()
            if self._cold:
                for inflight in list(self._inflight.values()):
                    pool_horses.kill(inflight.horse)
                    self._recorder.record_interrupted(inflight.task, SystemExit("cold shutdown"))
                self._inflight.clear()
            else:
                self._drain()
            self._tell_rq()
            for horse in self._idle:
                pool_horses.retire(horse)
                horse.reap(block=True)
                horse.close()
            self._idle.clear()
        finally:
            super().teardown()

    # --- handing over ---------------------------------------------------------------------

    def _run_claimed(self, job, queue, task: ReportTask) -> None:
        horse, self._chosen = self._chosen, None
        timeout = job.timeout or self.queue_class.DEFAULT_TIMEOUT
        overrun_at = None
        if timeout > 0:
            # The horse's own alarm ends the kind at the timeout; this is for a horse stuck where
            # signals do not reach Python (C code, a stopped process).
            overrun_at = time.monotonic() + timeout + 2 * settings.REPORT_HEARTBEAT_SECONDS
        inflight = self._inflight[horse.pid] = InFlight(job, queue, task, horse, None, overrun_at)
        sent = False
        try:
            horse.send(pool_horses.request_bytes(report_job.HandedOver.of(task), timeout))
            sent = True
        except OSError as exc:  # the horse died just now
            logger.warning("work-horse %s took no request (%s)", horse.pid, exc)
        finally:
            if not sent:  # whatever stopped the hand-over, the attempt ends as its horse's death
                pool_horses.kill(horse)
        if sent:
            self._may_take_ahead = True
            # The pipe's wake-up puts the horse on this CPU, expecting this process to sleep; what
            # is left here (RQ's bookkeeping) can wait for the other CPU or for the horse.
            os.sched_yield()
        # RQ hears of the start while the horse runs (with the other hand-overs made meanwhile).
        self._starting.append(inflight)
        kind = get_kind(task.kind)
        if sent and kind is not None and kind.writes_file(task.params):
            prepare_attempt_dir(str(task.public_id), task.attempt)  # the horse's upload is then a rename

    # --- the pool -------------------------------------------------------------------------

    def _horses(self) -> list[Horse]:
        return self._idle + [inflight.horse for inflight in self._inflight.values()]

    def _fill_pool(self) -> None:
        wanted = settings.REPORT_WORKER_CONCURRENCY - len(self._idle) - len(self._inflight)
        wanted -= self._chosen is not None
        for _ in range(max(wanted, 0)):
            self._idle.append(pool_horses.fork_horse(self._horses() + self._retiring))

    def _beat_wait(self) -> float:
        # Jobs taken ahead go back to their queues on time.
        until = min(self._next_beat, self._next_promote, self._taken_until if self._taken else float("inf"))
        return max(until - time.monotonic(), 0.001 if self._taken else 0.01)

    def _drain(self) -> None:
        self._tell_rq()
        while self._inflight:
            self._service(self._beat_wait())

    def _service(self, timeout: float, extra_fds: tuple = (), *, tell_rq: bool = True) -> list[int]:
        """Wait up to `timeout` for results and deaths, and handle them; beat, promote and check
        for overruns when their time has come. Returns which of extra_fds became readable.
        `tell_rq=False`: the ends of the attempts recorded here wait for the next hand-over's
        pipeline (the caller dequeues next, or calls _tell_rq)."""
        horses = self._horses()
        watched = list(extra_fds)
        for horse in horses:
            if horse.pidfd is not None:
                watched.append(horse.pidfd)
            if horse.pid in self._inflight or horse.pidfd is None:
                watched.append(horse.results_fd)
        ready = set(pool_horses.wait_readable(watched, timeout))
        for horse in horses:
            if horse.results_fd in ready:
                for frame in horse.drain():
                    self._on_result(horse, frame)
            if (horse.pidfd is not None and horse.pidfd in ready) or horse.eof:
                horse.reap(block=True)
                for frame in horse.drain():
                    self._on_result(horse, frame)
                self._on_death(horse)
        moment = time.monotonic()
        for inflight in list(self._inflight.values()):
            if inflight.overrun_at is not None and moment >= inflight.overrun_at and not inflight.killed_for_overrun:
                task = inflight.task
                logger.warning("task %s attempt %s overran its timeout; killing its work-horse", task.pk, task.attempt)
                inflight.killed_for_overrun = True
                pool_horses.kill(inflight.horse)
        if moment >= self._next_beat:
            self._next_beat = moment + settings.REPORT_HEARTBEAT_SECONDS
            self._beat()
        if moment >= self._next_promote:
            self._next_promote = moment + PROMOTE_EVERY_SECONDS
            self._recorder.promote_due()
        self._retiring = [horse for horse in self._retiring if not self._reaped(horse)]
        if not self._stop_requested:
            self._fill_pool()
        if tell_rq:
            self._tell_rq()
        try:
            self.heartbeat()
        except RedisError as exc:
            logger.error("RQ heartbeat failed: %s", exc)
        return [fd for fd in extra_fds if fd in ready]

    @staticmethod
    def _reaped(horse: Horse) -> bool:
        if horse.reap(block=False):
            horse.close()
            return True
        return False

    def _beat(self) -> None:
        for inflight in list(self._inflight.values()):
            task = inflight.task
            if self._recorder.renew(task) is False and not inflight.taken_back:
                # The reaper gave the attempt up (this worker looked dead, or an operator stopped
                # it): its result would be fenced.
                logger.warning("task %s attempt %s was taken back; stopping its work-horse", task.pk, task.attempt)
                inflight.taken_back = True
                pool_horses.kill(inflight.horse)
            if inflight.execution is None:
                continue
            self.execution = inflight.execution
            try:
                self.maintain_heartbeats(inflight.job)
            except RedisError as exc:
                logger.error("RQ heartbeat failed: %s", exc)

    def _on_result(self, horse: Horse, frame: bytes) -> None:
        inflight = self._inflight.pop(horse.pid, None)
        if inflight is None:
            logger.error("work-horse %s reported a result nobody asked for; killing it", horse.pid)
            pool_horses.kill(horse)
            return
        horse.tasks += 1
        result = report_job.RunResult.from_bytes(frame)
        if result is None:
            result = horse_exit_result(b"", None, overrun=False)
        self._recorder.record(inflight.task, result, release_slot=False)
        self._ended.append(pool_rq.Ended(inflight, result.status, inflight.task))
        if (
            horse.tasks >= settings.REPORT_HORSE_MAX_TASKS
            or result.status == report_job.TIMEOUT
            or horse.rss_mb() > settings.REPORT_HORSE_MAX_RSS_MB
        ):
            logger.info("recycling work-horse %s after %s attempt(s)", horse.pid, horse.tasks)
            pool_horses.retire(horse)
            self._retiring.append(horse)
        else:
            self._idle.append(horse)

    def _on_death(self, horse: Horse) -> None:
        if horse in self._idle:
            self._idle.remove(horse)
            logger.warning("idle work-horse %s ended: %s", horse.pid, pool_horses.fork_side.describe_exit(horse.status))
        inflight = self._inflight.pop(horse.pid, None)
        horse.close()
        if inflight is None:
            return
        job = inflight.job
        result = horse_exit_result(b"", horse.status, overrun=inflight.killed_for_overrun, timeout=job.timeout)
        self._recorder.record(inflight.task, result)
        job.ended_at = rq_now()
        self.execution = inflight.execution
        exc_string = f"{pool_horses.fork_side.describe_exit(horse.status)}; waitpid returned {horse.status}"
        try:
            self.handle_work_horse_killed(job, horse.pid, horse.status, horse.rusage)
            self.handle_job_failure(job, queue=inflight.queue, exc_string=exc_string)
        except RedisError as exc:
            logger.error("RQ bookkeeping of job %s failed: %s", job.id, exc)

    def _tell_rq(self) -> None:
        """RQ's bookkeeping of the hand-overs made and the attempts recorded since the last time,
        in one round trip (the slots not yet released by a dequeue are released in it). When Redis
        fails, the database is still the truth: the slots' leases free them and the reaper loop
        wakes their waiters."""
        ended, self._ended = self._ended, []
        starting, self._starting = self._starting, []
        if not ended and not starting:
            return
        try:
            pool_rq.bookkeeping(self, ended=ended, starting=starting, idle_after=not self._inflight)
        except RedisError as exc:
            jobs = [each.running.job.id for each in ended] + [each.job.id for each in starting]
            logger.error("RQ bookkeeping of job(s) %s failed: %s", ", ".join(jobs), exc)
