"""Bulk runs that start at a time (a single letter's scheduled replay is a run of one letter).

The due time lives on the BulkAction row (`start_at`, status `scheduled`), never in a process: the
planner (`manage.py run_scheduled_replays --loop`, every REPLAY_PLANNER_INTERVAL seconds) and, as
a backstop, every reaper pass promote the due ones with a conditional UPDATE scheduled -> pending
that exactly one caller wins, and enqueue the run's job once that commits. A planner killed
before the time changes nothing: the next one (or the reaper) finds the row due. Until it starts,
the run can be cancelled like any other (scheduled -> cancelled).
"""

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from deadletters.audit import record_audit
from deadletters.bulk.control import enqueue_after_commit
from deadletters.models import BulkAction, BulkActionStatus

logger = logging.getLogger("deadletters.bulk")

def promote_due_bulk_actions(*, now: datetime | None = None, limit: int = 100) -> list[int]:
    """scheduled -> pending for every run whose start_at has come (earliest first), each one
    conditional UPDATE, audited, its job enqueued on commit. Returns the ids this call started;
    a run another planner started first is not among them."""
    now = now or timezone.now()
    due = list(
        BulkAction.objects.filter(status=BulkActionStatus.SCHEDULED, start_at__lte=now)
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
            late = (moment - start_at).total_seconds()
            record_audit(
                action="bulk_scheduled_start",
                source="system",
                item_count=BulkAction.objects.filter(pk=pk).values_list("total", flat=True).first() or 0,
                details={"bulk": str(public_id), "start_at": start_at.isoformat(), "late_seconds": round(late, 3)},
            )
            enqueue_after_commit(pk)
        started.append(pk)
        logger.info("scheduled bulk %s started, %.3f s after its time", public_id, late)
    return started
