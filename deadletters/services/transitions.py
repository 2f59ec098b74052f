"""Operator actions on one dead letter besides replay: archive, discard, restore. Every state
change is one conditional UPDATE; every action writes an AuditEntry.

Transitions (DESIGN.md, DeadLetter):
    open -> replayed | archived | discarded
    archived | discarded -> replayed (replay) | open (restore)

Restore resets `expire_at` to now + DEADLETTER_RETENTION_DAYS: a letter an operator brought back
gets a full retention period, so the archiver does not re-archive it on its next cron run.

Bulk actions (deadletters.bulk.apply) apply the same transitions to a batch of letters as a set,
with the same from-states and the same per-letter audit entries, each naming its bulk run.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from deadletters.audit import record_audit, require_reason
from deadletters.models import BulkAction, DeadLetter, DeadLetterStatus
from deadletters.services.letters import DeadLetterNotFound

ARCHIVABLE_STATUSES = (DeadLetterStatus.OPEN,)
DISCARDABLE_STATUSES = (DeadLetterStatus.OPEN,)
RESTORABLE_STATUSES = (DeadLetterStatus.ARCHIVED, DeadLetterStatus.DISCARDED)


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


@dataclass(frozen=True)
class _Transition:
    action: str
    from_statuses: tuple
    to_status: str


# Taking a letter out of sight needs a reason when DEADLETTER_REQUIRE_REASON is on; restoring does not.
REASONED_ACTIONS = ("archive", "discard")
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
    if bulk is None and transition.action in REASONED_ACTIONS:
        require_reason(action=transition.action, reason=reason)
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
            details={"bulk": str(bulk.public_id)} if bulk is not None else {},
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
