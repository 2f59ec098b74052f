"""Submission validation and idempotency, and replay's one-run guarantee, under real concurrency."""

import threading

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from deadletters.models import AuditEntry, DeadLetterStatus
from deadletters.services.replay import replay_task
from reports.errors import InvalidParams
from reports.models import ReportTask, TaskStatus
from reports.services import IdempotencyConflict, TaskNotReplayable, submit_task
from tests.conftest import wait_until
from tests.factories import make_dead_letter

pytestmark = pytest.mark.django_db(transaction=True)


def run_concurrently(count, func):
    """Start `count` threads at one barrier; return (results, errors)."""
    barrier = threading.Barrier(count)
    results, errors = [], []

    def body():
        barrier.wait()
        try:
            results.append(func())
        except Exception as exc:  # collected for the assertions
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=body) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, errors


@pytest.mark.parametrize(
    ("kind", "params", "priority", "field"),
    [
        ("nope", {}, None, "kind"),
        ("", {}, None, "kind"),
        (None, {}, None, "kind"),
        ("probe", [], None, "params"),
        ("probe", "x", None, "params"),
        ("probe", {"sleep_seconds": -1}, None, "sleep_seconds"),
        ("probe", {"sleep_seconds": "1"}, None, "sleep_seconds"),
        ("probe", {"fail_attempts": True}, None, "fail_attempts"),
        ("probe", {"surprise": 1}, None, "surprise"),
        ("sales_summary", {"format": "pdf"}, None, "format"),
        ("sales_summary", {"date_from": "2026-13-01"}, None, "date_from"),
        ("http_export", {"url": "ftp://127.0.0.1/x"}, None, "url"),
        ("http_export", {"url": "http://169.254.169.254/latest"}, None, "url"),
        ("probe", {}, "urgent", "priority"),
        ("probe", {"blob": "x" * (64 * 1024)}, None, "params"),
    ],
)
def test_bad_submissions_name_the_field_and_write_nothing(kind, params, priority, field, redis_conn):
    with pytest.raises(InvalidParams) as caught:
        submit_task(kind=kind, params=params, priority=priority)
    assert caught.value.field == field
    assert not ReportTask.objects.exists()
    assert redis_conn.llen("rq:queue:default") == 0


def test_submit_enqueues_one_job_after_commit(redis_conn):
    task = submit_task(kind="probe", params={}).task
    assert redis_conn.lrange("rq:queue:default", 0, -1) == [f"report-{task.pk}-1".encode()]


def test_twenty_concurrent_submits_with_one_key_make_one_task(redis_conn):
    results, errors = run_concurrently(
        20, lambda: submit_task(kind="probe", params={"sleep_seconds": 1}, idempotency_key="client-42")
    )
    assert errors == []
    assert len({result.task.pk for result in results}) == 1
    assert sum(result.created for result in results) == 1
    assert ReportTask.objects.count() == 1
    assert redis_conn.llen("rq:queue:default") == 1


def test_same_key_with_other_params_is_a_conflict():
    submit_task(kind="probe", params={}, idempotency_key="k1")
    with pytest.raises(IdempotencyConflict):
        submit_task(kind="probe", params={"sleep_seconds": 2}, idempotency_key="k1")
    assert ReportTask.objects.count() == 1


def test_a_new_key_costs_one_statement_and_a_repeat_one_more_read(redis_conn):
    with CaptureQueriesContext(connection) as first:
        created = submit_task(kind="probe", params={}, idempotency_key="k2")
    with CaptureQueriesContext(connection) as again:
        repeat = submit_task(kind="probe", params={}, idempotency_key="k2")

    assert [q["sql"].split()[0] for q in first.captured_queries] == ["INSERT"]
    assert [q["sql"].split()[0] for q in again.captured_queries] == ["INSERT", "SELECT"]
    assert created.created and not repeat.created and repeat.task.pk == created.task.pk
    assert redis_conn.lrange("rq:queue:default", 0, -1) == [f"report-{created.task.pk}-1".encode()]


def test_a_repeated_key_inside_a_callers_transaction_leaves_it_usable(redis_conn):
    first = submit_task(kind="probe", params={}, idempotency_key="k3").task
    with transaction.atomic():
        repeat = submit_task(kind="probe", params={}, idempotency_key="k3")
        other = submit_task(kind="probe", params={}).task  # the transaction still takes statements

    assert repeat.task.pk == first.pk and not repeat.created
    assert ReportTask.objects.filter(pk=other.pk).exists()
    assert redis_conn.llen("rq:queue:default") == 2


def test_twenty_concurrent_replays_make_one_run(start_worker, redis_conn):
    letter = make_dead_letter()
    results, errors = run_concurrently(
        20, lambda: replay_task(task_id=letter.task_id, actor="op", source="test")
    )
    assert len(results) == 1
    assert len(errors) == 19 and all(isinstance(error, TaskNotReplayable) for error in errors)
    assert {error.replayed_by for error in errors} == {"op"}
    assert redis_conn.lrange("rq:queue:default", 0, -1) == [f"report-{letter.task_id}-4".encode()]
    letter.refresh_from_db()
    assert letter.status == DeadLetterStatus.REPLAYED and letter.replayed_by == "op"
    assert AuditEntry.objects.filter(action="replay", task_id=letter.task_id).count() == 1

    start_worker()
    task = wait_until(
        lambda: ReportTask.objects.filter(pk=letter.task_id, status=TaskStatus.DONE).first(),
        message="the replayed task to finish",
    )
    assert task.attempt == 4 and task.max_attempts == 6
    assert task.attempts.filter(outcome="succeeded").count() == 1


def test_replaying_something_not_dead_changes_nothing(redis_conn):
    task = submit_task(kind="probe", params={}).task
    redis_conn.flushall()
    with pytest.raises(TaskNotReplayable):
        replay_task(task_id=task.pk, actor="op")
    task.refresh_from_db()
    assert task.status == TaskStatus.PENDING and task.max_attempts == 3
    assert redis_conn.llen("rq:queue:default") == 0
    assert not AuditEntry.objects.exists()


def test_replay_with_edited_params_validates_and_keeps_the_original_in_the_audit(redis_conn):
    letter = make_dead_letter()
    with pytest.raises(InvalidParams):
        replay_task(task_id=letter.task_id, actor="op", params={"sleep_seconds": "soon"})
    assert ReportTask.objects.get(pk=letter.task_id).status == TaskStatus.DEAD

    replay_task(task_id=letter.task_id, actor="op", params={"sleep_seconds": 0.5})
    task = ReportTask.objects.get(pk=letter.task_id)
    assert task.params["sleep_seconds"] == 0.5
    diff = AuditEntry.objects.get(action="replay").details["params_diff"]
    assert diff["before"] == {} and diff["after"]["sleep_seconds"] == 0.5
    letter.refresh_from_db()
    assert letter.params == {}, "the dead letter keeps the params it died with"


def test_a_task_that_dies_again_after_replay_gets_a_new_dead_letter(start_worker, fast_retries):
    start_worker()
    task = submit_task(kind="probe", params={"fail_permanently": True}).task
    wait_until(lambda: task.dead_letters.count() == 1, message="the first death")
    replay_task(task_id=task.pk, actor="op")
    wait_until(lambda: task.dead_letters.count() == 2, message="the second death")
    first, second = task.dead_letters.order_by("id")
    assert first.status == DeadLetterStatus.REPLAYED and second.status == DeadLetterStatus.OPEN
    assert (first.attempts, second.attempts) == (1, 2)


def test_a_replay_starts_a_new_run_counted_from_one_with_a_fresh_budget(redis_conn, settings):
    settings.REPORT_MAX_ATTEMPTS = 3
    task = make_dead_letter().task  # died after attempts 1, 2, 3 of its first run
    assert (task.run_attempt, task.run_budget) == (3, 3)

    replay_task(task_id=task.pk, actor="op")

    task.refresh_from_db()
    assert (task.attempt, task.attempts_before_run, task.max_attempts) == (3, 3, 6)
    assert (task.run_attempt, task.run_budget) == (0, 3)
    task.attempt = 4  # what the next claim writes
    assert task.run_attempt == 1
