"""Each API token's submit budget (API_SUBMIT_RATE): a batch of N counts N, 429 with Retry-After past
it, shared through the real Redis; what a request does not create is not charged."""

import json

import pytest
from django.test import Client

from reports.models import ReportTask
from reports.services.tokens import create_api_token

pytestmark = pytest.mark.django_db

SALES = {"kind": "sales_summary"}


def client_for(name):
    raw = create_api_token(name=name, scopes=("submit", "read"))[1]
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def submit(client, body=None, **headers):
    return client.post(
        "/report/task/submit", data=json.dumps(body or SALES), content_type="application/json", headers=headers
    )


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


def test_sessions_and_an_unset_budget_are_not_limited(rate, settings, django_user_model):
    rate(1)
    staff = django_user_model.objects.create_user("ops", password="pw-123456789", is_staff=True)
    session = Client()
    session.force_login(staff)
    assert [submit(session).status_code for _ in range(3)] == [201] * 3

    settings.API_SUBMIT_RATE = None
    alice = client_for("alice")
    assert [submit(alice).status_code for _ in range(3)] == [201] * 3


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
