"""RQ's bookkeeping of a report job in a pool worker, done by the worker process: what rq.Worker
spreads over five to eight round trips per job (and its horse over more), in one pipeline when
the job starts and one when it ends. The keys and fields written are RQ's own (its Execution,
StartedJobRegistry, FinishedJobRegistry, Result, the job hash and the worker's counters), so `rq
info`, the dashboards and RQ's registry cleaning read them as usual. Report jobs never have
dependents or repeats, which is what lets the end skip rq.Worker's WATCH loop."""

import logging

from rq.executions import Execution
from rq.job import Job, JobStatus
from rq.queue import Queue
from rq.utils import now as rq_now
from rq.worker import WorkerStatus

from reports.worker import concurrency

logger = logging.getLogger("reports.worker")


# KEYS: the queues in order; ARGV[1]: the job key prefix. The first job id and its hash, as
# rq.Queue.dequeue_any's LPOP and Job.fetch's HGETALL would read them, in one round trip.
_POP = """
for _, key in ipairs(KEYS) do
  local id = redis.call('LPOP', key)
  if id then
    return {key, id, redis.call('HGETALL', ARGV[1] .. id)}
  end
end
return false
"""
GONE = object()


def dequeue(worker):
    """(job, queue), None when the queues are empty, or GONE for an id whose job hash is gone
    (RQ skips those too) or that is no job id at all."""
    queues = worker._ordered_queues
    reply = worker.connection.eval(_POP, len(queues), *(q.key for q in queues), Job.redis_job_namespace_prefix)
    if not reply:
        return None
    key, job_id, flat = reply
    queue = next(q for q in queues if q.key == key.decode())
    try:
        job = worker.job_class(job_id.decode(), connection=worker.connection, serializer=worker.serializer)
        if not flat:
            return GONE
        job.restore(dict(zip(flat[::2], flat[1::2], strict=True)))
    except Exception as exc:
        logger.error("dropped queue entry %r of %s: %s: %s", job_id[:200], queue.name, type(exc).__name__, exc)
        return GONE
    return job, queue


def start(worker, job: Job, queue: Queue) -> Execution:
    ttl = worker.get_heartbeat_ttl(job)
    with worker.connection.pipeline(transaction=False) as pipe:
        execution = Execution.create(job, ttl, pipeline=pipe, worker_name=worker.name)
        job.prepare_for_execution(worker.name, pipeline=pipe)
        if len(worker.queues) == 1:  # RQ moved it to the intermediate queue (LMOVE) on dequeue
            pipe.lrem(queue.intermediate_queue_key, 1, job.id)
        worker.set_current_job_id(job.id, pipeline=pipe)
        if worker.get_state() != WorkerStatus.BUSY:
            worker.set_state(WorkerStatus.BUSY, pipeline=pipe)
        pipe.execute()
    return execution


def finish(worker, job: Job, execution: Execution | None, return_value: str, *, task) -> None:
    """The RQ job's end, with the release of the attempt's concurrency slot (and the wake-up of
    its waiters) in the same pipeline."""
    job.ended_at = rq_now()
    job._result = return_value
    job._status = JobStatus.FINISHED
    result_ttl = job.get_result_ttl(worker.default_result_ttl)
    with worker.connection.pipeline(transaction=False) as pipe:
        capped = concurrency.release_and_wake_in(pipe, kind=task.kind, task_id=task.pk, attempt=task.attempt)
        if execution is None:  # its start never reached Redis
            woken = pipe.execute()[0] if capped else []
            if woken:
                concurrency.enqueue_woken(task.kind, woken)
            return
        worker.increment_successful_job_count(pipeline=pipe)
        if job.started_at is not None:
            worker.increment_total_working_time(job.ended_at - job.started_at, pipe)
        if result_ttl != 0:
            job._handle_success(
                result_ttl, pipeline=pipe, worker_name=worker.name, execution_id=execution.id,
                execution_started_at=execution.created_at, execution_ended_at=job.ended_at,
            )
        job.cleanup(result_ttl, pipeline=pipe, remove_from_queue=False)
        worker.set_current_job_id(None, pipeline=pipe)
        execution.delete(job=job, pipeline=pipe)
        replies = pipe.execute()
    if capped and replies[0]:
        concurrency.enqueue_woken(task.kind, replies[0])
