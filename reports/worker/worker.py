"""ReportWorker: the worker process, its pool of work-horses (reports/worker/horses.py) and its loop.

The worker owns each report attempt: it claims it (the engine's claim_task, on its own warm
database connection) before a horse runs it, renews its lease while it runs, records its outcome
after. The horses, REPORT_WORKER_CONCURRENCY of them, are forked once and reused (as Celery's
prefork pool), recycled after REPORT_HORSE_MAX_TASKS jobs (1: a fork per job), past
REPORT_HORSE_MAX_RSS_MB, and after a timeout. Other jobs (alert sends, bulk actions, batch
fan-outs) run in the same horses, through the same protocol. RQ is a library here, through
reports/worker/rq_bridge.py, so `rq info` and rq-dashboard read what rq.Worker leaves. The loop
(work) reads top to bottom: keep the pool full; take a job for each idle horse (the one notion of
demand), claim and hand it over; tell RQ; serve results, deaths, beats and overruns; stop."""

import logging
import os
import signal
import time

from django.conf import settings
from django.db import DatabaseError, connection
from redis.exceptions import RedisError
from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT
from rq.worker import Worker, WorkerStatus

from config import probe
from config.backoff import backoff_delay, doubling
from reports.kinds import get_kind
from reports.models import ReportTask
from reports.outputs import prepare_attempt_dir
from reports.services import ClaimDeferred, claim_task, concurrency
from reports.worker import horses, outcomes, report_job, rq_bridge
from reports.worker.horses import Horse, Running
from transport.connection import new_redis_connection
from transport.registry import note_refusal

logger = logging.getLogger("reports.worker")

POLL_SECONDS = 0.02  # idle horses, attempts in flight, empty queues: how often to look again
AHEAD_SECONDS = 0.02  # how long jobs taken ahead wait for a horse before they go back
SUSPENSION_CHECK_SECONDS = 1.0
CLAIM_FAILURE_WAITS = doubling(0.5, 10.0)  # a database that refuses claims is not asked at full speed


class ReportWorker(Worker):
    def __init__(self, queues, *args, **kwargs):
        # Our jobs are JSON, whatever rqworker passes; the client is the project's factory's own.
        kwargs["serializer"] = settings.JOB_SERIALIZER
        kwargs["connection"] = new_redis_connection()
        queues = [getattr(q, "name", q) for q in (queues if isinstance(queues, list | tuple) else [queues])]
        super().__init__(queues, *args, **kwargs)
        self._idle: list[Horse] = []
        self._running: dict[int, Running] = {}  # by horse pid
        self._retiring: list[Horse] = []
        self._starting: list[Running] = []  # handed over; RQ not told yet
        self._results: list[tuple[Running, report_job.RunResult]] = []  # to record after the hand-overs
        self._ended: list[rq_bridge.Ended] = []  # recorded; RQ not told yet
        self._next_beat = self._next_suspension_check = 0.0
        self._ahead: list = []  # (job, queue) taken ahead while every horse was busy
        self._ahead_until, self._may_take_ahead = 0.0, False
        self._suspended = False
        self._cold, self._claim_failures = False, 0  # a cold shutdown, claims failed in a row

    # --- the loop ---------------------------------------------------------------------------

    def work(self, burst=False, logging_level="INFO", date_format=DEFAULT_LOGGING_DATE_FORMAT,
             log_format=DEFAULT_LOGGING_FORMAT, max_jobs=None, with_scheduler=False, **_ignored) -> bool:
        outcomes.limit_statements_of_this_process()
        self.bootstrap(logging_level, date_format, log_format)  # RQ's: logs, registration, commands
        if with_scheduler:
            self.scheduler = rq_bridge.start_scheduler(self, burst=burst)
        signal.signal(signal.SIGINT, self._on_stop_signal)
        signal.signal(signal.SIGTERM, self._on_stop_signal)
        taken = 0
        try:
            while not self._stop_requested:
                self._fill_pool()
                if self._check_suspension(burst):  # no new job; the ones in flight are served
                    self._put_back_ahead()
                    self._serve(1.0)
                    self._tell_rq()
                    continue
                wanted = len(self._idle)
                handed = self._take_claim_and_hand_over() if wanted else 0
                self._tell_rq()
                self._take_ahead()
                taken += handed
                if max_jobs is not None and taken >= max_jobs:
                    break
                if burst and not self._running and not handed:
                    break
                if handed == wanted and self._idle:
                    self._serve(0)  # a job ran in no horse (a phantom): the queues may hold more
                elif self._running:
                    self._serve(POLL_SECONDS if self._idle else self._beat_wait())
                    if self._ahead and not self._idle and time.monotonic() >= self._ahead_until:
                        self._put_back_ahead()
                else:
                    self._serve(0)  # every horse idle, the queues empty: wait for a job (1 s at most)
                    rq_bridge.wait_for_a_job(self, min(self._beat_wait(), 1.0))
                if self.should_run_maintenance_tasks:
                    self.run_maintenance_tasks()
        finally:
            self._shut_down()
        return bool(taken)

    def _take_claim_and_hand_over(self) -> int:
        """A job for each idle horse, in one round trip; each claimed (a report attempt) and handed
        over. Returns how many jobs were taken."""
        wanted = len(self._idle)
        jobs, self._ahead = self._ahead[:wanted], self._ahead[wanted:]
        try:
            if len(jobs) < wanted:
                jobs += rq_bridge.dequeue_many(self, wanted=wanted - len(jobs), releasing=self._ended)
        except RedisError as exc:
            logger.error("dequeue failed: %s", exc)
            self._serve(1.0)
            return 0
        for job, queue in jobs:
            logger.info("Worker %s: %s: %s", self.name, queue.name, job.id)
            horse = self._idle.pop()
            try:
                sent = self._hand_over(job, queue, horse)
            finally:
                if horse.pid not in self._running:
                    self._idle.append(horse)
            if not sent and self._claim_failures:
                self._serve(backoff_delay(self._claim_failures, CLAIM_FAILURE_WAITS))
        return len(jobs)

    def _hand_over(self, job, queue, horse: Horse) -> bool:
        ref = rq_bridge.report_attempt_of(job)
        task = None
        try:
            if ref is not None:
                task = self._claim(job, queue, horse, *ref)
                if task is None:
                    return False
                request = horses.report_request(report_job.HandedOver.of(task, job.meta), job.timeout)
            elif note_refusal(job):  # logged once; the job fails unrun, in no horse
                rq_bridge.job_failed(self, job, queue, None, f"job function {job.func_name!r} is refused")
                return False
            else:
                request = horses.job_request(job, job.timeout, self.name)
        except Exception as exc:  # an undecodable job: RQ fails it, the worker lives on
            why = f"{type(exc).__name__}: {str(exc) or exc.__cause__}"
            logger.error("job %s failed before it ran: %s", job.id, why)
            rq_bridge.job_failed(self, job, queue, None, why)
            return False
        timeout = job.timeout or self.queue_class.DEFAULT_TIMEOUT
        # The horse's alarm ends it at its timeout; this is for one that signals do not reach (C code).
        overrun_at = time.monotonic() + timeout + 2 * settings.REPORT_HEARTBEAT_SECONDS if timeout > 0 else 0
        running = self._running[horse.pid] = Running(job, queue, horse, task, overrun_at)
        self._starting.append(running)
        try:
            horse.send(request)
        except OSError as exc:  # the horse died just now: the attempt ends as its death
            logger.warning("work-horse %s took no request (%s)", horse.pid, exc)
            horse.kill()
            return False
        self._may_take_ahead = True
        os.sched_yield()  # the pipe's wake-up puts the horse on this CPU, expecting this one to sleep
        if task is not None and (kind := get_kind(task.kind)) is not None and kind.writes_file(task.params):
            prepare_attempt_dir(str(task.public_id), task.attempt)  # the horse's upload is then a rename
        return True

    def _claim(self, job, queue, horse: Horse, task_id: int, attempt: int) -> ReportTask | None:
        """The engine's claim; None: nothing to run (a phantom, a deferred or a failed claim)."""
        slot = rq_bridge.taken_slot(job)
        claim = dict(task_id=task_id, attempt=attempt, lease_seconds=settings.REPORT_LEASE_SECONDS,
                     worker=f"{self.name} horse {horse.pid} pid {os.getpid()}")
        started = time.monotonic()
        try:
            try:
                claimed = claim_task(**claim, kind=slot[0] if slot else None)
            except DatabaseError as exc:  # a dropped connection (a restart, a failover, a terminated
                # backend): once more on a new one, as the fence allows (had it committed, a phantom)
                logger.warning("claim of task %s attempt %s: %s; reconnecting", task_id, attempt, exc)
                connection.close()
                claimed = claim_task(**claim, kind=slot[0] if slot else None)
            if slot is not None and not isinstance(claimed, ReportTask):
                # Not of the kind its job named (or a phantom): the slot goes back; the ordinary claim.
                rq_bridge.give_back_slot(job.id, slot)
                slot = None
                claimed = claim_task(**claim)
        except Exception as exc:  # the database or Redis is down: RQ fails the job, the reaper retries it
            self._claim_failures += 1
            logger.error("claim of task %s attempt %s failed: %r", task_id, attempt, exc)
            connection.close()
            if slot is not None:
                rq_bridge.give_back_slot(job.id, slot)
            rq_bridge.job_failed(self, job, queue, None, f"claim failed: {type(exc).__name__}: {exc}")
            return None
        finally:
            if time.monotonic() - started > outcomes.SLOW_SECONDS:
                logger.warning("claim of task %s attempt %s took %.1fs: database slow?", task_id, attempt,
                               time.monotonic() - started)
        self._claim_failures = 0
        if isinstance(claimed, ReportTask):
            return claimed
        if isinstance(claimed, ClaimDeferred):
            logger.info("task %s attempt %s deferred: %s", task_id, attempt, claimed.reason)
        else:
            logger.info("phantom delivery of task %s attempt %s ignored", task_id, attempt)
        self._ended.append(rq_bridge.Ended(job, None, "deferred" if claimed else "phantom", queue=queue))
        return None

    # --- results, deaths, beats, overruns ----------------------------------------------------

    def _serve(self, timeout: float) -> None:
        """Wait up to `timeout` for results and deaths; beat, kill overrunning horses."""
        pool = self._horses()
        watched = [fd for horse in pool for fd in (horse.pidfd, horse.results_fd) if (fd or -1) >= 0]
        ready = set(horses.wait_readable(watched, timeout))
        for horse in pool:
            if horse.results_fd in ready:
                for frame in horse.drain():
                    self._on_result(horse, frame)
            if (horse.pidfd is not None and horse.pidfd in ready) or horse.eof:
                horse.reap(block=True)
                for frame in horse.drain():
                    self._on_result(horse, frame)
                self._on_death(horse)
        moment = time.monotonic()
        for running in list(self._running.values()):
            if 0 < running.overrun_at <= moment and not running.killed_for_overrun:
                logger.warning("job %s overran its timeout; killing its work-horse", running.job.id)
                running.killed_for_overrun = True
                running.horse.kill()
        if moment >= self._next_beat:
            self._next_beat = moment + settings.REPORT_HEARTBEAT_SECONDS
            self._beat()
        self._retiring = [horse for horse in self._retiring if not horse.gone()]

    def _on_result(self, horse: Horse, frame: bytes) -> None:
        running = self._running.pop(horse.pid, None)
        if running is None:
            logger.error("work-horse %s reported a result nobody asked for; killing it", horse.pid)
            horse.kill()
            return
        horse.tasks += 1
        if running.task is None:  # another job: its return value, or its traceback
            ok, value = horses.job_answer(frame)
            if ok:
                self._ended.append(rq_bridge.Ended(running.job, running.execution, value))
            else:
                self._tell_rq()  # its start first
                rq_bridge.job_failed(self, running.job, running.queue, running.execution, value)
            status = None
        else:
            result = report_job.RunResult.from_bytes(frame) or horses.death_result(None, overrun=False)
            self._results.append((running, result))
            status = result.status
            cap = concurrency.limit_for(running.task.kind)
            if cap is not None and cap <= settings.REPORT_WORKER_CONCURRENCY:
                self._record_results()  # its slot may be the one the next claim needs: freed first
        if (horse.tasks >= settings.REPORT_HORSE_MAX_TASKS or status == report_job.TIMEOUT
                or horse.rss_mb() > settings.REPORT_HORSE_MAX_RSS_MB):
            logger.info("recycling work-horse %s after %s job(s)", horse.pid, horse.tasks)
            horse.retire()
            self._retiring.append(horse)
        else:
            self._idle.append(horse)

    def _on_death(self, horse: Horse) -> None:
        if horse in self._idle:
            self._idle.remove(horse)
            logger.warning("idle work-horse %s ended: %s", horse.pid, horses.describe_exit(horse.status))
        running = self._running.pop(horse.pid, None)
        horse.close()
        if running is None:
            return
        if running.task is not None:
            result = horses.death_result(horse.status, overrun=running.killed_for_overrun,
                                         timeout=running.job.timeout)
            outcomes.record(running.task, result)
            self._ended.append(rq_bridge.Ended(running.job, None, result.status, running.task))  # its slot
        self._tell_rq()  # its start first
        exc_string = f"{horses.describe_exit(horse.status)}; waitpid returned {horse.status}"
        rq_bridge.job_failed(self, running.job, running.queue, running.execution, exc_string)

    def _beat(self) -> None:
        """Each lease renewed (one taken back or stopped kills its horse), RQ's beats in one trip."""
        probe.beat(ready=not self._claim_failures)
        for running in list(self._running.values()):
            task = running.task
            if task is not None and outcomes.renew(task) is False and not running.taken_back:
                logger.warning("task %s attempt %s was taken back; killing its horse", task.pk, task.attempt)
                running.taken_back = True
                running.horse.kill()
        try:
            rq_bridge.beat(self, [(r.job, r.execution) for r in self._running.values() if r.execution])
        except RedisError as exc:
            logger.error("RQ heartbeat failed: %s", exc)

    def _tell_rq(self) -> None:
        """The results received are recorded (after the next hand-overs, so the horses are busy
        meanwhile); then RQ's bookkeeping of the hand-overs and ends since the last time, in one
        round trip. When Redis fails the database is still the truth: the slots' leases free them."""
        self._record_results()
        ended, self._ended = self._ended, []
        starting, self._starting = self._starting, []
        if not ended and not starting:
            return
        try:
            pairs, idle = [(r.job, r.queue) for r in starting], not self._running
            executions = rq_bridge.bookkeeping(self, starting=pairs, ended=ended, idle_after=idle)
            for running, execution in zip(starting, executions, strict=True):
                running.execution = execution
        except RedisError as exc:
            jobs = [each.job.id for each in ended] + [each.job.id for each in starting]
            logger.error("RQ bookkeeping of job(s) %s failed: %s", ", ".join(jobs), exc)

    def _record_results(self) -> None:
        for running, result in self._results:
            outcomes.record(running.task, result)
            self._ended.append(rq_bridge.Ended(running.job, running.execution, result.status, running.task))
        self._results = []

    # --- the pool, suspension, shutdown -------------------------------------------------------

    def _horses(self) -> list[Horse]:
        return self._idle + [running.horse for running in self._running.values()]

    def _fill_pool(self) -> None:
        for _ in range(settings.REPORT_WORKER_CONCURRENCY - len(self._idle) - len(self._running)):
            self._idle.append(horses.fork_horse(self._horses() + self._retiring))

    def _beat_wait(self) -> float:
        until = min(self._next_beat, self._ahead_until if self._ahead else float("inf"))
        return max(until - time.monotonic(), 0.001 if self._ahead else 0.01)

    def _take_ahead(self) -> None:
        """Every horse busy: the next jobs, one a horse, are taken now (once per hand-over) for the horse
        that finishes first; after AHEAD_SECONDS they go back (lost with the worker, they are re-sent)."""
        if self._idle or not self._running or self._ahead or not self._may_take_ahead or self._stop_requested:
            return
        self._may_take_ahead = False
        try:
            self._ahead = rq_bridge.dequeue_many(self, wanted=len(self._running), ahead=True)
        except RedisError as exc:
            logger.error("dequeue failed: %s", exc)
        self._ahead_until = time.monotonic() + AHEAD_SECONDS

    def _put_back_ahead(self) -> None:
        rq_bridge.put_back(self, self._ahead)
        self._ahead = []

    def _check_suspension(self, burst: bool) -> bool:
        """`rq suspend` in force (asked at most once a second); in burst mode the worker stops."""
        if time.monotonic() < self._next_suspension_check:
            return self._suspended
        self._next_suspension_check = time.monotonic() + SUSPENSION_CHECK_SECONDS
        suspended = rq_bridge.suspended(self, self._suspended)
        if suspended and burst:
            self.log.info("Worker %s: suspended in burst mode, exiting", self.name)
            self._stop_requested = True
        elif suspended != self._suspended:
            self.log.info("Worker %s: %s", self.name, "suspended (`rq resume`)" if suspended else "resumed")
            self.set_state(WorkerStatus.SUSPENDED if suspended else WorkerStatus.IDLE)
        self._suspended = suspended
        return suspended

    def _on_stop_signal(self, signum, frame) -> None:
        if self._stop_requested:
            self.log.warning("Worker %s: cold shut down", self.name)
            self._cold = True
            raise SystemExit()
        self.log.info("Worker %s [PID %d]: warm shut down requested", self.name, os.getpid())
        self._stop_requested = True

    def request_stop(self, signum=None, frame=None):  # RQ's `shutdown` command
        self._stop_requested = True

    def kill_horse(self, sig=signal.SIGKILL):  # RQ's `kill-horse` command: every horse of the worker
        for horse in self._horses():
            horse.kill(sig)

    def _shut_down(self) -> None:
        """Warm: the attempts in flight finish and are recorded. Cold (a second signal): their horses
        are killed and the attempts recorded as abandoned. Then the horses go and RQ hears of it."""
        try:
            self._put_back_ahead()
            if self._cold:
                for running in list(self._running.values()):
                    running.horse.kill()
                    if running.task is not None:
                        outcomes.record_interrupted(running.task, SystemExit("cold shutdown"))
                self._running.clear()
            else:
                while self._running:
                    self._serve(self._beat_wait())
            self._tell_rq()
            for horse in self._idle + self._retiring:
                horse.retire(wait=True)
            self._idle.clear()
        finally:
            self.teardown()  # RQ's: the scheduler stopped, the worker's death registered
