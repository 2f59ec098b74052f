"""The pool worker's own promises, through real processes: horses are reused and recycled (after
REPORT_HORSE_MAX_TASKS, past REPORT_HORSE_MAX_RSS_MB), a lease taken back kills its horse, and a
retry pending when its whole worker is SIGKILLed runs again on time from another worker."""

import os
import signal

import pytest
from django.utils import timezone

from reports.errors import LeaseExpired, error_type_name
from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus
from reports.services import FailureInfo, record_attempt_failure, submit_task
from tests.conftest import horse_pid_of_running_attempt, wait_until
from tests.reaping import reap_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def horses_of(tasks) -> list[int]:
    """The horse pid of each task's first attempt, in task order."""
    rows = dict(
        ReportTask.objects.filter(pk__in=[t.pk for t in tasks])
        .values_list("pk", "attempts__worker")
    )
    return [int(rows[t.pk].rsplit(" horse ", 1)[1].split()[0]) for t in tasks]


def all_done(tasks) -> bool:
    done = ReportTask.objects.filter(pk__in=[t.pk for t in tasks], status=TaskStatus.DONE).count()
    return done == len(tasks)


def alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_horse_runs_many_attempts_and_is_recycled_after_its_maximum(start_worker, settings):
    settings.REPORT_WORKER_CONCURRENCY = 1
    settings.REPORT_HORSE_MAX_TASKS = 3
    tasks = [submit_task(kind="probe", params={"write_output": False}).task for _ in range(7)]
    worker = start_worker()

    wait_until(lambda: all_done(tasks), message="the tasks to finish")

    horses = horses_of(tasks)
    assert horses[0:3] == [horses[0]] * 3 and horses[3:6] == [horses[3]] * 3
    assert len({horses[0], horses[3], horses[6]}) == 3
    assert worker.process.poll() is None


def test_a_horse_past_its_memory_limit_is_replaced_after_its_attempt(start_worker, settings):
    settings.REPORT_WORKER_CONCURRENCY = 1
    settings.REPORT_HORSE_MAX_RSS_MB = 16  # below what any Django process holds
    tasks = [submit_task(kind="probe", params={"write_output": False}).task for _ in range(3)]
    start_worker()

    wait_until(lambda: all_done(tasks), message="the tasks to finish")

    assert len(set(horses_of(tasks))) == 3


def test_a_lease_taken_back_kills_the_horse_running_it(start_worker, fast_retries):
    fast_retries.REPORT_HEARTBEAT_SECONDS = 0.25
    fast_retries.REPORT_LEASE_SECONDS = 600
    fast_retries.REPORT_MAX_ATTEMPTS = 1
    worker = start_worker()
    task = submit_task(kind="probe", params={"sleep_seconds": 60}).task
    running = wait_until(lambda: ReportTask.objects.filter(pk=task.pk, status=TaskStatus.RUNNING).first(),
                         message="the task to start")
    horse = horse_pid_of_running_attempt(running)

    # What the reaper (or an operator's stop) does: the attempt is no longer this worker's.
    failure = FailureInfo(error_type_name(LeaseExpired("")), "taken back", "", retriable=False)
    assert record_attempt_failure(
        task_id=task.pk, attempt=1, failure=failure, outcome=AttemptOutcome.ABANDONED
    ) == TaskStatus.DEAD

    wait_until(lambda: not alive(horse), timeout=10, message="the horse to be killed at the next beat")
    assert worker.process.poll() is None
    # The pool replaced the horse: the next task runs.
    after = submit_task(kind="probe", params={"write_output": False}).task
    wait_until(lambda: all_done([after]), message="a task after the kill")


def test_a_retry_pending_when_its_whole_worker_dies_runs_again_on_time(start_worker, settings):
    settings.REPORT_RETRY_BACKOFF = (1.0,)
    settings.REPORT_RETRY_JITTER = 0.0
    settings.REPORT_HEARTBEAT_SECONDS = 0.5
    settings.REPORT_LEASE_SECONDS = 2
    first = start_worker()  # holds RQ's scheduler locks too
    task = submit_task(kind="probe", params={"sleep_seconds": 30}).task
    wait_until(lambda: ReportTask.objects.filter(pk=task.pk, status=TaskStatus.RUNNING).exists(),
               message="the start")

    os.killpg(first.pid, signal.SIGKILL)  # the worker, its scheduler, and (own groups) its horses
    killed_at = timezone.now()
    first.process.wait(10)
    start_worker()

    def taken_back():
        reap_tasks(use_lock=False)  # as the periodic reaper would
        attempts = ReportTask.objects.get(pk=task.pk).attempts
        return attempts.filter(number=1).exclude(outcome=AttemptOutcome.RUNNING).exists()

    wait_until(taken_back, timeout=30, interval=0.2,
               message="the lease to lapse and the reaper to take it back")
    second = wait_until(
        lambda: ReportTask.objects.get(pk=task.pk).attempts.filter(number=2).first(),
        timeout=15, interval=0.05, message="attempt 2 to start",
    )
    first_attempt = ReportTask.objects.get(pk=task.pk).attempts.get(number=1)
    detected = (first_attempt.finished_at - killed_at).total_seconds()
    rerun = (second.started_at - first_attempt.finished_at).total_seconds()
    print(f"killed -> detected {detected:.2f}s; detected -> running again {rerun:.2f}s (backoff 1 s)")
    assert first_attempt.outcome == AttemptOutcome.ABANDONED
    assert detected >= settings.REPORT_LEASE_SECONDS - 1  # the lease, not a live worker, ended it
    assert 1.0 <= rerun <= 1.0 + 2.0, "due by the row: no dead scheduler's lock to wait out"


def test_rq_suspend_stops_taking_tasks_and_keeps_serving_the_attempts_in_flight(start_worker, settings,
                                                                                redis_conn):
    """As with rq.Worker, a worker waiting for a job when `rq suspend` comes takes the next one, then
    heeds it; unlike rq.Worker's sleep, the suspended pool keeps recording and renewing the leases
    of the attempts in flight (the reaper would take them back), and takes no new job until resumed."""
    from rq.suspension import resume, suspend

    settings.REPORT_HEARTBEAT_SECONDS = 0.5
    settings.REPORT_LEASE_SECONDS = 2
    worker = start_worker()
    before = submit_task(kind="probe", params={"write_output": False}).task
    wait_until(lambda: all_done([before]), message="a task before the suspension")  # now waiting for the next
    suspend(redis_conn)
    first = submit_task(kind="probe", params={"sleep_seconds": 4, "write_output": False}).task

    def first_done():
        reap_tasks(use_lock=False)  # as the periodic reaper would: a lapsed lease is taken back
        return all_done([first])

    wait_until(first_done, timeout=30, interval=0.2, message="the task the waiting worker took")
    assert list(first.attempts.values_list("outcome", flat=True)) == [AttemptOutcome.SUCCEEDED]
    assert redis_conn.hget(f"rq:worker:{worker.name}", "state") == b"suspended"
    held = submit_task(kind="probe", params={"write_output": False}).task
    wait_until(lambda: redis_conn.llen("rq:queue:default") == 1, message="the task's job to be queued")
    assert ReportTask.objects.get(pk=held.pk).status == TaskStatus.PENDING

    resume(redis_conn)
    wait_until(lambda: all_done([held]), message="the task after `rq resume`")


def test_the_store_holds_a_directory_only_for_an_attempt_that_writes_a_file(start_worker, media_root):
    start_worker()
    with_file = submit_task(kind="probe", params={}).task
    without = submit_task(kind="probe", params={"write_output": False}).task
    wait_until(lambda: all_done([with_file, without]), message="the tasks to finish")

    attempt_dir = media_root / "reports" / str(with_file.public_id) / "attempt-1"
    assert [p.name for p in attempt_dir.iterdir()] == ["probe.csv"]
    assert not (media_root / "reports" / str(without.public_id)).exists()


def test_a_job_a_busy_worker_took_ahead_runs_on_a_free_worker_not_after_the_long_report(start_worker,
                                                                                        settings):
    """A worker whose one horse runs a long report takes the next job ahead, and gives it back to
    its queue after TAKE_AHEAD_SECONDS: a worker that is free runs it meanwhile."""
    settings.REPORT_WORKER_CONCURRENCY = 1
    long = submit_task(kind="probe", params={"write_output": False, "sleep_seconds": 30}).task
    short = submit_task(kind="probe", params={"write_output": False}).task
    busy = start_worker(name_prefix="busy")
    wait_until(lambda: ReportTask.objects.filter(pk=long.pk, status=TaskStatus.RUNNING).exists(),
               message="the long report")

    free = start_worker(name_prefix="free")

    wait_until(lambda: all_done([short]), timeout=20, message="the short report, on the free worker")
    assert TaskAttempt.objects.get(task=short).worker.startswith(f"{free.name} ")
    assert ReportTask.objects.get(pk=long.pk).status == TaskStatus.RUNNING
    assert TaskAttempt.objects.get(task=long).worker.startswith(f"{busy.name} ")


def test_rq_sees_each_report_job_as_its_own_worker_would_leave_it(start_worker, redis_conn):
    """The pool worker writes RQ's start and end of its report jobs itself (reports/worker/pool_rq.py):
    `rq info`, the dashboards and RQ's registry cleaning must find what rq.Worker leaves."""
    from rq.job import Job, JobStatus
    from rq.registry import FinishedJobRegistry, StartedJobRegistry
    from rq.results import Result

    from transport.serializer import JobSerializer

    tasks = [submit_task(kind="probe", params={"write_output": False}).task for _ in range(3)]
    worker = start_worker()
    wait_until(lambda: all_done(tasks), message="the tasks to finish")
    ids = [f"report-{task.pk}-1" for task in tasks]
    wait_until(lambda: int(redis_conn.hget(f"rq:worker:{worker.name}", "successful_job_count") or 0)
               == len(ids),
               message="RQ to be told of the ends")

    finished = FinishedJobRegistry("default", connection=redis_conn, serializer=JobSerializer)
    started = StartedJobRegistry("default", connection=redis_conn, serializer=JobSerializer)
    assert sorted(finished.get_job_ids()) == sorted(ids)
    assert started.get_job_ids() == []
    for job_id in ids:
        job = Job.fetch(job_id, connection=redis_conn, serializer=JobSerializer)
        assert job.get_status() == JobStatus.FINISHED
        assert job.worker_name == worker.name and job.started_at <= job.ended_at
        assert 0 < redis_conn.ttl(job.key) <= job.get_result_ttl(500)
        result = job.latest_result()
        assert result.type == Result.Type.SUCCESSFUL and result.return_value == "done"
        assert result.worker_name == worker.name and result.execution_id
        assert redis_conn.keys(f"rq:execution:{job_id}:*") == []
    assert redis_conn.hget(f"rq:worker:{worker.name}", "current_job") is None
    assert float(redis_conn.hget(f"rq:worker:{worker.name}", "total_working_time")) > 0
