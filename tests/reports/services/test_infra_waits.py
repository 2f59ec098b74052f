"""The engine's record_attempt_failure with reports/services/infra_waits.py: an attempt our own
infrastructure failed is not charged (a budget one larger, its own capped backoff, outcome
"infra"), what the task waits for is visible, a failure of its own is charged as ever, and the wait
is bounded."""

from datetime import timedelta

import pytest
from django.utils import timezone

from deadletters.models import DeadLetter
from reports import metrics
from reports.errors import STORAGE, UPSTREAM
from reports.models import AttemptOutcome, ReportTask, TaskCounter, TaskStatus
from reports.services import FailureInfo, claim_task, record_attempt_failure, requeue_dead_task, submit_task
from reports.services.infra_waits import INFRA_WAIT_LIMIT

pytestmark = pytest.mark.django_db

FULL = FailureInfo("OSError", "[Errno 28] No space left on device", "", retriable=True, origin=STORAGE)
OWN = FailureInfo("reports.errors.TransientError", "the kind's own", "", retriable=True)
UPSTREAM_DOWN = FailureInfo("reports.kinds.outbound.SourceUnreachable", "no answer", "", retriable=True,
                            origin=UPSTREAM)


@pytest.fixture
def task(settings, redis_conn):
    settings.REPORT_RETRY_BACKOFF = (10.0, 30.0)
    settings.REPORT_RETRY_JITTER = 0.0
    settings.REPORT_MAX_ATTEMPTS = 3
    return submit_task(kind="probe", params={}).task


def attempt_and_fail(task, failure) -> ReportTask:
    assert isinstance(claim_task(task_id=task.pk, attempt=task.attempt + 1, worker="test pid 1"), ReportTask)
    record_attempt_failure(task_id=task.pk, attempt=task.attempt + 1, failure=failure)
    task.refresh_from_db()
    return task


def delay(task) -> float:
    return round((task.next_retry_at - task.updated_at).total_seconds(), 1)


def test_our_outage_is_not_charged_and_the_tasks_own_failures_are(task):
    delays, since = [], None
    for waits in range(1, 10):
        attempt_and_fail(task, FULL)
        assert (task.status, task.attempt, task.max_attempts) == (TaskStatus.RETRYING, waits, 3 + waits)
        assert task.waiting_for == STORAGE
        since = since or task.waiting_since
        assert task.waiting_since == since
        delays.append(delay(task))
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]  # capped at a minute
    assert set(task.attempts.values_list("outcome", flat=True)) == {AttemptOutcome.INFRA}
    assert TaskCounter.objects.get(kind="probe", event="waits_storage").count == 9
    assert metrics.infrastructure_waits() == [(STORAGE, 1, since)]
    assert metrics.oldest_waiting_seconds()["default"] >= (timezone.now() - since).total_seconds() - 1

    attempt_and_fail(task, OWN)  # charged: the budget stays, the wait is over
    assert (task.status, task.max_attempts, task.waiting_for, task.waiting_since) == (
        TaskStatus.RETRYING, 12, None, None)
    assert metrics.infrastructure_waits() == []
    attempt_and_fail(task, FULL)  # a new outage, from its first step
    assert (task.max_attempts, task.waiting_for, delay(task)) == (13, STORAGE, 0.5)
    attempt_and_fail(task, UPSTREAM_DOWN)  # the kind's source is the kind's: charged
    assert (task.status, task.max_attempts, task.waiting_for) == (TaskStatus.RETRYING, 13, None)
    attempt_and_fail(task, OWN)
    assert task.status == TaskStatus.DEAD and task.attempt == 13, "three failures of its own: dead"
    assert DeadLetter.objects.filter(task=task).count() == 1


def test_a_task_waits_for_us_at_most_the_limit_then_is_charged(task):
    attempt_and_fail(task, FULL)
    long_ago = timezone.now() - INFRA_WAIT_LIMIT - timedelta(seconds=1)
    ReportTask.objects.filter(pk=task.pk).update(waiting_since=long_ago)
    for _ in range(3):
        attempt_and_fail(task, FULL)
    assert task.status == TaskStatus.DEAD and task.max_attempts == 4
    assert list(task.attempts.values_list("outcome", flat=True)) == [
        AttemptOutcome.INFRA, AttemptOutcome.FAILED, AttemptOutcome.FAILED, AttemptOutcome.FAILED]
    requeue_dead_task(task_id=task.pk)  # a replay starts afresh
    task.refresh_from_db()
    assert (task.waiting_for, task.waiting_since) == (None, None)
    attempt_and_fail(task, FULL)
    assert task.status == TaskStatus.RETRYING and task.attempts.last().outcome == AttemptOutcome.INFRA
