"""The bulk runner: the body of the RQ job that applies a bulk action, batch by batch.

It walks the selection in id order with a keyset cursor (`last_processed_id`): one short
transaction per batch that applies the action to the whole batch as a set (deadletters.bulk.apply:
a handful of statements, one pipelined enqueue after commit) and advances the cursor with a
compare-and-set. A runner that dies mid-way loses at most its uncommitted batch; resuming (or
the housekeeper's stalled-bulk duty) enqueues a new job that carries on after the cursor. Duplicate
deliveries are harmless: the cursor CAS lets only one runner's batch count, and a Redis lock keeps
a second runner waiting. A run works in time slices (BULK_ACTION_SLICE_SECONDS) and re-enqueues
itself, so one big bulk never holds a worker (or a job timeout) for hours.

The throttle paces batches; while it sleeps the runner looks every CHECK_EVERY_SECONDS whether
the operator changed the rate, paused or cancelled, so each takes effect within a second.
"""

import logging
import time
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from redis.exceptions import LockError

from deadletters.alerts.resolved import announce_bulk, announce_bulk_finished
from deadletters.bulk.apply import apply_to_batch
from deadletters.bulk.canary import begin_canary_wait
from deadletters.bulk.control import enqueue_bulk_job
from deadletters.bulk.patch import REFUSALS_KEPT
from deadletters.bulk.selection import SCOPE_SELECTED, Selection, selection_of
from deadletters.bulk.throttle import Throttle, batch_size_for
from deadletters.bulk.watch import pause_if_replays_die_again
from deadletters.models import BulkAction, BulkActionStatus, CanaryPhase
from transport.connection import redis_connection

logger = logging.getLogger("deadletters.bulk")

WATCH_INTERVAL_SECONDS = 1.0


def _next_ids(selection: Selection, after: int, limit: int) -> list[int]:
    if selection.scope == SCOPE_SELECTED:
        # Eligibility is checked by the batch itself (a letter that changed is skipped).
        return [pk for pk in selection.ids if pk > after][:limit]
    return list(selection.queryset().filter(pk__gt=after).order_by("pk").values_list("pk", flat=True)[:limit])


class _CursorMoved(Exception):
    """The batch's compare-and-set lost: paused/cancelled meanwhile, or another runner got there."""


def _run_batch(bulk: BulkAction, ids: list[int]) -> tuple[int, int]:
    with transaction.atomic():
        outcome = apply_to_batch(bulk, ids)
        # The cursor's compare-and-set below makes this batch the only writer since `bulk` was read.
        refused = list(outcome.refused)
        refusals = {"refused": F("refused") + len(refused),
                    "refusals": (bulk.refusals + refused)[:REFUSALS_KEPT]} if refused else {}
        moved = BulkAction.objects.filter(
            pk=bulk.pk, status=BulkActionStatus.RUNNING, last_processed_id=bulk.last_processed_id
        ).update(
            last_processed_id=ids[-1],
            processed=F("processed") + len(ids),
            succeeded=F("succeeded") + outcome.succeeded,
            skipped=F("skipped") + outcome.skipped,
            updated_at=timezone.now(),
            **refusals,
        )
        if not moved:
            raise _CursorMoved()  # rolls the batch back, its enqueue with it
    return outcome.succeeded, outcome.skipped


def _changed_under(bulk_id: int, throttle: Throttle) -> Callable[[], bool]:
    """For the throttle's sleep: has the operator paused, cancelled or re-rated the run?"""

    def changed() -> bool:
        now = BulkAction.objects.filter(pk=bulk_id).values_list("status", "rate_per_second").first()
        return now != (BulkActionStatus.RUNNING, throttle.rate)

    return changed


def _finish(bulk: BulkAction) -> None:
    """running -> completed. Letters that left the eligible set during the run (someone else
    acted on them first) count as skipped, so processed == total and the bar ends at 100%."""
    bulk.refresh_from_db()
    missing = max(bulk.total - bulk.processed, 0)
    with transaction.atomic():  # the notice commits with the completion, or neither does
        running = BulkAction.objects.filter(pk=bulk.pk, status=BulkActionStatus.RUNNING,
                                            processed=bulk.processed)
        finished = running.update(
            status=BulkActionStatus.COMPLETED,
            finished_at=timezone.now(),
            processed=bulk.processed + missing,
            skipped=bulk.skipped + missing,
            # Letters restored into the selection meanwhile can make processed exceed the first count.
            total=max(bulk.total, bulk.processed),
            updated_at=timezone.now(),
        )
        if finished:
            bulk.refresh_from_db()
            announce_bulk_finished(bulk=bulk)


def run_bulk_action(
    bulk_id: int,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    slice_seconds: float | None = None,
) -> str:
    """The job body. Returns what happened: completed, paused, cancelled, canary (waiting on its
    canary's outcome), continued, gone, busy."""
    lock = redis_connection().lock(
        f"deadletters:bulk:{bulk_id}:runner",
        timeout=settings.BULK_ACTION_LOCK_SECONDS,
        blocking_timeout=settings.BULK_ACTION_LOCK_SECONDS + 5,
    )
    # A second delivery (or a resume while the old runner finishes its batch) waits its turn;
    # a runner that was killed lets go when its lock expires.
    if not lock.acquire():
        return "busy"
    try:
        return _run_locked(bulk_id, lock, clock=clock, sleep=sleep, slice_seconds=slice_seconds)
    finally:
        if lock.owned():
            lock.release()


def _run_locked(bulk_id, lock, *, clock, sleep, slice_seconds) -> str:
    now = timezone.now()
    claimed = BulkAction.objects.filter(
        pk=bulk_id, status__in=(BulkActionStatus.PENDING, BulkActionStatus.RUNNING)
    ).update(status=BulkActionStatus.RUNNING, updated_at=now)
    bulk = BulkAction.objects.filter(pk=bulk_id).first()
    if bulk is None:
        return "gone"
    if not claimed:
        return bulk.status
    BulkAction.objects.filter(pk=bulk_id, started_at=None).update(started_at=now)
    BulkAction.objects.filter(pk=bulk_id, canary_phase=CanaryPhase.PENDING).update(
        canary_phase=CanaryPhase.RUNNING
    )
    try:
        selection = selection_of(bulk)
        throttle = Throttle(bulk.rate_per_second, clock=clock, sleep=sleep)
        size = batch_size_for(bulk.rate_per_second)
        slice_end = clock() + (settings.BULK_ACTION_SLICE_SECONDS if slice_seconds is None else slice_seconds)
        next_watch = clock()
        interrupted = _changed_under(bulk_id, throttle)
        while True:
            bulk.refresh_from_db()
            if bulk.status != BulkActionStatus.RUNNING:
                return bulk.status  # paused or cancelled by an operator
            if bulk.rate_per_second != throttle.rate:
                throttle.change_rate(bulk.rate_per_second)  # the operator changed it on the page
                size = batch_size_for(bulk.rate_per_second)
            # Until its verdict, a canary replays no more than its k, and the verdict (not the
            # died-again watch) judges what they led to (deadletters.bulk.canary).
            canary_left = (bulk.canary_size - bulk.succeeded
                           if bulk.canary_phase == CanaryPhase.RUNNING else None)
            if canary_left is None and clock() >= next_watch:
                # The died-again count scans this bulk's replays: once a second is often enough.
                next_watch = clock() + WATCH_INTERVAL_SECONDS
                if pause_if_replays_die_again(bulk):
                    return BulkActionStatus.PAUSED
            limit = size if canary_left is None else min(size, max(canary_left, 0))
            ids = _next_ids(selection, bulk.last_processed_id, limit) if limit else []
            if not ids and canary_left is not None:
                # k replays made, or the selection ran out before (what was replayed is the canary).
                if begin_canary_wait(bulk):
                    return BulkActionStatus.CANARY
                continue  # changed under us: re-read
            if not ids:
                _finish(bulk)
                bulk.refresh_from_db()
                logger.info("bulk %s %s: %s", bulk.action, bulk.public_id, bulk.status)
                return bulk.status
            try:
                _run_batch(bulk, ids)
            except _CursorMoved:
                continue  # re-read: the status or the cursor changed under us
            try:
                lock.extend(settings.BULK_ACTION_LOCK_SECONDS, replace_ttl=True)
            except LockError:
                # The batch outlived the lock (a very slow database): another runner may have
                # started. The cursor CAS keeps the work single; hand over to a fresh job.
                logger.warning("bulk %s: runner lock lost, handing over to a new job", bulk_id)
                enqueue_bulk_job(bulk_id)
                return "handed-over"
            throttle.wait(len(ids), interrupted=interrupted)
            if clock() >= slice_end:
                enqueue_bulk_job(bulk_id)  # carry on in a fresh job; this one lets go of the lock
                return "continued"
    except Exception as exc:
        logger.exception("bulk action %s failed", bulk_id)
        error = f"{type(exc).__name__}: {exc}"[:10_000]
        with transaction.atomic():
            if BulkAction.objects.filter(pk=bulk_id, status=BulkActionStatus.RUNNING).update(
                status=BulkActionStatus.FAILED, error=error, updated_at=timezone.now()
            ):
                bulk.refresh_from_db()
                # A scheduled run that failed before its first letter could not start: say so.
                news = "not_started" if bulk.start_at and not bulk.processed else "bulk_finished"
                announce_bulk(bulk=bulk, news=news, error=error[:300])
        raise


def resume_stalled_bulk_actions(*, stale_after_seconds: int | None = None) -> list[int]:
    """Re-enqueue pending/running bulks whose runner went quiet (killed worker, lost job).

    Safe to run any time: a live runner holds the lock, so the extra job waits and then finds
    nothing to do or carries on from the cursor.
    """
    stale = stale_after_seconds if stale_after_seconds is not None else settings.BULK_ACTION_STALE_SECONDS
    cutoff = timezone.now() - timedelta(seconds=stale)
    ids = list(
        BulkAction.objects.filter(
            status__in=(BulkActionStatus.PENDING, BulkActionStatus.RUNNING), updated_at__lt=cutoff
        ).values_list("pk", flat=True)
    )
    for bulk_id in ids:
        enqueue_bulk_job(bulk_id)
    return ids
