"""The task state machine end to end, through real worker processes and a real Redis, with
long-lived horses (the default) and a fresh horse per task (REPORT_HORSE_MAX_TASKS=1)."""

from pathlib import Path

import pytest
from django.conf import settings

from deadletters.models import DeadLetter, DeadLetterStatus
from reports.models import AttemptOutcome, ReportTask, TaskStatus
from reports.services import submit_task
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=[{}, {"REPORT_HORSE_MAX_TASKS": 1}], ids=["pool", "fork"])
def horse_mode(request):
    return request.param


def finished(task_id, *statuses):
    statuses = statuses or (TaskStatus.DONE, TaskStatus.DEAD)
    return lambda: ReportTask.objects.filter(pk=task_id, status__in=statuses).first()


def test_sales_summary_succeeds_and_writes_a_real_xlsx(start_worker, horse_mode, fast_retries):
    from django.core.management import call_command
    from openpyxl import load_workbook

    call_command("seed_demo_data", rows=500, verbosity=0)
    start_worker(**horse_mode)
    task = submit_task(kind="sales_summary", params={"format": "xlsx", "group_by": "region"}).task

    done = wait_until(finished(task.pk), message="the report to finish")

    assert done.status == TaskStatus.DONE, done.last_error
    assert done.attempt == 1
    path = Path(settings.MEDIA_ROOT) / done.output_file
    sheet = load_workbook(path).active
    rows = list(sheet.iter_rows(values_only=True))
    assert rows[0] == ("region", "orders", "units", "revenue")
    assert sum(row[1] for row in rows[1:]) == 500
    [attempt] = done.attempts.all()
    assert attempt.outcome == AttemptOutcome.SUCCEEDED and attempt.duration_seconds >= 0


def test_transient_failure_is_retried_then_succeeds(start_worker, horse_mode, fast_retries):
    start_worker(**horse_mode)
    task = submit_task(kind="probe", params={"fail_attempts": 2}).task

    done = wait_until(finished(task.pk), message="the retried task to finish")

    assert done.status == TaskStatus.DONE
    assert done.attempt == 3
    outcomes = list(done.attempts.values_list("number", "outcome", "error_type"))
    assert outcomes == [
        (1, "failed", "reports.errors.TransientError"),
        (2, "failed", "reports.errors.TransientError"),
        (3, "succeeded", ""),
    ]
    assert not DeadLetter.objects.exists()
    assert (Path(settings.MEDIA_ROOT) / done.output_file).read_text().strip().endswith(",3")


def test_exhausted_attempts_make_exactly_one_complete_dead_letter(start_worker, horse_mode, fast_retries):
    start_worker(**horse_mode)
    task = submit_task(kind="probe", params={"fail_attempts": 99}).task

    dead = wait_until(finished(task.pk), message="the task to die")

    assert dead.status == TaskStatus.DEAD and dead.attempt == 3
    [letter] = DeadLetter.objects.filter(task=task)
    assert letter.status == DeadLetterStatus.OPEN
    assert letter.kind == "probe"
    assert letter.params == {
        "sleep_seconds": 0,
        "fail_attempts": 99,
        "fail_permanently": False,
        "write_output": True,
    }
    assert letter.error_type == "reports.errors.TransientError"
    assert letter.error_message == "probe failing attempt 3 of the first 99"
    assert "Traceback (most recent call last)" in letter.traceback and "TransientError" in letter.traceback
    assert letter.attempts == 3
    assert len(letter.fingerprint) == 40
    retention = (letter.expire_at - letter.created_at).total_seconds()
    assert retention == pytest.approx(settings.DEADLETTER_RETENTION_DAYS * 86400, abs=5)
    assert list(dead.attempts.values_list("outcome", flat=True)) == ["failed"] * 3


def test_permanent_error_dies_after_one_attempt(start_worker, horse_mode, fast_retries):
    start_worker(**horse_mode)
    task = submit_task(kind="probe", params={"fail_permanently": True}).task

    dead = wait_until(finished(task.pk), message="the task to die")

    assert dead.status == TaskStatus.DEAD and dead.attempt == 1
    assert DeadLetter.objects.get(task=task).error_type == "reports.errors.PermanentError"


def test_timeout_is_recorded_and_retried(start_worker, horse_mode, fast_retries):
    fast_retries.REPORT_JOB_TIMEOUT = 1
    start_worker(**horse_mode)
    task = submit_task(kind="probe", params={"sleep_seconds": 5}).task

    dead = wait_until(finished(task.pk), timeout=60, message="three timed-out attempts")

    assert dead.status == TaskStatus.DEAD
    assert list(dead.attempts.values_list("outcome", flat=True)) == ["timeout"] * 3
    assert DeadLetter.objects.get(task=task).error_type == "rq.timeouts.JobTimeoutException"


def test_retry_waits_for_the_backoff_due_by_its_row(start_worker, horse_mode, settings, redis_conn):
    settings.REPORT_RETRY_BACKOFF = (2.0,)
    settings.REPORT_RETRY_JITTER = 0.0
    start_worker(**horse_mode)
    task = submit_task(kind="probe", params={"fail_attempts": 1}).task

    wait_until(finished(task.pk, TaskStatus.RETRYING), message="the first attempt to fail")
    assert redis_conn.zcard("rq:scheduled:default") == 0, "no scheduler holds the due time"
    done = wait_until(finished(task.pk), message="the retried task to finish")

    first, second = done.attempts.order_by("number")
    assert (second.started_at - first.finished_at).total_seconds() >= 2.0
