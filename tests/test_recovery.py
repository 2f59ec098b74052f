"""Worker crashes and Redis loss: the reaper brings every task to exactly one outcome."""

import signal
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from reports import queueing
from reports.models import AttemptOutcome, ReportTask, TaskStatus
from reports.services import claim_task, reap_tasks, submit_task
from tests.conftest import horse_pid_of_running_attempt, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def status_of(task_id):
    return ReportTask.objects.values_list("status", flat=True).get(pk=task_id)


def reap_until(predicate, *, message, timeout=30):
    """Run reaper passes (as the periodic reaper would) until predicate holds."""

    def step():
        reap_tasks(use_lock=False)
        return predicate()

    return wait_until(step, timeout=timeout, interval=0.2, message=message)


def test_work_horse_sigkilled_mid_job_is_recovered_and_completes_once(start_worker, fast_retries):
    fast_retries.REPORT_JOB_TIMEOUT = 3
    fast_retries.REPORT_LEASE_GRACE = 0
    worker = start_worker()
    task = submit_task(kind="probe", params={"sleep_seconds": 2}).task
    running = wait_until(
        lambda: ReportTask.objects.filter(pk=task.pk, status=TaskStatus.RUNNING).first(),
        message="the task to start",
    )

    horse = horse_pid_of_running_attempt(running)
    import os

    os.kill(horse, signal.SIGKILL)

    reap_until(lambda: status_of(task.pk) == TaskStatus.DONE, message="recovery and completion")
    done = ReportTask.objects.get(pk=task.pk)
    outcomes = list(done.attempts.values_list("number", "outcome"))
    assert outcomes == [(1, AttemptOutcome.ABANDONED), (2, AttemptOutcome.SUCCEEDED)]
    first = done.attempts.get(number=1)
    assert first.error_type == "reports.errors.LeaseExpired"
    media = Path(settings.MEDIA_ROOT) / "reports" / str(done.public_id)
    assert sorted(p.relative_to(media).as_posix() for p in media.rglob("*.csv")) == ["attempt-2/probe.csv"]
    assert worker.process.poll() is None, "the worker parent survives its horse's death"


def test_late_finisher_of_a_presumed_dead_attempt_is_fenced(start_worker, fast_retries):
    first_worker = start_worker()
    task = submit_task(kind="probe", params={"sleep_seconds": 2}).task
    running = wait_until(
        lambda: ReportTask.objects.filter(pk=task.pk, status=TaskStatus.RUNNING).first(),
        message="attempt 1 to start",
    )
    late_horse = horse_pid_of_running_attempt(running)
    # SIGKILL of the parent leaves the work-horse running on its own (RQ_FACTS): it will finish late.
    first_worker.kill(signal.SIGKILL)
    # Time passes beyond the lease: the reaper presumes the attempt dead.
    ReportTask.objects.filter(pk=task.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert reap_tasks(use_lock=False).abandoned == 1
    start_worker()

    wait_until(lambda: status_of(task.pk) == TaskStatus.DONE, timeout=30, message="attempt 2 to finish")
    wait_until(lambda: not _alive(late_horse), timeout=30, message="the late work-horse to finish")

    done = ReportTask.objects.get(pk=task.pk)
    assert done.attempt == 2 and done.output_file.endswith("attempt-2/probe.csv")
    assert list(done.attempts.values_list("number", "outcome")) == [
        (1, AttemptOutcome.ABANDONED),
        (2, AttemptOutcome.SUCCEEDED),
    ]
    media = Path(settings.MEDIA_ROOT) / "reports" / str(task.public_id)
    assert [p.relative_to(media).as_posix() for p in media.rglob("*.csv")] == ["attempt-2/probe.csv"]
    assert "late finisher fenced" in first_worker.output()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_phantom_and_duplicate_deliveries_do_nothing(start_worker, redis_conn):
    task = submit_task(kind="probe", params={}).task
    # The same attempt delivered twice, and a stale attempt number that no longer matches.
    queueing.enqueue_attempt(task_id=task.pk, attempt=1, priority="default", timeout=30)
    queueing.enqueue_attempt(task_id=task.pk, attempt=5, priority="default", timeout=30)
    assert redis_conn.llen("rq:queue:default") >= 2
    start_worker()

    wait_until(
        lambda: redis_conn.llen("rq:queue:default") == 0 and status_of(task.pk) == TaskStatus.DONE,
        message="all deliveries to be consumed",
    )
    done = ReportTask.objects.get(pk=task.pk)
    assert done.attempt == 1
    assert done.attempts.count() == 1


@pytest.mark.parametrize("loss", ["flushall", "restart"])
def test_tasks_survive_redis_loss(loss, start_worker, settings, redis_server, redis_conn):
    settings.REPORT_RETRY_BACKOFF = (1.0,)
    settings.REPORT_RETRY_JITTER = 0.0
    settings.REPORT_REENQUEUE_AFTER = 0
    first = start_worker()
    flaky = [submit_task(kind="probe", params={"fail_attempts": 1}).task.pk for _ in range(5)]
    wait_until(
        lambda: ReportTask.objects.filter(pk__in=flaky, status=TaskStatus.RETRYING).count() == 5,
        message="the flaky tasks to be scheduled for retry",
    )
    first.kill(signal.SIGKILL)
    pending = [submit_task(kind="probe", params={}).task.pk for _ in range(5)]
    assert ReportTask.objects.filter(pk__in=pending, status=TaskStatus.PENDING).count() == 5

    if loss == "flushall":
        redis_conn.flushall()
    else:
        redis_server.restart()
        queueing._redis.cache_clear()
    assert redis_conn.dbsize() == 0
    start_worker()

    everything = flaky + pending
    reap_until(
        lambda: ReportTask.objects.filter(pk__in=everything, status=TaskStatus.DONE).count() == 10,
        message="every task to finish after the Redis loss",
    )
    for task in ReportTask.objects.filter(pk__in=everything):
        assert task.attempts.filter(outcome=AttemptOutcome.SUCCEEDED).count() == 1


def test_two_reapers_at_once_recover_an_expired_lease_once(redis_conn):
    task = submit_task(kind="probe", params={}).task
    redis_conn.flushall()  # no worker here: the test plays the worker that claims then dies
    claim_task(task_id=task.pk, attempt=1, worker="doomed pid 1")
    ReportTask.objects.filter(pk=task.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=5))

    results = []
    barrier = threading.Barrier(2)

    def reaper():
        barrier.wait()
        try:
            results.append(reap_tasks(use_lock=False).abandoned)
        finally:
            connection.close()

    threads = [threading.Thread(target=reaper) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results) == [0, 1]
    task.refresh_from_db()
    assert task.status == TaskStatus.RETRYING and task.attempt == 1
    assert list(task.attempts.values_list("outcome", flat=True)) == [AttemptOutcome.ABANDONED]


def test_reaper_lock_lets_one_pass_run(redis_conn):
    lock = redis_conn.lock("reports:reaper-lock", timeout=30)
    assert lock.acquire(blocking=False)
    try:
        assert reap_tasks().skipped_locked
    finally:
        lock.release()
    assert not reap_tasks().skipped_locked


def test_job_popped_by_a_worker_that_died_before_registering_it_is_reenqueued(start_worker, settings, redis_conn):
    settings.REPORT_REENQUEUE_AFTER = 0
    task = submit_task(kind="probe", params={}).task
    # BLPOP took the id off the list, then the worker died: the job hash still says "queued".
    assert redis_conn.lpop("rq:queue:default") == f"report-{task.pk}-1".encode()
    assert redis_conn.hget(f"rq:job:report-{task.pk}-1", "status") == b"queued"
    start_worker()

    reap_until(lambda: status_of(task.pk) == TaskStatus.DONE, message="the lost job to be re-enqueued and run")
    assert ReportTask.objects.get(pk=task.pk).attempts.count() == 1


def test_a_long_legitimate_backlog_does_not_hide_a_lost_task(settings, redis_conn):
    settings.REPORT_REENQUEUE_AFTER = 0
    backlog = [submit_task(kind="probe", params={}).task for _ in range(30)]
    lost = submit_task(kind="probe", params={}).task
    redis_conn.lrem("rq:queue:default", 0, f"report-{lost.pk}-1")

    report = reap_tasks(batch_size=7)  # the lost task sits behind four full chunks

    assert report.reenqueued == 1
    queued = redis_conn.lrange("rq:queue:default", 0, -1)
    assert queued.count(f"report-{lost.pk}-1".encode()) == 1
    assert all(queued.count(f"report-{task.pk}-1".encode()) == 1 for task in backlog)
