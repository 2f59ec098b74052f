"""Pause and resume a report kind: when a downstream system is down, pause, fix, resume,
instead of burning every task's attempts into dead letters.

While a kind is paused its claims are deferred (reports.services.claim_task returns
ClaimDeferred): no attempt number is used and the task stays pending/retrying. The deferred
job ends; nothing re-checks on a timer, so a paused kind costs no worker time. The reaper leaves
paused kinds' tasks out of its scan, and `resume_kind` enqueues them all at once; once resumed
they are ordinary tasks again, so a lost resume enqueue is recovered by the reaper.
"""

import logging

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

import reports.services.concurrency as concurrency
from reports.errors import InvalidParams
from reports.kinds import KINDS
from reports.models import PausedKind, ReportTask, TaskStatus
from reports.services.enqueue import enqueue_attempts_many, job_id_for
from transport.queues import job_states, on_commit_robust

logger = logging.getLogger(__name__)

WAITING = (TaskStatus.PENDING, TaskStatus.RETRYING)
ENQUEUE_CHUNK = 2000


class KindNotPaused(Exception):
    pass


def _check_kind(kind: object) -> str:
    if not isinstance(kind, str) or kind not in KINDS:
        raise InvalidParams("kind", _("unknown report kind; known: %(known)s")
                            % {"known": ", ".join(sorted(KINDS))})
    return kind


def paused_kinds() -> dict[str, PausedKind]:
    return {row.kind: row for row in PausedKind.objects.order_by("kind")}


def pause_kind(*, kind: object, paused_by: str, reason: str = "") -> tuple[PausedKind, bool]:
    """Pause a kind. Returns (PausedKind, created); pausing a paused kind changes nothing.

    Raises InvalidParams for an unknown kind. Who may pause, and the audit entry, are the
    caller's business."""
    kind = _check_kind(kind)
    try:
        with transaction.atomic():
            row = PausedKind.objects.create(kind=kind, paused_by=paused_by[:150], reason=reason)
    except IntegrityError:
        return PausedKind.objects.get(kind=kind), False
    logger.warning("report kind %s paused by %s: %s", kind, paused_by or "system", reason)
    return row, True


def waiting_count(kind: str) -> int:
    return ReportTask.objects.filter(kind=kind, status__in=WAITING).count()


def resume_kind(*, kind: object, paused_by: str | None = None) -> int:
    """Resume a kind (only if `paused_by` paused it, when given); its waiting tasks are enqueued
    once the caller's transaction commits. Returns how many tasks wait. Raises KindNotPaused when
    it was not paused (a second click, another operator), InvalidParams for an unknown kind."""
    kind = _check_kind(kind)
    rows = PausedKind.objects.filter(kind=kind)
    with transaction.atomic():
        deleted, _by_model = (rows if paused_by is None else rows.filter(paused_by=paused_by)).delete()
        if not deleted:
            raise KindNotPaused(kind)
        waiting = waiting_count(kind)
        on_commit_robust(enqueue_waiting, kind=kind)
    logger.warning("report kind %s resumed; %s task(s) waiting", kind, waiting)
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
        states = job_states([job_id_for(pk, attempt + 1) for pk, attempt, *_rest in rows])
        items = [
            (pk, attempt + 1, priority, timeout, kind)
            for pk, attempt, priority, timeout in rows
            if states.get(job_id_for(pk, attempt + 1)) not in ("queued", "started", "scheduled")
        ]
        count += enqueue_attempts_many(items) if items else 0


def parked_task_ids(candidates: list[tuple[int, int, str, int]]) -> set[int]:
    """Of the reaper's (task_id, attempt, priority, timeout) candidates, those waiting in a
    concurrency cap's waiting room: a freed slot (or the reaper loop's wake_all) wakes them, so
    the reaper does not deliver them again and again. (Paused kinds are left out of the
    reaper's scan altogether.)"""
    if not candidates or not concurrency.any_capped():
        return set()
    kinds = dict(ReportTask.objects.filter(pk__in=[row[0] for row in candidates]).values_list("pk", "kind"))
    parked: set[int] = set()
    for kind in {kind for kind in kinds.values() if concurrency.limit_for(kind) is not None}:
        members = [
            (pk, attempt + 1, priority, timeout)
            for pk, attempt, priority, timeout in candidates
            if kinds.get(pk) == kind
        ]
        parked |= concurrency.parked_ids(kind, members)
    return parked
