"""/metrics reads the attempts of its recent window and, for each, its task by primary key: the
tasks table is never scanned, however the planner weighs a scan of it against the lookups
(EXPLAIN of the statements a scrape runs, on analysed data; EXPLAIN QUERY PLAN on SQLite)."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from reports import metrics
from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus

TASKS = 3000


def tasks_with_recent_first_attempts() -> None:
    """Half the tasks finished their first attempt inside the window: a join that the planner would
    rather answer by hashing the whole tasks table than by 1,500 lookups."""
    now = timezone.now()
    ReportTask.objects.bulk_create(
        ReportTask(kind="probe", status=TaskStatus.DONE, attempt=1, max_attempts=3, timeout_seconds=60)
        for _ in range(TASKS)
    )
    attempts = []
    for i, task_id in enumerate(ReportTask.objects.values_list("pk", flat=True)):
        finished = now - timedelta(seconds=30 if i % 2 else 7200)
        attempts.append(
            TaskAttempt(
                task_id=task_id,
                number=1,
                started_at=finished - timedelta(seconds=1),
                finished_at=finished,
                outcome=AttemptOutcome.SUCCEEDED,
                duration_seconds=1.0,
            )
        )
    TaskAttempt.objects.bulk_create(attempts, batch_size=1000)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {ReportTask._meta.db_table}")
        cursor.execute(f"ANALYZE {TaskAttempt._meta.db_table}")


def plans_of(run) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        run()
    shown = []
    with connection.cursor() as cursor:
        for query in queries.captured_queries:
            if connection.vendor == "postgresql":
                cursor.execute(f"EXPLAIN (FORMAT JSON) {query['sql']}")
                shown.append(json.dumps(cursor.fetchone()[0]))
            else:
                cursor.execute(f"EXPLAIN QUERY PLAN {query['sql']}")
                shown.append("\n".join(str(row[-1]) for row in cursor.fetchall()))
    return shown


@pytest.mark.django_db
@pytest.mark.parametrize(
    "histograms", [metrics.queue_wait_histograms, metrics.duration_histograms], ids=["queue wait", "duration"]
)
def test_window_histograms_read_tasks_by_primary_key_only(histograms):
    tasks_with_recent_first_attempts()

    [shown] = plans_of(lambda: histograms(600))

    if connection.vendor == "postgresql":
        scans = [node for node in shown.split('"Node Type": ')[1:] if node.startswith('"Seq Scan"')]
        assert not [scan for scan in scans if '"Relation Name": "reports_reporttask"' in scan], shown
    else:
        assert "SCAN reports_reporttask" not in shown, shown
    assert sum(h.count for h in histograms(600)) == TASKS // 2
