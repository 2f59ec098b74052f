"""The allowlist of job functions: what a job names is imported only when an app declared it."""

import sys

import pytest
from rq import Callback, Queue

from transport.registry import AllowlistedJob, JobFunctionRefused, allowed_job_functions
from transport.serializer import JobSerializer


@pytest.fixture
def queue(redis_conn):
    return Queue("default", connection=redis_conn, serializer=JobSerializer, job_class=AllowlistedJob)


def _fetched(queue, job):
    return AllowlistedJob.fetch(job.id, connection=queue.connection, serializer=JobSerializer)


def test_the_apps_declare_their_job_functions():
    assert allowed_job_functions() == {
        "reports.worker.report_job.run_report_task",
        "reports.worker.report_job.fan_out_batch",
        "deadletters.alerts.jobs.send_alerts_job",
        "deadletters.bulk.jobs.run_bulk_action_job",
    }


def test_an_allowed_function_resolves(queue):
    job = _fetched(queue, queue.enqueue_call("reports.worker.report_job.run_report_task", args=(1, 1)))
    assert job.func.__name__ == "run_report_task"


def test_a_function_off_the_list_is_refused_without_being_imported(queue, caplog):
    assert "xml.dom.pulldom" not in sys.modules
    job = _fetched(queue, queue.enqueue_call("xml.dom.pulldom.parse", args=("/etc/passwd",)))
    with pytest.raises(JobFunctionRefused):
        job.func  # noqa: B018 - the property is the check
    with pytest.raises(JobFunctionRefused):
        job.func  # noqa: B018
    assert "xml.dom.pulldom" not in sys.modules
    assert sum("xml.dom.pulldom.parse" in r.getMessage() for r in caplog.records) == 1


def test_a_callback_off_the_list_is_refused(queue):
    job = queue.enqueue_call(
        "reports.worker.report_job.run_report_task", args=(1, 1), on_success=Callback("os.mkdir")
    )
    with pytest.raises(JobFunctionRefused):
        _fetched(queue, job).success_callback  # noqa: B018
