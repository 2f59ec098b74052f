"""The pipeline on each storage backend (the local disk, and a real S3-compatible server): real
worker processes store outputs under per-attempt keys, an attempt taken back leaves no file, a
late finisher's upload is deleted, and downloads stream from the store behind the same checks."""

import os
import signal

import pytest
from django.core.files.storage import storages

from reports.models import AttemptOutcome, ReportTask, TaskStatus
from reports.services import submit_task
from tests.conftest import (
    freeze_between_heartbeats,
    has_exited,
    horse_pid_of_running_attempt,
    stored_names,
    wait_until,
    work_horse_of,
)
from tests.reaping import reap_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def status_of(task_id):
    return ReportTask.objects.values_list("status", flat=True).get(pk=task_id)


def taken_back(task) -> bool:
    """Attempt 1 counted abandoned (the task then retries: promoted at once, as its backoff is 0)."""
    return task.attempts.filter(number=1, outcome=AttemptOutcome.ABANDONED).exists()


def outputs_of(task) -> list[str]:
    prefix = f"reports/{task.public_id}"
    return [name.removeprefix(prefix + "/") for name in stored_names(storages["default"], prefix)]


def reap_until(predicate, *, message, timeout=30):
    def step():
        reap_tasks(use_lock=False)
        return predicate()

    return wait_until(step, timeout=timeout, interval=0.2, message=message)


@pytest.fixture
def s3_keys(report_storage, settings, request):
    """The keys under a prefix as the bucket itself lists them (the test's own key prefix cut)."""
    if report_storage != "s3":
        return lambda prefix: []
    server, location = request.getfixturevalue("s3_server"), settings.AWS_LOCATION
    return lambda prefix: [key.removeprefix(f"{location}/") for key in server.keys(f"{location}/{prefix}")]


@pytest.fixture
def short_leases(fast_retries):
    fast_retries.REPORT_HEARTBEAT_SECONDS = 0.5
    fast_retries.REPORT_LEASE_SECONDS = 2
    return fast_retries


def test_a_report_is_stored_per_attempt_and_downloaded_from_the_store(
    report_storage, start_worker, fast_retries, token_client, operator, media_root, s3_keys
):
    start_worker()
    task = submit_task(kind="probe", params={"fail_attempts": 1}).task

    wait_until(lambda: status_of(task.pk) == TaskStatus.DONE, message="the task to finish")
    done = ReportTask.objects.get(pk=task.pk)
    assert done.output_file == f"reports/{task.public_id}/attempt-2/probe.csv"
    assert outputs_of(done) == ["attempt-2/probe.csv"]
    if report_storage == "s3":
        assert s3_keys(f"reports/{task.public_id}/") == [f"reports/{task.public_id}/attempt-2/probe.csv"]
        assert not (media_root / "reports").exists(), "nothing may be written to the local disk"

    api = token_client.get(f"/report/task/{task.public_id}/output")
    assert api.status_code == 200
    assert api["Content-Disposition"] == 'attachment; filename="probe.csv"'
    assert api["Content-Type"] == "text/csv; charset=utf-8"
    body = b"".join(api.streaming_content).decode("utf-8-sig")
    assert body.splitlines() == ["task,attempt", f"{task.public_id},2"]

    token_client.defaults.pop("HTTP_AUTHORIZATION")
    assert token_client.get(f"/report/task/{task.public_id}/output").status_code in (401, 403)
    assert token_client.get(f"/console/tasks/{task.public_id}/output").status_code == 302  # to the login
    token_client.force_login(operator)
    console = token_client.get(f"/console/tasks/{task.public_id}/output")
    assert console.status_code == 200
    assert console["Content-Type"] == "text/csv; charset=utf-8"
    assert b"".join(console.streaming_content).decode("utf-8-sig") == body


def test_an_attempt_taken_back_leaves_no_file_in_the_store(report_storage, start_worker, short_leases):
    stalled = start_worker()
    task = submit_task(kind="probe", params={"sleep_seconds": 1}).task
    wait_until(lambda: status_of(task.pk) == TaskStatus.RUNNING, message="attempt 1 to start")
    # The worker freezes while its horse finishes and uploads: the store holds a file the
    # database never heard of.
    freeze_between_heartbeats(stalled, task)
    try:
        wait_until(lambda: outputs_of(task) == ["attempt-1/probe.csv"], message="the horse's upload")
        reap_until(lambda: taken_back(task), message="the lease to lapse")
        assert outputs_of(task) == [], "the file of an attempt taken back does not outlive it"
        start_worker()
        wait_until(lambda: status_of(task.pk) == TaskStatus.DONE, message="attempt 2 to finish")
    finally:
        os.kill(stalled.pid, signal.SIGCONT)
    wait_until(lambda: "late finisher fenced" in stalled.output(), message="the late result to be fenced")
    assert outputs_of(task) == ["attempt-2/probe.csv"]


def test_a_late_finishers_upload_is_deleted(report_storage, start_worker, short_leases):
    # One horse, which serves one job (its exit is what this test waits for).
    stalled = start_worker(REPORT_WORKER_CONCURRENCY=1, REPORT_HORSE_MAX_TASKS=1)
    # The lease lapses about 2.5 s in and the reaper then removes what the attempt stored; the
    # horse uploads at 6 s, seconds after that clean-up even on a loaded machine (at 3 s, a slow
    # clean-up could still be listing when the upload landed, and delete it before anyone saw it).
    task = submit_task(kind="probe", params={"sleep_seconds": 6}).task
    wait_until(lambda: status_of(task.pk) == TaskStatus.RUNNING, message="attempt 1 to start")
    horse = work_horse_of(stalled.pid)
    freeze_between_heartbeats(stalled, task)
    try:
        # Taken back before its horse wrote anything (a 2 s lease, a 5 s report, room for a slow
        # reaper pass on a loaded machine); the horse uploads afterwards.
        reap_until(lambda: taken_back(task), message="the lease to lapse")
        wait_until(lambda: outputs_of(task) == ["attempt-1/probe.csv"], message="the late upload")
        # Its result waits in the pipe: the worker, woken, reads it before its next heartbeat.
        # (Woken while the horse still ran, it would find the attempt taken back and kill it.)
        wait_until(lambda: has_exited(horse), message="the late finisher to exit")
    finally:
        os.kill(stalled.pid, signal.SIGCONT)
    wait_until(lambda: "late finisher fenced" in stalled.output(), message="the late result to be fenced")

    def late_upload_gone():
        status = status_of(task.pk)  # read first: attempt 2 finishing later cannot be credited here
        return status if "attempt-1/probe.csv" not in outputs_of(task) else None

    # The fence removes it; attempt 2 (6 s of sleep on the same worker, after the fence) would too,
    # as it finishes: the status read before the upload was seen gone says which one did.
    status_when_gone = wait_until(late_upload_gone, interval=0.02, message="the late upload to be deleted")
    assert status_when_gone != TaskStatus.DONE, "the fence, not attempt 2's clean-up, removes the late upload"
    wait_until(lambda: status_of(task.pk) == TaskStatus.DONE, message="attempt 2 to finish")
    done = ReportTask.objects.get(pk=task.pk)
    assert list(done.attempts.values_list("number", "outcome")) == [
        (1, AttemptOutcome.ABANDONED),
        (2, AttemptOutcome.SUCCEEDED),
    ]
    assert outputs_of(done) == ["attempt-2/probe.csv"]


def test_a_killed_horse_leaves_no_scratch_directory(start_worker, fast_retries, tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    start_worker(TMPDIR=scratch)
    task = submit_task(kind="probe", params={"sleep_seconds": 30}).task
    running = wait_until(
        lambda: ReportTask.objects.filter(pk=task.pk, status=TaskStatus.RUNNING).first(), message="attempt 1"
    )
    horse = horse_pid_of_running_attempt(running)
    leftover = scratch / f"report-horse-{horse}" / "half-written.csv"  # what a report it died in left
    leftover.write_text("task,attempt\n")

    os.kill(horse, signal.SIGKILL)

    wait_until(
        lambda: running.attempts.filter(number=1, outcome=AttemptOutcome.ABANDONED).exists(),
        message="the killed horse to be recorded",
    )
    wait_until(lambda: not leftover.parent.exists(), message="its scratch directory to go")


def test_a_task_that_dies_leaves_nothing_in_the_store(report_storage, start_worker, fast_retries, media_root):
    """A pool worker makes an attempt's directory ahead of its file; an attempt that fails takes it
    back, and the task's own directory goes with the last one."""
    start_worker()
    dead = [
        submit_task(kind="probe", params={"fail_permanently": True}).task,
        submit_task(kind="probe", params={"fail_attempts": 5}).task,
    ]
    wait_until(lambda: all(status_of(task.pk) == TaskStatus.DEAD for task in dead), timeout=60,
               message="both tasks to die")
    assert not [name for task in dead for name in outputs_of(task)]
    if report_storage == "filesystem":
        assert not list((media_root / "reports").glob("*"))
