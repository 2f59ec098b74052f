"""RQ's bookkeeping of a report job in a pool worker, done by the worker process: what rq.Worker
spreads over five to eight round trips per job (and its horse over more), in one pipeline sent
once the next jobs are with their horses: the start of those jobs and the end of those recorded
before them.
The concurrency slots of the recorded attempts are released before the next claim, in the round
trip that dequeues the next job. The keys and fields written are RQ's own (its Execution,
StartedJobRegistry, FinishedJobRegistry, Result, the job hash and the worker's counters), so `rq
info`, the dashboards and RQ's registry cleaning read them as usual. Report jobs never have
dependents or repeats, which is what lets the end skip rq.Worker's WATCH loop."""

import hashlib
import json
import logging
from dataclasses import dataclass

from django.conf import settings
from redis.exceptions import NoScriptError, ResponseError
from rq.executions import Execution
from rq.job import Job, JobStatus
from rq.queue import Queue
from rq.utils import now as rq_now
from rq.worker import WorkerStatus

from reports.services import concurrency

logger = logging.getLogger("reports.worker")


# KEYS: the queues in order, then a (holders, waiters) pair per slot to release. ARGV: the job key
# prefix, the number of queues, the capped kinds ({kind: [holders key, limit]}, JSON), the slot
# lease beyond the job timeout, '1' to put a job whose kind is at its cap back at the head of its
# queue (see FULL), how many jobs to take, then a (limit, holder) pair per slot to release. In one
# round trip: the slots of the attempts just recorded are released (their waiters popped); up to
# that many job ids and their hashes are read, in the queues' order, as rq.Queue.dequeue_any's
# LPOP and Job.fetch's HGETALL would read them; and when a job is a report attempt whose meta names
# a capped kind, a slot of that kind is taken for it (TAKE_SLOT_FUNCTION), so that its claim needs
# no transaction around Redis. A job after the first whose kind is at its cap goes back to the head
# of its queue and ends the batch (taken alone, next time, it is claimed the ordinary way).
_POP = concurrency.RELEASE_AND_WAKE_FUNCTION + concurrency.TAKE_SLOT_FUNCTION + """
local queues = tonumber(ARGV[2])
local woken = {}
for pair = 1, (#KEYS - queues) / 2 do
  local at = queues + 2 * pair - 1
  woken[pair] = release_and_wake(KEYS[at], KEYS[at + 1], ARGV[5 + 2 * pair], ARGV[6 + 2 * pair])
end
local wanted = tonumber(ARGV[6])
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
      if job[f] == 'meta' then meta = job[f + 1] elseif job[f] == 'timeout' then timeout = tonumber(job[f + 1]) end
    end
    if task and meta and timeout then
      local ok, hint = pcall(cjson.decode, meta)
      local cap = ok and type(hint) == 'table' and caps[hint.kind]
      if cap then
        local score = take_slot(cap[1], cap[2], task .. ':' .. attempt, timeout + tonumber(ARGV[4]))
        if score then
          slot = {hint.kind, score}
        elseif ARGV[5] == '1' or #taken > 0 then
          redis.call('LPUSH', KEYS[i], id)
          if #taken == 0 then return {woken, 'full'} end
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
GONE = object()
# The first job's kind is at its cap, and the caller holds a slot it has not released yet (a
# completion waiting to go with the next claim): the job is back at the head of its queue.
FULL = object()


@dataclass
class Ended:
    """A report job whose outcome is recorded and whose end RQ has not been told yet."""

    running: object  # the worker's own record of the job: .job, and .execution once RQ heard of its start
    return_value: str
    task: object  # the ReportTask
    slot_released: bool = False


def dequeue(worker, releasing: list[Ended] = (), *, full_goes_back: bool = False):
    """(job, queue), None when the queues are empty, or GONE for an id whose job hash is gone
    (RQ skips those too) or that is no job id at all. The concurrency slots of `releasing` are
    freed first, in the same round trip, and their waiters enqueued. A job for which a slot was
    taken carries it: see taken_slot(). `full_goes_back`: FULL instead of a job whose kind is at
    its cap (the caller releases what it holds, then asks again)."""
    batch = dequeue_many(worker, releasing, full_goes_back=full_goes_back, wanted=1)
    return batch if batch is FULL else (batch[0] if batch else None)


def dequeue_many(worker, releasing: list[Ended] = (), *, full_goes_back: bool = False, wanted: int = 1):
    """dequeue() for up to `wanted` jobs in one round trip (a worker with that many idle horses):
    a list of (job, queue) or GONE, in the queues' order, empty when they are; or FULL."""
    queues = worker._ordered_queues
    slots = _unreleased_slots(releasing)
    keys = [q.key for q in queues]
    args = [Job.redis_job_namespace_prefix, len(queues), json.dumps(concurrency.caps_by_holders_key()),
            settings.REPORT_LEASE_GRACE, "1" if full_goes_back else "0", max(wanted, 1)]
    for _, (holders, waiters, limit, holder) in slots:
        keys += [holders, waiters]
        args += [limit, holder]
    woken_per_slot, taken = _run_script(worker.connection, _POP, _POP_SHA, len(keys), *keys, *args)
    _woken(slots, woken_per_slot)
    if taken == b"full":
        return FULL
    return [_job_of(worker, queues, *entry) for entry in taken]


def _unreleased_slots(ended: list[Ended]) -> list[tuple[Ended, list]]:
    """The recorded attempts whose concurrency slot is still held, each with the words that
    release it: (holders key, waiters key, limit, holder)."""
    slots = []
    for each in ended:
        kind = each.task.kind
        limit = concurrency.limit_for(kind)
        if not each.slot_released and limit:
            holder = concurrency.holder(each.task.pk, each.task.attempt)
            slots.append((each, [concurrency.holders_key(kind), concurrency.waiters_key(kind), limit, holder]))
    return slots


def _woken(slots: list[tuple[Ended, list]], woken_per_slot: list) -> None:
    """Those slots are released: the waiters the release popped are enqueued."""
    for each, woken in zip((each for each, _ in slots), woken_per_slot, strict=True):
        each.slot_released = True
        if woken:
            concurrency.enqueue_woken(each.task.kind, woken)


def _job_of(worker, queues, key: bytes, job_id: bytes, flat: list, slot):
    queue = next(q for q in queues if q.key == key.decode())
    try:
        job = worker.job_class(job_id.decode(), connection=worker.connection, serializer=worker.serializer)
        if not flat:
            return GONE
        job.restore(dict(zip(flat[::2], flat[1::2], strict=True)))
    except Exception as exc:
        logger.error("dropped queue entry %r of %s: %s: %s", job_id[:200], queue.name, type(exc).__name__, exc)
        if slot:
            give_back_slot(job_id.decode(), slot)
        return GONE
    if slot:
        job.report_slot = (slot[0].decode(), slot[1])
    return job, queue


def put_back(worker, jobs: list) -> None:
    """Jobs taken and not handed over (a stop, a suspension): back to the heads of their queues in
    their order, their slots given back."""
    if not jobs:
        return
    with worker.connection.pipeline(transaction=False) as pipe:
        for job, queue in reversed(jobs):
            pipe.lpush(queue.key, job.id)
        pipe.execute()
    for job, _ in jobs:
        slot = taken_slot(job)
        if slot is not None:
            give_back_slot(job.id, slot)


def _run_script(conn, script: str, sha: str, numkeys: int, *keys_and_args):
    """The script by its digest, or whole to a Redis that forgot it (restarted, SCRIPT FLUSH): one
    round trip either way, where redis-py's Script would load it and ask again."""
    try:
        return conn.evalsha(sha, numkeys, *keys_and_args)
    except NoScriptError:
        return conn.eval(script, numkeys, *keys_and_args)


def give_back_slot(job_id: str, slot) -> None:
    kind, score = slot
    task_id, attempt = job_id.rsplit("-", 2)[1:]
    concurrency.give_back(kind=kind.decode() if isinstance(kind, bytes) else kind, task_id=int(task_id),
                          attempt=int(attempt), score=score)


def taken_slot(job) -> "tuple[str, bytes] | None":
    """(kind, score) of the concurrency slot the dequeue took for this job's attempt, if any."""
    return getattr(job, "report_slot", None)


# RQ's bookkeeping as one script: ARGV holds the number of slots to release, a (holders key,
# waiters key, limit, holder) quadruple per slot, then the commands RQ's own functions queued, each
# as its length and its words. Run in order and, as in a pipeline, past a failing one; returns the
# members woken per released slot and the first error (or false).
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


def bookkeeping(worker, *, ended: list[Ended], starting: list = (), idle_after: bool = False) -> None:
    """RQ's start of the `starting` jobs (each has .job and .queue; its .execution is set here) and
    its end of the `ended` ones (with the release of the slots not released yet, and the wake-up
    of those slots' waiters), in one round trip. `idle_after`: no job is left in flight.
    RQ's own functions write the commands, into a pipeline that is never sent: they go as the
    words of one script, which costs Redis and this process a fraction of a pipeline's per-command
    work (about 20 commands a job)."""
    recorder = worker.connection.pipeline(transaction=False)
    releases = _unreleased_slots(ended)
    try:
        for each in starting:
            each.execution = _start_in(recorder, worker, each.job, each.queue)
        for each in ended:
            _finish_in(recorder, worker, each)
        if idle_after:
            worker.set_current_job_id(None, pipeline=recorder)
        args = [len(releases)]
        for _, words in releases:
            args += words
        for words, _ in recorder.command_stack:
            args.append(len(words))
            args += words
        woken, failed = _run_script(worker.connection, _BOOKKEEPING, _BOOKKEEPING_SHA, 0, *args)
    except BaseException:
        for each in starting:  # RQ never heard of these starts: their ends are not its business
            each.execution = None
        raise
    finally:
        recorder.reset()
    _woken(releases, woken)
    if failed:
        raise ResponseError(failed.decode() if isinstance(failed, bytes) else str(failed))


def _start_in(pipe, worker, job: Job, queue: Queue) -> Execution:
    ttl = worker.get_heartbeat_ttl(job)
    execution = Execution.create(job, ttl, pipeline=pipe, worker_name=worker.name)
    job.prepare_for_execution(worker.name, pipeline=pipe)
    if len(worker.queues) == 1:  # RQ moved it to the intermediate queue (LMOVE) on dequeue
        pipe.lrem(queue.intermediate_queue_key, 1, job.id)
    worker.set_current_job_id(job.id, pipeline=pipe)
    if worker.get_state() != WorkerStatus.BUSY:
        worker.set_state(WorkerStatus.BUSY, pipeline=pipe)
    return execution


def _finish_in(pipe, worker, ended: Ended) -> None:
    job, execution = ended.running.job, ended.running.execution
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
