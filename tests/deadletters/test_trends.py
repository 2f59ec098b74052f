"""A cause's deaths per hour over 24 h and its trend word (deadletters.selectors.trends)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import Q

from deadletters.filters import parse_dead_letter_filters
from deadletters.models import DeadLetter, DeadLetterStatus
from deadletters.selectors.letters import fingerprint_groups_with_trends
from deadletters.selectors.trends import (
    FALLING,
    QUIET,
    RISING,
    SPARKLINE_HOURS,
    STEADY,
    cause_trends,
    sparkline_start,
    trend_of,
)
from tests.factories import make_dead_letter

NOW = datetime(2026, 11, 24, 14, 20, 30, tzinfo=UTC)


# --- the rule -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recent", "before", "trend"),
    [
        (0, 0, STEADY),  # nothing at all
        (1, 0, STEADY),  # one death against none is no rise
        (2, 0, STEADY),  # below the minimum of 3
        (3, 0, RISING),  # the minimum, against nothing
        (3, 1, RISING),
        (6, 3, RISING),  # exactly twice as many
        (5, 3, STEADY),  # more, but not twice
        (10, 10, STEADY),
        (0, 2, STEADY),  # too few before to call it a fall
        (0, 3, FALLING),
        (1, 3, FALLING),
        (2, 3, STEADY),
        (3, 6, FALLING),  # exactly half
        (4, 6, STEADY),
        (100, 49, RISING),
        (100, 51, STEADY),
    ],
)
def test_trend_rule(recent, before, trend):
    assert trend_of(recent, before) == trend


def test_the_sparkline_ends_with_the_current_clock_hour():
    assert sparkline_start(NOW) == datetime(2026, 11, 23, 15, 0, tzinfo=UTC)
    assert sparkline_start(NOW.replace(minute=0, second=0)) == datetime(2026, 11, 23, 15, 0, tzinfo=UTC)


# --- counted in the database ------------------------------------------------------------------


def died(at: datetime, *, message="orders API unreachable", **fields) -> DeadLetter:
    return make_dead_letter(error_message=message, created_at=at, **fields)


@pytest.mark.django_db
def test_sparkline_counts_equal_the_database_and_the_windows_roll_with_the_clock(django_assert_num_queries):
    cause = died(NOW - timedelta(minutes=5)).fingerprint
    # Last 6 h (from NOW - 6 h, inclusive): 4 deaths, one of them replayed since (still a death).
    died(NOW - timedelta(hours=6))
    died(NOW - timedelta(hours=2), status=DeadLetterStatus.REPLAYED)
    died(NOW - timedelta(hours=1, minutes=1))
    # The 6 h before: 1 death; then older ones outside both windows but inside 24 h.
    died(NOW - timedelta(hours=12))
    died(NOW - timedelta(hours=12, seconds=1))
    died(NOW - timedelta(hours=20), status=DeadLetterStatus.ARCHIVED)
    died(NOW - timedelta(hours=23, minutes=20))  # 15:00 yesterday: the first bucket
    # Not counted: before the first bucket, another cause.
    died(NOW - timedelta(hours=23, minutes=21))
    other = died(NOW - timedelta(hours=1), message="region missing").fingerprint

    with django_assert_num_queries(1):
        trends = cause_trends(DeadLetter.objects.all(), [cause, other, "0" * 40], now=NOW)

    trend = trends[cause]
    start = sparkline_start(NOW)
    expected = [
        DeadLetter.objects.filter(
            fingerprint=cause,
            created_at__gte=start + timedelta(hours=i),
            created_at__lt=start + timedelta(hours=i + 1),
        ).count()
        for i in range(SPARKLINE_HOURS)
    ]
    assert list(trend.deaths_24h) == expected
    assert trend.total == 8 and expected[0] == 1 and expected[-1] == 1
    assert (trend.recent, trend.before) == (4, 1)
    assert trend.trend == RISING
    assert trends[other].deaths_24h[-2] == 1 and trends[other].trend == STEADY
    assert trends["0" * 40] == QUIET


@pytest.mark.django_db
def test_a_cause_that_stopped_dying_is_falling():
    for hours in (7, 8, 9, 10):
        died(NOW - timedelta(hours=hours))
    died(NOW - timedelta(hours=1))
    cause = DeadLetter.objects.first().fingerprint

    trend = cause_trends(DeadLetter.objects.all(), [cause], now=NOW)[cause]

    assert (trend.recent, trend.before, trend.trend) == (1, 4, FALLING)


@pytest.mark.django_db
def test_groups_count_deaths_under_the_pages_filters_except_the_status(django_assert_max_num_queries):
    now = datetime.now(UTC)
    for _ in range(3):
        died(now - timedelta(minutes=30), kind="probe")
    died(now - timedelta(minutes=20), kind="probe", status=DeadLetterStatus.REPLAYED)
    died(now - timedelta(minutes=10), kind="http_export")  # same cause, another kind
    for i in range(5):  # more causes must not mean more queries
        died(now - timedelta(hours=i), message=f"cause number {i} failed")

    filters = parse_dead_letter_filters({"kind": "probe"})
    with django_assert_max_num_queries(5):
        groups = fingerprint_groups_with_trends(filters, now=now)

    group = next(g for g in groups if g.count == 3)
    assert group.trend.deaths_24h[-1] + group.trend.deaths_24h[-2] == 4  # the replayed one counts
    assert group.trend.total == DeadLetter.objects.filter(
        Q(fingerprint=group.fingerprint, kind="probe")
    ).count()
    assert group.trend.trend == RISING
    assert all(g.trend is not None for g in groups)
