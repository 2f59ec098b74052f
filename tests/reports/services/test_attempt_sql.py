"""The hot path's statements (reports/services/attempt_sql.py): on PostgreSQL the claim and the
completion are prepared once per connection (REPORT_DB_PREPARED_STATEMENTS, on by default) and
the fencing rules are the same either way; with the setting off nothing is prepared, for poolers
in transaction mode. SQLite has no prepared statements to keep: there the same calls go through
Django's own cursor.

A claim can carry the completion of the attempt its worker just finished: on PostgreSQL both go
in one statement, fenced as each is alone."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from reports.models import ReportTask, TaskAttempt, TaskStatus
from reports.services import claim_task, complete_task, submit_task
from reports.services.attempt_sql import CarriedCompletion, carries_completions

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


def finished_attempt(**params) -> ReportTask:
    task = submit_task(kind="probe", params={"write_output": False, **params}).task
    return claim_task(task_id=task.pk, attempt=1, worker="w", lease_seconds=12)


def carried(task: ReportTask, output_file: str = "") -> CarriedCompletion:
    return CarriedCompletion(task.pk, task.attempt, output_file, task.started_at)


def test_a_claim_carries_the_previous_completion_in_its_one_statement(redis_conn, settings):
    settings.REPORT_KIND_DEFAULT_CONCURRENCY = 0  # no cap: the claim is a single statement
    finished = finished_attempt()
    following = submit_task(kind="probe", params={"write_output": False}).task
    completion = carried(finished)

    with CaptureQueriesContext(connection) as queries:
        claimed = claim_task(task_id=following.pk, attempt=1, worker="w", lease_seconds=12, completing=completion)

    assert claimed.status == TaskStatus.RUNNING
    finished.refresh_from_db()
    if carries_completions():
        assert completion.done is True and finished.status == TaskStatus.DONE
        assert [q["sql"].split()[0] for q in queries] == ["WITH"]
        closed = TaskAttempt.objects.get(task=finished, number=1)
        assert closed.outcome == "succeeded" and closed.finished_at == claimed.started_at
    else:  # SQLite: the claim leaves it to its caller
        assert completion.done is None and finished.status == TaskStatus.RUNNING


def test_a_carried_completion_is_fenced_and_a_phantom_claim_still_carries_one(redis_conn, settings):
    settings.REPORT_KIND_DEFAULT_CONCURRENCY = 0
    stale = finished_attempt()
    ReportTask.objects.filter(pk=stale.pk).update(attempt=2)  # the reaper gave it to another attempt
    following = submit_task(kind="probe", params={"write_output": False}).task
    fenced = carried(stale)

    assert claim_task(task_id=following.pk, attempt=1, worker="w", lease_seconds=12, completing=fenced) is not None
    assert fenced.done is (False if carries_completions() else None)
    assert ReportTask.objects.get(pk=stale.pk).status == TaskStatus.RUNNING

    finished = finished_attempt()
    completion = carried(finished)
    assert claim_task(task_id=following.pk, attempt=1, worker="w2", lease_seconds=12, completing=completion) is None
    assert completion.done is (True if carries_completions() else None)
    expected = TaskStatus.DONE if carries_completions() else TaskStatus.RUNNING
    assert ReportTask.objects.get(pk=finished.pk).status == expected
