"""Bulk runs that start at a time (a single letter's scheduled replay is a run of one letter).

The due time lives on the BulkAction row (`start_at`, status `scheduled`), never in a process: the
housekeeper (its `scheduled runs` duty, twice a second) promotes the due ones with a conditional
UPDATE scheduled -> pending that exactly one caller wins, and enqueues the run's job once that
commits. A housekeeper killed before the time changes nothing: the next one finds the row due.
Until it starts, the run can be cancelled like any other (scheduled -> cancelled).

A replay may wait for a kind's circuit breaker to be closed instead of a clock time
(`after_breaker_of`, start_after_breaker): the same duty starts it once the breaker is closed. A
breaker that opens pauses the replays still to make into its kind (pause_replays_into).
"""

import logging
from datetime import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from deadletters.audit import record_audit
from deadletters.bulk.control import enqueue_after_commit, start_bulk_action
from deadletters.bulk.pause_reasons import paused_by
from deadletters.bulk.selection import (
    SCOPE_SELECTED,
    BulkRequestConflict,
    InvalidBulkRequest,
    build_selection,
    selection_of,
)
from deadletters.models import BulkAction, BulkActionKind, BulkActionStatus, DeadLetter
from deadletters.services.letters import REPLAYABLE_STATUSES, DeadLetterNotFound
from reports.errors import InvalidParams
from reports.kinds import KINDS
from reports.models import TaskStatus
from reports.services import TaskNotReplayable
from reports.services.breakers import BREAKER, check_kind, tripped_kinds

logger = logging.getLogger("deadletters.bulk")

def promote_due_bulk_actions(*, now: datetime | None = None, limit: int = 100) -> list[int]:
    """scheduled -> pending for every run whose start_at has come (earliest first), each one
    conditional UPDATE, audited, its job enqueued on commit. Returns the ids this call started;
    a run another planner started first is not among them."""
    now = now or timezone.now()
    due = list(
        BulkAction.objects.filter(status=BulkActionStatus.SCHEDULED)
        .filter(Q(start_at__lte=now) | Q(start_at__isnull=True, after_breaker_of__gt=""))
        .exclude(after_breaker_of__in=tripped_kinds())
        .order_by("start_at", "pk")
        .values_list("pk", "public_id", "start_at")[:limit]
    )
    started = []
    for pk, public_id, start_at in due:
        with transaction.atomic():
            moment = timezone.now()
            if not BulkAction.objects.filter(pk=pk, status=BulkActionStatus.SCHEDULED).update(
                status=BulkActionStatus.PENDING, started_at=moment, updated_at=moment
            ):
                continue  # cancelled meanwhile, or another planner was first
            late = (moment - start_at).total_seconds() if start_at else 0.0  # else: after a breaker
            record_audit(
                action="bulk_scheduled_start",
                source="system",
                item_count=BulkAction.objects.filter(pk=pk).values_list("total", flat=True).first() or 0,
                details={"bulk": str(public_id), "start_at": start_at.isoformat() if start_at else None,
                         "late_seconds": round(late, 3)},
            )
            enqueue_after_commit(pk)
        started.append(pk)
        logger.info("scheduled bulk %s started, %.3f s after its time", public_id, late)
    return started


def schedule_letter_replay(
    *, dead_letter_id: int, start_at: datetime, actor: str, ip_address: str | None, reason: str = "",
    source: str = "console",
) -> tuple[BulkAction, DeadLetter]:
    """One dead letter's replay at `start_at`: a scheduled bulk replay of that letter alone, so it
    is started, cancelled, audited and shown as every scheduled run is. Refused now (not at the
    time) when the letter cannot be replayed now; a letter replayed meanwhile is skipped then."""
    letter = DeadLetter.objects.select_related("task").filter(pk=dead_letter_id).first()
    if letter is None:
        raise DeadLetterNotFound(dead_letter_id)
    if letter.status not in REPLAYABLE_STATUSES or letter.task.status != TaskStatus.DEAD:
        raise TaskNotReplayable(letter.task, replayed_by=letter.replayed_by, replayed_at=letter.replayed_at)
    selection = build_selection(action=BulkActionKind.REPLAY, scope=SCOPE_SELECTED, ids=[letter.pk])
    bulk, _ = start_bulk_action(
        selection=selection, actor=actor, ip_address=ip_address, reason=reason, start_at=start_at,
        source=source,
    )
    return bulk, letter


def scheduled_replays_of(letter: DeadLetter):
    """The scheduled single-letter replays of this letter, soonest first (its detail page shows them)."""
    return BulkAction.objects.filter(
        status=BulkActionStatus.SCHEDULED, action=BulkActionKind.REPLAY, selected_ids=[letter.pk]
    ).order_by("start_at", "pk")


def start_after_breaker(*, kind: object, **start) -> tuple[BulkAction, bool]:
    """A replay (with a canary or not) that starts once the circuit breaker of `kind` is closed:
    start_bulk_action's run, scheduled with after_breaker_of instead of a time. Raises
    InvalidBulkRequest naming the field."""
    try:
        kind = check_kind(kind)
    except InvalidParams as exc:  # a kind without an upstream on this site: a conflict, as the API says
        refusal = BulkRequestConflict if isinstance(kind, str) and kind in KINDS else InvalidBulkRequest
        raise refusal("after_breaker_of", exc.message) from None
    if start.get("start_at") is not None:
        raise InvalidBulkRequest("after_breaker_of", _("give a start time or a breaker, not both"))
    if start["selection"].action != BulkActionKind.REPLAY:
        raise InvalidBulkRequest("after_breaker_of", _("only a replay can wait for a breaker"))
    return start_bulk_action(**start, after_breaker_of=kind)


def pause_replays_into(*, kind: str) -> int:
    """The kind's breaker opened: every pending or running replay with letters of the kind still to
    replay pauses (audited as the system); resumed, it carries on from its cursor. How many paused."""
    active = (BulkActionStatus.PENDING, BulkActionStatus.RUNNING)
    reason = paused_by(f"{BREAKER} of {kind}")
    paused = 0
    for bulk in BulkAction.objects.filter(action=BulkActionKind.REPLAY, status__in=active):
        if not selection_of(bulk).queryset().filter(kind=kind, pk__gt=bulk.last_processed_id).exists():
            continue
        if BulkAction.objects.filter(pk=bulk.pk, status__in=active).update(
                status=BulkActionStatus.PAUSED, paused_reason=reason, updated_at=timezone.now()):
            record_audit(action="bulk_pause", source="system", item_count=max(bulk.total - bulk.processed, 0),
                         reason=reason, details={"bulk": str(bulk.public_id), "automatic": True})
            paused += 1
    return paused
