"""What an operator may ask of a bulk run besides its selection: a canary (its size and the share
of it that must succeed) and a start time. Shape errors raise InvalidBulkRequest naming the field;
what is refused only for what is true now (the selection is smaller than the canary, the time has
passed or is too far ahead) raises BulkRequestConflict."""

import math
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from deadletters.bulk.selection import BulkRequestConflict, InvalidBulkRequest
from deadletters.models import BulkActionKind

EXAMPLE = "2026-11-25T02:00+08:00"


def parse_start_at(value: object, *, now: datetime | None = None) -> datetime | None:
    """An ISO 8601 date and time with its UTC offset (API, shell), checked by check_start_at.
    Blank or None: no schedule, start now."""
    if value is None or value == "":
        return None
    shape = _("must be an ISO 8601 date and time with its UTC offset, such as %(example)s") % {
        "example": EXAMPLE
    }
    if not isinstance(value, str) or len(value) > 64:
        raise InvalidBulkRequest("start_at", shape)
    try:
        moment = parse_datetime(value.strip())
    except ValueError:  # the shape of a date, not a real one (month 13, 25:00)
        moment = None
    if moment is None:
        raise InvalidBulkRequest("start_at", shape)
    return check_start_at(moment, now=now)


def check_start_at(moment: datetime, *, now: datetime | None = None) -> datetime:
    """A start time must say which moment it is (an offset), lie ahead, and not too far ahead."""
    if timezone.is_naive(moment):
        raise InvalidBulkRequest(
            "start_at",
            _("must include its UTC offset (such as +08:00, or Z for UTC): %(value)s is ambiguous")
            % {"value": moment.isoformat()},
        )
    now = now or timezone.now()
    if moment <= now:
        raise BulkRequestConflict(
            "start_at",
            _("%(value)s is in the past (it is %(now)s now)")
            % {"value": moment.isoformat(), "now": now.replace(microsecond=0).isoformat()},
        )
    days = settings.BULK_SCHEDULE_MAX_DAYS
    if moment > now + timedelta(days=days):
        raise BulkRequestConflict(
            "start_at", _("may be at most %(days)d days ahead") % {"days": days}
        )
    return moment


def validate_canary(value: object, *, action: str) -> int:
    """The canary's size k (0: none). A whole number from 1 to BULK_CANARY_MAX, replays only;
    text of digits is accepted for the console's form and the shell."""
    if value is None or value == "":
        return 0
    message = _("must be a whole number from 1 to %(max)d") % {"max": settings.BULK_CANARY_MAX}
    if isinstance(value, bool):
        raise InvalidBulkRequest("canary", message)
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON Schema's integer: 5.0 is 5
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 20:
        value = int(value.strip())
    if not isinstance(value, int) or not 1 <= value <= settings.BULK_CANARY_MAX:
        raise InvalidBulkRequest("canary", message)
    if action != BulkActionKind.REPLAY:
        raise InvalidBulkRequest("canary", _("only a replay can start with a canary"))
    return value


def check_canary_fits(size: int, total: int) -> None:
    if size > total:
        raise BulkRequestConflict(
            "canary",
            _("is %(size)d, but the selection holds only %(total)d dead letters that can be replayed")
            % {"size": size, "total": total},
        )


def validate_canary_success(value: object) -> float:
    """The share of the canary's replays that must end done for the run to carry on: 0 to 1."""
    if value is None or value == "":
        return min(1.0, float(settings.BULK_CANARY_SUCCESS))
    message = _("must be a number from 0 to 1 (0.8: four in five must succeed)")
    if isinstance(value, bool):
        raise InvalidBulkRequest("canary_success", message)
    try:
        share = float(value)
    except (TypeError, ValueError):
        raise InvalidBulkRequest("canary_success", message) from None
    if not math.isfinite(share) or not 0 <= share <= 1:
        raise InvalidBulkRequest("canary_success", message)
    return share


def needed_successes(share: float, replayed: int) -> int:
    """How many of `replayed` canary replays must end done: the share, rounded up."""
    return min(replayed, math.ceil(share * replayed - 1e-9))
