"""The engine (reports/services/engine.py): a failed attempt's wait before the next (REPORT_RETRY_BACKOFF)."""

import pytest


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
