"""The hot path's statements (reports/services/attempt_sql.py): on PostgreSQL the claim and the
completion are prepared once per connection (REPORT_DB_PREPARED_STATEMENTS, on by default) and
the fencing rules are the same either way; with the setting off nothing is prepared, for poolers
in transaction mode. SQLite has no prepared statements to keep: there the same calls go through
Django's own cursor."""

import pytest
from django.db import connection

from reports.models import ReportTask, TaskAttempt, TaskStatus
from reports.services import claim_task, complete_task, submit_task

pytestmark = pytest.mark.django_db(transaction=True)


def prepared_statements() -> list[str] | None:
    """What this connection has prepared; None where the database keeps no such list."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0].split()[0] + " " + row[0].split()[1] for row in cursor.fetchall()]


def run_twice() -> list[int]:
    ids = []
    for _ in range(2):
        task = submit_task(kind="probe", params={"write_output": False}).task
        assert claim_task(task_id=task.pk, attempt=1, worker="w", lease_seconds=12).status == TaskStatus.RUNNING
        assert complete_task(task_id=task.pk, attempt=1, output_file="", started_at=task.created_at)
        ids.append(task.pk)
    return ids


@pytest.fixture
def fresh_connection():
    connection.close()  # prepared statements belong to a connection: start with none
    yield
    connection.close()


def test_claim_and_completion_are_prepared_once_per_connection(settings, redis_conn, fresh_connection):
    settings.REPORT_DB_PREPARED_STATEMENTS = True

    ids = run_twice()

    assert ReportTask.objects.filter(pk__in=ids, status=TaskStatus.DONE).count() == 2
    assert TaskAttempt.objects.filter(task_id__in=ids, outcome="succeeded").count() == 2
    prepared = prepared_statements()
    if prepared is not None:
        # Two kinds of statement, each prepared once although each ran twice.
        assert sorted(prepared) == ["WITH done", "WITH durability"]


def test_with_the_setting_off_nothing_is_prepared(settings, redis_conn, fresh_connection):
    settings.REPORT_DB_PREPARED_STATEMENTS = False

    ids = run_twice()

    assert ReportTask.objects.filter(pk__in=ids, status=TaskStatus.DONE).count() == 2
    assert prepared_statements() in (None, [])


def test_a_prepared_completion_still_fences_a_stale_attempt(settings, redis_conn, fresh_connection):
    settings.REPORT_DB_PREPARED_STATEMENTS = True
    run_twice()  # the statements are prepared now
    task = submit_task(kind="probe", params={"write_output": False}).task
    claim_task(task_id=task.pk, attempt=1, worker="w", lease_seconds=12)

    assert not complete_task(task_id=task.pk, attempt=2, output_file="", started_at=task.created_at)
    assert claim_task(task_id=task.pk, attempt=1, worker="w2", lease_seconds=12) is None
    assert ReportTask.objects.get(pk=task.pk).status == TaskStatus.RUNNING
