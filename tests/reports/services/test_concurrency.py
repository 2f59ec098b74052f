"""Per-kind concurrency cap: a Redis semaphore with leases. Never more than N tasks of a kind
run at once across workers; a waiting task uses no attempt; a SIGKILLed worker's slot is
released by its lease and the remaining tasks complete."""

import os
import signal
import time

import pytest

from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus
from reports.services import concurrency, submit_task
from reports.services.batches import submit_batch
from tests.conftest import horse_pid_of_running_attempt, wait_until
from tests.reaping import reap_tasks

pytestmark = pytest.mark.django_db(transaction=True)

CAP = 2


def parent_pid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def live_holders() -> dict[str, float]:
    now = time.time()
    return {member: expiry for member, expiry in concurrency.holders("probe").items() if expiry > now}


def test_semaphore_takes_renews_and_frees_slots(settings, redis_conn):
    settings.REPORT_KIND_CONCURRENCY = {"probe": CAP}
    assert concurrency.acquire(kind="probe", task_id=1, attempt=1, lease_seconds=60)
    assert concurrency.acquire(kind="probe", task_id=2, attempt=1, lease_seconds=60)
    assert not concurrency.acquire(kind="probe", task_id=3, attempt=1, lease_seconds=60)
    assert concurrency.acquire(kind="probe", task_id=1, attempt=1, lease_seconds=60)  # renewal
    concurrency.release(kind="probe", task_id=2, attempt=1)
    # Long enough that a stalled test process cannot see it lapse between the next two lines.
    assert concurrency.acquire(kind="probe", task_id=3, attempt=1, lease_seconds=2)
    assert not concurrency.acquire(kind="probe", task_id=4, attempt=1, lease_seconds=60)
    wait_until(
        lambda: concurrency.acquire(kind="probe", task_id=4, attempt=1, lease_seconds=60),
        timeout=30,
        message="the short lease to expire and free its slot",
    )
    assert concurrency.acquire(kind="sales_summary", task_id=5, attempt=1, lease_seconds=1)  # no cap


def test_a_tasks_next_attempt_takes_over_the_slot_its_last_attempt_left(settings, redis_conn):
    """Attempt n is claimed only after attempt n-1 ended: a slot n-1 never released is stale."""
    settings.REPORT_KIND_CONCURRENCY = {"probe": 1}
    assert concurrency.acquire(kind="probe", task_id=7, attempt=1, lease_seconds=60)
    assert concurrency.acquire(kind="probe", task_id=7, attempt=2, lease_seconds=60)
    assert set(concurrency.holders("probe")) == {"7:2"}
    assert not concurrency.acquire(kind="probe", task_id=70, attempt=1, lease_seconds=60)  # "70:" is not "7:"


def test_a_claim_without_a_slot_waits_in_the_room_and_a_release_wakes_it(settings, redis_conn):
    from reports.services import CAP_REASON, ClaimDeferred, claim_task

    settings.REPORT_KIND_CONCURRENCY = {"probe": 1}
    settings.REPORT_REENQUEUE_AFTER = 0
    holder = submit_task(kind="probe", params={}).task
    waiter = submit_task(kind="probe", params={}).task
    redis_conn.delete("rq:queue:default")

    assert claim_task(task_id=holder.pk, attempt=1, worker="w1").status == TaskStatus.RUNNING
    assert claim_task(task_id=waiter.pk, attempt=1, worker="w2") == ClaimDeferred(CAP_REASON)
    waiter.refresh_from_db()
    assert (waiter.status, waiter.attempt, waiter.attempts.count()) == (TaskStatus.PENDING, 0, 0)
    assert reap_tasks(use_lock=False).reenqueued == 0  # waiting on purpose, not lost

    concurrency.release_and_wake(kind="probe", task_id=holder.pk, attempt=1)
    assert redis_conn.lrange("rq:queue:default", 0, -1) == [f"report-{waiter.pk}-1".encode()]
    assert claim_task(task_id=waiter.pk, attempt=1, worker="w2").status == TaskStatus.RUNNING


def test_a_kind_without_its_own_cap_has_the_default_cap(settings, redis_conn):
    from reports.services import CAP_REASON, ClaimDeferred, claim_task

    settings.REPORT_KIND_CONCURRENCY = {"sales_summary": 3}
    settings.REPORT_KIND_DEFAULT_CONCURRENCY = 1
    assert (concurrency.limit_for("probe"), concurrency.limit_for("sales_summary")) == (1, 3)
    first = submit_task(kind="probe", params={}).task
    second = submit_task(kind="probe", params={}).task

    assert claim_task(task_id=first.pk, attempt=1, worker="w1").status == TaskStatus.RUNNING
    assert claim_task(task_id=second.pk, attempt=1, worker="w2") == ClaimDeferred(CAP_REASON)
    concurrency.release_and_wake(kind="probe", task_id=first.pk, attempt=1)
    assert claim_task(task_id=second.pk, attempt=1, worker="w2").status == TaskStatus.RUNNING

    settings.REPORT_KIND_DEFAULT_CONCURRENCY = 0
    assert concurrency.limit_for("probe") is None


def test_cap_is_never_exceeded_and_a_killed_workers_slot_is_released_by_its_lease(
    start_worker, settings, fast_retries, redis_conn
):
    settings.REPORT_KIND_CONCURRENCY = {"probe": CAP}
    settings.REPORT_JOB_TIMEOUT = 5
    settings.REPORT_LEASE_GRACE = 1
    settings.REPORT_REENQUEUE_AFTER = 2
    workers = [start_worker(REPORT_KIND_CONCURRENCY=f"probe={CAP}") for _ in range(3)]

    # Phase 1: 8 tasks, 3 workers, cap 2.
    batch, _ = submit_batch(
        items=[{"kind": "probe", "params": {"sleep_seconds": 0.5, "write_output": False}}] * 8
    )
    seen = []

    def sample_phase_one():
        running = ReportTask.objects.filter(kind="probe", status=TaskStatus.RUNNING).count()
        holders = len(live_holders())
        assert running <= CAP and holders <= CAP, (running, holders)
        seen.append(running)
        return ReportTask.objects.filter(batch=batch, status=TaskStatus.DONE).count() == 8

    wait_until(sample_phase_one, timeout=120, interval=0.05, message="the capped batch to finish")
    assert max(seen) == CAP, "the cap was never reached: the test proved nothing"
    # Waiting for a slot used no attempt.
    assert set(batch.tasks.values_list("attempt", flat=True)) == {1}
    assert TaskAttempt.objects.filter(task__batch=batch).count() == 8

    # Phase 2: kill the worker that holds a slot; its lease frees the slot.
    victim = submit_task(kind="probe", params={"sleep_seconds": 3, "write_output": False}).task
    wait_until(
        lambda: ReportTask.objects.filter(pk=victim.pk, status=TaskStatus.RUNNING).exists(),
        timeout=60,
        message="the victim to start",
    )
    victim.refresh_from_db()
    horse = horse_pid_of_running_attempt(victim)
    [owner] = [w for w in workers if parent_pid(horse) == w.pid]
    # SIGKILL the worker's process group and its work-horse (RQ puts the horse in a group of its
    # own): nothing is left to release the slot, as after an OOM kill of the whole container.
    os.killpg(owner.pid, signal.SIGKILL)
    os.kill(horse, signal.SIGKILL)
    owner.process.wait(10)
    rest, _ = submit_batch(
        items=[{"kind": "probe", "params": {"sleep_seconds": 0.2, "write_output": False}}] * 4
    )
    leaked = f"{victim.pk}:1"
    assert leaked in live_holders(), "the killed worker's slot is still held until its lease ends"

    def recovered():
        assert len(live_holders()) <= CAP
        reap_tasks(use_lock=False)  # the reaper pass: expired task lease -> abandoned attempt -> retry
        concurrency.wake_all()  # beside it in the reaper loop: a freed slot wakes waiting tasks
        return (
            leaked not in live_holders()
            and ReportTask.objects.filter(status=TaskStatus.DONE).count() == 8 + 1 + 4
        )

    wait_until(recovered, timeout=120, interval=0.2, message="the slot to expire and every task to finish")
    victim.refresh_from_db()
    outcomes = list(victim.attempts.values_list("number", "outcome"))
    assert outcomes == [(1, AttemptOutcome.ABANDONED), (2, AttemptOutcome.SUCCEEDED)]
    assert set(rest.tasks.values_list("attempt", flat=True)) == {1}
