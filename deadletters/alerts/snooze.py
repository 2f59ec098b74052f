"""Snoozing alerts, as an operator action (console and API call these): mute one cause
(fingerprint) or one report kind until a time, with a reason, audited; or a cause until its deaths
cross a threshold (deadletters.alerts.threshold). Deaths it covers are counted, not sent
(deadletters.alerts.outbox.mute_reason); when it ends (its time is up, or an operator lifts it) one
summary says how many died meanwhile."""

import logging
import time
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from deadletters.alerts.outbox import notice
from deadletters.alerts.text import visible
from deadletters.audit import REASON_MAX, record_audit
from deadletters.models import AlertSnooze, CauseState, DeadLetter

logger = logging.getLogger("deadletters.alerts")
MAX_MINUTES = 7 * 24 * 60
THRESHOLD_MAX = 1_000_000
THRESHOLD_MAX_DAYS = 30  # a mute until a threshold that is never crossed ends anyway, with its summary


class SnoozeError(ValueError):
    """Bad snooze input: `field` names it, the message (in the language active where it is raised)
    says what is wrong."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(message)


def snooze_alerts(
    *,
    fingerprint: str = "",
    kind: str = "",
    minutes=None,
    reason: str,
    actor: str,
    source: str = "console",
    ip_address: str | None = None,
    per_minute=None,
    total=None,
) -> AlertSnooze:
    """Mute for `minutes`; or, for a cause, until its deaths go over `per_minute` in a minute or
    `total` in all (deadletters.alerts.threshold), or THRESHOLD_MAX_DAYS have passed."""
    fingerprint, kind = (fingerprint or "").strip(), (kind or "").strip()
    # Stored without control or invisible characters; a reason of nothing else is kept escaped
    # ("\\x97"), as it was given, rather than refused as missing.
    given_reason = (reason or "").strip()
    escaped = given_reason.encode("unicode_escape").decode()
    reason = visible(given_reason, REASON_MAX) or visible(escaped, REASON_MAX)
    given = {"per_minute": per_minute, "total": total}
    thresholds = {name: _threshold(name, value) for name, value in given.items() if value not in (None, "")}
    if not thresholds and "" in given.values():  # the threshold form, sent blank
        raise SnoozeError("per_minute", _("give a number of deaths a minute, in total, or both"))
    if thresholds and kind:
        raise SnoozeError("kind", _("a threshold mutes a cause (fingerprint), not a kind"))
    if bool(fingerprint) == bool(kind):
        raise SnoozeError("fingerprint", _("name either a cause (fingerprint) or a kind, not both"))
    if fingerprint and (len(fingerprint) != 40 or not all(c in "0123456789abcdef" for c in fingerprint)):
        raise SnoozeError("fingerprint", _("a fingerprint is 40 hexadecimal characters"))
    if len(kind) > 64:
        raise SnoozeError("kind", _("a kind has at most %(n)d characters") % {"n": 64})
    if not thresholds:
        try:
            minutes = int(minutes)
        except (TypeError, ValueError):
            raise SnoozeError("minutes", _("minutes must be a whole number")) from None
        if not 1 <= minutes <= MAX_MINUTES:
            raise SnoozeError(
                "minutes", _("minutes must be between 1 and %(max)d (a week)") % {"max": MAX_MINUTES}
            )
        if not reason:
            raise SnoozeError("reason", _("say why the alerts are muted"))
    now = timezone.now()
    with transaction.atomic():
        until = now + (timedelta(days=THRESHOLD_MAX_DAYS) if thresholds else timedelta(minutes=minutes))
        snooze = AlertSnooze.objects.create(
            fingerprint=fingerprint,
            kind=kind,
            until=until,
            reason=reason,
            created_by=actor[:150],
            created_at=now,
            **thresholds,
        )
        details = {"snooze": snooze.pk, "fingerprint": fingerprint, "kind": kind, "until": until.isoformat(),
                   **thresholds}
        record_audit(
            action="snooze_alerts",
            actor=actor,
            source=source,
            ip_address=ip_address,
            item_count=0,
            reason=reason,
            details=details,
        )
    return snooze


def _threshold(field: str, value) -> int:
    """A whole number of deaths from 1 to THRESHOLD_MAX (digits as text too: forms, the shell)."""
    if isinstance(value, float) and value.is_integer():  # JSON Schema's integer: 30.0 is 30
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit() and len(value) < 20:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= THRESHOLD_MAX:
        message = _("the threshold must be a whole number of deaths from 1 to %(max)s")
        raise SnoozeError(field, message % {"max": THRESHOLD_MAX})
    return value


def lift_snooze(
    *, snooze_id: int, actor: str, source: str = "console", ip_address: str | None = None
) -> AlertSnooze | None:
    """End a snooze now (its summary goes out with the next pass); None when it had ended already."""
    now = timezone.now()
    with transaction.atomic():
        if not AlertSnooze.objects.filter(pk=snooze_id, ended_at__isnull=True, until__gt=now).update(
            until=now, ended_by=actor[:150]
        ):
            return None
        snooze = AlertSnooze.objects.get(pk=snooze_id)
        record_audit(
            action="lift_snooze",
            actor=actor,
            source=source,
            ip_address=ip_address,
            item_count=0,
            details={"snooze": snooze.pk, "fingerprint": snooze.fingerprint, "kind": snooze.kind},
        )
    return snooze


def active_snoozes():
    return AlertSnooze.objects.filter(ended_at__isnull=True, until__gt=timezone.now()).order_by("until")


def covered_deaths(snooze: AlertSnooze) -> int:
    scope = Q(fingerprint=snooze.fingerprint) if snooze.fingerprint else Q(kind=snooze.kind)
    return DeadLetter.objects.filter(
        scope, created_at__gte=snooze.created_at, created_at__lt=snooze.until
    ).count()


def announce_ended_snoozes(*, clock=time.time) -> int:
    """One summary per snooze whose time is up; the conditional UPDATE makes it one."""
    now = datetime.fromtimestamp(clock(), tz=UTC)
    announced = 0
    for snooze in AlertSnooze.objects.filter(ended_at__isnull=True, until__lte=now).order_by("id")[:200]:
        cause = (
            CauseState.objects.filter(fingerprint=snooze.fingerprint).first() if snooze.fingerprint else None
        )
        with transaction.atomic():
            if not AlertSnooze.objects.filter(pk=snooze.pk, ended_at__isnull=True).update(ended_at=now):
                continue
            notice(
                {
                    "notice": "snooze_ended",
                    # The cause by its error text, not its id (render.cause_text).
                    "error_type": cause.sample_error_type if cause else "",
                    "message": cause.sample_message if cause else snooze.fingerprint[:12],
                    "fingerprint": snooze.fingerprint,
                    "kind": snooze.kind,
                    "reason": snooze.reason,
                    "deaths": covered_deaths(snooze),
                    "started_at": snooze.created_at.isoformat(),
                    "until": snooze.until.isoformat(),
                    "lifted_by": snooze.ended_by,
                },
                fingerprint=snooze.fingerprint,
            )
        announced += 1
    return announced
