"""How each cause (fingerprint) is dying lately: its deaths per hour over the last 24 hours (a
sparkline) and a trend word, rising, steady or falling.

A death is a dead letter's creation, whatever became of the letter since (replayed, archived,
discarded): replaying the open letters of a cause must not make it look as if it stopped dying.

The trend compares the deaths of the last TREND_WINDOW (6 h) with those of the 6 h before:

- rising: the last 6 h had at least TREND_MIN_DEATHS (3) deaths and at least TREND_FACTOR (2)
  times as many as the 6 h before;
- falling: the 6 h before had at least 3 deaths and at least twice as many as the last 6 h;
- steady: anything else, including too few deaths to tell (1 against 0 is not "rising").

The windows roll with the clock (the last 6 h end now); the sparkline's buckets are clock hours
(UTC), the last one the current hour so far, as the dashboard's chart.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import Count, Q, QuerySet
from django.db.models.functions import TruncHour
from django.utils import timezone

SPARKLINE_HOURS = 24
TREND_WINDOW = timedelta(hours=6)
TREND_MIN_DEATHS = 3
TREND_FACTOR = 2

RISING, STEADY, FALLING = "rising", "steady", "falling"
TRENDS = (RISING, STEADY, FALLING)


def trend_of(recent: int, before: int) -> str:
    """The trend word for `recent` deaths in the last window against `before` in the one before it."""
    if recent >= TREND_MIN_DEATHS and recent >= TREND_FACTOR * before:
        return RISING
    if before >= TREND_MIN_DEATHS and before >= TREND_FACTOR * recent:
        return FALLING
    return STEADY


@dataclass(frozen=True)
class CauseTrend:
    deaths_24h: tuple[int, ...]  # SPARKLINE_HOURS counts, oldest hour first
    recent: int  # deaths in the last TREND_WINDOW
    before: int  # deaths in the TREND_WINDOW before that
    trend: str

    @property
    def total(self) -> int:
        return sum(self.deaths_24h)

    @property
    def peak(self) -> int:
        return max(self.deaths_24h)


QUIET = CauseTrend(deaths_24h=(0,) * SPARKLINE_HOURS, recent=0, before=0, trend=STEADY)


def sparkline_start(now: datetime) -> datetime:
    """The start of the first hourly bucket: the current clock hour (UTC) is the last of them."""
    hour = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return hour - timedelta(hours=SPARKLINE_HOURS - 1)


def cause_trends(letters: QuerySet, fingerprints, *, now: datetime | None = None) -> dict[str, CauseTrend]:
    """The trend of each of `fingerprints` among `letters` (a DeadLetter QuerySet, already narrowed
    to what the caller may see), in one grouped query: (fingerprint, hour) -> counts. The
    fingerprint-and-time index (dl_fingerprint_created) bounds it to the last 24 h of these causes,
    however many letters the table holds. Causes without deaths in 24 h get QUIET."""
    fingerprints = list(fingerprints)
    if not fingerprints:
        return {}
    now = now or timezone.now()
    start = sparkline_start(now)
    end = start + timedelta(hours=SPARKLINE_HOURS)
    recent_from, before_from = now - TREND_WINDOW, now - 2 * TREND_WINDOW
    rows = (
        letters.filter(fingerprint__in=fingerprints, created_at__gte=start, created_at__lt=end)
        .annotate(hour=TruncHour("created_at", tzinfo=UTC))
        .order_by()
        .values("fingerprint", "hour")
        .annotate(
            # Counting created_at (never null), not id: the index on (fingerprint, created_at) then
            # holds every column the query reads, and PostgreSQL may answer from it alone.
            n=Count("created_at"),
            recent=Count("created_at", filter=Q(created_at__gte=recent_from)),
            before=Count("created_at", filter=Q(created_at__gte=before_from, created_at__lt=recent_from)),
        )
    )
    counts: dict[str, list[int]] = {}
    windows: dict[str, list[int]] = {}
    for row in rows:
        hour = row["hour"]
        if timezone.is_naive(hour):
            hour = timezone.make_aware(hour, UTC)
        index = int((hour.astimezone(UTC) - start) / timedelta(hours=1))
        if not 0 <= index < SPARKLINE_HOURS:
            continue
        counts.setdefault(row["fingerprint"], [0] * SPARKLINE_HOURS)[index] += row["n"]
        window = windows.setdefault(row["fingerprint"], [0, 0])
        window[0] += row["recent"]
        window[1] += row["before"]
    trends = {}
    for fp in fingerprints:
        if fp not in counts:
            trends[fp] = QUIET
            continue
        recent, before = windows[fp]
        trends[fp] = CauseTrend(
            deaths_24h=tuple(counts[fp]), recent=recent, before=before, trend=trend_of(recent, before)
        )
    return trends


def attach_trends(groups, letters: QuerySet, *, now: datetime | None = None):
    """Set `trend` on each FingerprintGroup from `letters` (the deaths to count: whatever the
    groups were narrowed by, except the letters' status). Returns the groups."""
    trends = cause_trends(letters, [group.fingerprint for group in groups], now=now)
    for group in groups:
        group.trend = trends[group.fingerprint]
    return groups
