"""Replay: a dead task goes back to pending with a fresh attempt budget, its dead letters are
marked replayed by who and when, and an audit entry records it, in one transaction. The task
row's compare-and-set (reports.services.requeue_dead_task) makes concurrent replays one run."""

import logging

from django.db import transaction

from deadletters.audit import record_audit, require_reason
from deadletters.models import BulkAction, DeadLetter, DeadLetterStatus
from deadletters.services.letters import REPLAYABLE_STATUSES, DeadLetterNotFound, mark_replayed
from reports.models import ReportTask
from reports.services import TaskNotFound, TaskNotReplayable, requeue_dead_task

logger = logging.getLogger(__name__)


def replay_task(
    *,
    task_id: int,
    actor: str = "",
    source: str = "console",
    reason: str = "",
    ip_address: str | None = None,
    params: dict | None = None,
    audit_details: dict | None = None,
) -> ReportTask:
    """dead -> pending with a fresh attempt budget, enqueued once however often this is called.

    Raises ReasonRequired, TaskNotFound, TaskNotReplayable (naming who replayed it when someone
    did), or InvalidParams for edited params."""
    require_reason(action="replay", reason=reason)
    return _replay_task(
        task_id=task_id,
        actor=actor,
        source=source,
        reason=reason,
        ip_address=ip_address,
        params=params,
        audit_details=audit_details,
    )


def _replay_task(*, task_id, actor, source, reason, ip_address, params, audit_details) -> ReportTask:
    with transaction.atomic():
        try:
            requeued = requeue_dead_task(task_id=task_id, params=params)
        except TaskNotReplayable as exc:
            raise _with_last_replay(exc.task) from None
        task = requeued.task
        letters = mark_replayed(task=task, actor=actor, now=task.updated_at)
        details = dict(audit_details or {})
        if requeued.params_diff:
            details["params_diff"] = requeued.params_diff
        record_audit(
            action="replay",
            actor=actor,
            source=source,
            ip_address=ip_address,
            task=task,
            dead_letter=letters[0] if letters else None,
            reason=reason,
            details=details,
        )
    logger.info("task %s replayed by %s via %s", task.public_id, actor or "system", source)
    return task


def _with_last_replay(task: ReportTask) -> TaskNotReplayable:
    last = task.dead_letters.exclude(replayed_at=None).order_by("-replayed_at").first()
    return TaskNotReplayable(
        task, replayed_by=last.replayed_by if last else "", replayed_at=last.replayed_at if last else None
    )


def replay_dead_letter(
    *,
    dead_letter_id: int,
    actor: str,
    ip_address: str | None,
    reason: str = "",
    params: dict | None = None,
    bulk: BulkAction | None = None,
    source: str = "console",
) -> ReportTask:
    """Replay the letter's task (dead -> pending, one enqueue). Returns the task.

    Raises ReasonRequired (checked once at a bulk's start, not per letter); DeadLetterNotFound;
    TaskNotReplayable when the letter was replayed already (by anyone,
    with who and when) or its task is not dead; InvalidParams when edited params fail the kind's
    validation (nothing changed then). Two concurrent calls make one replay: the task's
    dead -> pending UPDATE is the compare-and-set, the loser gets TaskNotReplayable.
    """
    if bulk is None:
        require_reason(action="replay", reason=reason)
    letter = DeadLetter.objects.select_related("task").filter(pk=dead_letter_id).first()
    if letter is None:
        raise DeadLetterNotFound(dead_letter_id)
    if letter.status not in REPLAYABLE_STATUSES:
        # An old letter of a task that was replayed (and maybe died again under a newer letter):
        # replaying from here would act on a newer death the operator has not looked at.
        raise TaskNotReplayable(letter.task, replayed_by=letter.replayed_by, replayed_at=letter.replayed_at)
    details = {"dead_letter": letter.pk}
    if bulk is not None:
        details["bulk"] = str(bulk.public_id)
    with transaction.atomic():
        marked = list(
            DeadLetter.objects.filter(task_id=letter.task_id, status__in=REPLAYABLE_STATUSES).values_list(
                "pk", flat=True
            )
        )
        task = _replay_task(
            task_id=letter.task_id,
            actor=actor,
            source=source,
            reason=reason,
            ip_address=ip_address,
            params=params,
            audit_details=details,
        )
        if bulk is not None and marked:
            # What the bulk watches: the tasks its replays put back in the pipeline.
            replayed = DeadLetter.objects.filter(pk__in=marked, status=DeadLetterStatus.REPLAYED)
            replayed.update(replayed_in=bulk)
    return task


def replay_conflict_details(exc: TaskNotReplayable) -> dict:
    """What a person needs to know about a refused replay (for the 409 page, which words it in the
    page's language: console.refusals)."""
    return {"task": exc.task, "replayed_by": exc.replayed_by, "replayed_at": exc.replayed_at}


__all__ = [
    "DeadLetterNotFound",
    "TaskNotFound",
    "TaskNotReplayable",
    "replay_conflict_details",
    "replay_dead_letter",
    "replay_task",
]
