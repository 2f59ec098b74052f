"""GET /report/dead-letters/groups: the dead-letter list's letters by cause, with deaths per hour and
trend; the list's filters and scope (a client sees only causes, counts and deaths of its own tasks)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from deadletters.models import DeadLetter, DeadLetterStatus
from reports.models import TaskStatus
from reports.services.tokens import create_api_token
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db

GROUPS = "/report/dead-letters/groups"


def client_for(name, *scopes):
    token, raw = create_api_token(name=name, scopes=scopes)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    client.token = token
    return client


def died(*, owner=None, message="orders API unreachable", kind="probe", ago=timedelta(minutes=5), **fields):
    task = make_task(kind=kind, status=TaskStatus.DEAD, attempt=3, owner=owner)
    return make_dead_letter(task=task, error_message=message, created_at=timezone.now() - ago, **fields)


@pytest.fixture
def alice():
    return client_for("alice", "read")


@pytest.fixture
def bob():
    return client_for("bob", "read")


@pytest.fixture
def operator():
    return client_for("ops", "read", "operator")


def by_message(answer) -> dict[str, dict]:
    return {group["sample_message"]: group for group in answer["results"]}


def test_each_cause_with_its_counts_deaths_and_trend(operator, settings):
    for minutes in (5, 10, 15, 20):
        died(ago=timedelta(minutes=minutes))
    died(ago=timedelta(minutes=25), status=DeadLetterStatus.REPLAYED)  # a death, not listed
    died(kind="sales_summary", message="region missing\nsecond line", ago=timedelta(hours=30))

    response = operator.get(GROUPS)

    assert response.status_code == 200
    answer = response.json()
    assert answer["limited"] is False
    start = datetime.fromisoformat(answer["deaths_24h_start"])
    this_hour = timezone.now().astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    assert start == this_hour - timedelta(hours=23)
    orders, region = answer["results"]  # biggest first
    letter = DeadLetter.objects.filter(error_message="orders API unreachable").first()
    assert orders == {
        "fingerprint": letter.fingerprint,
        "error_type": "reports.errors.TransientError",
        "sample_message": "orders API unreachable",
        "count": 4,
        "kinds": ["probe"],
        "first_seen": orders["first_seen"],
        "last_seen": orders["last_seen"],
        "new": False,
        "new_release": None,
        "deaths_24h": orders["deaths_24h"],
        "trend": "rising",
        "console_url": f"{settings.CONSOLE_BASE_URL}/console/dead-letters/?fingerprint={letter.fingerprint}",
        "releases": [],
        "fixed": None,
    }
    assert len(orders["deaths_24h"]) == 24 and sum(orders["deaths_24h"]) == 5
    for i, n in enumerate(orders["deaths_24h"]):
        hour = start + timedelta(hours=i)
        assert n == DeadLetter.objects.filter(
            fingerprint=letter.fingerprint, created_at__gte=hour, created_at__lt=hour + timedelta(hours=1)
        ).count()
    assert region["sample_message"] == "region missing" and region["kinds"] == ["sales_summary"]
    assert region["deaths_24h"] == [0] * 24 and region["trend"] == "steady"


def test_new_causes_are_marked(operator, settings):
    settings.RELEASE_NAME = ""
    from deadletters.alerts.causes import record_death

    record_death(dead_letter=died())
    assert operator.get(GROUPS).json()["results"][0]["new"] is True


def test_a_client_sees_only_its_own_causes_and_counts(alice, bob, operator):
    for _ in range(2):
        died(owner=alice.token, message="shared cause")
    for _ in range(3):
        died(owner=bob.token, message="shared cause")
    died(owner=bob.token, message="bob's secret cause")
    died(owner=bob.token, message="shared cause", status=DeadLetterStatus.ARCHIVED, ago=timedelta(hours=1))

    mine = by_message(alice.get(GROUPS).json())
    theirs = by_message(bob.get(GROUPS).json())
    everyone = by_message(operator.get(GROUPS).json())

    assert set(mine) == {"shared cause"}
    assert mine["shared cause"]["count"] == 2 and sum(mine["shared cause"]["deaths_24h"]) == 2
    assert theirs["shared cause"]["count"] == 3 and sum(theirs["shared cause"]["deaths_24h"]) == 4
    assert "bob's secret cause" in theirs
    assert everyone["shared cause"]["count"] == 5 and sum(everyone["shared cause"]["deaths_24h"]) == 6
    # Asking for another client's cause by its fingerprint finds nothing.
    secret = DeadLetter.objects.get(error_message="bob's secret cause").fingerprint
    assert alice.get(GROUPS, {"fingerprint": secret}).json()["results"] == []


def test_filters_narrow_the_groups(operator):
    died(kind="probe", message="orders API unreachable")
    died(kind="sales_summary", message="orders API unreachable")
    died(kind="sales_summary", message="region missing")
    expired = died(message="long gone", expire_at=timezone.now() - timedelta(minutes=1))

    assert {g["count"] for g in operator.get(GROUPS, {"kind": "sales_summary"}).json()["results"]} == {1}
    prefix = DeadLetter.objects.filter(error_message="region missing").first().fingerprint[:12]
    assert [g["sample_message"] for g in operator.get(GROUPS, {"fingerprint": prefix}).json()["results"]] == [
        "region missing"
    ]
    found = operator.get(GROUPS, {"q": "orders api"}).json()["results"]
    assert [(g["sample_message"], g["count"], g["kinds"]) for g in found] == [
        ("orders API unreachable", 2, ["probe", "sales_summary"])
    ]
    assert expired.fingerprint not in {g["fingerprint"] for g in operator.get(GROUPS).json()["results"]}


@pytest.mark.parametrize(
    ("query", "field", "says"),
    [
        ({"kind": "nope"}, "kind", "must be a report kind"),
        ({"fingerprint": "XYZ"}, "fingerprint", "8 to 40 lowercase hex characters"),
        ({"fingerprint": "abc"}, "fingerprint", "8 to 40 lowercase hex characters"),
        ({"q": "x" * 201}, "q", "at most 200 characters"),
        ({"limit": "10"}, "limit", "unknown query parameter 'limit'"),
        ({"cursor": "1-1"}, "cursor", "unknown query parameter 'cursor'"),
        ({"kind": ["probe", "probe"]}, "kind", "give kind at most once"),
    ],
)
def test_bad_filter_values_answer_400_naming_the_parameter(operator, query, field, says):
    response = operator.get(GROUPS, query)
    assert response.status_code == 400
    assert response.json()["field"] == field and says in response.json()["error"]


def test_scopes_and_sessions(client, django_user_model):
    died()
    assert client_for("submitter", "submit").get(GROUPS).status_code == 403
    assert Client().get(GROUPS).status_code == 401
    staff = django_user_model.objects.create_user("staff", password="pw-123456789", is_staff=True)
    client.force_login(staff)
    assert client.get(GROUPS).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_deadletter"))
    assert client.get(GROUPS).json()["results"][0]["count"] == 1
    assert client.post(GROUPS).status_code == 405


def test_at_most_200_causes_with_the_limited_flag(operator):
    for i in range(200):
        died(error_type=f"reports.errors.Cause{words(i)}")
    assert operator.get(GROUPS).json()["limited"] is False
    died(error_type="reports.errors.OneMore")
    answer = operator.get(GROUPS).json()
    assert len(answer["results"]) == 200 and answer["limited"] is True


def words(i: int) -> str:
    """A name without digits (a fingerprint ignores numbers in a message)."""
    return "".join("abcdefghij"[int(d)] for d in str(i))
