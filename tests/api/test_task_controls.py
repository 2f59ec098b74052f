"""POST /report/task/<id>/cancel, /retry-now, /stop: who may call them, the 200 that leaves the
task in its new state, the 409 that changes nothing, and the audit entry of each."""

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from deadletters.models import AuditEntry
from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus
from reports.services.enqueue import job_id_for
from reports.services.tokens import create_api_token
from tests.factories import make_task
from transport.queues import get_queue

pytestmark = pytest.mark.django_db


def client_for(name, *scopes):
    token, raw = create_api_token(name=name, scopes=scopes)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    client.token = token
    return client


def post(client, path, body=None):
    return client.post(
        path, data=json.dumps(body) if body is not None else "", content_type="application/json"
    )


@pytest.fixture
def alice():
    return client_for("alice", "submit", "read")


@pytest.fixture
def operator():
    return client_for("ops", "submit", "read", "replay", "operator")


def running_task(**fields):
    now = timezone.now()
    task = make_task(
        status=TaskStatus.RUNNING,
        attempt=1,
        started_at=now,
        lease_expires_at=now + timedelta(seconds=30),
        **fields,
    )
    TaskAttempt.objects.create(
        task=task, number=1, started_at=now - timedelta(seconds=2), worker="host-a pid 42"
    )
    return task


@pytest.mark.parametrize("status", [TaskStatus.PENDING, TaskStatus.RETRYING])
def test_a_client_cancels_its_own_pending_or_retrying_task(alice, status):
    task = make_task(status=status, owner=alice.token, next_retry_at=timezone.now() + timedelta(minutes=5))

    response = post(alice, f"/report/task/{task.public_id}/cancel", {"reason": "ordered by mistake"})

    assert response.status_code == 200
    assert response.json() == {
        "ok": True,
        "task_id": str(task.public_id),
        "status": "cancelled",
        "attempt": 0,
    }
    task.refresh_from_db()
    assert task.status == TaskStatus.CANCELLED and task.finished_at is not None and task.next_retry_at is None
    entry = AuditEntry.objects.get(action="cancel")
    assert (entry.actor, entry.source, entry.reason, entry.task_id) == (
        "token:alice",
        "api",
        "ordered by mistake",
        task.pk,
    )
    assert alice.get(f"/report/task/{task.public_id}/status").json()["status"] == "cancelled"


@pytest.mark.parametrize(
    "status", [TaskStatus.DONE, TaskStatus.DEAD, TaskStatus.RUNNING, TaskStatus.CANCELLED]
)
def test_cancel_of_a_task_that_ran_or_runs_is_409_and_changes_nothing(operator, status):
    task = make_task(status=status, attempt=1)

    response = post(operator, f"/report/task/{task.public_id}/cancel")

    assert response.status_code == 409
    assert f"it is {status}" in response.json()["error"]
    assert ReportTask.objects.get(pk=task.pk).status == status
    assert not AuditEntry.objects.exists()


def test_a_client_cannot_touch_another_clients_task_nor_retry_or_stop_at_all(alice, operator):
    theirs = make_task(owner=operator.token)
    assert post(alice, f"/report/task/{theirs.public_id}/cancel").status_code == 404
    mine = make_task(status=TaskStatus.RETRYING, owner=alice.token)
    assert post(alice, f"/report/task/{mine.public_id}/retry-now").status_code == 403
    assert post(alice, f"/report/task/{running_task(owner=alice.token).public_id}/stop").status_code == 403
    metrics_only = client_for("prom", "metrics")
    assert post(metrics_only, f"/report/task/{mine.public_id}/cancel").status_code == 403
    assert ReportTask.objects.get(pk=theirs.pk).status == TaskStatus.PENDING


def test_retry_now_makes_a_waiting_retry_due_and_enqueues_it(operator, django_capture_on_commit_callbacks):
    task = make_task(
        status=TaskStatus.RETRYING, attempt=1, next_retry_at=timezone.now() + timedelta(minutes=10)
    )

    with django_capture_on_commit_callbacks(execute=True):
        response = post(operator, f"/report/task/{task.public_id}/retry-now", {"reason": "upstream is back"})

    assert response.status_code == 200 and response.json()["status"] == "retrying"
    task.refresh_from_db()
    assert task.next_retry_at <= timezone.now()
    assert job_id_for(task.pk, 2) in get_queue("default").get_job_ids()
    assert AuditEntry.objects.get(action="retry_now").reason == "upstream is back"
    assert post(operator, f"/report/task/{make_task().public_id}/retry-now").status_code == 409


def test_stop_records_the_attempt_as_stopped_and_cancels_or_retries(
    operator, django_capture_on_commit_callbacks
):
    cancelled = running_task()
    response = post(operator, f"/report/task/{cancelled.public_id}/stop", {"reason": "runaway", "attempt": 1})
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    attempt = TaskAttempt.objects.get(task=cancelled, number=1)
    assert attempt.outcome == AttemptOutcome.STOPPED and attempt.finished_at and attempt.duration_seconds >= 2
    assert "runaway" in attempt.error_message

    retried = running_task(max_attempts=1)  # its budget is spent: the stop does not count against it
    with django_capture_on_commit_callbacks(execute=True):
        response = post(operator, f"/report/task/{retried.public_id}/stop", {"then": "retry"})
    assert response.status_code == 200 and response.json()["status"] == "retrying"
    retried.refresh_from_db()
    assert retried.max_attempts == 2 and retried.next_retry_at <= timezone.now()
    assert job_id_for(retried.pk, 2) in get_queue("default").get_job_ids()
    entry = AuditEntry.objects.filter(action="stop").order_by("-id").first()
    assert entry.details == {"attempt": 1, "then": "retry", "status": "retrying"}

    # The same stop again, or of an attempt that is not the running one: 409, nothing changes.
    assert post(operator, f"/report/task/{cancelled.public_id}/stop").status_code == 409
    other = running_task()
    assert post(operator, f"/report/task/{other.public_id}/stop", {"attempt": 2}).status_code == 409
    assert ReportTask.objects.get(pk=other.pk).status == TaskStatus.RUNNING
    assert post(operator, f"/report/task/{other.public_id}/stop", {"then": "later"}).status_code == 422


def test_the_client_reads_that_its_task_was_stopped_but_not_the_operators_note(alice, operator):
    task = running_task(owner=alice.token)
    note = "client 42 floods the export source"
    assert post(operator, f"/report/task/{task.public_id}/stop", {"reason": note}).status_code == 200

    status = alice.get(f"/report/task/{task.public_id}/status")

    assert status.json()["last_error"] == "stopped by an operator"
    assert note not in status.content.decode()
    assert note in TaskAttempt.objects.get(task=task).error_message  # the console still shows it
