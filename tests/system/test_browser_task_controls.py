"""Live-task controls as an operator uses them: a real browser on the Running and Retrying views,
the live server, a real worker. The views update by themselves (htmx polling), no reload."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from deadletters.models import AuditEntry
from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus
from reports.services import submit_task
from tests.conftest import browser_login, wait_until
from tests.factories import make_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TIMEOUT = 30_000


def mark_page(page):
    page.evaluate("window.__noReload = true")


def waiting_retry(**params):
    return make_task(
        params={"sleep_seconds": 0, **params},
        status=TaskStatus.RETRYING,
        attempt=1,
        next_retry_at=timezone.now() + timedelta(hours=1),
        last_error="reports.errors.TransientError: upstream 503",
    )


def test_retry_now_and_cancel_from_the_retrying_view(page, operator, start_worker):
    start_worker()
    first, second = waiting_retry(), waiting_retry()
    browser_login(page, next_path="/console/retrying/")
    expect(page.locator(f"tr[data-task='{first.public_id}']")).to_contain_text("upstream 503")

    page.locator(f"tr[data-task='{first.public_id}'] button[data-action=retry-now]").click()

    expect(page).to_have_url(re.compile(r"/console/retrying/$"))
    expect(page.locator(".messages")).to_contain_text("retried now")
    wait_until(
        lambda: ReportTask.objects.get(pk=first.pk).status == TaskStatus.DONE, message="the retry to run"
    )

    row = page.locator(f"tr[data-task='{second.public_id}']")
    row.get_by_label("Reason for cancelling").fill("client withdrew it")
    row.locator("button[data-action=cancel]").click()
    expect(page.locator(".messages")).to_contain_text("it is now cancelled")
    mark_page(page)
    third = waiting_retry()  # appears without a reload
    expect(page.locator(f"tr[data-task='{third.public_id}']")).to_be_visible(timeout=TIMEOUT)
    expect(page.locator(f"tr[data-task='{second.public_id}']")).to_have_count(0)
    assert page.evaluate("window.__noReload") is True
    assert ReportTask.objects.get(pk=second.pk).status == TaskStatus.CANCELLED
    assert AuditEntry.objects.get(action="cancel").reason == "client withdrew it"
    assert AuditEntry.objects.filter(action="retry_now", task=first).exists()


def test_stop_a_running_attempt_from_the_running_view(page, operator, start_worker, settings):
    settings.REPORT_HEARTBEAT_SECONDS = 0.5
    start_worker()
    browser_login(page, next_path="/console/running/")
    expect(page.locator(".empty")).to_contain_text("Nothing is running")
    mark_page(page)

    task = submit_task(kind="probe", params={"sleep_seconds": 120}).task
    row = page.locator(f"tr[data-task='{task.public_id}']")
    expect(row).to_be_visible(timeout=TIMEOUT)  # appeared by polling
    assert page.evaluate("window.__noReload") is True
    expect(row.locator(".elapsed")).to_have_text(re.compile(r"\d+ s"))
    row.locator("button[data-action=stop]").click()
    # It asks first, retrying by default; this operator cancels the task.
    expect(page.locator("input[name=then][value=retry]")).to_be_checked()
    page.locator("input[name=then][value=cancel]").check()
    page.get_by_label("Reason (optional, kept in the audit log)").fill("wrong month")
    page.locator("button[data-action=stop-confirmed]").click()

    expect(page.locator(".messages")).to_contain_text("it is now cancelled")
    expect(page.locator(f"tr[data-task='{task.public_id}']")).to_have_count(0)
    attempt = TaskAttempt.objects.get(task=task)
    assert attempt.outcome == AttemptOutcome.STOPPED and "wrong month" in attempt.error_message
    # The worker killed its horse at the next heartbeat and is free again.
    other = submit_task(kind="probe", params={"sleep_seconds": 0}).task
    wait_until(lambda: ReportTask.objects.get(pk=other.pk).status == TaskStatus.DONE, message="the next task")
    assert ReportTask.objects.get(pk=task.pk).status == TaskStatus.CANCELLED
