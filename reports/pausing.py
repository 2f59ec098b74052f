"""Pause and resume a report kind: when a downstream system is down, pause, fix, resume,
instead of burning every task's attempts into dead letters.

While a kind is paused its claims are deferred (reports.services.claim_task returns
ClaimDeferred): no attempt number is used and the task stays pending/retrying. The deferred
job ends; nothing re-checks on a timer, so a paused kind costs no worker time. The reaper leaves
paused kinds' tasks out of its scan, and `resume_kind` enqueues them all at once; once resumed
they are ordinary tasks again, so a lost resume enqueue is recovered by the reaper.
"""

import logging
from functools import partial

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from reports import queueing, semaphore
from reports.errors import InvalidParams
from reports.kinds import KINDS
from reports.models import PausedKind, ReportTask, TaskStatus

logger = logging.getLogger(__name__)

WAITING = (TaskStatus.PENDING, TaskStatus.RETRYING)
ENQUEUE_CHUNK = 2000
REASON_MAX = 2000


class KindNotPaused(Exception):
    pass


def _check_kind(kind: object) -> str:
    if not isinstance(kind, str) or kind not in KINDS:
        raise InvalidParams("kind", f"unknown report kind; known: {', '.join(sorted(KINDS))}")
    return kind


def paused_kinds() -> dict[str, PausedKind]:
    return {row.kind: row for row in PausedKind.objects.order_by("kind")}


def pause_kind(*, kind: object, actor: str, reason: str = "", source: str = "console", ip_address=None):
    """Pause a kind. Returns (PausedKind, created); pausing a paused kind changes nothing."""
    from deadletters.services import record_audit

    kind = _check_kind(kind)
    reason = (reason or "")[:REASON_MAX]
    try:
        with transaction.atomic():
            row = PausedKind.objects.create(kind=kind, paused_by=actor[:150], reason=reason)
            record_audit(
                action="pause_kind",
                actor=actor,
                source=source,
                ip_address=ip_address,
                item_count=ReportTask.objects.filter(kind=kind, status__in=WAITING).count(),
                reason=reason,
                details={"kind": kind},
            )
    except IntegrityError:
        return PausedKind.objects.get(kind=kind), False
    logger.warning("report kind %s paused by %s: %s", kind, actor or "system", reason)
    return row, True


def resume_kind(*, kind: object, actor: str, source: str = "console", ip_address=None) -> int:
    """Resume a kind and enqueue its waiting tasks now. Returns how many were enqueued.

    Raises KindNotPaused when it was not paused (a second click, another operator)."""
    from deadletters.services import record_audit

    kind = _check_kind(kind)
    with transaction.atomic():
        deleted, _ = PausedKind.objects.filter(kind=kind).delete()
        if not deleted:
            raise KindNotPaused(kind)
        waiting = ReportTask.objects.filter(kind=kind, status__in=WAITING).count()
        record_audit(
            action="resume_kind",
            actor=actor,
            source=source,
            ip_address=ip_address,
            item_count=waiting,
            details={"kind": kind},
        )
        transaction.on_commit(partial(enqueue_waiting, kind=kind), robust=True)
    logger.warning("report kind %s resumed by %s; %s task(s) waiting", kind, actor or "system", waiting)
    return waiting


def enqueue_waiting(*, kind: str) -> int:
    """Enqueue the next attempt of every due pending/retrying task of the kind.

    Jobs already queued, running or scheduled (a retry whose backoff is not over) are left
    alone; a duplicate would only be a phantom delivery, but there is no need for it."""
    now = timezone.now()
    due = ReportTask.objects.filter(kind=kind, status__in=WAITING).filter(
        Q(next_retry_at__isnull=True) | Q(next_retry_at__lte=now)
    )
    count = 0
    last_pk = 0
    while True:
        rows = list(
            due.filter(pk__gt=last_pk)
            .order_by("pk")
            .values_list("pk", "attempt", "priority", "timeout_seconds")[:ENQUEUE_CHUNK]
        )
        if not rows:
            return count
        last_pk = rows[-1][0]
        states = queueing.job_states([queueing.job_id_for(pk, attempt + 1) for pk, attempt, _, _ in rows])
        items = [
            (pk, attempt + 1, priority, timeout)
            for pk, attempt, priority, timeout in rows
            if states.get(queueing.job_id_for(pk, attempt + 1)) not in ("queued", "started", "scheduled")
        ]
        count += queueing.enqueue_attempts_many(items) if items else 0


def parked_task_ids(candidates: list[tuple[int, int, str, int]]) -> set[int]:
    """Of the reaper's (task_id, attempt, priority, timeout) candidates, those waiting in a
    concurrency cap's waiting room: a freed slot (or the reaper loop's wake_all) wakes them, so
    the reaper does not deliver them again and again. (Paused kinds are left out of the
    reaper's scan altogether.)"""
    if not candidates or not settings.REPORT_KIND_CONCURRENCY:
        return set()
    kinds = dict(ReportTask.objects.filter(pk__in=[row[0] for row in candidates]).values_list("pk", "kind"))
    parked: set[int] = set()
    for kind in {kind for kind in kinds.values() if semaphore.limit_for(kind) is not None}:
        members = [
            (pk, attempt + 1, priority, timeout)
            for pk, attempt, priority, timeout in candidates
            if kinds.get(pk) == kind
        ]
        parked |= semaphore.parked_ids(kind, members)
    return parked
