"""A cause marked "fixed in the next release" (console, API, shell), audited. When work first runs
under another RELEASE_NAME, the housekeeper's `fixed causes` duty claims the mark (one conditional
UPDATE sets fixed_release_started from NULL, so of two housekeepers one does) and starts a canary
replay of the cause's open letters: the bulk runs' own canary, rate and share (deadletters.bulk),
audited as the system acting for whoever marked it. A death under yet another release after that
is a regression (deadletters.alerts.causes)."""

import logging
from urllib.parse import urlencode

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from deadletters.alerts.causes import current_release
from deadletters.audit import record_audit
from deadletters.bulk.control import start_bulk_action
from deadletters.bulk.selection import SCOPE_FILTER, build_selection
from deadletters.models import BulkActionKind, CauseState

logger = logging.getLogger("deadletters.bulk")
RELEASE_CANARY = 10  # replays made first under the new release (fewer when the cause has fewer letters)
DUE_BATCH = 100


class CauseError(ValueError):
    """A cause that cannot be marked: `field` names what, the message (active language) says why."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(message)


class CauseNotFound(Exception):
    pass


def cause_mark_fixed(
    *, fingerprint: str, actor: str, undo: bool = False, source: str = "console",
    ip_address: str | None = None,
) -> tuple[CauseState, bool]:
    """Mark the cause fixed in the next release (or, `undo`, unmark it). Returns the cause and
    whether this call changed it (False: it was marked, or unmarked, already)."""
    release = current_release()
    if not undo and not release:
        raise CauseError("release", _("this site names no release (RELEASE_NAME), so it has no next release"))
    rows = CauseState.objects.filter(fingerprint=fingerprint)
    with transaction.atomic():
        if undo:
            changed = rows.filter(fixed_marked_at__isnull=False).update(
                fixed_marked_at=None, fixed_marked_by="", fixed_marked_release="", fixed_release="",
                fixed_release_started=None,
            )
        else:
            changed = rows.filter(fixed_marked_at__isnull=True).update(
                fixed_marked_at=timezone.now(), fixed_marked_by=actor[:150], fixed_marked_release=release,
                fixed_release="", fixed_release_started=None, regressed_release="",
            )
        cause = rows.first()
        if cause is None:
            raise CauseNotFound(fingerprint)
        if changed:
            record_audit(
                action="cause_unmark_fixed" if undo else "cause_mark_fixed", actor=actor, source=source,
                ip_address=ip_address, item_count=0, details={"fingerprint": fingerprint, "release": release},
            )
    return cause, bool(changed)


def release_replay_fixed_causes() -> str:
    """The housekeeper's duty: each cause marked under another release than this process's gets
    its canary replay, once."""
    release = current_release()
    if not release:
        return "no RELEASE_NAME"
    due = CauseState.objects.filter(
        fixed_marked_at__isnull=False, fixed_release_started__isnull=True
    ).exclude(fixed_marked_release=release)
    started = sum(_replay_under(cause, release) for cause in due.order_by("pk")[:DUE_BATCH])
    return f"{started} fixed cause(s) replayed under {release}" if started else "nothing"


def _replay_under(cause: CauseState, release: str) -> bool:
    with transaction.atomic():
        if not CauseState.objects.filter(
            pk=cause.pk, fixed_marked_at=cause.fixed_marked_at, fixed_release_started__isnull=True
        ).update(fixed_release=release, fixed_release_started=timezone.now()):
            return False  # unmarked meanwhile, or another housekeeper was first
        query = urlencode({"fingerprint": cause.fingerprint})
        selection = build_selection(action=BulkActionKind.REPLAY, scope=SCOPE_FILTER, filter_qs=query)
        total = selection.queryset().count()
        who = cause.fixed_marked_by
        bulk = None
        if total:
            reason = (f"Release {release} started; {who or 'someone'} marked this cause fixed in the next "
                      f"release under {cause.fixed_marked_release}.")
            bulk, _created = start_bulk_action(
                selection=selection, actor=who, ip_address=None, reason=reason,
                canary=min(RELEASE_CANARY, total), source="system",
            )
        record_audit(
            action="cause_release_replay", actor=who, source="system", item_count=total,
            details={"fingerprint": cause.fingerprint, "release": release, "on_behalf_of": who,
                     "marked_under": cause.fixed_marked_release,
                     "bulk": str(bulk.public_id) if bulk else None},
        )
    logger.info("release %s: cause %s marked fixed by %s, %s open letters to replay", release,
                cause.fingerprint[:12], who, total)
    return True
