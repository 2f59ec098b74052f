"""The only place that talks to RQ. Jobs carry (task id, attempt number) and nothing else."""

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from functools import cache

import django_rq
from django.conf import settings
from redis import Redis
from rq import Queue

logger = logging.getLogger(__name__)

JOB_FUNC = "reports.jobs.run_report_task"


def job_id_for(task_id: int, attempt: int) -> str:
    return f"report-{task_id}-{attempt}"


@cache
def _redis(url: str) -> Redis:
    # One client (and pool) per process and URL; redis-py resets the pool after fork.
    # Timeouts: a Redis that silently drops packets must fail a page or a pass, not hang it.
    return Redis.from_url(url, socket_connect_timeout=5, socket_timeout=15, health_check_interval=30)


def redis_connection() -> Redis:
    return _redis(settings.REDIS_URL)


def get_queue(priority: str) -> Queue:
    name = priority if priority in settings.REPORT_QUEUES else "default"
    return django_rq.get_queue(name, connection=redis_connection(), commit_mode="auto")


def enqueue_attempt(
    *, task_id: int, attempt: int, priority: str, timeout: int, at: datetime | None = None
) -> str:
    """Put one attempt on its queue, now or at `at` (through RQ's scheduler)."""
    queue = get_queue(priority)
    options = {
        "job_id": job_id_for(task_id, attempt),
        "result_ttl": settings.RQ_RESULT_TTL,
        "failure_ttl": settings.RQ_FAILURE_TTL,
        "description": f"report task {task_id} attempt {attempt}",
    }
    if at is None:
        queue.enqueue_call(JOB_FUNC, args=(task_id, attempt), timeout=timeout, **options)
    else:
        # RQ's scheduler keeps whole-second scores; rounding up keeps the backoff a minimum.
        if at.microsecond:
            at = at.replace(microsecond=0) + timedelta(seconds=1)
        queue.enqueue_at(at, JOB_FUNC, task_id, attempt, job_timeout=timeout, **options)
    return options["job_id"]


def enqueue_attempts_many(items: Iterable[tuple[int, int, str, int]]) -> int:
    """Enqueue (task_id, attempt, priority, timeout) tuples with one pipeline per queue."""
    by_queue: dict[str, list] = {}
    for task_id, attempt, priority, timeout in items:
        by_queue.setdefault(priority, []).append(
            Queue.prepare_data(
                JOB_FUNC,
                args=(task_id, attempt),
                job_id=job_id_for(task_id, attempt),
                timeout=timeout,
                result_ttl=settings.RQ_RESULT_TTL,
                failure_ttl=settings.RQ_FAILURE_TTL,
                description=f"report task {task_id} attempt {attempt}",
            )
        )
    count = 0
    for priority, jobs in by_queue.items():
        queue = get_queue(priority)
        with queue.connection.pipeline() as pipe:
            queue.enqueue_many(jobs, pipeline=pipe)
            pipe.execute()
        count += len(jobs)
    return count


def enqueue_batch_fan_out(*, batch_id: int) -> str:
    """One job that enqueues a large batch's tasks (reports.jobs.fan_out_batch)."""
    job_id = f"batch-fan-out-{batch_id}"
    get_queue("high").enqueue_call(
        "reports.jobs.fan_out_batch",
        args=(batch_id,),
        job_id=job_id,
        result_ttl=settings.RQ_RESULT_TTL,
        failure_ttl=settings.RQ_FAILURE_TTL,
        description=f"enqueue the tasks of batch {batch_id}",
    )
    return job_id


def job_states(job_ids: list[str]) -> dict[str, str | None]:
    """RQ's status field for each job id (None when the job hash is gone)."""
    if not job_ids:
        return {}
    with redis_connection().pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hget(f"rq:job:{job_id}", "status")
        raw = pipe.execute()
    return {job_id: (value.decode() if value else None) for job_id, value in zip(job_ids, raw, strict=True)}


def job_ids_waiting(priorities: Iterable[str]) -> set[str]:
    """Every job id sitting in the given queues' lists."""
    waiting: set[str] = set()
    for priority in priorities:
        queue = get_queue(priority)
        waiting.update(raw.decode() for raw in queue.connection.lrange(queue.key, 0, -1))
    return waiting
