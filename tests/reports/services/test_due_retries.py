"""Retries are due by the task row: promote_due_retries moves due ones to pending and enqueues
their next attempt, once however many promoters run, and leaves paused kinds alone."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from reports.models import ReportTask, TaskStatus
from reports.services import FailureInfo, claim_task, promote_due_retries, record_attempt_failure, submit_task
from reports.services.pausing import pause_kind, resume_kind

pytestmark = pytest.mark.django_db(transaction=True)

FAILURE = FailureInfo("reports.errors.TransientError", "upstream down", "", retriable=True)


@pytest.fixture
def ten_second_backoff(settings):
    settings.REPORT_RETRY_BACKOFF = (10.0,)
    settings.REPORT_RETRY_JITTER = 0.0
    return settings


def failed_once(redis_conn) -> ReportTask:
    task = submit_task(kind="probe", params={}).task
    redis_conn.flushall()
    claim_task(task_id=task.pk, attempt=1, worker="test pid 1")
    record_attempt_failure(task_id=task.pk, attempt=1, failure=FAILURE)
    return ReportTask.objects.get(pk=task.pk)


def queued(redis_conn) -> list[bytes]:
    return redis_conn.lrange("rq:queue:default", 0, -1)


def test_a_failure_leaves_the_retry_on_the_row_not_in_a_scheduler(ten_second_backoff, redis_conn):
    task = failed_once(redis_conn)

    assert task.status == TaskStatus.RETRYING
    assert (task.next_retry_at - task.updated_at).total_seconds() == 10.0
    assert queued(redis_conn) == []
    assert redis_conn.zcard("rq:scheduled:default") == 0
    assert promote_due_retries() == 0, "not due yet"


def test_a_due_retry_is_promoted_and_enqueued_once(ten_second_backoff, redis_conn):
    task = failed_once(redis_conn)
    later = task.next_retry_at + timedelta(milliseconds=1)

    assert promote_due_retries(now=later) == 1
    assert promote_due_retries(now=later) == 0

    task.refresh_from_db()
    assert task.status == TaskStatus.PENDING and task.attempt == 1
    assert queued(redis_conn) == [f"report-{task.pk}-2".encode()]


def test_promoters_racing_promote_each_task_once(ten_second_backoff, redis_conn):
    tasks = [failed_once(redis_conn) for _ in range(20)]
    ReportTask.objects.filter(pk__in=[t.pk for t in tasks]).update(next_retry_at=timezone.now())
    counts = []
    barrier = threading.Barrier(3)

    def promoter():
        barrier.wait()
        try:
            counts.append(promote_due_retries())
        finally:
            connection.close()

    threads = [threading.Thread(target=promoter) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sum(counts) == 20
    assert sorted(queued(redis_conn)) == sorted(f"report-{t.pk}-2".encode() for t in tasks)


def test_a_paused_kind_is_promoted_only_after_resume(ten_second_backoff, redis_conn):
    task = failed_once(redis_conn)
    pause_kind(kind="probe", paused_by="op")
    later = task.next_retry_at + timedelta(seconds=1)

    assert promote_due_retries(now=later) == 0
    resume_kind(kind="probe")
    assert promote_due_retries(now=later) == 1
    assert f"report-{task.pk}-2".encode() in queued(redis_conn)
