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

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from deadletters.audit import record_audit, require_reason
from deadletters.models import BulkAction, DeadLetter, DeadLetterStatus
from deadletters.services.letters import DeadLetterNotFound
from reports.wording import status_word, verb_word

ARCHIVABLE_STATUSES = (DeadLetterStatus.OPEN,)
DISCARDABLE_STATUSES = (DeadLetterStatus.OPEN,)
RESTORABLE_STATUSES = (DeadLetterStatus.ARCHIVED, DeadLetterStatus.DISCARDED)


class DeadLetterConflict(Exception):
    """The letter is not in a state this action applies to (someone else got there first)."""

    def __init__(self, letter: DeadLetter, action: str):
        self.letter = letter
        self.action = action
        when = _changed_at(letter)
        values = {
            "id": letter.pk,
            "status": status_word(letter.status),
            "when": f"{when:%Y-%m-%d %H:%M:%S} UTC" if when else "",
            "who": letter.replayed_by,
        }
        if when and letter.status == DeadLetterStatus.REPLAYED and letter.replayed_by:
            detail = _("dead letter %(id)s is %(status)s since %(when)s (replayed by %(who)s)") % values
        elif when:
            detail = _("dead letter %(id)s is %(status)s since %(when)s") % values
        else:
            detail = _("dead letter %(id)s is %(status)s") % values
        super().__init__(_("cannot %(verb)s: %(detail)s") % {"verb": verb_word(action), "detail": detail})


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
    from_statuses: tuple
    to_status: str
    fields: Callable[[datetime], dict]  # what the move sets besides the status, given the time of it


def _fresh_retention(now: datetime) -> dict:
    return {
        "archived_at": None,
        "discarded_at": None,
        "expire_at": now + timedelta(days=settings.DEADLETTER_RETENTION_DAYS),
    }


TRANSITIONS = {
    "archive": _Transition(ARCHIVABLE_STATUSES, DeadLetterStatus.ARCHIVED, lambda now: {"archived_at": now}),
    # "never replay this"
    "discard": _Transition(DISCARDABLE_STATUSES, DeadLetterStatus.DISCARDED,
                           lambda now: {"discarded_at": now}),
    "restore": _Transition(RESTORABLE_STATUSES, DeadLetterStatus.OPEN, _fresh_retention),
}
# Taking a letter out of sight needs a reason when DEADLETTER_REQUIRE_REASON is on; restoring does not.
REASONED_ACTIONS = ("archive", "discard")


def change_dead_letter(
    *,
    action: str,
    dead_letter_id: int,
    actor: str,
    ip_address: str | None,
    reason: str = "",
    bulk: BulkAction | None = None,
    source: str = "console",
) -> DeadLetter:
    """One of TRANSITIONS on one letter, audited. Raises DeadLetterNotFound, DeadLetterConflict (the
    letter is not in a from-state: someone got there first) or ReasonRequired."""
    transition = TRANSITIONS[action]
    if bulk is None and action in REASONED_ACTIONS:
        require_reason(action=action, reason=reason)
    with transaction.atomic():
        changed = DeadLetter.objects.filter(pk=dead_letter_id, status__in=transition.from_statuses).update(
            status=transition.to_status, **transition.fields(timezone.now())
        )
        letter = _get_letter(dead_letter_id)
        if not changed:
            raise DeadLetterConflict(letter, action)
        record_audit(
            action=action,
            actor=actor,
            source=source,
            ip_address=ip_address,
            task=letter.task,
            dead_letter=letter,
            reason=reason,
            details={"bulk": str(bulk.public_id)} if bulk is not None else {},
        )
    return letter
