"""Queues and enqueueing: a job names a function (a dotted path on the allowlist,
transport.registry) and carries only JSON arguments. Nothing here knows what a job is for."""

from collections.abc import Iterable
from datetime import datetime, timedelta
from functools import partial

import django_rq
from django.conf import settings
from django.db import transaction
from rq import Queue

from transport.connection import redis_connection

# How long RQ keeps a finished job's result, and a failed job (seconds): the database keeps the truth.
RESULT_TTL = 600
FAILURE_TTL = 7 * 24 * 3600


def get_queue(name: str) -> Queue:
    """One of settings.REPORT_QUEUES by name; an unknown name is the default queue."""
    name = name if name in settings.REPORT_QUEUES else "default"
    return django_rq.get_queue(name, connection=redis_connection(), commit_mode="auto")


def enqueue_job(
    func: str,
    *,
    queue: str,
    job_id: str,
    args: tuple = (),
    timeout: int | None = None,
    description: str = "",
    at: datetime | None = None,
    result_ttl: int | None = None,
    meta: dict | None = None,
) -> str:
    """Put one job on `queue`, now or at `at` (through RQ's scheduler). `meta`: RQ's job meta,
    JSON, for whatever reads the job before running it."""
    rq_queue = get_queue(queue)
    options = {
        "job_id": job_id,
        "result_ttl": RESULT_TTL if result_ttl is None else result_ttl,
        "failure_ttl": FAILURE_TTL,
        "description": description,
        "meta": meta,
    }
    if at is None:
        rq_queue.enqueue_call(func, args=args, timeout=timeout, **options)
    else:
        # RQ's scheduler keeps whole-second scores; rounding up keeps a delay a minimum.
        if at.microsecond:
            at = at.replace(microsecond=0) + timedelta(seconds=1)
        rq_queue.enqueue_at(at, func, *args, job_timeout=timeout, **options)
    return job_id


def enqueue_jobs_many(func: str, items: Iterable[tuple]) -> int:
    """Enqueue (queue, job_id, args, timeout, description[, meta]) items with one pipeline per queue."""
    by_queue: dict[str, list] = {}
    for queue, job_id, args, timeout, description, *meta in items:
        by_queue.setdefault(queue, []).append(
            Queue.prepare_data(
                func,
                args=args,
                job_id=job_id,
                timeout=timeout,
                result_ttl=RESULT_TTL,
                failure_ttl=FAILURE_TTL,
                description=description,
                meta=meta[0] if meta else None,
            )
        )
    count = 0
    # The queues in the order workers take them (high first): a waking worker meets high priority.
    for queue, jobs in sorted(by_queue.items(), key=lambda item: list(settings.RQ_QUEUES).index(item[0])):
        rq_queue = get_queue(queue)
        # No MULTI/EXEC: each job's commands stand alone, and a transaction adds nothing but time.
        with rq_queue.connection.pipeline(transaction=False) as pipe:
            rq_queue.enqueue_many(jobs, pipeline=pipe)
            pipe.execute()
        count += len(jobs)
    return count


def on_commit_robust(func, /, *args, **kwargs) -> None:
    """func(*args, **kwargs) once the current transaction commits; an error (a Redis outage at
    commit time) is logged and swallowed: the database is the truth, and its recovery (a reaper)
    enqueues later. Django 5.2 names a failed robust callback by its __qualname__, which a
    functools.partial lacks: its error became a 500."""
    call = partial(func, *args, **kwargs)
    call.__qualname__ = getattr(func, "__qualname__", repr(func))
    transaction.on_commit(call, robust=True)


def job_states(job_ids: list[str]) -> dict[str, str | None]:
    """RQ's status field for each job id (None when the job hash is gone)."""
    if not job_ids:
        return {}
    with redis_connection().pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hget(f"rq:job:{job_id}", "status")
        raw = pipe.execute()
    return {job_id: (value.decode() if value else None) for job_id, value in zip(job_ids, raw, strict=True)}


def job_ids_waiting(queues: Iterable[str]) -> set[str]:
    """Every job id sitting in the given queues' lists."""
    waiting: set[str] = set()
    for name in queues:
        rq_queue = get_queue(name)
        waiting.update(raw.decode() for raw in rq_queue.connection.lrange(rq_queue.key, 0, -1))
    return waiting
