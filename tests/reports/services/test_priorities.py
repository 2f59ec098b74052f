"""Priorities: per-kind defaults (configurable), per-submit overrides, and workers draining
`high` before `default` before `low`."""

import pytest

from reports.models import ReportTask, TaskAttempt, TaskStatus
from reports.services import submit_task
from reports.services.batches import submit_batch
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_setting_overrides_the_kinds_default_and_a_submit_overrides_both(settings, redis_conn):
    assert submit_task(kind="probe", params={}).task.priority == "default"

    settings.REPORT_KIND_PRIORITIES = {"probe": "low"}
    assert submit_task(kind="probe", params={}).task.priority == "low"
    assert submit_task(kind="probe", params={}, priority="high").task.priority == "high"
    batch, _ = submit_batch(items=[{"kind": "probe"}, {"kind": "probe", "priority": "high"}])
    assert list(batch.tasks.order_by("pk").values_list("priority", flat=True)) == ["low", "high"]
    batch, _ = submit_batch(
        items=[{"kind": "probe"}, {"kind": "probe", "priority": "low"}], priority="default"
    )
    assert list(batch.tasks.order_by("pk").values_list("priority", flat=True)) == ["default", "low"]


def test_a_high_task_submitted_behind_1000_low_ones_finishes_first(start_worker, redis_conn):
    quiet = {"write_output": False}
    low, _ = submit_batch(items=[{"kind": "probe", "params": quiet}] * 1000, priority="low")
    high = submit_task(kind="probe", params=quiet, priority="high").task
    assert redis_conn.llen("rq:queue:low") == 1000

    start_worker()
    wait_until(
        lambda: ReportTask.objects.filter(pk=high.pk, status=TaskStatus.DONE).exists(),
        timeout=120,
        message="the high-priority task to finish",
    )

    high_started = TaskAttempt.objects.get(task=high).started_at
    low_before = TaskAttempt.objects.filter(task__batch=low, started_at__lt=high_started).count()
    low_done = ReportTask.objects.filter(batch=low, status=TaskStatus.DONE).count()
    assert low_before <= 2, f"{low_before} low tasks started before the high one"
    assert low_done < 1000
