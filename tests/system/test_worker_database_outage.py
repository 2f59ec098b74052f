"""A database that stops answering must not wedge a worker silently: its statements give up after
REPORT_WORKER_DB_TIMEOUT, the failure is logged, the job is failed in RQ without using an
attempt, and the reaper delivers the task again once the database answers."""

import threading

import pytest
from django.db import connection, transaction
from django.db.models import F

from reports.models import ReportTask, TaskStatus
from reports.services import submit_task
from tests.conftest import wait_until
from tests.reaping import reap_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_claim_stuck_behind_a_lock_gives_up_loudly_and_the_task_runs_later(
        start_worker, settings, redis_conn):
    settings.REPORT_REENQUEUE_AFTER = 0
    task = submit_task(kind="probe", params={}).task
    holding, release = threading.Event(), threading.Event()

    def hold_the_row():  # a long transaction elsewhere: a row lock (PostgreSQL), the write lock (SQLite)
        try:
            with transaction.atomic():
                ReportTask.objects.filter(pk=task.pk).update(priority=F("priority"))
                holding.set()
                release.wait(60)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_row)
    holder.start()
    try:
        assert holding.wait(10)
        worker = start_worker(REPORT_WORKER_DB_TIMEOUT=1)
        wait_until(
            lambda: f"claim of task {task.pk} attempt 1 failed" in worker.output(),
            message="the stuck claim to give up and say so",
        )
        wait_until(
            lambda: redis_conn.hget(f"rq:job:report-{task.pk}-1", "status") == b"failed",
            message="RQ to fail the job",
        )
    finally:
        release.set()
        holder.join(10)

    def recovered():
        reap_tasks(use_lock=False)
        return ReportTask.objects.filter(pk=task.pk, status=TaskStatus.DONE).exists()

    wait_until(recovered, interval=0.2, message="the reaper to deliver the task again")
    assert ReportTask.objects.get(pk=task.pk).attempts.count() == 1  # the failed claim used none
    assert worker.process.poll() is None
