"""Bulk actions over many dead letters, run in the background by an RQ job.

Lifecycle of a BulkAction row (each change one conditional UPDATE):

    pending --job claims--> running --all done--> completed
       ^                      |  \\--died-again ratio over threshold / operator--> paused
       |                      |                                                   |
       +------ resume --------+---------------------------------------------------+
    pending | running | paused --operator--> cancelled;  unexpected error --> failed (resumable)

The selection is a snapshot taken at start: either the selected ids, or the list filter plus the
highest dead-letter id at that moment (`filters["max_id"]`), so letters that die after the start
are never included. The runner walks the selection in id order with a keyset cursor
(`last_processed_id`), one short transaction per batch that applies the action to each letter
through the single-letter services and advances the cursor with a compare-and-set. A runner that
dies mid-way loses at most its uncommitted batch; resuming (or `manage.py resume_bulk_actions`)
enqueues a new job that carries on after the cursor. Duplicate deliveries are harmless: the
cursor CAS lets only one runner's batch count, and a Redis lock keeps a second runner waiting.

A run works in time slices (BULK_ACTION_SLICE_SECONDS) and re-enqueues itself, so one big bulk
never holds a worker (or a job timeout) for hours.
"""

import logging
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Max, Q, QuerySet
from django.http import QueryDict
from django.utils import timezone
from redis.exceptions import LockError

from deadletters.filters import (
    DeadLetterFilters,
    InvalidFilter,
    filtered_dead_letters,
    parse_dead_letter_filters,
)
from deadletters.models import BulkAction, BulkActionKind, BulkActionStatus, DeadLetter
from deadletters.services import record_audit
from deadletters.services.actions import (
    ELIGIBLE_STATUSES,
    DeadLetterConflict,
    DeadLetterNotFound,
    apply_action,
)
from reports import queueing
from reports.models import ReportTask, TaskStatus
from reports.services import TaskNotFound, TaskNotReplayable

logger = logging.getLogger(__name__)

JOB_FUNC = "deadletters.jobs_bulk.run_bulk_action_job"
SCOPE_SELECTED = "selected"
SCOPE_FILTER = "filter"
SCOPES = (SCOPE_SELECTED, SCOPE_FILTER)
SAMPLE_SIZE = 10
# Slowest allowed rate: one item every 10 s keeps a batch well inside the runner lock.
MIN_RATE = 0.1
WATCH_INTERVAL_SECONDS = 1.0
ACTIVE_STATUSES = (BulkActionStatus.PENDING, BulkActionStatus.RUNNING, BulkActionStatus.PAUSED)
FINISHED_STATUSES = (BulkActionStatus.COMPLETED, BulkActionStatus.CANCELLED, BulkActionStatus.FAILED)
# What a per-letter step may refuse with: the letter changed state since the snapshot -> skipped.
SKIPPABLE = (DeadLetterConflict, DeadLetterNotFound, TaskNotReplayable, TaskNotFound)


class InvalidBulkRequest(ValueError):
    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")


class BulkStateConflict(Exception):
    """Pause/resume/cancel asked of a bulk action in a state that does not allow it."""

    def __init__(self, bulk: BulkAction, action: str):
        self.bulk = bulk
        super().__init__(f"cannot {action} a bulk action that is {bulk.status}")


# --- selection ------------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    """What a bulk action touches, as stored in BulkAction.filters / selected_ids."""

    action: str
    scope: str
    ids: tuple[int, ...] = ()
    filters: DeadLetterFilters | None = None
    max_id: int = 0

    def queryset(self) -> QuerySet:
        """The letters this selection can still act on, unordered."""
        if self.scope == SCOPE_SELECTED:
            # Small by construction (BULK_SELECTION_MAX); the runner walks `ids` itself.
            qs = DeadLetter.objects.filter(pk__in=self.ids)
        else:
            qs = filtered_dead_letters(self.filters).filter(pk__lte=self.max_id)
        return qs.filter(status__in=ELIGIBLE_STATUSES[self.action])

    def as_filters_json(self) -> dict:
        data = {"scope": self.scope, "max_id": self.max_id}
        if self.filters is not None:
            data["filter"] = self.filters.as_json()
        return data


def build_selection(
    *, action: object, scope: object, ids: list | tuple = (), filter_qs: object = "", max_id: object = None
) -> Selection:
    """Validate what the list form posted. Raises InvalidBulkRequest naming the field."""
    if action not in BulkActionKind.values:
        raise InvalidBulkRequest("action", f"must be one of {', '.join(BulkActionKind.values)}")
    if scope not in SCOPES:
        raise InvalidBulkRequest("scope", f"must be one of {', '.join(SCOPES)}")
    current_max = DeadLetter.objects.aggregate(m=Max("pk"))["m"] or 0
    cap = current_max
    if max_id not in (None, ""):
        # The preview's snapshot: start acts on what the operator saw, never on later deaths.
        cap = min(_positive_id(max_id, "max_id", "must be a dead-letter id"), current_max)
    if scope == SCOPE_SELECTED:
        parsed = sorted({_positive_id(i, "ids", "must be dead-letter ids") for i in ids})
        if not parsed:
            raise InvalidBulkRequest("ids", "select at least one dead letter")
        if len(parsed) > settings.BULK_SELECTION_MAX:
            raise InvalidBulkRequest(
                "ids", f"at most {settings.BULK_SELECTION_MAX} at once; use 'everything matching the filter'"
            )
        return Selection(action=action, scope=scope, ids=tuple(parsed), max_id=cap)
    if not isinstance(filter_qs, str):
        raise InvalidBulkRequest("filter_qs", "must be a query string")
    try:
        filters = parse_dead_letter_filters(QueryDict(filter_qs.lstrip("?")))
    except InvalidFilter as exc:
        raise InvalidBulkRequest("filter_qs", str(exc)) from None
    return Selection(action=action, scope=scope, filters=filters, max_id=cap)


MAX_ID = 2**63 - 1  # a bigint primary key; larger values would be a database error, not "no match"


def _positive_id(value: object, field: str, message: str) -> int:
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        raise InvalidBulkRequest(field, message) from None
    if not 0 <= number <= MAX_ID or (field == "ids" and number == 0):
        raise InvalidBulkRequest(field, message)
    return number


def selection_of(bulk: BulkAction) -> Selection:
    stored = bulk.filters or {}
    if stored.get("scope") == SCOPE_SELECTED:
        return Selection(
            action=bulk.action,
            scope=SCOPE_SELECTED,
            ids=tuple(bulk.selected_ids or ()),
            max_id=int(stored.get("max_id") or 0),
        )
    return Selection(
        action=bulk.action,
        scope=SCOPE_FILTER,
        filters=parse_dead_letter_filters(stored.get("filter") or {}),
        max_id=int(stored.get("max_id") or 0),
    )


# --- preview and start ------------------------------------------------------------


@dataclass(frozen=True)
class BulkPreview:
    selection: Selection
    count: int
    sample: list[DeadLetter]


def preview_bulk_action(*, selection: Selection) -> BulkPreview:
    """Dry run: how many letters the action would touch now, and the first SAMPLE_SIZE of them."""
    qs = selection.queryset()
    sample = list(qs.select_related("task").order_by("pk")[:SAMPLE_SIZE])
    return BulkPreview(selection=selection, count=qs.count(), sample=sample)


def validate_rate(value: object) -> float:
    if value in (None, ""):
        return float(settings.BULK_ACTION_RATE_PER_SECOND)
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise InvalidBulkRequest("rate_per_second", "must be a number") from None
    if not math.isfinite(rate) or not MIN_RATE <= rate <= settings.BULK_ACTION_MAX_RATE:
        raise InvalidBulkRequest(
            "rate_per_second", f"must be between {MIN_RATE} and {settings.BULK_ACTION_MAX_RATE} per second"
        )
    return rate


def validate_threshold(value: object) -> float:
    if value in (None, ""):
        return float(settings.BULK_REPLAY_PAUSE_THRESHOLD)
    try:
        threshold = float(value)
    except (TypeError, ValueError):
        raise InvalidBulkRequest("pause_threshold", "must be a number between 0 and 1") from None
    if not math.isfinite(threshold) or not 0 <= threshold <= 1:
        raise InvalidBulkRequest("pause_threshold", "must be between 0 and 1")
    return threshold


def start_bulk_action(
    *,
    selection: Selection,
    actor: str,
    ip_address: str | None,
    reason: str = "",
    rate_per_second: float | None = None,
    pause_threshold: float | None = None,
    request_token: str | None = None,
) -> tuple[BulkAction, bool]:
    """Create the BulkAction (pending), audit it once with its item count, enqueue its job on commit.

    `request_token` (a UUID the preview form carries) becomes the bulk's public_id, so a form sent
    twice starts one bulk: the second call returns the first bulk and created=False.
    """
    rate = validate_rate(rate_per_second)
    threshold = validate_threshold(pause_threshold)
    public_id = _token_uuid(request_token)
    existing = BulkAction.objects.filter(public_id=public_id).first()
    if existing is not None:
        return existing, False
    try:
        bulk = _create_bulk(selection, actor, ip_address, reason, rate, threshold, public_id)
    except IntegrityError:
        existing = BulkAction.objects.filter(public_id=public_id).first()
        if existing is None:
            raise
        return existing, False
    logger.info("bulk %s %s started by %s: %s letters", bulk.action, bulk.public_id, actor, bulk.total)
    return bulk, True


def _token_uuid(token: str | None) -> uuid.UUID:
    try:
        return uuid.UUID(str(token)) if token else uuid.uuid4()
    except ValueError:
        return uuid.uuid4()


def _create_bulk(selection, actor, ip_address, reason, rate, threshold, public_id) -> BulkAction:
    with transaction.atomic():
        total = selection.queryset().count()
        bulk = BulkAction.objects.create(
            public_id=public_id,
            action=selection.action,
            filters=selection.as_filters_json(),
            selected_ids=list(selection.ids) if selection.scope == SCOPE_SELECTED else None,
            actor=actor[:150],
            ip_address=ip_address,
            reason=reason[:2000],
            total=total,
            rate_per_second=rate,
            pause_threshold=threshold if selection.action == BulkActionKind.REPLAY else 0,
        )
        record_audit(
            action=f"bulk_{selection.action}",
            actor=actor,
            ip_address=ip_address,
            item_count=total,
            reason=reason,
            details={
                "bulk": str(bulk.public_id),
                "scope": selection.scope,
                **({"filter": selection.filters.as_json()} if selection.filters is not None else {}),
                **({"ids": list(selection.ids)[:1000]} if selection.scope == SCOPE_SELECTED else {}),
                "max_id": selection.max_id,
                "rate_per_second": rate,
                **({"pause_threshold": threshold} if selection.action == BulkActionKind.REPLAY else {}),
            },
        )
        _enqueue_after_commit(bulk.pk)
    return bulk


def enqueue_bulk_job(bulk_id: int) -> str:
    job_id = f"bulk-{bulk_id}-{uuid.uuid4().hex[:12]}"
    queueing.get_queue("default").enqueue_call(
        JOB_FUNC,
        args=(bulk_id,),
        job_id=job_id,
        timeout=settings.BULK_ACTION_SLICE_SECONDS + settings.BULK_ACTION_LOCK_SECONDS + 120,
        result_ttl=settings.RQ_RESULT_TTL,
        failure_ttl=settings.RQ_FAILURE_TTL,
        description=f"bulk action {bulk_id}",
    )
    return job_id


def _enqueue_after_commit(bulk_id: int) -> None:
    # robust: if Redis is down at commit, `manage.py resume_bulk_actions` enqueues it later.
    transaction.on_commit(lambda: enqueue_bulk_job(bulk_id), robust=True)


# --- pause / resume / cancel ------------------------------------------------------


def _operator_change(
    *, bulk_id: int, action: str, actor: str, ip_address: str | None, from_statuses, updates
):
    with transaction.atomic():
        changed = BulkAction.objects.filter(pk=bulk_id, status__in=from_statuses).update(
            updated_at=timezone.now(), **updates
        )
        bulk = BulkAction.objects.get(pk=bulk_id)
        if not changed:
            raise BulkStateConflict(bulk, action)
        record_audit(
            action=f"bulk_{action}",
            actor=actor,
            ip_address=ip_address,
            item_count=max(bulk.total - bulk.processed, 0),
            details={"bulk": str(bulk.public_id), "bulk_action": bulk.action},
        )
    return bulk


def pause_bulk_action(*, bulk_id: int, actor: str, ip_address: str | None = None) -> BulkAction:
    """pending/running -> paused; the runner stops at its next batch boundary."""
    return _operator_change(
        bulk_id=bulk_id,
        action="pause",
        actor=actor,
        ip_address=ip_address,
        from_statuses=(BulkActionStatus.PENDING, BulkActionStatus.RUNNING),
        updates={"status": BulkActionStatus.PAUSED, "paused_reason": f"Paused by {actor}."[:2000]},
    )


def resume_bulk_action(*, bulk_id: int, actor: str, ip_address: str | None = None) -> BulkAction:
    """paused/failed -> pending and a new job; the cursor makes it carry on where it stopped.

    The died-again watch restarts from now: the operator resumes because the cause is fixed,
    so deaths from before the resume must not pause it again at once.
    """
    with transaction.atomic():
        bulk = BulkAction.objects.filter(pk=bulk_id).first()
        if bulk is None:
            raise BulkAction.DoesNotExist(bulk_id)
        filters = dict(bulk.filters or {}, watch_since=timezone.now().isoformat())
        bulk = _operator_change(
            bulk_id=bulk_id,
            action="resume",
            actor=actor,
            ip_address=ip_address,
            from_statuses=(BulkActionStatus.PAUSED, BulkActionStatus.FAILED),
            updates={
                "status": BulkActionStatus.PENDING,
                "paused_reason": "",
                "error": "",
                "filters": filters,
            },
        )
        _enqueue_after_commit(bulk.pk)
    return bulk


def cancel_bulk_action(*, bulk_id: int, actor: str, ip_address: str | None = None) -> BulkAction:
    """pending/running/paused -> cancelled. What was done stays done; nothing more is touched."""
    return _operator_change(
        bulk_id=bulk_id,
        action="cancel",
        actor=actor,
        ip_address=ip_address,
        from_statuses=ACTIVE_STATUSES + (BulkActionStatus.FAILED,),
        updates={"status": BulkActionStatus.CANCELLED, "finished_at": timezone.now()},
    )


# --- the runner ---------------------------------------------------------------------


class Throttle:
    """Keeps a run at or under `rate` items per second: after n items, at least n/rate seconds
    have passed since the start. `clock` and `sleep` are injectable for tests."""

    def __init__(self, rate: float, *, clock: Callable[[], float] = time.monotonic, sleep=time.sleep):
        self.rate = rate
        self.clock = clock
        self.sleep = sleep
        self.started = clock()
        self.items = 0

    # Work that ran slow may be caught up with at most this much of a burst afterwards.
    max_burst_seconds = 1.0

    def delay_for(self, items: int) -> float:
        """Seconds to wait after `items` more items to stay on schedule."""
        if self.rate <= 0:
            return 0.0
        now = self.clock()
        self.started = max(self.started, now - self.items / self.rate - self.max_burst_seconds)
        due = self.started + (self.items + items) / self.rate
        return max(0.0, due - now)

    def wait(self, items: int) -> float:
        delay = self.delay_for(items)
        self.items += items
        if delay > 0:
            self.sleep(delay)
        return delay


def batch_size_for(rate: float) -> int:
    """Batches of at most about one second of work, so pause and cancel take effect quickly."""
    per_second = max(1, math.floor(rate)) if rate > 0 else settings.BULK_ACTION_BATCH_SIZE
    return max(1, min(settings.BULK_ACTION_BATCH_SIZE, per_second))


@dataclass(frozen=True)
class ReplayOutcome:
    replayed: int
    finished: int
    died_again: int

    @property
    def ratio(self) -> float:
        return self.died_again / self.finished if self.finished else 0.0


def replay_outcome(bulk: BulkAction, *, since: datetime | None = None) -> ReplayOutcome:
    """Of the tasks this bulk replayed (since `since`), how many finished and how many are dead again."""
    letters = DeadLetter.objects.filter(replayed_in=bulk)
    if since is not None:
        letters = letters.filter(replayed_at__gte=since)
    counts = ReportTask.objects.filter(pk__in=letters.values("task_id")).aggregate(
        replayed=Count("pk"),
        finished=Count("pk", filter=Q(status__in=(TaskStatus.DONE, TaskStatus.DEAD))),
        dead=Count("pk", filter=Q(status=TaskStatus.DEAD)),
    )
    return ReplayOutcome(replayed=counts["replayed"], finished=counts["finished"], died_again=counts["dead"])


def _watch_since(bulk: BulkAction) -> datetime | None:
    raw = (bulk.filters or {}).get("watch_since")
    return datetime.fromisoformat(raw) if raw else None


def _check_died_again(bulk: BulkAction) -> bool:
    """Pause the bulk (running -> paused) when too many of its replays died again. True if paused."""
    if bulk.action != BulkActionKind.REPLAY or bulk.pause_threshold <= 0:
        return False
    outcome = replay_outcome(bulk, since=_watch_since(bulk))
    if outcome.finished < settings.BULK_REPLAY_PAUSE_MIN_SAMPLE or outcome.ratio <= bulk.pause_threshold:
        return False
    reason = (
        f"Paused automatically: {outcome.died_again} of {outcome.finished} replayed tasks that finished "
        f"died again ({outcome.ratio:.0%}, threshold {bulk.pause_threshold:.0%}). Fix the cause, then "
        "resume, or cancel."
    )
    with transaction.atomic():
        paused = BulkAction.objects.filter(pk=bulk.pk, status=BulkActionStatus.RUNNING).update(
            status=BulkActionStatus.PAUSED, paused_reason=reason, updated_at=timezone.now()
        )
        if paused:
            record_audit(
                action="bulk_pause",
                actor="",
                source="system",
                ip_address=None,
                item_count=max(bulk.total - bulk.processed, 0),
                reason=reason,
                details={
                    "bulk": str(bulk.public_id),
                    "automatic": True,
                    "finished": outcome.finished,
                    "died_again": outcome.died_again,
                },
            )
    if paused:
        logger.warning("bulk %s paused: %s", bulk.public_id, reason)
    return bool(paused)


def _next_ids(selection: Selection, after: int, limit: int) -> list[int]:
    if selection.scope == SCOPE_SELECTED:
        # Eligibility is checked per letter by the action itself (skipped if it changed).
        return [pk for pk in selection.ids if pk > after][:limit]
    return list(selection.queryset().filter(pk__gt=after).order_by("pk").values_list("pk", flat=True)[:limit])


class _CursorMoved(Exception):
    """The batch's compare-and-set lost: paused/cancelled meanwhile, or another runner got there."""


def _run_batch(bulk: BulkAction, selection: Selection, ids: list[int]) -> tuple[int, int]:
    succeeded = skipped = 0
    with transaction.atomic():
        for pk in ids:
            try:
                # Each step is a savepoint: a refused letter leaves nothing behind.
                with transaction.atomic():
                    apply_action(
                        bulk.action,
                        dead_letter_id=pk,
                        actor=bulk.actor,
                        ip_address=bulk.ip_address,
                        reason=bulk.reason,
                        bulk=bulk,
                    )
                succeeded += 1
            except SKIPPABLE:
                skipped += 1
        moved = BulkAction.objects.filter(
            pk=bulk.pk, status=BulkActionStatus.RUNNING, last_processed_id=bulk.last_processed_id
        ).update(
            last_processed_id=ids[-1],
            processed=F("processed") + len(ids),
            succeeded=F("succeeded") + succeeded,
            skipped=F("skipped") + skipped,
            updated_at=timezone.now(),
        )
        if not moved:
            raise _CursorMoved()
    return succeeded, skipped


def _finish(bulk: BulkAction) -> None:
    """running -> completed. Letters that left the eligible set during the run (someone else
    acted on them first) count as skipped, so processed == total and the bar ends at 100%."""
    bulk.refresh_from_db()
    missing = max(bulk.total - bulk.processed, 0)
    BulkAction.objects.filter(pk=bulk.pk, status=BulkActionStatus.RUNNING, processed=bulk.processed).update(
        status=BulkActionStatus.COMPLETED,
        finished_at=timezone.now(),
        processed=bulk.processed + missing,
        skipped=bulk.skipped + missing,
        # Letters restored into the selection meanwhile can make processed exceed the first count.
        total=max(bulk.total, bulk.processed),
        updated_at=timezone.now(),
    )


def run_bulk_action(
    bulk_id: int,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    slice_seconds: float | None = None,
) -> str:
    """The job body. Returns what happened: completed, paused, cancelled, continued, gone, busy."""
    lock = queueing.redis_connection().lock(
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
    try:
        selection = selection_of(bulk)
        throttle = Throttle(bulk.rate_per_second, clock=clock, sleep=sleep)
        size = batch_size_for(bulk.rate_per_second)
        slice_end = clock() + (settings.BULK_ACTION_SLICE_SECONDS if slice_seconds is None else slice_seconds)
        next_watch = clock()
        while True:
            bulk.refresh_from_db()
            if bulk.status != BulkActionStatus.RUNNING:
                return bulk.status  # paused or cancelled by an operator
            if clock() >= next_watch:
                # The died-again count scans this bulk's replays: once a second is often enough.
                next_watch = clock() + WATCH_INTERVAL_SECONDS
                if _check_died_again(bulk):
                    return BulkActionStatus.PAUSED
            ids = _next_ids(selection, bulk.last_processed_id, size)
            if not ids:
                _finish(bulk)
                bulk.refresh_from_db()
                logger.info("bulk %s %s: %s", bulk.action, bulk.public_id, bulk.status)
                return bulk.status
            try:
                _run_batch(bulk, selection, ids)
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
            throttle.wait(len(ids))
            if clock() >= slice_end:
                enqueue_bulk_job(bulk_id)  # carry on in a fresh job; this one lets go of the lock
                return "continued"
    except Exception as exc:
        logger.exception("bulk action %s failed", bulk_id)
        BulkAction.objects.filter(pk=bulk_id, status=BulkActionStatus.RUNNING).update(
            status=BulkActionStatus.FAILED,
            error=f"{type(exc).__name__}: {exc}"[:10_000],
            updated_at=timezone.now(),
        )
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
