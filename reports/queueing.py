"""The only place that talks to RQ. Jobs carry (task id, attempt number) and nothing else."""

import json
import logging
import pickle
from collections.abc import Iterable
from datetime import datetime, timedelta
from functools import cache, partial

import django_rq
from django.conf import settings
from django.db import transaction
from redis import Redis
from redis.exceptions import RedisError
from rq import Queue, Worker
from rq.utils import now as rq_now

from config import redis_client

logger = logging.getLogger(__name__)

JOB_FUNC = "reports.jobs.run_report_task"


# Pickle's PROTO opcode: every pickle RQ ever wrote (protocol 2 and later) starts with it, and no
# JSON text does.
_PICKLE_PROTO = b"\x80"


class JobSerializer:
    """RQ payloads (job data, meta, results) as JSON. Our jobs carry only integers and strings,
    and JSON cannot run code on load, so a Redis anyone can write to does not hand them the worker.

    Jobs pickled by earlier releases are read only while settings.RQ_ACCEPT_PICKLED_JOBS is on;
    otherwise they fail (RQ logs it) and the reaper re-enqueues their tasks as JSON."""

    @staticmethod
    def dumps(obj) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    @staticmethod
    def loads(data: bytes):
        if data[:1] == _PICKLE_PROTO:
            if not settings.RQ_ACCEPT_PICKLED_JOBS:
                raise ValueError(
                    "refused a pickled RQ payload: set RQ_ACCEPT_PICKLED_JOBS=true to run jobs "
                    "enqueued before the switch to JSON"
                )
            return pickle.loads(data)  # noqa: S301 - only by operator opt-in, for the upgrade
        return json.loads(data)


def job_id_for(task_id: int, attempt: int) -> str:
    return f"report-{task_id}-{attempt}"


def new_redis_connection(url: str | None = None, *, socket_timeout: float | None = None) -> Redis:
    """A client of its own (own pool) on REDIS_URL, for a worker or a scheduler: RQ stretches a
    worker's socket timeout past its BLPOP, which must not leak into the shared client."""
    return redis_client.make_redis_client(
        url or settings.REDIS_URL,
        connect_timeout=settings.REDIS_CONNECT_TIMEOUT,
        socket_timeout=socket_timeout or settings.REDIS_SOCKET_TIMEOUT,
        retries=settings.REDIS_RETRY_ATTEMPTS,
        backoff_cap=settings.REDIS_RETRY_BACKOFF_CAP,
    )


@cache
def _redis(url: str) -> Redis:
    # One client (and pool) per process and URL; redis-py resets the pool after fork.
    # Timeouts: a Redis that silently drops packets must fail a page or a pass, not hang it.
    return new_redis_connection(url)


def redis_connection() -> Redis:
    """The process's shared client: semaphores, locks, the alert rate limit, queues, the console."""
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


def on_commit_robust(func, /, *args, **kwargs) -> None:
    """func(*args, **kwargs) once the current transaction commits; an error (a Redis outage at
    commit time) is logged and swallowed, and the reaper enqueues later. Django 5.2 names a failed
    robust callback by its __qualname__, which a functools.partial lacks: its error became a 500."""
    call = partial(func, *args, **kwargs)
    call.__qualname__ = getattr(func, "__qualname__", repr(func))
    transaction.on_commit(call, robust=True)


def enqueue_next_attempt_on_commit(task, *, at: datetime | None = None) -> None:
    """Enqueue the task's next attempt once the current transaction commits (now, or at `at`)."""
    on_commit_robust(
        enqueue_attempt,
        task_id=task.pk,
        attempt=task.attempt + 1,
        priority=task.priority,
        timeout=task.timeout_seconds,
        at=at,
    )


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
        # No MULTI/EXEC: each job's commands stand alone, and a transaction adds nothing but time.
        with queue.connection.pipeline(transaction=False) as pipe:
            queue.enqueue_many(jobs, pipeline=pipe)
            pipe.execute()
        count += len(jobs)
    return count


def enqueue_attempts_on_commit(items: list[tuple[int, int, str, int]]) -> None:
    """enqueue_attempts_many once the current transaction commits (robust, as above)."""
    if items:
        on_commit_robust(enqueue_attempts_many, items)


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


def _seconds_since(moment: datetime | None) -> int | None:
    return None if moment is None else max(0, round((rq_now() - moment).total_seconds()))


def queue_overview() -> dict:
    """Per queue: queued, scheduled, started, failed, deferred; workers alive. Never raises on a dead Redis."""
    try:
        connection = redis_connection()
        queues = []
        for name in settings.REPORT_QUEUES:
            queue = Queue(name, connection=connection)
            queues.append(
                {
                    "name": name,
                    "queued": queue.count,
                    "scheduled": queue.scheduled_job_registry.count,
                    "started": queue.started_job_registry.count,
                    "failed": queue.failed_job_registry.count,
                    "deferred": queue.deferred_job_registry.count,
                }
            )
        workers = [
            {
                "name": worker.name,
                "state": worker.get_state(),
                "queues": ", ".join(worker.queue_names()),
                "current_job": worker.get_current_job_id() or "",
                "last_heartbeat": worker.last_heartbeat,
                "heartbeat_age": _seconds_since(worker.last_heartbeat),
                "host": f"{worker.hostname or '?'} pid {worker.pid or '?'}",
                "successful": worker.successful_job_count,
                "failed": worker.failed_job_count,
            }
            for worker in Worker.all(connection=connection)
        ]
        workers.sort(key=lambda w: w["name"])
        return {"reachable": True, "queues": queues, "workers": workers, "error": ""}
    except (RedisError, OSError) as exc:
        return {"reachable": False, "queues": [], "workers": [], "error": f"{type(exc).__name__}: {exc}"[:300]}
    except Exception as exc:  # odd data in Redis must not turn the dashboard into a 500
        logger.exception("reading RQ state failed")
        return {"reachable": True, "queues": [], "workers": [], "error": f"{type(exc).__name__}: {exc}"[:300]}
