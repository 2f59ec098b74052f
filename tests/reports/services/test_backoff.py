"""The backoff policy on its own: steps, the repeating last step, jitter bounds."""

import pytest

from reports.services.backoff import retry_delay


def test_each_failed_attempt_waits_its_step_and_the_last_step_repeats(settings):
    settings.REPORT_RETRY_BACKOFF = (10.0, 30.0, 60.0)
    settings.REPORT_RETRY_JITTER = 0.0

    assert [retry_delay(n) for n in (1, 2, 3, 4, 9)] == [10.0, 30.0, 60.0, 60.0, 60.0]


def test_jitter_only_lengthens_the_wait_and_stays_within_its_fraction(settings):
    settings.REPORT_RETRY_BACKOFF = (10.0,)
    settings.REPORT_RETRY_JITTER = 0.2

    delays = [retry_delay(1) for _ in range(500)]

    assert min(delays) >= 10.0 and max(delays) <= 12.0
    assert max(delays) - min(delays) > 1.0  # it does spread a burst of failures out


@pytest.mark.parametrize("attempt", [0, -3])
def test_an_attempt_number_below_one_gets_the_first_step(settings, attempt):
    settings.REPORT_RETRY_BACKOFF = (10.0, 30.0)
    settings.REPORT_RETRY_JITTER = 0.0

    assert retry_delay(attempt) == 10.0


@pytest.mark.django_db
def test_a_replayed_task_climbs_the_backoff_ladder_from_its_first_step(settings, redis_conn):
    from reports.models import TaskStatus
    from reports.services import (
        FailureInfo,
        claim_task,
        record_attempt_failure,
        requeue_dead_task,
        submit_task,
    )

    settings.REPORT_RETRY_BACKOFF = (10.0, 30.0, 60.0)
    settings.REPORT_RETRY_JITTER = 0.0
    settings.REPORT_MAX_ATTEMPTS = 3
    task = submit_task(kind="probe", params={}).task
    failure = FailureInfo("reports.errors.TransientError", "upstream down", "", retriable=True)

    def fail_run(first: int) -> list[float]:
        delays = []
        for number in range(first, first + 3):
            claim_task(task_id=task.pk, attempt=number, worker="test pid 1")
            record_attempt_failure(task_id=task.pk, attempt=number, failure=failure)
            task.refresh_from_db()
            if task.status == TaskStatus.RETRYING:
                delays.append((task.next_retry_at - task.updated_at).total_seconds())
        assert task.status == TaskStatus.DEAD
        return delays

    assert fail_run(1) == [10.0, 30.0]
    requeue_dead_task(task_id=task.pk)  # the replay: attempts 4, 5, 6 are its 1st, 2nd, 3rd
    assert fail_run(4) == [10.0, 30.0]
