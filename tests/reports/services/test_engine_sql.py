"""The engine's statements (reports/services/engine_sql.py): on PostgreSQL the claim and the
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
        claimed = claim_task(task_id=task.pk, attempt=1, worker="w", lease_seconds=12)
        assert claimed.status == TaskStatus.RUNNING
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


def plan_of(statement: str, params: list) -> str:
    """The plan the database picks for a statement with these values, as text."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"EXPLAIN {statement}", params)
        else:
            cursor.execute(f"EXPLAIN QUERY PLAN {statement}", params)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


@pytest.mark.django_db(transaction=False)
def test_the_hot_statements_find_their_rows_by_key_on_a_table_never_analysed():
    """On a table the planner has no statistics for (a new database; here a temporary copy, which
    autovacuum never analyses), PostgreSQL rated the index on (kind, status), those on (status, ...)
    and the partial index of first attempts as cheap as the primary key, and took them: each claim
    read every task of its kind, each completion every first attempt ever made."""
    from datetime import timedelta

    from django.utils import timezone

    from reports.services import engine_sql
    from reports.services.engine_sql import PostgresStatements, _completion_params

    tasks = ReportTask.objects.bulk_create(
        ReportTask(kind="probe", max_attempts=3, timeout_seconds=60, status=status, attempt=attempt)
        for status, attempt in [(TaskStatus.PENDING, 0), (TaskStatus.RUNNING, 1), (TaskStatus.DONE, 1)] * 700
    )
    TaskAttempt.objects.bulk_create(TaskAttempt(task=task, number=1, worker="w", started_at=timezone.now())
                                    for task in tasks if task.attempt)
    task = tasks[0]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for table in (engine_sql.TASK, engine_sql.ATTEMPT):
                cursor.execute(f"CREATE TEMPORARY TABLE {table} (LIKE public.{table} INCLUDING ALL)")
                cursor.execute(f"INSERT INTO pg_temp.{table} SELECT * FROM public.{table}")
    now = timezone.now()
    claim = ["running", 1, now, now + timedelta(seconds=12), now, task.pk, "pending", "retrying", 0]
    attempt_row = [1, "w", now, "running"]
    done_params, close_params = _completion_params(connection, tasks[1].pk, 1, "", now, 1.0)
    if connection.vendor == "postgresql":
        plans = [
            plan_of(PostgresStatements.claim_statement(False), claim + attempt_row),
            plan_of(PostgresStatements.claim_statement(True), claim + ["probe"] + attempt_row),
            plan_of(PostgresStatements.COMPLETE, done_params + close_params + [1, "running"]),
        ]
        for plan in plans:
            scans = [line.strip() for line in plan.splitlines() if "Scan" in line or "Cond" in line]
            on_tasks = [line for line in scans if f" on {engine_sql.TASK}" in line]
            on_attempts = [line for line in scans if f" on {engine_sql.ATTEMPT}" in line]
            assert on_tasks and all("_pkey" in line for line in on_tasks), plan
            assert all("first" not in line and "Seq Scan" not in line for line in on_attempts), plan
    else:
        update = f"{engine_sql.CLAIM}{engine_sql.OF_KIND}"
        assert "USING INTEGER PRIMARY KEY" in plan_of(update, claim + ["probe"])
        assert "USING INTEGER PRIMARY KEY" in plan_of(engine_sql.DONE, done_params)
        close = plan_of(engine_sql.CLOSE, close_params + [tasks[1].pk, 1, "running"])
        assert "task_id=?" in close and "first" not in close, close
