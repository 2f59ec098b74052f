"""Worker crashes and Redis loss: the reaper brings every task to exactly one outcome."""

import os
import signal
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from deadletters.models import DeadLetter
from reports.models import AttemptOutcome, ReportTask, TaskStatus
from reports.services import claim_task, submit_task
from reports.services.enqueue import enqueue_attempt
from tests.conftest import (
    freeze_between_heartbeats,
    horse_pid_of_running_attempt,
    wait_until,
    worker_pid_of_running_attempt,
)
from tests.reaping import reap_tasks
from transport.connection import _redis

pytestmark = pytest.mark.django_db(transaction=True)


def status_of(task_id):
    return ReportTask.objects.values_list("status", flat=True).get(pk=task_id)


def reap_until(predicate, *, message, timeout=30):
    """Run reaper passes (as the periodic reaper would) until predicate holds."""

    def step():
        reap_tasks(use_lock=False)
        return predicate()

    return wait_until(step, timeout=timeout, interval=0.2, message=message)


def csv_files(task) -> list[str]:
    media = Path(settings.MEDIA_ROOT) / "reports" / str(task.public_id)
    return sorted(p.relative_to(media).as_posix() for p in media.rglob("*.csv"))


def test_work_horse_sigkilled_is_recorded_by_its_worker_at_once(start_worker, fast_retries):
    # A lease and a job timeout far beyond the test's patience, and no reaper: only the worker
    # noticing its horse's death can bring the task back.
    fast_retries.REPORT_JOB_TIMEOUT = 300
    fast_retries.REPORT_LEASE_SECONDS = 600
    worker = start_worker()
    task = submit_task(kind="probe", params={"sleep_seconds": 2}).task
    running = wait_until(
        lambda: ReportTask.objects.filter(pk=task.pk, status=TaskStatus.RUNNING).first(),
        message="the task to start",
    )

    os.kill(horse_pid_of_running_attempt(running), signal.SIGKILL)

    wait_until(lambda: status_of(task.pk) == TaskStatus.DONE, timeout=20, message="the retry to finish")
    done = ReportTask.objects.get(pk=task.pk)
    assert list(done.attempts.values_list("number", "outcome")) == [
        (1, AttemptOutcome.ABANDONED),
        (2, AttemptOutcome.SUCCEEDED),
    ]
    first = done.attempts.get(number=1)
    assert first.error_type == "reports.errors.WorkHorseKilled"
    assert first.error_message.startswith("the work-horse was killed by SIGKILL")
    assert csv_files(done) == ["attempt-2/probe.csv"]
    assert worker.process.poll() is None, "the worker survives its horse's death"


def test_a_poison_pill_dies_after_its_budget_with_the_cause(start_worker, fast_retries):
    fast_retries.REPORT_LEASE_SECONDS = 600  # no lease involved: the worker records each death
    start_worker()
    task = submit_task(kind="probe", params={"sleep_seconds": 30}).task

    for attempt in (1, 2, 3):  # the report takes its work-horse down every time (the OOM killer)
        running = wait_until(
            lambda n=attempt: ReportTask.objects.filter(pk=task.pk, status=TaskStatus.RUNNING,
                                                        attempt=n).first(),
            message=f"attempt {attempt} to start",
        )
        os.kill(horse_pid_of_running_attempt(running), signal.SIGKILL)

    wait_until(lambda: status_of(task.pk) == TaskStatus.DEAD, timeout=20, message="the task to die")
    dead = ReportTask.objects.get(pk=task.pk)
    assert list(dead.attempts.values_list("outcome", flat=True)) == [AttemptOutcome.ABANDONED] * 3
    letter = DeadLetter.objects.get(task=task)
    assert letter.error_type == "reports.errors.WorkHorseKilled"
    assert letter.error_message.startswith("the work-horse was killed 3 times: out of memory?")
    assert dead.last_error == f"{letter.error_type}: {letter.error_message}"


def test_whole_worker_sigkilled_is_recovered_after_its_heartbeat_lapses(start_worker, fast_retries):
    fast_retries.REPORT_JOB_TIMEOUT = 300  # the lease does not depend on it any more
    fast_retries.REPORT_HEARTBEAT_SECONDS = 0.5
    fast_retries.REPORT_LEASE_SECONDS = 2
    worker = start_worker()
    task = submit_task(kind="probe", params={"sleep_seconds": 3}).task
    running = wait_until(
        lambda: ReportTask.objects.filter(pk=task.pk, status=TaskStatus.RUNNING).first(),
        message="the task to start",
    )
    horse = horse_pid_of_running_attempt(running)

    os.killpg(worker.pid, signal.SIGKILL)  # the worker, its scheduler and (its own group) the horse
    os.kill(horse, signal.SIGKILL)
    worker.process.wait(10)
    start_worker()

    reap_until(lambda: status_of(task.pk) == TaskStatus.DONE, message="recovery and completion")
    done = ReportTask.objects.get(pk=task.pk)
    assert list(done.attempts.values_list("number", "outcome")) == [
        (1, AttemptOutcome.ABANDONED),
        (2, AttemptOutcome.SUCCEEDED),
    ]
    assert done.attempts.get(number=1).error_type == "reports.errors.LeaseExpired"
    assert csv_files(done) == ["attempt-2/probe.csv"]


def test_the_heartbeat_keeps_an_attempt_longer_than_its_lease(start_worker, fast_retries):
    # Six heartbeats to a lease: a loaded machine may delay one or two of them; with a one-second
    # lease, one stalled second of the worker (or of its database write) would lose the attempt.
    fast_retries.REPORT_HEARTBEAT_SECONDS = 0.5
    fast_retries.REPORT_LEASE_SECONDS = 3
    start_worker()
    task = submit_task(kind="probe", params={"sleep_seconds": 7}).task

    # The reaper runs all along; an attempt over two leases long is never taken from a live worker.
    reap_until(lambda: status_of(task.pk) == TaskStatus.DONE, message="the long attempt to finish")
    assert list(ReportTask.objects.get(pk=task.pk).attempts.values_list("number", "outcome")) == [
        (1, AttemptOutcome.SUCCEEDED)
    ]


def test_a_worker_killed_mid_job_is_recovered_by_the_reaper(start_worker, fast_retries):
    fast_retries.REPORT_HEARTBEAT_SECONDS = 0.5
    fast_retries.REPORT_LEASE_SECONDS = 2
    first = start_worker(scheduler=False)
    task = submit_task(kind="probe", params={"sleep_seconds": 3}).task
    running = wait_until(
        lambda: ReportTask.objects.filter(pk=task.pk, status=TaskStatus.RUNNING).first(),
        message="the task to start",
    )
    assert worker_pid_of_running_attempt(running) == first.pid

    first.kill(signal.SIGKILL)
    start_worker()

    reap_until(lambda: status_of(task.pk) == TaskStatus.DONE, message="recovery and completion")
    done = ReportTask.objects.get(pk=task.pk)
    outcomes = list(done.attempts.values_list("outcome", flat=True))
    assert outcomes == [AttemptOutcome.ABANDONED, AttemptOutcome.SUCCEEDED]
    assert csv_files(done) == [f"attempt-{done.attempt}/probe.csv"]


def test_orphaned_work_horse_dies_with_its_worker(start_worker, fast_retries):
    fast_retries.REPORT_HEARTBEAT_SECONDS = 0.5
    fast_retries.REPORT_LEASE_SECONDS = 2
    worker = start_worker()
    task = submit_task(kind="probe", params={"sleep_seconds": 3}).task
    running = wait_until(
        lambda: ReportTask.objects.filter(pk=task.pk, status=TaskStatus.RUNNING).first(),
        message="the task to start",
    )
    horse = horse_pid_of_running_attempt(running)

    worker.kill(signal.SIGKILL)  # the parent only: its horse would run on, but nobody could record it

    wait_until(lambda: not _alive(horse), timeout=30, message="the orphaned horse to die with its worker")
    start_worker()
    reap_until(lambda: status_of(task.pk) == TaskStatus.DONE, message="recovery and completion")
    done = ReportTask.objects.get(pk=task.pk)
    outcomes = list(done.attempts.values_list("outcome", flat=True))
    assert outcomes == [AttemptOutcome.ABANDONED, AttemptOutcome.SUCCEEDED]
    assert csv_files(done) == ["attempt-2/probe.csv"]


def test_a_worker_cut_off_past_its_lease_is_fenced_and_leaves_no_file(start_worker, fast_retries, redis_conn):
    fast_retries.REPORT_HEARTBEAT_SECONDS = 0.5
    fast_retries.REPORT_LEASE_SECONDS = 2
    stalled = start_worker()
    task = submit_task(kind="probe", params={"sleep_seconds": 1}).task
    wait_until(
        lambda: ReportTask.objects.filter(pk=task.pk, status=TaskStatus.RUNNING).exists(),
        message="attempt 1 to start",
    )
    # The worker freezes (a stop-the-world pause, a lost network) while its horse finishes: RQ
    # marks the job finished, the file is written, but the database still says running. Frozen
    # after a heartbeat: the claim says running before the horse is forked (frozen in between, no
    # horse would write a file), and inside a heartbeat it would hold SQLite's write lock.
    freeze_between_heartbeats(stalled, task)
    try:
        wait_until(lambda: csv_files(task) == ["attempt-1/probe.csv"], message="the horse's file")
        assert status_of(task.pk) == TaskStatus.RUNNING, "only the worker records the outcome"
        reap_until(  # taken back; the retry is then due at once (no backoff)
            lambda: task.attempts.filter(number=1, outcome=AttemptOutcome.ABANDONED).exists(),
            message="the lease to lapse",
        )
        assert csv_files(task) == [], "the file of an attempt taken back does not outlive it"
        start_worker()
        wait_until(lambda: status_of(task.pk) == TaskStatus.DONE, message="attempt 2 to finish")
    finally:
        os.kill(stalled.pid, signal.SIGCONT)

    wait_until(lambda: "late finisher fenced" in stalled.output(), message="the late result to be fenced")
    done = ReportTask.objects.get(pk=task.pk)
    assert done.attempt == 2 and done.output_file.endswith("attempt-2/probe.csv")
    assert list(done.attempts.values_list("number", "outcome")) == [
        (1, AttemptOutcome.ABANDONED),
        (2, AttemptOutcome.SUCCEEDED),
    ]
    assert csv_files(done) == ["attempt-2/probe.csv"]


def test_a_horse_that_overruns_its_timeout_is_killed_and_recorded_as_a_timeout(start_worker, fast_retries):
    fast_retries.REPORT_JOB_TIMEOUT = 1
    fast_retries.REPORT_HEARTBEAT_SECONDS = 0.5
    fast_retries.REPORT_MAX_ATTEMPTS = 1
    worker = start_worker()
    task = submit_task(kind="probe", params={"sleep_seconds": 5}).task
    running = wait_until(
        lambda: ReportTask.objects.filter(pk=task.pk, status=TaskStatus.RUNNING).first(),
        message="the task to start",
    )
    # A horse its own alarm cannot reach (stuck in C code, or stopped): only its worker can end it.
    os.kill(horse_pid_of_running_attempt(running), signal.SIGSTOP)

    wait_until(lambda: status_of(task.pk) == TaskStatus.DEAD, timeout=20,
               message="the timeout to be recorded")
    [attempt] = ReportTask.objects.get(pk=task.pk).attempts.all()
    assert attempt.outcome == AttemptOutcome.TIMEOUT
    assert attempt.error_type == "rq.timeouts.JobTimeoutException"
    assert "overran its timeout of 1s and was killed by its worker" in attempt.error_message
    assert worker.process.poll() is None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_phantom_and_duplicate_deliveries_do_nothing(start_worker, redis_conn):
    task = submit_task(kind="probe", params={}).task
    # The same attempt delivered twice, and a stale attempt number that no longer matches.
    enqueue_attempt(task_id=task.pk, attempt=1, priority="default", timeout=30)
    enqueue_attempt(task_id=task.pk, attempt=5, priority="default", timeout=30)
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
        _redis.cache_clear()
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


def test_job_popped_by_a_worker_that_died_before_registering_it_is_reenqueued(
    start_worker, settings, redis_conn
):
    settings.REPORT_REENQUEUE_AFTER = 0
    task = submit_task(kind="probe", params={}).task
    # BLPOP took the id off the list, then the worker died: the job hash still says "queued".
    assert redis_conn.lpop("rq:queue:default") == f"report-{task.pk}-1".encode()
    assert redis_conn.hget(f"rq:job:report-{task.pk}-1", "status") == b"queued"
    start_worker()

    reap_until(lambda: status_of(task.pk) == TaskStatus.DONE,
               message="the lost job to be re-enqueued and run")
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
