"""The reaper: what crashed workers and lost Redis jobs leave behind, as two housekeeper duties
(duties.py): lapsed leases are the engine's take_back_lapsed, lost jobs are found here.

Both are idempotent and safe from several processes at once (the conditional UPDATEs decide; a
Redis lock only spares duplicate enqueues when several housekeepers wake together):
- running attempts whose lease lapsed: their worker stopped renewing it (the whole worker died,
  or lost the database), so the attempt counts as `abandoned` and the normal retry/dead policy
  applies; its files go, and so does its concurrency slot. (A work-horse that dies while its
  worker lives is recorded by the worker at once; it never waits for the reaper.)
- pending/retrying tasks overdue by REPORT_REENQUEUE_AFTER whose RQ job is gone (flushed,
  restarted, failed over, or popped by a worker that died before registering it): enqueued again.
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from reports.models import PausedKind, ReportTask, TaskStatus
from reports.services.enqueue import enqueue_attempt, job_id_for
from reports.services.pausing import parked_task_ids
from transport.connection import redis_connection
from transport.queues import job_ids_waiting, job_states

logger = logging.getLogger("reports.services")

LOCK_KEY = "reports:reaper-lock"


def reenqueue_lost_jobs(
    *, now: datetime | None = None, batch_size: int = 500, use_lock: bool = True
) -> int | None:
    """Enqueue again every overdue pending/retrying task whose RQ job is gone; how many, or None
    when another housekeeper holds the scan's lock (it is doing the same right now)."""
    lock = redis_connection().lock(LOCK_KEY, timeout=120, blocking=False) if use_lock else None
    if lock is not None and not lock.acquire():
        return None
    try:
        return _reenqueue_lost_jobs(now or timezone.now(), batch_size)
    finally:
        if lock is not None and lock.owned():
            lock.release()


def _reenqueue_lost_jobs(now: datetime, batch_size: int, max_chunks: int = 200) -> int:
    """Walk every overdue pending/retrying task in id order, a chunk at a time, so a long
    legitimate backlog cannot hide a lost task behind it."""
    cutoff = now - timedelta(seconds=settings.REPORT_REENQUEUE_AFTER)
    # Paused kinds' tasks wait on purpose (resume_kind enqueues them).
    paused = PausedKind.objects.values("kind")
    overdue = (
        ReportTask.objects.filter(
            Q(status=TaskStatus.PENDING, updated_at__lt=cutoff)
            | Q(status=TaskStatus.RETRYING, next_retry_at__lt=cutoff)
        )
        .exclude(kind__in=paused)
        .order_by("pk")
    )
    waiting: dict[str, set[str]] = {}  # queue lists, read at most once per pass
    reenqueued = 0
    last_pk = 0
    for _ in range(max_chunks):
        chunk = list(
            overdue.filter(pk__gt=last_pk)
            .values_list("pk", "attempt", "priority", "timeout_seconds")[:batch_size]
        )
        if not chunk:
            break
        last_pk = chunk[-1][0]
        reenqueued += _reenqueue_chunk(chunk, waiting)
    return reenqueued


def _reenqueue_chunk(chunk, waiting: dict[str, set[str]]) -> int:
    parked = parked_task_ids(chunk)  # tasks waiting for a concurrency slot are woken, not re-sent
    candidates = [row for row in chunk if row[0] not in parked]
    states = job_states([job_id_for(pk, attempt + 1) for pk, attempt, _, _ in candidates])
    reenqueued = 0
    for pk, attempt, priority, timeout in candidates:
        job_id = job_id_for(pk, attempt + 1)
        state = states.get(job_id)
        if state in ("started", "deferred"):
            continue
        # A job hash marked queued may still be lost: popped by a worker that died before
        # registering it. Only its presence in the queue list proves it waits.
        if state == "queued":
            if priority not in waiting:
                waiting[priority] = job_ids_waiting([priority])
            if job_id in waiting[priority]:
                continue
        enqueue_attempt(task_id=pk, attempt=attempt + 1, priority=priority, timeout=timeout)
        reenqueued += 1
        logger.warning(
            "re-enqueued task %s attempt %s (RQ job state: %s)", pk, attempt + 1, state or "missing"
        )
    return reenqueued
