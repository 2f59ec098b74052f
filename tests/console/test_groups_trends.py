"""The groups page: each cause's deaths over 24 h as a sparkline, with the numbers in words, and its
trend word; computed in a fixed number of queries however many causes the page shows."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from deadletters.models import DeadLetterStatus
from tests.conftest import operators_group
from tests.factories import make_dead_letter

pytestmark = pytest.mark.django_db

GROUPS = "/console/dead-letters/groups/"


@pytest.fixture
def op_client(client):
    user = get_user_model().objects.create_user("op", "op@example.invalid", "pw-op-12345", is_staff=True)
    user.groups.add(operators_group())
    client.force_login(user)
    return client


def rows(body: str) -> list[str]:
    return re.findall(r"<tr>.*?</tr>", body.split("<tbody>", 1)[1], flags=re.S)


def test_each_cause_shows_its_sparkline_in_words_and_its_trend(op_client):
    now = timezone.now()
    for minutes in (10, 20, 30, 40):  # 4 in the last 6 hours, none before: rising
        make_dead_letter(error_message="orders API unreachable", created_at=now - timedelta(minutes=minutes))
    for hours in (7, 8, 9):  # 3 in the 6 hours before, none since: falling
        make_dead_letter(error_message="region missing", created_at=now - timedelta(hours=hours))
    make_dead_letter(error_message="disk full", created_at=now - timedelta(days=3))  # quiet for a day

    body = op_client.get(GROUPS).content.decode()

    rising, falling, quiet = rows(body)
    assert "orders API unreachable" in rising and 'class="badge trend trend-rising"' in rising
    assert "4 deaths in the last 24 hours; per hour, oldest first: " in rising
    assert "deaths in the last 6 hours: 4; in the 6 hours before: 0" in rising
    assert rising.count("<rect ") >= 1
    assert "region missing" in falling and "trend-falling" in falling and "falling" in falling
    assert "3 deaths in the last 24 hours" in falling
    assert "disk full" in quiet and "trend-steady" in quiet
    assert "No deaths in the last 24 hours." in quiet and "<rect " not in quiet


def test_the_words_give_every_hour_oldest_first(op_client):
    now = timezone.now()
    letter = make_dead_letter(created_at=now)
    make_dead_letter(created_at=now - timedelta(hours=23))

    body = op_client.get(GROUPS).content.decode()

    label = re.search(r'aria-label="(\d+ deaths in the last 24 hours; per hour, oldest first: [^"]*)"',
                      body)[1]
    counts = [int(n) for n in label.split(": ", 1)[1].rstrip(".").split(", ")]
    assert len(counts) == 24 and counts[0] == 1 and counts[-1] == 1 and sum(counts) == 2
    assert letter.fingerprint[:10] in body


def test_queries_do_not_grow_with_the_causes_on_the_page(op_client):
    def queries_for_page() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert op_client.get(GROUPS).status_code == 200
        return len(captured)

    make_dead_letter(error_message="first cause")
    make_dead_letter(error_message="second cause")
    queries_for_page()  # the session and the filter choices' cache are read once
    few = queries_for_page()
    for i in range(12):
        make_dead_letter(error_message=f"another cause {i} here", status=DeadLetterStatus.OPEN)
    assert queries_for_page() == few


def test_htmx_partial_carries_the_sparklines(op_client):
    make_dead_letter(error_message="orders API unreachable")
    body = op_client.get(GROUPS, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in body and 'class="sparkline"' in body and "trend-" in body
