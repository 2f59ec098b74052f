"""RQ's bookkeeping of a report job in a pool worker, done by the worker process: what rq.Worker
spreads over five to eight round trips per job (and its horse over more), in one pipeline when
the job starts and one when it ends. The keys and fields written are RQ's own (its Execution,
StartedJobRegistry, FinishedJobRegistry, Result, the job hash and the worker's counters), so `rq
info`, the dashboards and RQ's registry cleaning read them as usual. Report jobs never have
dependents or repeats, which is what lets the end skip rq.Worker's WATCH loop."""

from rq.executions import Execution
from rq.job import Job, JobStatus
from rq.queue import Queue
from rq.utils import now as rq_now
from rq.worker import WorkerStatus


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


def finish(worker, job: Job, execution: Execution, return_value: str) -> None:
    job.ended_at = rq_now()
    job._result = return_value
    job._status = JobStatus.FINISHED
    result_ttl = job.get_result_ttl(worker.default_result_ttl)
    with worker.connection.pipeline(transaction=False) as pipe:
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
        pipe.execute()
