"""Operator actions on one dead letter: replay (optionally with edited params), archive, discard,
restore. Every state change is one conditional UPDATE; every action writes an AuditEntry.

Transitions (DESIGN.md, DeadLetter):
    open -> replayed | archived | discarded
    archived | discarded -> replayed (replay) | open (restore)

Restore resets `expire_at` to now + DEADLETTER_RETENTION_DAYS: a letter an operator brought back
gets a full retention period, so the archiver does not re-archive it on its next cron run.

The bulk runner (deadletters.services.bulk) calls these same functions per letter, passing
`bulk=` so each per-letter audit entry names its bulk run.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from deadletters.models import BulkAction, DeadLetter, DeadLetterStatus
from deadletters.services import REPLAYABLE_STATUSES, record_audit
from reports.models import ReportTask, TaskStatus
from reports.services import TaskNotReplayable, replay_task

ARCHIVABLE_STATUSES = (DeadLetterStatus.OPEN,)
DISCARDABLE_STATUSES = (DeadLetterStatus.OPEN,)
RESTORABLE_STATUSES = (DeadLetterStatus.ARCHIVED, DeadLetterStatus.DISCARDED)

# Which letters each action can touch: the bulk preview counts and the bulk runner iterates these.
ELIGIBLE_STATUSES = {
    "replay": tuple(REPLAYABLE_STATUSES),
    "archive": ARCHIVABLE_STATUSES,
    "discard": DISCARDABLE_STATUSES,
    "restore": RESTORABLE_STATUSES,
}


class DeadLetterNotFound(Exception):
    pass


class DeadLetterConflict(Exception):
    """The letter is not in a state this action applies to (someone else got there first)."""

    def __init__(self, letter: DeadLetter, action: str):
        self.letter = letter
        self.action = action
        when = _changed_at(letter)
        detail = f"dead letter {letter.pk} is {letter.status}"
        if when:
            detail += f" since {when:%Y-%m-%d %H:%M:%S} UTC"
        if letter.status == DeadLetterStatus.REPLAYED and letter.replayed_by:
            detail += f" (replayed by {letter.replayed_by})"
        super().__init__(f"cannot {action}: {detail}")


def _changed_at(letter: DeadLetter) -> datetime | None:
    return {
        DeadLetterStatus.REPLAYED: letter.replayed_at,
        DeadLetterStatus.ARCHIVED: letter.archived_at,
        DeadLetterStatus.DISCARDED: letter.discarded_at,
    }.get(letter.status)


def _get_letter(dead_letter_id: int) -> DeadLetter:
    letter = DeadLetter.objects.select_related("task").filter(pk=dead_letter_id).first()
    if letter is None:
        raise DeadLetterNotFound(dead_letter_id)
    return letter


def _audit_details(bulk: BulkAction | None, **extra) -> dict:
    details = {k: v for k, v in extra.items() if v not in (None, "")}
    if bulk is not None:
        details["bulk"] = str(bulk.public_id)
    return details


# --- replay -------------------------------------------------------------------


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

    Raises DeadLetterNotFound; TaskNotReplayable when the letter was replayed already (by anyone,
    with who and when) or its task is not dead; InvalidParams when edited params fail the kind's
    validation (nothing changed then). Two concurrent calls make one replay: the task's
    dead -> pending UPDATE is the compare-and-set, the loser gets TaskNotReplayable.
    """
    letter = _get_letter(dead_letter_id)
    if letter.status not in REPLAYABLE_STATUSES:
        # An old letter of a task that was replayed (and maybe died again under a newer letter):
        # replaying from here would act on a newer death the operator has not looked at.
        raise TaskNotReplayable(letter.task, replayed_by=letter.replayed_by, replayed_at=letter.replayed_at)
    with transaction.atomic():
        marked = list(
            DeadLetter.objects.filter(task_id=letter.task_id, status__in=REPLAYABLE_STATUSES).values_list(
                "pk", flat=True
            )
        )
        task = replay_task(
            task_id=letter.task_id,
            actor=actor,
            source=source,
            reason=reason,
            ip_address=ip_address,
            params=params,
            audit_details=_audit_details(bulk, dead_letter=letter.pk),
        )
        if bulk is not None and marked:
            # What the bulk watches: the tasks its replays put back in the pipeline.
            DeadLetter.objects.filter(pk__in=marked, status=DeadLetterStatus.REPLAYED).update(
                replayed_in=bulk
            )
    return task


def replay_conflict_details(exc: TaskNotReplayable) -> dict:
    """What a person needs to read about a refused replay (for the 409 page)."""
    task = exc.task
    if exc.replayed_by or exc.replayed_at:
        message = f"Already replayed by {exc.replayed_by or 'the system'}"
        if exc.replayed_at:
            message += f" at {exc.replayed_at:%Y-%m-%d %H:%M:%S} UTC"
        message += f"; the task is now {task.status}."
    elif task.status == TaskStatus.DEAD:
        message = "This dead letter cannot be replayed."
    else:
        message = f"The task is {task.status}, not dead: there is nothing to replay."
    return {"message": message, "task": task, "replayed_by": exc.replayed_by, "replayed_at": exc.replayed_at}


# --- archive / discard / restore ----------------------------------------------


@dataclass(frozen=True)
class _Transition:
    action: str
    from_statuses: tuple
    to_status: str


_ARCHIVE = _Transition("archive", ARCHIVABLE_STATUSES, DeadLetterStatus.ARCHIVED)
_DISCARD = _Transition("discard", DISCARDABLE_STATUSES, DeadLetterStatus.DISCARDED)
_RESTORE = _Transition("restore", RESTORABLE_STATUSES, DeadLetterStatus.OPEN)


def _transition(
    transition: _Transition,
    *,
    dead_letter_id: int,
    actor: str,
    ip_address: str | None,
    reason: str,
    bulk: BulkAction | None,
    source: str,
    updates: dict,
) -> DeadLetter:
    with transaction.atomic():
        changed = DeadLetter.objects.filter(pk=dead_letter_id, status__in=transition.from_statuses).update(
            status=transition.to_status, **updates
        )
        letter = _get_letter(dead_letter_id)
        if not changed:
            raise DeadLetterConflict(letter, transition.action)
        record_audit(
            action=transition.action,
            actor=actor,
            source=source,
            ip_address=ip_address,
            task=letter.task,
            dead_letter=letter,
            reason=reason,
            details=_audit_details(bulk),
        )
    return letter


def archive_dead_letter(
    *,
    dead_letter_id: int,
    actor: str,
    ip_address: str | None,
    reason: str = "",
    bulk: BulkAction | None = None,
    source: str = "console",
) -> DeadLetter:
    """open -> archived. Raises DeadLetterNotFound or DeadLetterConflict."""
    return _transition(
        _ARCHIVE,
        dead_letter_id=dead_letter_id,
        actor=actor,
        ip_address=ip_address,
        reason=reason,
        bulk=bulk,
        source=source,
        updates={"archived_at": timezone.now()},
    )


def discard_dead_letter(
    *,
    dead_letter_id: int,
    actor: str,
    ip_address: str | None,
    reason: str = "",
    bulk: BulkAction | None = None,
    source: str = "console",
) -> DeadLetter:
    """open -> discarded ("never replay this"). Raises DeadLetterNotFound or DeadLetterConflict."""
    return _transition(
        _DISCARD,
        dead_letter_id=dead_letter_id,
        actor=actor,
        ip_address=ip_address,
        reason=reason,
        bulk=bulk,
        source=source,
        updates={"discarded_at": timezone.now()},
    )


def restore_dead_letter(
    *,
    dead_letter_id: int,
    actor: str,
    ip_address: str | None,
    reason: str = "",
    bulk: BulkAction | None = None,
    source: str = "console",
) -> DeadLetter:
    """archived/discarded -> open, with a fresh retention period (expire_at = now + retention)."""
    now = timezone.now()
    return _transition(
        _RESTORE,
        dead_letter_id=dead_letter_id,
        actor=actor,
        ip_address=ip_address,
        reason=reason,
        bulk=bulk,
        source=source,
        updates={
            "archived_at": None,
            "discarded_at": None,
            "expire_at": now + timedelta(days=settings.DEADLETTER_RETENTION_DAYS),
        },
    )


def apply_action(action: str, **kwargs):
    """Dispatch by action name (the bulk runner's per-letter step)."""
    return {
        "replay": replay_dead_letter,
        "archive": archive_dead_letter,
        "discard": discard_dead_letter,
        "restore": restore_dead_letter,
    }[action](**kwargs)
