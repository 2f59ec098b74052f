"""Jobs we did not write, or whose data is broken, are dropped without killing the worker."""

import pytest
from rq import Queue

from reports.models import ReportTask, TaskStatus
from reports.services import submit_task
from tests.conftest import wait_until
from transport.serializer import JobSerializer

pytestmark = pytest.mark.django_db(transaction=True)


def test_malformed_payloads_are_dropped_and_the_worker_keeps_working(start_worker, redis_conn):
    queue = Queue("default", connection=redis_conn, serializer=JobSerializer)
    queue.enqueue_call("reports.worker.report_job.run_report_task", args=("not-a-number", None))
    queue.enqueue_call("reports.worker.report_job.run_report_task", args=(1, 1, "extra"))
    queue.enqueue_call("reports.worker.report_job.run_report_task", args=(1, 1), kwargs={"x": 1})
    queue.enqueue_call("reports.worker.report_job.no_such_function", args=(1, 1))
    redis_conn.rpush("rq:queue:default", "job-without-a-hash")
    redis_conn.hset("rq:job:garbage-data", mapping={"data": b"\x00not json", "status": "queued"})
    redis_conn.rpush("rq:queue:default", "garbage-data")
    # A pickle is refused unread: it could carry code.
    Queue("default", connection=redis_conn).enqueue_call("reports.worker.report_job.run_report_task",
                                                         args=(1, 1))
    task = submit_task(kind="probe", params={}).task
    worker = start_worker()

    wait_until(
        lambda: ReportTask.objects.filter(pk=task.pk, status=TaskStatus.DONE).exists(),
        message="the real task behind the garbage to finish",
    )
    assert worker.process.poll() is None
    assert "dropped malformed report job payload" in worker.output()


def test_a_job_naming_a_function_off_the_allowlist_runs_nothing(start_worker, redis_conn, tmp_path):
    """JSON payloads stop pickles, but RQ imports and calls whatever function a job names: a
    Redis writer's `os.mkdir` job must be refused before import, logged once, and the worker lives."""
    proof = tmp_path / "proof-dir"
    queue = Queue("default", connection=redis_conn, serializer=JobSerializer)
    queue.enqueue_call("os.mkdir", args=(str(proof),))
    queue.enqueue_call("os.mkdir", args=(str(proof),))
    task = submit_task(kind="probe", params={}).task
    worker = start_worker()

    wait_until(
        lambda: ReportTask.objects.filter(pk=task.pk, status=TaskStatus.DONE).exists(),
        message="the real task behind the forged jobs to finish",
    )
    assert not proof.exists()
    assert worker.process.poll() is None
    assert worker.output().count("refused a job function 'os.mkdir'") == 1
