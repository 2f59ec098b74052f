"""Watching what a bulk replay led to: of the tasks it replayed, how many finished and how many
died again; too many deaths pause the bulk, so a replay of 50,000 does not burn through a cause
that is not fixed yet."""

import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, Q
from django.db.models.functions import Substr
from django.utils import timezone

from deadletters.alerts.resolved import announce_bulk
from deadletters.audit import record_audit
from deadletters.bulk.pause_reasons import paused_automatically
from deadletters.models import BulkAction, BulkActionKind, BulkActionStatus, DeadLetter
from reports.models import ReportTask, TaskStatus

logger = logging.getLogger("deadletters.bulk")


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


OUTCOME_CAUSES_MAX = 50


@dataclass(frozen=True)
class CauseOutcome:
    """What the replays of one cause led to: tasks replayed, done now, dead again now (the rest
    are still pending, retrying, running, or were cancelled)."""

    fingerprint: str
    error_type: str
    replayed: int
    done: int
    died_again: int
    error_message: str = field(default="", compare=False)  # one of the cause's: how an operator knows it

    @property
    def unfinished(self) -> int:
        return self.replayed - self.done - self.died_again


def replay_outcome_by_cause(bulk: BulkAction, *,
                            limit: int = OUTCOME_CAUSES_MAX) -> tuple[list[CauseOutcome], bool]:
    """replay_outcome per cause of the letters this bulk replayed, biggest first, in one grouped
    query; at most `limit` causes, and whether there were more. A task counts once per cause,
    with its state now, as replay_outcome counts it."""
    rows = list(
        DeadLetter.objects.filter(replayed_in=bulk)
        .order_by()
        .values("fingerprint")
        .annotate(
            error_type=Max("error_type"),
            error_message=Max(Substr("error_message", 1, 200)),
            replayed=Count("task_id", distinct=True),
            done=Count("task_id", distinct=True, filter=Q(task__status=TaskStatus.DONE)),
            died_again=Count("task_id", distinct=True, filter=Q(task__status=TaskStatus.DEAD)),
        )
        .order_by("-replayed", "fingerprint")[: limit + 1]
    )
    causes = [CauseOutcome(**row) for row in rows[:limit]]
    return causes, len(rows) > limit


def _watch_since(bulk: BulkAction) -> datetime | None:
    raw = (bulk.filters or {}).get("watch_since")
    return datetime.fromisoformat(raw) if raw else None


def pause_if_replays_die_again(bulk: BulkAction) -> bool:
    """Pause the bulk (running -> paused) when too many of its replays died again. True if paused."""
    if bulk.action != BulkActionKind.REPLAY or bulk.pause_threshold <= 0:
        return False
    outcome = replay_outcome(bulk, since=_watch_since(bulk))
    if outcome.finished < settings.BULK_REPLAY_PAUSE_MIN_SAMPLE or outcome.ratio <= bulk.pause_threshold:
        return False
    reason = paused_automatically(
        died_again=outcome.died_again, finished=outcome.finished, ratio=outcome.ratio,
        threshold=bulk.pause_threshold,
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
            announce_bulk(
                bulk=bulk,
                news="bulk_paused",
                died=outcome.died_again,
                finished=outcome.finished,
                ratio=round(outcome.ratio * 100),
                threshold=round(bulk.pause_threshold * 100),
            )
    if paused:
        logger.warning("bulk %s paused: %s", bulk.public_id, reason)
    return bool(paused)


def died_again_letters(bulk: BulkAction):
    """The dead letters born after this bulk replayed their tasks: what the operator looks at next."""
    replayed_tasks = DeadLetter.objects.filter(replayed_in=bulk).values("task_id")
    return DeadLetter.objects.filter(task_id__in=replayed_tasks, created_at__gte=bulk.created_at).exclude(
        replayed_in=bulk
    )


def died_again_causes(bulk: BulkAction, *, limit: int = 10) -> list[dict]:
    """Those letters grouped by cause, biggest first: fingerprint, error_type, count, newest id."""
    return list(
        died_again_letters(bulk)
        .order_by()
        .values("fingerprint", "error_type")
        .annotate(count=Count("pk"), newest=Max("pk"))
        .order_by("-count", "-newest")[:limit]
    )
