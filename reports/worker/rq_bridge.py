"""RQ as a library for ReportWorker (reports/worker/worker.py): the one module of the project that
touches RQ's internals. Taking jobs, RQ's own bookkeeping of their start and end (so `rq info`,
rq-dashboard and RQ's registry cleaning read what rq.Worker leaves), the worker's registration,
heartbeat and suspension, and RQ's scheduler.

RQ internals used here, each read from rq 2.12 and rq 3.0 (the same in both unless said):
- the key layout `rq:queue:<name>` (a list of job ids) and `rq:job:<id>` (a hash), read by the
  dequeue's Lua script as rq.Queue.dequeue_any's LPOP and Job.fetch's HGETALL read them, and
  `Job.restore()` to build a job from that hash;
- `Execution.create()` / `.delete()` / `.heartbeat()`, `Job.prepare_for_execution()`,
  `Job._handle_success()`, `Job.cleanup()`, `Job.heartbeat()`: the start, end and beat of a job as
  rq.Worker writes them; the queue's `intermediate_queue_key` (rq.Worker LMOVEs a single queue's
  jobs there on dequeue and removes them at the start);
- `Worker.set_current_job_id()` (rq 2 only: rq 3 keeps a worker's executions in a set that
  `Execution.create()` fills), `Worker.handle_job_failure()` (rq 3 adds `execution=`),
  `Worker.increment_*()`, `Worker.get_heartbeat_ttl()`;
- `rq.worker_registration.REDIS_WORKER_KEYS` and `register()`, to register again a worker that a
  flushed or restarted Redis forgot;
- `RQScheduler._connection`, so the scheduler's client comes from the project's factory.
Report jobs never have dependents, repeats or callbacks: the end skips rq.Worker's WATCH loop."""

import hashlib
import json
import logging
import time
from dataclasses import dataclass

from django.conf import settings
from redis.exceptions import NoScriptError, RedisError, ResponseError
from rq import worker_registration
from rq.executions import Execution
from rq.job import Job, JobStatus
from rq.scheduler import RQScheduler
from rq.suspension import is_suspended
from rq.utils import now as rq_now
from rq.version import VERSION as RQ_VERSION
from rq.worker import WorkerStatus

from reports.services import concurrency
from reports.services.enqueue import REPORT_JOB_FUNC
from transport.connection import new_redis_connection

logger = logging.getLogger("reports.worker")
RQ_3 = int(RQ_VERSION.split(".")[0]) >= 3


def report_attempt_of(job) -> tuple[int, int] | None:
    """(task id, attempt) of a well-formed report job; None for anything else."""
    try:
        if job.func_name != REPORT_JOB_FUNC:
            return None
        args, kwargs = job.args, job.kwargs
    except Exception:
        return None
    if kwargs or len(args) != 2 or any(type(arg) is not int for arg in args) or args[1] < 1:
        return None
    return args[0], args[1]


# --- taking jobs ------------------------------------------------------------------------------

# KEYS: the queues, then (holders, waiters) per slot to release. ARGV: the job key prefix, the number
# of queues, the capped kinds ({kind: [holders key, limit]}), the slot lease beyond the job timeout,
# how many jobs to take, '1' if even a first job at its cap goes back, then (limit, holder) per slot
# to release. The slots are released (their waiters popped), jobs popped in the queues' order, and
# for a report attempt whose meta names a capped kind a slot is taken, so its claim needs no
# transaction around Redis. A job after the first whose kind is at its cap goes back to the head of
# its queue and ends the batch.
_POP = concurrency.RELEASE_AND_WAKE_FUNCTION + concurrency.TAKE_SLOT_FUNCTION + """
local queues = tonumber(ARGV[2])
local woken = {}
for pair = 1, (#KEYS - queues) / 2 do
  local at = queues + 2 * pair - 1
  woken[pair] = release_and_wake(KEYS[at], KEYS[at + 1], ARGV[5 + 2 * pair], ARGV[6 + 2 * pair])
end
local wanted = tonumber(ARGV[5])
local caps = cjson.decode(ARGV[3])
local taken = {}
local i = 1
while #taken < wanted and i <= queues do
  local id = redis.call('LPOP', KEYS[i])
  if not id then
    i = i + 1
  else
    local job = redis.call('HGETALL', ARGV[1] .. id)
    local slot = false
    local task, attempt = string.match(id, '^report%-(%d+)%-(%d+)$')
    local meta, timeout
    for f = 1, #job, 2 do
      if job[f] == 'meta' then meta = job[f + 1]
      elseif job[f] == 'timeout' then timeout = tonumber(job[f + 1]) end
    end
    if task and meta and timeout then
      local ok, hint = pcall(cjson.decode, meta)
      local cap = ok and type(hint) == 'table' and caps[hint.kind]
      if cap then
        local score = take_slot(cap[1], cap[2], task .. ':' .. attempt, timeout + tonumber(ARGV[4]))
        if score then
          slot = {hint.kind, score}
        elseif #taken > 0 or ARGV[6] == '1' then
          redis.call('LPUSH', KEYS[i], id)
          break
        end
      end
    end
    taken[#taken + 1] = {KEYS[i], id, job, slot}
  end
end
return {woken, taken}
"""
# Sent by its digest (EVALSHA): the script is 2 KB that Redis would otherwise read and hash per job.
_POP_SHA = hashlib.sha1(_POP.encode()).hexdigest()


@dataclass
class Ended:
    """A job whose outcome is recorded and whose end RQ has not been told yet."""

    job: Job
    execution: Execution | None  # None: RQ never heard of its start
    return_value: object
    task: object = None  # the ReportTask of a report attempt (its slot is released with the end)
    slot_released: bool = False
    queue: object = None  # given for a job that ends without running (a phantom): RQ hears of both


def dequeue_many(worker, *, wanted: int, releasing: list[Ended] = (), ahead: bool = False) -> list:
    """Up to `wanted` (job, queue) pairs, in the queues' order, in one round trip; the concurrency
    slots of `releasing` are freed first and their waiters enqueued. A job for which a slot was
    taken carries it (taken_slot()). Ids whose job hash is gone, or that are no job at all, are
    dropped (as RQ skips them). `ahead`: jobs taken ahead, none of a kind at its cap."""
    queues = worker.queues
    slots = _unreleased_slots(releasing)
    keys = [q.key for q in queues]
    args = [Job.redis_job_namespace_prefix, len(queues), json.dumps(concurrency.caps_by_holders_key()),
            settings.REPORT_LEASE_GRACE, max(wanted, 1), "1" if ahead else "0"]
    for _, (holders, waiters, limit, holder) in slots:
        keys += [holders, waiters]
        args += [limit, holder]
    woken_per_slot, taken = _run_script(worker.connection, _POP, _POP_SHA, len(keys), *keys, *args)
    _woken(slots, woken_per_slot)
    jobs = (_job_of(worker, queues, *entry) for entry in taken)
    return [job for job in jobs if job is not None]


def wait_for_a_job(worker, timeout: float) -> None:
    """Block up to `timeout` for a job on any of the queues (BLPOP, as rq.Worker waits); a job that
    came goes back to the head of its queue for the dequeue to take."""
    try:
        popped = worker.connection.blpop([q.key for q in worker.queues], max(int(timeout), 1))
        if popped is not None:
            worker.connection.lpush(*popped)
    except RedisError as exc:
        logger.error("waiting for a job failed: %s", exc)
        time.sleep(1.0)


def _unreleased_slots(ended: list[Ended]) -> list[tuple[Ended, list]]:
    """The recorded attempts whose concurrency slot is still held, each with the words that
    release it: (holders key, waiters key, limit, holder)."""
    slots = []
    for each in ended:
        kind = each.task.kind if each.task is not None else None
        limit = concurrency.limit_for(kind) if kind else None
        if not each.slot_released and limit:
            keys = [concurrency.holders_key(kind), concurrency.waiters_key(kind)]
            slots.append((each, [*keys, limit, concurrency.holder(each.task.pk, each.task.attempt)]))
    return slots


def _woken(slots: list[tuple[Ended, list]], woken_per_slot: list) -> None:
    """Those slots are released: the waiters the release popped are enqueued."""
    for (each, _), woken in zip(slots, woken_per_slot, strict=True):
        each.slot_released = True
        if woken:
            concurrency.enqueue_woken(each.task.kind, woken)


def _job_of(worker, queues, key: bytes, job_id: bytes, flat: list, slot):
    queue = next(q for q in queues if q.key == key.decode())
    try:
        if not flat:
            return None
        job = worker.job_class(job_id.decode(), connection=worker.connection, serializer=worker.serializer)
        job.restore(dict(zip(flat[::2], flat[1::2], strict=True)))
    except Exception as exc:
        logger.error("dropped queue entry %r of %s: %r", job_id[:200], queue.name, exc)
        job = None
    if slot:
        slot = (slot[0].decode(), slot[1])
        if job is None:
            give_back_slot(job_id.decode(), slot)
            return None
    job.report_slot = slot or None
    return job, queue


def taken_slot(job) -> "tuple[str, bytes] | None":
    """(kind, score) of the concurrency slot the dequeue took for this job's attempt, if any."""
    return getattr(job, "report_slot", None)


def give_back_slot(job_id: str, slot) -> None:
    """A slot taken for a claim that did not happen (or claimed another way); never raises."""
    kind, score = slot
    task_id, attempt = job_id.rsplit("-", 2)[1:]
    try:
        concurrency.give_back(kind=kind, task_id=int(task_id), attempt=int(attempt), score=score)
    except RedisError as exc:  # the slot's own lease frees it
        logger.error("could not give back the concurrency slot of job %s: %s", job_id, exc)


def put_back(worker, jobs: list) -> None:
    """Jobs taken and not handed over (a stop): back to the heads of their queues in their order,
    their slots given back. Should this fail, their tasks stay pending: the reaper enqueues them."""
    if not jobs:
        return
    try:
        with worker.connection.pipeline(transaction=False) as pipe:
            for job, queue in reversed(jobs):
                pipe.lpush(queue.key, job.id)
            pipe.execute()
    except RedisError as exc:
        logger.error("could not put back job(s) %s: %s", ", ".join(job.id for job, _ in jobs), exc)
    for job, _ in jobs:
        if taken_slot(job) is not None:
            give_back_slot(job.id, taken_slot(job))


def _run_script(conn, script: str, sha: str, numkeys: int, *keys_and_args):
    """The script by its digest, or whole to a Redis that forgot it (restarted, SCRIPT FLUSH): one
    round trip either way, where redis-py's Script would load it and ask again."""
    try:
        return conn.evalsha(sha, numkeys, *keys_and_args)
    except NoScriptError:
        return conn.eval(script, numkeys, *keys_and_args)


# --- RQ's bookkeeping -------------------------------------------------------------------------

# ARGV: the number of slots to release, a (holders key, waiters key, limit, holder) quadruple per
# slot, then the commands RQ's own functions queued, each as its length and its words. Run in order
# and, as in a pipeline, past a failing one; returns the members woken per released slot and the
# first error (or false).
_BOOKKEEPING = concurrency.RELEASE_AND_WAKE_FUNCTION + """
local releases = tonumber(ARGV[1])
local woken = {}
local at = 2
for r = 1, releases do
  woken[r] = release_and_wake(ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3])
  at = at + 4
end
local failed = false
while at <= #ARGV do
  local words = tonumber(ARGV[at])
  local reply = redis.pcall(unpack(ARGV, at + 1, at + words))
  if not failed and type(reply) == 'table' and reply.err then failed = reply.err end
  at = at + words + 1
end
return {woken, failed}
"""
_BOOKKEEPING_SHA = hashlib.sha1(_BOOKKEEPING.encode()).hexdigest()


def bookkeeping(worker, *, starting: list, ended: list[Ended], idle_after: bool) -> list:
    """RQ's start of the `starting` (job, queue) pairs and its end of the `ended` jobs (with the
    release of their slots not released yet), in one round trip; returns the Executions of the
    starts. `idle_after`: no job is left in flight. RQ's own functions write the commands, into a
    pipeline that is never sent: they go as the words of one script, a fraction of a pipeline's
    per-command work (about 20 commands a job). A failing command is raised after the others ran."""
    recorder = worker.connection.pipeline(transaction=False)
    releases = _unreleased_slots(ended)
    try:
        executions = [_start_in(recorder, worker, job, queue) for job, queue in starting]
        for each in ended:
            _finish_in(recorder, worker, each)
        if idle_after and not RQ_3:
            worker.set_current_job_id(None, pipeline=recorder)
        args = [len(releases)]
        for _, words in releases:
            args += words
        for words, _ in recorder.command_stack:
            args += [len(words), *words]
        woken, failed = _run_script(worker.connection, _BOOKKEEPING, _BOOKKEEPING_SHA, 0, *args)
    finally:
        recorder.reset()
    _woken(releases, woken)
    if failed:
        raise ResponseError(failed.decode() if isinstance(failed, bytes) else str(failed))
    return executions


def _start_in(pipe, worker, job: Job, queue) -> Execution:
    execution = Execution.create(job, worker.get_heartbeat_ttl(job), pipeline=pipe, worker_name=worker.name)
    job.prepare_for_execution(worker.name, pipeline=pipe)
    if len(worker.queues) == 1:  # RQ moves a single queue's jobs to its intermediate queue on dequeue
        pipe.lrem(queue.intermediate_queue_key, 1, job.id)
    if not RQ_3:
        worker.set_current_job_id(job.id, pipeline=pipe)
    if worker.get_state() != WorkerStatus.BUSY:
        worker.set_state(WorkerStatus.BUSY, pipeline=pipe)
    return execution


def _finish_in(pipe, worker, ended: Ended) -> None:
    if ended.queue is not None:
        ended.execution = _start_in(pipe, worker, ended.job, ended.queue)
    job, execution = ended.job, ended.execution
    if execution is None:  # its start never reached Redis
        return
    job.ended_at = rq_now()
    job._result = ended.return_value
    job._status = JobStatus.FINISHED
    result_ttl = job.get_result_ttl(worker.default_result_ttl)
    worker.increment_successful_job_count(pipeline=pipe)
    if job.started_at is not None:
        worker.increment_total_working_time(job.ended_at - job.started_at, pipe)
    if result_ttl != 0:
        job._handle_success(
            result_ttl, pipeline=pipe, worker_name=worker.name, execution_id=execution.id,
            execution_started_at=execution.created_at, execution_ended_at=job.ended_at,
        )
    job.cleanup(result_ttl, pipeline=pipe, remove_from_queue=False)
    execution.delete(job=job, pipeline=pipe)


def job_failed(worker, job: Job, queue, execution: Execution | None, exc_string: str) -> None:
    """RQ's failure of a job, as rq.Worker writes it; never raises (the database is the truth)."""
    job.ended_at = rq_now()
    try:
        if not RQ_3:
            worker.execution = execution
        rq_3 = {"execution": execution} if RQ_3 else {}
        worker.handle_job_failure(job, queue=queue, exc_string=exc_string, **rq_3)
    except RedisError as exc:
        logger.error("RQ bookkeeping of job %s failed: %s", job.id, exc)


def beat(worker, running: list[tuple[Job, Execution]]) -> None:
    """The worker's heartbeat and its running jobs', in one round trip, with the question whether
    Redis still lists the worker (a flushed or restarted Redis forgets it: `rq info`, the console
    and the no-live-worker alert would call it dead while it works): if not, it registers again."""
    worker_ttl = worker.job_monitoring_interval + 60
    with worker.connection.pipeline() as pipe:
        worker.heartbeat(worker_ttl, pipeline=pipe)
        for job, execution in running:
            ttl = worker.get_heartbeat_ttl(job)
            execution.heartbeat(job.started_job_registry, ttl, pipeline=pipe)
            job.heartbeat(rq_now(), ttl, pipeline=pipe, xx=True)
        pipe.sismember(worker_registration.REDIS_WORKER_KEYS, worker.key)
        if pipe.execute()[-1]:
            return
    worker.log.warning("Worker %s: Redis no longer lists this worker (restarted, flushed); registering it "
                       "again", worker.name)
    with worker.connection.pipeline() as pipe:
        pipe.delete(worker.key)
        pipe.hset(worker.key, mapping=worker.serialize())
        worker_registration.register(worker, pipe)
        pipe.expire(worker.key, worker_ttl)
        pipe.execute()


def suspended(worker, unknown: bool) -> bool:
    """`rq suspend` in force, for every worker or this one (`unknown`: what to answer without Redis)."""
    try:
        return is_suspended(worker.connection, worker) if RQ_3 else is_suspended(worker.connection)
    except RedisError:
        return unknown


class ReportScheduler(RQScheduler):
    """RQ's scheduler with its client from the project's factory, in whichever process it runs (RQ
    rebuilds the client in the forked process from pool kwargs, which a Sentinel client is not)."""

    @property
    def connection(self):
        if self._connection is None:
            self._connection = new_redis_connection()
        return self._connection


def start_scheduler(worker, *, burst: bool):
    """RQ's scheduler, as `rqworker --with-scheduler` starts it: in a process of its own, or one
    pass in burst mode. Returns it, or None when another worker holds its locks."""
    scheduler = ReportScheduler(worker.queues, connection=worker.connection, serializer=worker.serializer)
    scheduler.acquire_locks()
    if not scheduler.acquired_locks:
        return None
    if not burst:
        scheduler.start()
        return scheduler
    try:
        scheduler.register_birth()
        scheduler.enqueue_scheduled_jobs()
    finally:
        scheduler.release_locks()
        scheduler.register_death()
    return None


