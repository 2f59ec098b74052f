"""requeue_dead_tasks: the set-based dead -> pending compare-and-set a bulk replay's batch uses."""

import pytest
from django.db import transaction

from reports.models import ReportTask, TaskStatus
from reports.services import requeue_dead_tasks
from tests.factories import make_task
from transport.queues import job_ids_waiting


@pytest.mark.django_db(transaction=True)
def test_only_tasks_still_dead_change_each_gets_a_fresh_budget_and_one_job_after_commit(settings):
    settings.REPORT_MAX_ATTEMPTS = 3
    dead = [make_task(status=TaskStatus.DEAD, attempt=3, priority=p) for p in ("high", "default", "low")]
    pending = make_task(status=TaskStatus.PENDING, attempt=1)
    done = make_task(status=TaskStatus.DONE, attempt=2)

    with transaction.atomic():
        changed = requeue_dead_tasks([t.pk for t in dead] + [pending.pk, done.pk, 10**12, dead[0].pk])
        assert job_ids_waiting(("high", "default", "low")) == set()  # nothing before commit

    assert [row.task_id for row in changed] == [t.pk for t in dead]
    assert {(row.attempt, row.priority) for row in changed} == {(3, "high"), (3, "default"), (3, "low")}
    for task in ReportTask.objects.filter(pk__in=[t.pk for t in dead]):
        assert (task.status, task.attempts_before_run, task.max_attempts) == ("pending", 3, 6)
        assert task.finished_at is None and task.next_retry_at is None
    assert ReportTask.objects.get(pk=pending.pk).status == "pending"
    assert ReportTask.objects.get(pk=done.pk).status == "done"
    assert job_ids_waiting(("high", "default", "low")) == {f"report-{t.pk}-4" for t in dead}
    assert requeue_dead_tasks([t.pk for t in dead]) == []  # a second call finds nothing dead
    assert requeue_dead_tasks([]) == []
