"""RQ jobs are JSON (they carry only integers): a payload in Redis cannot run code when it is read,
and a job that is not JSON (a pickle) is refused and its task recovered by the reaper, as any lost
job is."""

import zlib

import pytest
from rq import Queue

from reports.models import ReportTask, TaskStatus
from reports.services import submit_task
from tests.conftest import wait_until
from tests.reaping import reap_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def pickled_the_old_way(redis_conn, task) -> str:
    """Replace the task's queued JSON job by a pickled job, as bare RQ writes them."""
    job_id = f"report-{task.pk}-1"
    redis_conn.delete("rq:queue:default", f"rq:job:{job_id}")
    Queue("default", connection=redis_conn).enqueue_call(
        "reports.worker.report_job.run_report_task", args=(task.pk, 1), job_id=job_id, timeout=60
    )
    assert zlib.decompress(redis_conn.hget(f"rq:job:{job_id}", "data"))[:1] == b"\x80"
    return job_id


def status_of(task) -> str:
    return ReportTask.objects.values_list("status", flat=True).get(pk=task.pk)


def test_jobs_are_written_as_json(redis_conn):
    task = submit_task(kind="probe", params={}).task

    data = zlib.decompress(redis_conn.hget(f"rq:job:report-{task.pk}-1", "data"))

    assert data == b'["reports.worker.report_job.run_report_task",null,[%d,1],{}]' % task.pk


def test_a_pickled_job_is_refused_and_its_task_recovered_by_the_reaper(start_worker, redis_conn, settings):
    settings.REPORT_REENQUEUE_AFTER = 0
    task = submit_task(kind="probe", params={}).task
    job_id = pickled_the_old_way(redis_conn, task)
    start_worker()

    wait_until(lambda: redis_conn.hget(f"rq:job:{job_id}", "status") == b"failed", message="the refusal")
    assert status_of(task) == TaskStatus.PENDING

    def recovered():
        reap_tasks(use_lock=False)
        return status_of(task) == TaskStatus.DONE

    wait_until(recovered, interval=0.2, message="the reaper to re-enqueue the task as JSON")
    assert ReportTask.objects.get(pk=task.pk).attempts.count() == 1
