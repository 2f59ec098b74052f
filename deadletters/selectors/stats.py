"""Counts and trends of dead letters: by status, deaths per hour, the biggest open causes."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import Count
from django.db.models.functions import TruncHour
from django.utils import timezone

from config.keyset import capped_count
from deadletters.filters import DeadLetterFilters
from deadletters.models import BulkAction, BulkActionStatus, DeadLetter, DeadLetterStatus
from deadletters.selectors.letters import FingerprintGroup, fingerprint_groups


def dead_letter_status_counts() -> dict[str, int]:
    counts = {status: 0 for status in DeadLetterStatus.values}
    for row in DeadLetter.objects.order_by().values("status").annotate(n=Count("id")):
        counts[row["status"]] = row["n"]
    return counts


def open_letters_overview(*, now: datetime | None = None) -> dict:
    """The oldest open dead letter and how many open ones the archiver takes within 24 h."""
    now = now or timezone.now()
    open_letters = DeadLetter.objects.filter(status=DeadLetterStatus.OPEN)
    oldest = open_letters.order_by("created_at", "id").values("id", "created_at").first()
    expiring, expiring_capped = capped_count(open_letters.filter(expire_at__lte=now + timedelta(hours=24)))
    return {"oldest": oldest, "expiring_24h": expiring, "expiring_capped": expiring_capped}


@dataclass
class Bucket:
    start: datetime
    count: int


def deaths_per_hour(*, hours: int, now: datetime | None = None) -> list[Bucket]:
    """Dead letters created per hour over the last `hours` hours, oldest first, empty hours as 0.

    GROUP BY TruncHour in the database; only one row per non-empty hour comes back.
    """
    start, end = _hour_window(hours, now)
    rows = (
        _created_between(start, end)
        .annotate(hour=TruncHour("created_at", tzinfo=UTC))
        .order_by()
        .values("hour")
        .annotate(n=Count("id"))
    )
    by_hour = {_utc(row["hour"]): row["n"] for row in rows}
    return [Bucket(start=moment, count=by_hour.get(moment, 0)) for moment in _hours(start, hours)]


def deaths_per_hour_by_kind(*, hours: int, now: datetime | None = None) -> dict[str | None, list[int]]:
    """Dead letters created per hour over the last `hours` hours, oldest first: {None: every kind,
    kind: that kind} (kinds without a death in the window are absent). One GROUP BY (kind, hour)."""
    start, end = _hour_window(hours, now)
    rows = (
        _created_between(start, end)
        .annotate(hour=TruncHour("created_at", tzinfo=UTC))
        .order_by()
        .values_list("kind", "hour")
        .annotate(n=Count("id"))
    )
    moments = {moment: i for i, moment in enumerate(_hours(start, hours))}
    counts: dict[str | None, list[int]] = {None: [0] * hours}
    for kind, hour, n in rows:
        i = moments[_utc(hour)]
        counts.setdefault(kind, [0] * hours)[i] += n
        counts[None][i] += n
    return counts


def _created_between(start: datetime, end: datetime):
    # Every status named: the (status, created_at) index is then four range scans of the window,
    # not a walk through the whole index filtering on its second column.
    return DeadLetter.objects.filter(created_at__gte=start, created_at__lt=end,
                                     status__in=DeadLetterStatus.values)


def _hour_window(hours: int, now: datetime | None) -> tuple[datetime, datetime]:
    now = now or timezone.now()
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return (end - timedelta(hours=hours)).astimezone(UTC), end.astimezone(UTC)


def _hours(start: datetime, hours: int) -> list[datetime]:
    return [start + timedelta(hours=i) for i in range(hours)]


def _utc(hour: datetime) -> datetime:
    if timezone.is_naive(hour):
        hour = timezone.make_aware(hour, UTC)
    return hour.astimezone(UTC)


def top_fingerprints(*, limit: int = 8) -> list[FingerprintGroup]:
    return fingerprint_groups(DeadLetterFilters(status=DeadLetterStatus.OPEN), limit=limit)


def paused_bulk_actions(*, limit: int = 10) -> list[BulkAction]:
    """Bulk runs waiting in `paused` (by an operator, or by themselves when replays died again)."""
    return list(
        BulkAction.objects.filter(status=BulkActionStatus.PAUSED)
        .only("public_id", "action", "paused_reason", "processed", "total", "updated_at")
        .order_by("-updated_at", "-id")[:limit]
    )
