"""The pool worker's dequeue (reports/worker/pool_rq.py): in one round trip it releases the slots of
the attempts just recorded and takes the slot of the kind the next job names, so that job's claim
is a single statement; a slot taken for a claim that does not happen goes back at once, and a
slot an ordinary claim renewed meanwhile is left alone. The cap holds throughout."""

from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from reports.models import ReportTask, TaskStatus
from reports.services import claim_task, concurrency, submit_task
from reports.services.enqueue import enqueue_attempt
from reports.worker import pool_rq
from reports.worker.pool import PoolReportWorker

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def capped(settings, redis_conn):
    settings.REPORT_KIND_CONCURRENCY = {"probe": 1}
    settings.REPORT_KIND_DEFAULT_CONCURRENCY = 0
    return settings


@pytest.fixture
def worker(redis_conn):
    return PoolReportWorker(["default"], name="pool-rq-test")


def claim(task, slot, attempt=1):
    """As the pool worker claims a job the dequeue took a slot for: with the slot's kind, and when
    that matches nothing, the slot given back and the claim made the ordinary way."""
    claimed = claim_task(task_id=task.pk, attempt=attempt, worker="w", lease_seconds=12, kind=slot[0])
    if not isinstance(claimed, ReportTask):
        pool_rq.give_back_slot(f"report-{task.pk}-{attempt}", slot)
        claimed = claim_task(task_id=task.pk, attempt=attempt, worker="w", lease_seconds=12)
    return claimed


def redis_calls(redis_conn) -> int:
    return sum(stats["calls"] for stats in redis_conn.info("commandstats").values())


def test_the_dequeue_takes_the_slot_its_job_names_and_the_claim_is_one_statement(capped, worker, redis_conn):
    task = submit_task(kind="probe", params={"write_output": False}).task

    job, _ = pool_rq.dequeue(worker)

    slot = pool_rq.taken_slot(job)
    assert slot is not None and slot[0] == "probe"
    assert set(concurrency.holders("probe")) == {f"{task.pk}:1"}
    calls = redis_calls(redis_conn)
    with CaptureQueriesContext(connection) as queries:
        claimed = claim(task, slot)
    assert claimed.status == TaskStatus.RUNNING and claimed.kind == "probe"
    assert redis_calls(redis_conn) == calls + 1  # INFO itself: the claim waited for no Redis call
    statements = [query["sql"].split()[0] for query in queries]
    # PostgreSQL: the UPDATE and the attempt row in one statement, outside any transaction.
    assert statements == (["WITH"] if connection.vendor == "postgresql" else ["BEGIN", "UPDATE", "INSERT", "COMMIT"])
    assert set(concurrency.holders("probe")) == {f"{task.pk}:1"}


def test_a_claim_that_does_not_happen_gives_the_slot_back(capped, worker):
    task = submit_task(kind="probe", params={"write_output": False}).task
    job, _ = pool_rq.dequeue(worker)
    ReportTask.objects.filter(pk=task.pk).update(status=TaskStatus.CANCELLED)  # the delivery is a phantom now

    assert claim(task, pool_rq.taken_slot(job)) is None
    assert concurrency.holders("probe") == {}


def test_a_job_naming_another_kind_is_claimed_the_ordinary_way(capped, worker, redis_conn):
    task = submit_task(kind="sales_summary", params={}).task
    redis_conn.delete("rq:queue:default")
    enqueue_attempt(task_id=task.pk, attempt=1, priority="default", timeout=30, kind="probe")  # a forged hint

    job, _ = pool_rq.dequeue(worker)
    assert pool_rq.taken_slot(job)[0] == "probe"
    claimed = claim(task, pool_rq.taken_slot(job))

    assert claimed.status == TaskStatus.RUNNING and claimed.kind == "sales_summary"
    assert concurrency.holders("probe") == {}


def test_no_slot_is_taken_for_an_attempt_holding_one_or_for_a_full_kind(capped, worker, redis_conn):
    first = submit_task(kind="probe", params={}).task
    second = submit_task(kind="probe", params={}).task
    assert concurrency.acquire(kind="probe", task_id=first.pk, attempt=1, lease_seconds=60)  # a duplicate's

    job, _ = pool_rq.dequeue(worker)
    assert job.id == f"report-{first.pk}-1" and pool_rq.taken_slot(job) is None
    job, _ = pool_rq.dequeue(worker)
    assert job.id == f"report-{second.pk}-1" and pool_rq.taken_slot(job) is None  # the cap is full
    assert set(concurrency.holders("probe")) == {f"{first.pk}:1"}


def test_a_slot_renewed_by_an_ordinary_claim_is_not_given_back(capped, worker):
    task = submit_task(kind="probe", params={}).task
    job, _ = pool_rq.dequeue(worker)
    kind, score = pool_rq.taken_slot(job)
    # A duplicate delivery of the same attempt, claimed the ordinary way, renews the member.
    assert claim_task(task_id=task.pk, attempt=1, worker="w2", lease_seconds=12).status == TaskStatus.RUNNING

    concurrency.give_back(kind=kind, task_id=task.pk, attempt=1, score=score)

    assert set(concurrency.holders("probe")) == {f"{task.pk}:1"}


def test_a_retry_holding_its_slot_evicts_the_stale_slot_of_its_earlier_attempt(capped, worker, redis_conn):
    capped.REPORT_KIND_CONCURRENCY = {"probe": 2}
    task = submit_task(kind="probe", params={}).task
    redis_conn.delete("rq:queue:default")
    ReportTask.objects.filter(pk=task.pk).update(status=TaskStatus.RETRYING, attempt=1)
    assert concurrency.acquire(kind="probe", task_id=task.pk, attempt=1, lease_seconds=600)  # a killed worker's
    enqueue_attempt(task_id=task.pk, attempt=2, priority="default", timeout=30, kind="probe")

    job, _ = pool_rq.dequeue(worker)
    assert claim(task, pool_rq.taken_slot(job), attempt=2).attempt == 2

    assert set(concurrency.holders("probe")) == {f"{task.pk}:2"}


def test_the_dequeue_releases_the_recorded_attempts_slots_before_taking_the_next(capped, worker):
    """With a cap of 1, the next task of the kind is claimed at once, not parked: the slot of the
    attempt just recorded is released in the same round trip, before the next job's slot is taken."""
    first = submit_task(kind="probe", params={}).task
    second = submit_task(kind="probe", params={}).task
    job, _ = pool_rq.dequeue(worker)
    running = claim(first, pool_rq.taken_slot(job))
    ended = pool_rq.Ended(SimpleNamespace(job=job, execution=None), "done", running)

    job, _ = pool_rq.dequeue(worker, releasing=[ended])

    assert ended.slot_released and job.id == f"report-{second.pk}-1"
    assert set(concurrency.holders("probe")) == {f"{second.pk}:1"}
    assert claim(second, pool_rq.taken_slot(job)).status == TaskStatus.RUNNING


def test_a_job_of_a_full_kind_goes_back_to_the_head_while_a_completion_waits_to_be_carried(capped, worker, redis_conn):
    """The worker holds the slot of a completion it means to carry with the next claim: a job of a
    kind at its cap is not claimed the ordinary way (it would be parked) but put back where it was,
    and taken once that completion is recorded and its slot released."""
    first = submit_task(kind="probe", params={}).task
    second = submit_task(kind="probe", params={}).task
    job, _ = pool_rq.dequeue(worker)
    running = claim(first, pool_rq.taken_slot(job))

    assert pool_rq.dequeue(worker, full_goes_back=True) is pool_rq.FULL

    assert redis_conn.lrange("rq:queue:default", 0, -1) == [f"report-{second.pk}-1".encode()]
    assert set(concurrency.holders("probe")) == {f"{first.pk}:1"}
    ended = pool_rq.Ended(SimpleNamespace(job=job, execution=None), "done", running)
    job, _ = pool_rq.dequeue(worker, releasing=[ended], full_goes_back=True)
    assert job.id == f"report-{second.pk}-1" and pool_rq.taken_slot(job)[0] == "probe"


def test_the_dequeue_sends_its_script_by_digest_and_again_whole_to_a_redis_that_forgot_it(worker, redis_conn):
    tasks = [submit_task(kind="probe", params={"write_output": False}).task for _ in range(3)]
    redis_conn.script_flush()  # loaded by earlier tests on this server
    redis_conn.config_resetstat()

    taken = [pool_rq.dequeue(worker)[0].id]
    redis_conn.script_flush()  # what a restarted Redis has forgotten
    taken += [pool_rq.dequeue(worker)[0].id, pool_rq.dequeue(worker)[0].id]

    assert taken == [f"report-{task.pk}-1" for task in tasks]
    stats = redis_conn.info("commandstats")
    # The first dequeue's digest was unknown too (as to a new server): its whole text then as well.
    assert stats["cmdstat_evalsha"]["calls"] == 3
    assert stats["cmdstat_eval"]["calls"] == 2


def test_rqs_bookkeeping_frees_the_slot_wakes_its_waiter_and_goes_past_a_failing_command(capped, worker, redis_conn):
    """RQ's start and end of the jobs go as one script that also releases the slots not released
    yet: like a pipeline, a command that fails (here the worker's key is no hash) stops neither the
    others nor the wake-up of the slot's waiter, and the error is raised after."""
    from redis.exceptions import ResponseError
    from rq.job import JobStatus
    from rq.registry import FinishedJobRegistry

    first = submit_task(kind="probe", params={"write_output": False}).task
    waiting = submit_task(kind="probe", params={"write_output": False}).task
    job, queue = pool_rq.dequeue(worker)
    running = claim(first, pool_rq.taken_slot(job))
    redis_conn.delete("rq:queue:default")
    concurrency.park(kind="probe", task_id=waiting.pk, attempt=1, priority=waiting.priority, timeout=60)
    inflight = SimpleNamespace(job=job, queue=queue, execution=None)
    pool_rq.bookkeeping(worker, ended=[], starting=[inflight])
    assert inflight.execution is not None and redis_conn.hget(job.key, "status") == b"started"
    redis_conn.delete(worker.key)
    redis_conn.set(worker.key, "not a hash")

    with pytest.raises(ResponseError, match="WRONGTYPE"):
        pool_rq.bookkeeping(worker, ended=[pool_rq.Ended(inflight, "done", running)], idle_after=True)

    assert redis_conn.hget(job.key, "status") == JobStatus.FINISHED.value.encode()
    assert FinishedJobRegistry("default", connection=redis_conn).get_job_ids() == [job.id]
    assert concurrency.holders("probe") == {}
    assert redis_conn.lrange("rq:queue:default", 0, -1) == [f"report-{waiting.pk}-1".encode()]


def test_a_worker_with_idle_horses_takes_a_job_for_each_in_one_round_trip_in_the_queues_order(capped, worker, redis_conn):
    capped.REPORT_KIND_CONCURRENCY = {"probe": 2}
    tasks = [submit_task(kind="probe", params={"write_output": False}).task for _ in range(3)]
    redis_conn.script_load(pool_rq._POP)
    redis_conn.config_resetstat()

    jobs = pool_rq.dequeue_many(worker, wanted=2)

    stats = redis_conn.info("commandstats")
    assert stats["cmdstat_evalsha"]["calls"] == 1 and "cmdstat_eval" not in stats
    assert [job.id for job, _ in jobs] == [f"report-{task.pk}-1" for task in tasks[:2]]
    assert [pool_rq.taken_slot(job)[0] for job, _ in jobs] == ["probe", "probe"]
    assert redis_conn.lrange("rq:queue:default", 0, -1) == [f"report-{tasks[2].pk}-1".encode()]

    pool_rq.put_back(worker, jobs)  # a stop before the hand-overs: both back at the head, in order

    assert redis_conn.lrange("rq:queue:default", 0, -1) == [f"report-{task.pk}-1".encode() for task in tasks]
    assert concurrency.holders("probe") == {}


def test_a_later_job_of_a_kind_at_its_cap_goes_back_and_ends_the_batch(capped, worker, redis_conn):
    """Cap 1: the first job takes the slot; the second cannot, so it goes back to the head (taken
    alone later, it is claimed the ordinary way, parked if the kind is still full)."""
    first, second = (submit_task(kind="probe", params={"write_output": False}).task for _ in range(2))

    jobs = pool_rq.dequeue_many(worker, wanted=2)

    assert [job.id for job, _ in jobs] == [f"report-{first.pk}-1"]
    assert redis_conn.lrange("rq:queue:default", 0, -1) == [f"report-{second.pk}-1".encode()]
    assert set(concurrency.holders("probe")) == {f"{first.pk}:1"}
