"""Each API client's budgets: submits (API_SUBMIT_RATE; a batch of N counts N) and replays
(API_REPLAY_RATE), 429 with Retry-After past them, shared through the real Redis; what a request
does not do is not charged. A console user calling the API with a session has budgets too."""

import json

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from deadletters.models import AuditEntry
from reports.models import ReportTask, TaskStatus
from reports.services.tokens import create_api_token
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db

SALES = {"kind": "sales_summary"}


def client_for(name):
    raw = create_api_token(name=name, scopes=("submit", "read"))[1]
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def submit(client, body=None, **headers):
    return client.post("/report/task/submit", data=json.dumps(body or SALES), content_type="application/json",
                       headers=headers)


def batch(client, n):
    return client.post(
        "/report/batch/submit", data=json.dumps({"items": [SALES] * n}), content_type="application/json"
    )


@pytest.fixture
def rate(settings):
    def set_rate(count, seconds=60):
        settings.API_SUBMIT_RATE = (count, seconds)

    return set_rate


def test_past_the_budget_a_submit_is_429_with_retry_after(rate):
    rate(3)
    alice = client_for("alice")

    assert [submit(alice).status_code for _ in range(3)] == [201, 201, 201]
    refused = submit(alice)

    assert refused.status_code == 429
    assert refused.json()["field"] is None and "budget" in refused.json()["error"]
    assert 1 <= int(refused["Retry-After"]) <= 20  # one task of a 3-per-minute budget comes back in 20 s
    assert ReportTask.objects.count() == 3


def test_each_token_has_its_own_budget(rate):
    rate(1)
    alice, bob = client_for("alice"), client_for("bob")

    assert submit(alice).status_code == 201
    assert submit(alice).status_code == 429
    assert submit(bob).status_code == 201


def test_a_batch_of_n_counts_n(rate):
    rate(5)
    alice = client_for("alice")

    assert batch(alice, 4).status_code == 201
    assert submit(alice).status_code == 201
    assert submit(alice).status_code == 429
    assert batch(alice, 1).status_code == 429


def test_a_batch_larger_than_the_budget_is_taken_once_then_paid_back(rate):
    rate(5)
    alice = client_for("alice")

    assert batch(alice, 20).status_code == 201
    refused = submit(alice)

    assert refused.status_code == 429
    # 20 tasks at 12 s each: 240 s of budget spent; a task gets in again once 48 s are left to pay.
    assert 185 <= int(refused["Retry-After"]) <= 192


def test_refused_submits_and_idempotent_repeats_cost_nothing(rate):
    rate(2)
    alice = client_for("alice")

    assert submit(alice, Idempotency_Key="k").status_code == 201
    for _ in range(5):
        assert submit(alice, Idempotency_Key="k").status_code == 200
        assert submit(alice, {"kind": "sales_summary", "params": {"format": "pdf"}}).status_code == 422
        assert batch(alice, 0).status_code == 422
    assert submit(alice).status_code == 201
    assert submit(alice).status_code == 429


def _session_of(django_user_model, name, *codenames):
    user = django_user_model.objects.create_user(name, password="pw-123456789", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    session = Client()
    session.force_login(user)
    return session


def test_sessions_have_a_budget_of_their_own_per_user(rate, django_user_model):
    rate(2)
    ops = _session_of(django_user_model, "ops", "add_reporttask")
    other = _session_of(django_user_model, "other", "add_reporttask")

    assert [submit(ops).status_code for _ in range(3)] == [201, 201, 429]
    refused = submit(ops)
    assert refused.status_code == 429 and "console user's submit budget" in refused.json()["error"]
    assert int(refused["Retry-After"]) >= 1
    assert batch(ops, 1).status_code == 429
    assert submit(other).status_code == 201
    assert ReportTask.objects.count() == 3


def test_an_unset_budget_is_not_limited(settings):
    settings.API_SUBMIT_RATE = None
    alice = client_for("alice")
    assert [submit(alice).status_code for _ in range(3)] == [201] * 3


# --- replays ---------------------------------------------------------------------------------


def replay(client, task):
    return client.post(f"/report/task/{task.public_id}/replay", content_type="application/json")


def test_past_the_replay_budget_a_replay_is_429_and_nothing_is_replayed(settings):
    """A client looping replay -> death -> alert is stopped at its budget."""
    settings.API_REPLAY_RATE = (2, 3600)
    raw = create_api_token(name="replayer", scopes=("replay", "operator"))[1]
    alice = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    letters = [make_dead_letter() for _ in range(3)]

    assert [replay(alice, letter.task).status_code for letter in letters[:2]] == [200, 200]
    refused = replay(alice, letters[2].task)

    assert refused.status_code == 429
    assert "replay budget (2 replays per 3600 s)" in refused.json()["error"]
    assert 1700 <= int(refused["Retry-After"]) <= 1800  # one replay of a 2-per-hour budget: 30 minutes
    letters[2].task.refresh_from_db()
    assert letters[2].task.status == TaskStatus.DEAD
    assert AuditEntry.objects.filter(action="replay").count() == 2
    other_token = create_api_token(name="other", scopes=("replay", "operator"))[1]
    other = Client(HTTP_AUTHORIZATION=f"Bearer {other_token}")
    assert replay(other, letters[2].task).status_code == 200


def test_refused_replays_cost_nothing_and_sessions_spend_their_own(settings, django_user_model):
    settings.API_REPLAY_RATE = (1, 3600)
    raw = create_api_token(name="replayer", scopes=("replay", "operator"))[1]
    alice = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    letter, second = make_dead_letter(), make_dead_letter()
    running = make_task(status=TaskStatus.RUNNING, attempt=1)

    for _ in range(3):
        assert replay(alice, running).status_code == 409
    assert replay(alice, letter.task).status_code == 200
    assert replay(alice, letter.task).status_code == 429  # the budget is spent before the 409 is found

    ops = _session_of(django_user_model, "ops", "replay_deadletter")
    ops.get("/console/login/")
    token = ops.cookies["csrftoken"].value
    answers = [
        ops.post(f"/report/task/{task.public_id}/replay", content_type="application/json",
                 headers={"X-CSRFToken": token}).status_code
        for task in (second.task, make_dead_letter().task)
    ]
    assert answers == [200, 429]


def test_without_redis_the_budget_is_not_enforced(rate, settings):
    rate(1)
    alice = client_for("alice")
    from transport.connection import _redis

    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    _redis.cache_clear()
    try:
        assert [submit(alice).status_code for _ in range(2)] == [201, 201]
    finally:
        _redis.cache_clear()
