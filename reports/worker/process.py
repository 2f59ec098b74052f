"""Our RQ workers: the worker process claims each report attempt before anything runs, renews
its lease while it runs and records its outcome after. ReportWorker forks a horse per job;
SimpleReportWorker runs jobs in the worker process (a thread renews the lease)."""

import logging
import os
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.db.backends.signals import connection_created
from redis.exceptions import RedisError
from rq.exceptions import InvalidJobOperation
from rq.job import JobStatus
from rq.scheduler import RQScheduler
from rq.utils import ensure_job_list
from rq.utils import now as rq_now
from rq.worker import SimpleWorker, Worker, WorkerStatus

from reports.errors import WorkHorseKilled, error_type_name
from reports.models import ReportTask
from reports.outputs import remove_output
from reports.services import ClaimDeferred, FailureInfo, claim_task
from reports.services.enqueue import REPORT_JOB_FUNC
from reports.worker import horse, registration, report_job
from reports.worker.records import ABANDONED, SLOW_SECONDS, AttemptRecorder, LeaseKeeper, horse_exit_result
from transport.connection import new_redis_connection
from transport.registry import note_refusal

logger = logging.getLogger("reports.worker")


def report_attempt_of(job) -> tuple[int, int] | None:
    """(task id, attempt) of a well-formed report job; None for anything else, which runs as a
    plain RQ job (a malformed payload is dropped there; an undecodable one fails there)."""
    try:
        if job.func_name != REPORT_JOB_FUNC:
            return None
        args, kwargs = job.args, job.kwargs
    except Exception:
        return None
    if kwargs or len(args) != 2 or any(type(arg) is not int for arg in args) or args[1] < 1:
        return None
    return args[0], args[1]


def _limit_statements(sender, connection, **kwargs) -> None:
    """Statements of a worker process (not of its horses, whose reports may query for long) give
    up after REPORT_WORKER_DB_TIMEOUT: PostgreSQL cancels them, SQLite stops waiting for its lock."""
    if os.getpid() != _worker_pid:
        return
    milliseconds = int(settings.REPORT_WORKER_DB_TIMEOUT * 1000)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT set_config('statement_timeout', %s, false)", [str(milliseconds)])
        elif connection.vendor == "sqlite":
            cursor.execute(f"PRAGMA busy_timeout = {milliseconds}")


class ReportScheduler(RQScheduler):
    """RQ's scheduler with its client from the project's factory, in whichever process it runs."""

    @property
    def connection(self):
        if self._connection is None:
            self._connection = new_redis_connection()
        return self._connection


_worker_pid = 0  # set in the worker process; its horses (and RQ's scheduler) are other pids
REDIS_HEARTBEAT_SECONDS = 1.0
PROMOTE_EVERY_SECONDS = 0.5


class _AttemptOwner:
    """What both workers share: claim before the job runs, record after it ended."""

    def __init__(self, queues, *args, **kwargs):
        # Whatever rqworker passes (django-rq defaults to pickle): our jobs are JSON.
        kwargs["serializer"] = settings.JOB_SERIALIZER
        # django-rq's connection has no retry and no Sentinel logging: the worker, its queues and
        # its scheduler use a client of the project's one factory (its own: RQ widens its timeout).
        kwargs["connection"] = new_redis_connection()
        queues = [queue if isinstance(queue, str) else queue.name for queue in ensure_job_list(queues)]
        super().__init__(queues, *args, **kwargs)
        self._claim_failures = 0
        self._idle_in_redis = False
        self._recorder = AttemptRecorder()
        self._next_promote = 0.0

    def bootstrap(self, *args, **kwargs):
        global _worker_pid
        _worker_pid = os.getpid()
        connection_created.connect(_limit_statements, dispatch_uid="reports.worker.statement_timeout")
        self.attempt_worker_name = f"{self.name} pid {os.getpid()}"
        super().bootstrap(*args, **kwargs)

    def _start_scheduler(self, burst=False, logging_level="INFO", date_format=None, log_format=None):
        # rq.Worker's own, with our scheduler class: RQ rebuilds the scheduler's client in the
        # forked process from pool kwargs, which a Sentinel client cannot be rebuilt from.
        formats = {k: v for k, v in (("date_format", date_format), ("log_format", log_format)) if v}
        self.scheduler = ReportScheduler(
            self.queues,
            connection=self.connection,
            logging_level=logging_level if logging_level is not None else self.log.level,
            serializer=self.serializer,
            **formats,
        )
        self.scheduler.acquire_locks()
        if not self.scheduler.acquired_locks:
            return
        if not burst:
            self.scheduler.start()
            return
        try:
            self.scheduler.register_birth()
            self.scheduler.enqueue_scheduled_jobs()
        finally:
            self.scheduler.release_locks()
            self.scheduler.register_death()

    def heartbeat(self, timeout=None, pipeline=None):
        # RQ beats its worker key about three times a job, two round trips each; once a second
        # keeps the key (TTL: worker_ttl + 60 s) and the dashboards just as alive.
        if timeout is None and pipeline is None and self.last_heartbeat is not None:
            if (rq_now() - self.last_heartbeat).total_seconds() < REDIS_HEARTBEAT_SECONDS:
                return
        if pipeline is not None:
            super().heartbeat(timeout, pipeline)
            return
        with self.connection.pipeline() as beat:
            super().heartbeat(timeout, beat)
            registration.queue_registration_check(self, beat)
            if not beat.execute()[-1]:
                registration.register_again(self)

    def set_state(self, state, pipeline=None):
        # The loop writes "idle" twice a job (after the job, before the next dequeue); once will do.
        if pipeline is None and state == WorkerStatus.IDLE and self._idle_in_redis:
            self._state = state
            return
        super().set_state(state, pipeline)
        self._idle_in_redis = pipeline is None and state == WorkerStatus.IDLE

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        """RQ's blocking dequeue in slices of a second, promoting due retries between them (and
        once before a burst's look), so every live worker keeps retries on time."""
        waited = 0
        while True:
            if time.monotonic() >= self._next_promote:
                self._next_promote = time.monotonic() + PROMOTE_EVERY_SECONDS
                self._recorder.promote_due()
            if timeout is None:
                return super().dequeue_job_and_maintain_ttl(None, max_idle_time)
            result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time=1)
            waited += 1
            if result is not None or (max_idle_time is not None and waited >= max_idle_time):
                return result

    def execute_job(self, job, queue):
        ref = report_attempt_of(job)
        if ref is None:
            note_refusal(job)  # logged once here; the job then fails in the horse, unrun
            return super().execute_job(job, queue)
        task_id, attempt = ref
        claimed = self._claim(task_id, attempt, slot=self._slot_taken_for(job, task_id, attempt))
        if isinstance(claimed, ReportTask):
            return self._run_claimed(job, queue, claimed)
        return self._settle_without_running(job, queue, claimed)

    def _slot_taken_for(self, job, task_id: int, attempt: int):
        return None  # the pool worker's dequeue takes slots (reports/worker/pool_rq.py)

    def _claim(self, task_id: int, attempt: int, slot=None) -> "ReportTask | report_job.Decided":
        started = time.monotonic()
        claim = dict(
            task_id=task_id, attempt=attempt, worker=self.attempt_worker_name, lease_seconds=settings.REPORT_LEASE_SECONDS
        )
        try:
            try:
                claimed = claim_task(**claim, kind=slot[0] if slot else None)
                if slot is not None and not isinstance(claimed, ReportTask):
                    # Not the kind its job named (or a phantom): the slot goes back, and the claim
                    # is made the ordinary way.
                    self._give_back_slot(task_id, attempt, slot)
                    slot = None
                    claimed = claim_task(**claim)
            except (OperationalError, InterfaceError) as exc:
                # Most often the server dropped this idle connection (a restart, a failover, a
                # terminated backend): once more on a new one. A claim that did commit before
                # the error makes this one a phantom; its lease then lapses and the reaper retries.
                logger.warning("claim of task %s attempt %s: %s; reconnecting", task_id, attempt, exc)
                connection.close()
                if slot is not None:
                    self._give_back_slot(task_id, attempt, slot)
                    slot = None
                claimed = claim_task(**claim)
        except Exception as exc:  # database or Redis down: RQ fails the job, the reaper retries it
            if slot is not None:
                self._give_back_slot(task_id, attempt, slot)
            self._claim_failures += 1
            logger.error("claim of task %s attempt %s failed: %s: %s", task_id, attempt, type(exc).__name__, exc)
            connection.close()
            return report_job.Decided(task_id, attempt, "claim failed", error=exc)
        finally:
            took = time.monotonic() - started
            if took > SLOW_SECONDS:
                logger.warning("claim of task %s attempt %s took %.1fs: database slow?", task_id, attempt, took)
        self._claim_failures = 0
        if isinstance(claimed, ClaimDeferred):
            logger.info("task %s attempt %s deferred: %s", task_id, attempt, claimed.reason)
            return report_job.Decided(task_id, attempt, "deferred")
        if claimed is None:
            logger.info("phantom delivery of task %s attempt %s ignored", task_id, attempt)
            return report_job.Decided(task_id, attempt, "phantom")
        return claimed

    def _give_back_slot(self, task_id: int, attempt: int, slot) -> None:
        pass

    def _settle_without_running(self, job, queue, decided: "report_job.Decided") -> None:
        """Phantom, deferred or unclaimable: RQ's bookkeeping in this process, nothing forked."""
        report_job.hand_over(decided)
        try:
            self.prepare_execution(job)
            self.perform_job(job, queue)
        finally:
            report_job.hand_over(None)
            self.set_state(WorkerStatus.IDLE)
        if decided.error is not None:  # the database is down: do not burn the whole queue meanwhile
            time.sleep(min(0.5 * 2 ** (self._claim_failures - 1), 10))

    def _run_claimed(self, job, queue, task: ReportTask) -> None:
        raise NotImplementedError


@dataclass
class _Running:
    task: ReportTask
    handed: "report_job.HandedOver"
    watch: "horse.HorseWatch | None" = None
    killed_for_overrun: bool = False
    taken_back: bool = False
    beaten: bool = False  # a heartbeat ran, so RQ's working-time field needs resetting


class ReportWorker(_AttemptOwner, Worker):
    """Forking worker: claim, fork the horse (which only runs the kind), heartbeat, record."""

    _running: _Running | None = None

    def _run_claimed(self, job, queue, task: ReportTask) -> None:
        running = self._running = _Running(task, report_job.HandedOver.of(task))
        report_job.hand_over(running.handed)
        try:
            Worker.execute_job(self, job, queue)
            watch = running.watch
            result = horse_exit_result(
                watch.result_bytes(), watch.status, overrun=running.killed_for_overrun, timeout=job.timeout
            )
        except BaseException as exc:  # a cold shutdown (SystemExit) killed the horse under us
            self._recorder.record_interrupted(task, exc)
            raise
        finally:
            if running.watch is not None:
                running.watch.close()
            self._running = None
            report_job.hand_over(None)
        self._recorder.record(task, result)

    def fork_work_horse(self, job, queue):
        running = self._running
        parent_pid = os.getpid()
        if running is not None:
            read_fd, write_fd = os.pipe()

            def report(result, fd=write_fd):
                on_orphan = lambda: remove_output(result.output_file)  # noqa: E731
                horse.send_result(fd, parent_pid, result.to_bytes(), on_orphan)

            running.handed.report = report
        horse.before_fork()
        self._idle_in_redis = False  # the horse sets the state in Redis
        try:
            child_pid = os.fork()
        except OSError:
            horse.after_fork_in_parent()
            if running is not None:
                os.close(read_fd)
                os.close(write_fd)
            raise
        if child_pid == 0:
            try:
                horse.become_work_horse(parent_pid)
                if running is not None:
                    os.close(read_fd)
                os.environ["RQ_WORKER_ID"] = self.name
                os.environ["RQ_JOB_ID"] = job.id
                os.setpgrp()
                self.main_work_horse(job, queue)
            finally:
                os._exit(1)  # main_work_horse exits by itself; this is for what raised before it
        horse.after_fork_in_parent()
        self._horse_pid = child_pid
        if running is not None:
            os.close(write_fd)
            running.watch = horse.HorseWatch(child_pid, read_fd)
        self.procline(f"Forked {child_pid} at {time.time()}")

    def monitor_work_horse(self, job, queue):
        if self._running is None:
            return super().monitor_work_horse(job, queue)
        running = self._running
        task, watch = running.task, running.watch
        job.started_at = rq_now()
        beat = settings.REPORT_HEARTBEAT_SECONDS
        overrun_at = None
        if job.timeout and job.timeout > 0:
            # The horse's own alarm ends the kind at the timeout; this is for a horse stuck where
            # signals do not reach Python (C code, a stopped process).
            overrun_at = time.monotonic() + job.timeout + 2 * beat
        next_beat = time.monotonic() + beat
        while True:
            wake_at = next_beat if overrun_at is None else min(next_beat, overrun_at)
            if watch.wait(wake_at - time.monotonic()):
                break
            moment = time.monotonic()
            if overrun_at is not None and moment >= overrun_at and not running.killed_for_overrun:
                logger.warning("task %s attempt %s overran its timeout; killing its work-horse", task.pk, task.attempt)
                running.killed_for_overrun = True
                self.kill_horse()
            if moment >= next_beat:
                next_beat = moment + beat
                self._heartbeat(job, running)
        self._after_horse_exit(job, queue, watch.status, watch.rusage, reset_working_time=running.beaten)

    def _heartbeat(self, job, running: _Running) -> None:
        task = running.task
        running.beaten = True
        if self._recorder.renew(task) is False and not running.taken_back:
            # The reaper gave the attempt up (this worker looked dead): its result would be fenced.
            logger.warning("task %s attempt %s was taken back; stopping its work-horse", task.pk, task.attempt)
            running.taken_back = True
            self.kill_horse()
        try:
            self.set_current_job_working_time((rq_now() - job.started_at).total_seconds())
            self.maintain_heartbeats(job)
        except RedisError as exc:  # the database is the truth; RQ's registries can wait
            logger.error("RQ heartbeat failed: %s", exc)

    def _after_horse_exit(self, job, queue, status, rusage, *, reset_working_time: bool) -> None:
        """RQ's own bookkeeping of a horse that did not exit cleanly (as rq.Worker does it)."""
        if reset_working_time:  # the horse zeroes it when it starts; only a heartbeat changes it
            self.set_current_job_working_time(0)
        self._horse_pid = 0
        if status == os.EX_OK:
            return
        try:
            job_status = job.get_status()
        except InvalidJobOperation:
            return
        if self._stopped_job_id == job.id:
            self.handle_job_failure(job, queue=queue, exc_string="Job stopped by user, work-horse terminated.")
        elif job_status not in (JobStatus.FINISHED, JobStatus.FAILED):
            job.ended_at = rq_now()
            exc_string = f"{horse.describe_exit(status)}; waitpid returned {status}"
            self.handle_work_horse_killed(job, None, status, rusage)
            self.handle_job_failure(job, queue=queue, exc_string=exc_string)


class SimpleReportWorker(_AttemptOwner, SimpleWorker):
    """No fork: the job runs in the worker process while a thread renews its lease."""

    def _run_claimed(self, job, queue, task: ReportTask) -> None:
        results: list = []
        handed = report_job.HandedOver.of(task)
        handed.report = results.append
        report_job.hand_over(handed)
        keeper = self.__dict__.setdefault("_lease_keeper", LeaseKeeper(self._recorder))
        keeper.hold(task)
        try:
            SimpleWorker.execute_job(self, job, queue)
        except BaseException as exc:  # a cold shutdown (SystemExit) raised inside the job
            keeper.release()
            self._recorder.record_interrupted(task, exc)
            raise
        finally:
            keeper.release()
            report_job.hand_over(None)
        if not results:  # the job raised past run_kind (BaseException) and RQ caught it
            message = "the job ended without a result (see the worker's log)"
            failure = FailureInfo(error_type_name(WorkHorseKilled()), message, "", retriable=True)
            results.append(report_job.RunResult(ABANDONED, failure=failure))
        self._recorder.record(task, results[0])
