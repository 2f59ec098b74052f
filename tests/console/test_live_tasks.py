"""The Running and Retrying views and the controls they post to, through the real URLs."""

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from deadletters.models import AuditEntry
from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus
from tests.conftest import operators_group
from tests.factories import make_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user(
        "olga", "olga@example.invalid", "pw-123456789", is_staff=True
    )
    user.groups.add(operators_group())
    client = Client(REMOTE_ADDR="10.9.8.7")
    client.force_login(user)
    return client


@pytest.fixture
def viewer(django_user_model):
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("vic", "vic@example.invalid", "pw-123456789", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_reporttask"))
    client = Client()
    client.force_login(user)
    return client


def running_task():
    now = timezone.now()
    task = make_task(
        kind="sales_summary", status=TaskStatus.RUNNING, attempt=1, started_at=now - timedelta(seconds=75)
    )
    TaskAttempt.objects.create(task=task, number=1, started_at=task.started_at, worker="host-7 pid 4242")
    return task


def test_the_running_view_shows_elapsed_time_worker_attempt_and_a_stop_button(operator):
    task = running_task()

    page = operator.get(reverse("console:running")).content.decode()

    assert str(task.public_id)[:8] in page and "host-7 pid 4242" in page
    assert "75 s" in page or "76 s" in page
    assert reverse("console:task-stop", args=[task.public_id]) in page
    assert 'hx-trigger="every 2s"' in page
    partial = operator.get(reverse("console:running"), HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial and "host-7 pid 4242" in partial


def test_the_retrying_view_shows_next_retry_last_error_and_its_buttons(operator):
    task = make_task(
        status=TaskStatus.RETRYING,
        attempt=1,
        next_retry_at=timezone.now() + timedelta(minutes=3),
        last_error="reports.errors.TransientError: upstream 503",
    )

    page = operator.get(reverse("console:retrying")).content.decode()

    assert "upstream 503" in page
    assert "(in 2\xa0minutes" in page or "(in 3\xa0minutes" in page
    assert reverse("console:task-retry-now", args=[task.public_id]) in page
    assert reverse("console:task-cancel", args=[task.public_id]) in page


def test_cancel_from_the_console_audits_who_and_why_and_comes_back(operator):
    task = make_task()
    back = reverse("console:retrying")

    response = operator.post(
        reverse("console:task-cancel", args=[task.public_id]), {"reason": "duplicate order", "next": back}
    )

    assert response.status_code == 302 and response["Location"] == back
    assert ReportTask.objects.get(pk=task.pk).status == TaskStatus.CANCELLED
    entry = AuditEntry.objects.get(action="cancel")
    assert (entry.actor, entry.source, entry.reason, entry.ip_address) == (
        "olga",
        "console",
        "duplicate order",
        "10.9.8.7",
    )
    detail = operator.get(reverse("console:task-detail", args=[task.public_id])).content.decode()
    assert "status-cancelled" in detail and "not a dead letter" in detail


def test_a_control_on_a_task_that_moved_on_is_a_409_page_that_changes_nothing(operator):
    done = make_task(status=TaskStatus.DONE, attempt=1)
    response = operator.post(reverse("console:task-cancel", args=[done.public_id]))
    assert response.status_code == 409 and "it is done" in response.content.decode()
    response = operator.post(reverse("console:task-stop", args=[done.public_id]),
                             {"attempt": "1", "then": "cancel", "confirmed": "yes"})
    assert response.status_code == 409
    assert ReportTask.objects.get(pk=done.pk).status == TaskStatus.DONE
    assert not AuditEntry.objects.exists()
    # An outside `next` is not followed.
    task = make_task(status=TaskStatus.RETRYING, attempt=1)
    response = operator.post(
        reverse("console:task-retry-now", args=[task.public_id]), {"next": "https://evil.example/"}
    )
    assert response["Location"] == reverse("console:task-detail", args=[task.public_id])


def test_stop_from_the_console_records_a_stopped_attempt(operator):
    task = running_task()

    operator.post(
        reverse("console:task-stop", args=[task.public_id]),
        {"attempt": "1", "then": "cancel", "reason": "hung", "confirmed": "yes"},
    )

    assert ReportTask.objects.get(pk=task.pk).status == TaskStatus.CANCELLED
    assert TaskAttempt.objects.get(task=task).outcome == AttemptOutcome.STOPPED


def test_a_viewer_sees_the_views_without_buttons_and_cannot_post(viewer):
    task = running_task()
    page = viewer.get(reverse("console:running")).content.decode()
    assert str(task.public_id)[:8] in page and reverse("console:task-stop", args=[task.public_id]) not in page
    response = viewer.post(reverse("console:task-stop", args=[task.public_id]), {"attempt": "1"})
    assert response.status_code == 403
    assert ReportTask.objects.get(pk=task.pk).status == TaskStatus.RUNNING
