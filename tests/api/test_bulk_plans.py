"""A bulk run's start time and a replay's canary through the API: every bad value is refused with
a message naming the field and nothing is written; what is refused only for what is true now (a
time that passed, a canary larger than the selection) is a 409; the status shows the schedule and
the canary's phase and counts."""

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from deadletters.bulk.canary import decide_canaries
from deadletters.models import AuditEntry, BulkAction, BulkActionStatus, DeadLetter
from reports.models import ReportTask, TaskStatus
from reports.services.tokens import create_api_token
from tests.deadletters.bulk.test_actions import letters, run
from tests.factories import make_dead_letter

pytestmark = pytest.mark.django_db

START = "/report/bulk/start"


@pytest.fixture
def operator():
    raw = create_api_token(name="ops", scopes=("read", "replay", "operator"))[1]
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def post(client, path, body):
    return client.post(path, data=json.dumps(body), content_type="application/json")


def replay(**plan) -> dict:
    return {"action": "replay", "filter": {"kind": "probe"}, "reason": "upstream fixed", **plan}


def in_hours(hours: float) -> str:
    return (timezone.now() + timedelta(hours=hours)).isoformat()


@pytest.mark.parametrize(
    "plan, status, field, message",
    [
        ({"canary": 0}, 422, "canary", "must be a whole number from 1 to 1000"),
        ({"canary": -3}, 422, "canary", "must be a whole number from 1 to 1000"),
        ({"canary": 2.5}, 422, "canary", "must be a whole number"),
        ({"canary": "3"}, 422, "canary", "must be a number"),
        ({"canary": True}, 422, "canary", "must be a number"),
        ({"canary": 1001}, 422, "canary", "must be a whole number from 1 to 1000"),
        ({"canary": 6}, 409, "canary", "is 6, but the selection holds only 5 dead letters"),
        ({"canary": 2, "canary_success": -0.1}, 422, "canary_success", "must be a number from 0 to 1"),
        ({"canary": 2, "canary_success": 1.01}, 422, "canary_success", "must be a number from 0 to 1"),
        ({"canary": 2, "canary_success": "0.8"}, 422, "canary_success", "must be a number"),
        ({"canary_success": 0.8}, 422, "canary_success", "goes with canary"),
        ({"start_at": "2020-01-01T00:00:00Z"}, 409, "start_at", "is in the past"),
        ({"start_at": "next tuesday"}, 422, "start_at", "ISO 8601 date and time with its UTC offset"),
        ({"start_at": "2026-02-30T02:00:00+08:00"}, 422, "start_at", "ISO 8601"),
        ({"start_at": "2030-11-25T02:00:00"}, 422, "start_at", "must include its UTC offset"),
        ({"start_at": ""}, 422, "start_at", "must be a date and time with its UTC offset"),
        ({"start_at": None}, 422, "start_at", "must be a date and time with its UTC offset"),
        ({"start_at": 1764000000}, 422, "start_at", "must be a date and time with its UTC offset"),
    ],
)
def test_bad_plans_are_refused_naming_the_field_and_nothing_starts(operator, plan, status, field, message):
    letters(5)
    response = post(operator, START, replay(**plan))

    assert response.status_code == status, response.content
    body = response.json()
    assert body["field"] == field and message in body["error"], body
    if status == 422:
        assert body["errors"] == [{"field": field, "error": body["error"]}]
    assert not BulkAction.objects.exists() and not AuditEntry.objects.exists()


def test_a_start_time_too_far_ahead_is_a_conflict(operator, settings):
    settings.BULK_SCHEDULE_MAX_DAYS = 30
    letters(1)
    response = post(operator, START, replay(start_at=in_hours(24 * 30 + 1)))
    assert (response.status_code, response.json()["field"]) == (409, "start_at")
    assert "at most 30 days ahead" in response.json()["error"]


def test_a_canary_is_for_replays_only(operator):
    letters(3)
    response = post(operator, START, {"action": "archive", "canary": 2})
    assert (response.status_code, response.json()["field"]) == (422, "canary")
    assert "only a replay can start with a canary" in response.json()["error"]


def test_a_scheduled_canary_replay_shows_its_plan_and_then_its_phase(
        operator, django_capture_on_commit_callbacks):
    letters(5)
    start_at = in_hours(2)
    response = post(operator, START,
                    replay(canary=2, canary_success=0.5, start_at=start_at, rate_per_second=10))

    assert response.status_code == 202, response.content
    body = response.json()
    assert (body["status"], body["start_at"], body["started_at"]) == ("scheduled", start_at, None)
    assert body["canary"] == {
        "size": 2,
        "success_share": 0.5,
        "needed": 1,
        "replayed": 0,
        "done": 0,
        "died_again": 0,
        "unfinished": 0,
        "phase": "pending",
        "deadline": None,
        "causes": [],
        "reason": None,
    }
    bulk = BulkAction.objects.get()
    entry = AuditEntry.objects.get(action="bulk_replay")
    assert (entry.source, entry.details["canary"], entry.details["start_at"]) == (
        "api", 2, bulk.start_at.isoformat())

    # Started by hand here (the planner's tests are tests/deadletters/bulk/test_schedule.py).
    BulkAction.objects.filter(pk=bulk.pk).update(status=BulkActionStatus.PENDING)
    assert run(bulk) == BulkActionStatus.CANARY
    status = operator.get(f"/report/bulk/{bulk.public_id}/status").json()
    assert status["status"] == "canary"
    assert {k: status["canary"][k] for k in ("phase", "replayed", "unfinished")} == {
        "phase": "running",
        "replayed": 2,
        "unfinished": 2,
    }
    assert status["canary"]["deadline"] is not None

    task = ReportTask.objects.filter(dead_letters__replayed_in=bulk).first()
    ReportTask.objects.filter(pk=task.pk).update(status=TaskStatus.DEAD)
    make_dead_letter(task=task, error_type="TimeoutError", error_message="upstream timed out")
    other = ReportTask.objects.filter(dead_letters__replayed_in=bulk).exclude(pk=task.pk).first()
    ReportTask.objects.filter(pk=other.pk).update(status=TaskStatus.DONE)
    decide_canaries()

    status = operator.get(f"/report/bulk/{bulk.public_id}/status").json()
    assert (status["status"], status["canary"]["phase"], status["canary"]["done"]) == ("pending", "passed", 1)
    assert status["canary"]["causes"] == [
        {"fingerprint": status["canary"]["causes"][0]["fingerprint"], "error_type": "TimeoutError",
         "count": 1}
    ]
    assert status["canary"]["reason"].startswith("Canary passed: 1 of 2")


def test_a_dead_letters_replay_at_a_time_is_a_scheduled_run_of_one(operator):
    letter = make_dead_letter()
    start_at = in_hours(1)

    response = post(operator, f"/report/dead-letter/{letter.pk}/replay",
                    {"start_at": start_at, "reason": "after deploy"})

    assert response.status_code == 202, response.content
    body = response.json()
    bulk = BulkAction.objects.get()
    assert response["Location"] == f"/report/bulk/{bulk.public_id}/status"
    assert (body["ok"], body["id"], body["task_id"]) == (True, letter.pk, str(letter.task.public_id))
    assert (body["scheduled"]["status"], body["scheduled"]["total"], body["scheduled"]["start_at"]) == (
        "scheduled",
        1,
        start_at,
    )
    assert bulk.selected_ids == [letter.pk] and bulk.reason == "after deploy"
    assert DeadLetter.objects.get(pk=letter.pk).status == "open"  # nothing happens before the time
    assert ReportTask.objects.get(pk=letter.task_id).status == TaskStatus.DEAD

    cancelled = post(operator, f"/report/bulk/{bulk.public_id}/cancel", {})
    assert cancelled.json()["status"] == "cancelled"


@pytest.mark.parametrize(
    "body, status, field",
    [
        ({"start_at": "2020-01-01T00:00:00+08:00"}, 409, "start_at"),
        ({"start_at": "soon"}, 422, "start_at"),
        ({"start_at": "2030-01-01T00:00:00"}, 422, "start_at"),
        ({"start_at": None}, 422, "start_at"),
        ({"start_at": "2030-01-01T00:00:00Z", "params": {}}, 422, "params"),
    ],
)
def test_a_dead_letters_replay_at_a_bad_time_is_refused(operator, body, status, field):
    letter = make_dead_letter()
    response = post(operator, f"/report/dead-letter/{letter.pk}/replay", body)
    assert (response.status_code, response.json()["field"]) == (status, field), response.content
    assert not BulkAction.objects.exists()
    assert ReportTask.objects.get(pk=letter.task_id).status == TaskStatus.DEAD


def test_a_replayed_letter_cannot_be_scheduled(operator):
    letter = make_dead_letter()
    assert post(operator, f"/report/dead-letter/{letter.pk}/replay", {}).status_code == 200
    response = post(operator, f"/report/dead-letter/{letter.pk}/replay", {"start_at": in_hours(1)})
    assert response.status_code == 409 and not BulkAction.objects.exists()
