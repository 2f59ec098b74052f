"""Our own outages do not count (reports/services/infra_waits.py): the report storage fills up
under a real worker and then frees again. The worker runs in a mount namespace of its own whose
MEDIA_ROOT/reports is a 1 MB tmpfs (`unshare`: no root needed, and the mount goes with the worker);
the test fills it with ballast through /proc/<worker>/root, so uploads fail with ENOSPC, then
removes the ballast. Every task that would succeed succeeds, and only the kind's own failures are
charged: a task that fails on its own dies on its normal schedule meanwhile."""

import errno
import os
from pathlib import Path

import pytest

from deadletters.models import DeadLetter
from reports.models import ApiScope, AttemptOutcome, ReportTask, TaskStatus
from reports.services import submit_task
from reports.services.tokens import create_api_token
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def tiny_disk(path: Path) -> tuple[str, ...]:
    """A command that mounts a 1 MB tmpfs on `path` in a private mount namespace, then execs the rest."""
    user = () if os.geteuid() == 0 else ("--user", "--map-root-user")
    return ("unshare", "--mount", "--propagation", "private", *user,
            "sh", "-c", 'mount -t tmpfs -o size=1m tmpfs "$0" && exec "$@"', str(path))


def fill(disk: Path) -> None:
    with open(disk / "ballast", "wb") as ballast:
        try:
            while True:
                ballast.write(b"\0" * 65536)
                ballast.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def outcomes(task) -> list[str]:
    return list(task.attempts.order_by("number").values_list("outcome", flat=True))


def test_storage_full_then_fixed(start_worker, fast_retries, media_root, client, operator):
    reports_dir = media_root / "reports"
    reports_dir.mkdir(parents=True)
    worker = start_worker(wrapper=tiny_disk(reports_dir))
    disk = Path(f"/proc/{worker.pid}/root{reports_dir}")  # the worker's view: its tmpfs
    fill(disk)
    budget = fast_retries.REPORT_MAX_ATTEMPTS

    fine = [submit_task(kind="probe", params={}).task for _ in range(4)]
    once = submit_task(kind="probe", params={"fail_attempts": 1}).task  # fails once on its own
    own = submit_task(kind="probe", params={"fail_attempts": 1000}).task  # never succeeds
    waiting = [*fine, once]

    # The outage outlasts the budget: each task that would succeed has been tried more times than
    # it has attempts, and still waits; the task failing on its own died on schedule meanwhile.
    def outage_outlasted_budget():
        rows = ReportTask.objects.in_bulk([task.pk for task in waiting]).values()
        assert TaskStatus.DEAD not in {row.status for row in rows}, "a task our disk failed died"
        return all(row.attempt > budget for row in rows)

    wait_until(outage_outlasted_budget, timeout=30, message="the waiting tasks to outlast their budget")
    own.refresh_from_db()
    assert own.status == TaskStatus.DEAD and outcomes(own) == [AttemptOutcome.FAILED] * budget
    for task in waiting:
        task.refresh_from_db()
        assert task.waiting_for == "storage" and task.status != TaskStatus.DEAD
        assert AttemptOutcome.INFRA in outcomes(task)

    # Visible while it lasts: the dashboard's banner and /metrics.
    client.force_login(operator)
    page = client.get("/console/").content.decode()
    assert "tasks waiting for the report storage since" in page
    token = create_api_token(name="prometheus", scopes=[ApiScope.METRICS])[1]
    metrics = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}").content.decode()
    assert 'report_infrastructure_waiting_tasks{component="storage"} 5.0' in metrics
    waits = next(line for line in metrics.splitlines()
                 if line.startswith('report_infrastructure_waits_total{component="storage"}'))
    assert float(waits.split()[-1]) >= len(fine) * budget

    (disk / "ballast").unlink()  # fixed

    wait_until(lambda: all(task.status == TaskStatus.DONE for task in ReportTask.objects.filter(
        pk__in=[task.pk for task in waiting])), timeout=90, message="the waiting tasks to finish")
    for task in fine:
        task.refresh_from_db()
        attempts = outcomes(task)
        assert attempts[-1] == AttemptOutcome.SUCCEEDED
        assert set(attempts[:-1]) == {AttemptOutcome.INFRA}, "nothing charged to a task our disk failed"
        assert (disk / task.output_file.removeprefix("reports/")).is_file()
    once.refresh_from_db()
    attempts = outcomes(once)
    assert attempts[0] == AttemptOutcome.FAILED and attempts[-1] == AttemptOutcome.SUCCEEDED
    assert set(attempts[1:-1]) == {AttemptOutcome.INFRA}, "its own failure alone is charged"
    assert once.run_budget - once.run_attempt == budget - 2, "one own failure, one success: both charged"
    assert list(DeadLetter.objects.values_list("task_id", flat=True)) == [own.pk]

    assert "tasks waiting for the report storage" not in client.get("/console/").content.decode()
    metrics = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}").content.decode()
    assert 'report_infrastructure_waiting_tasks{component="storage"} 0.0' in metrics
