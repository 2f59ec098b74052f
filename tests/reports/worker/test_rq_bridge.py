"""The worker's bridge to RQ (reports/worker/rq_bridge.py): in one round trip the dequeue releases
the slots of the attempts just recorded and takes the slot of the kind each next job names, so
its claim is a single statement; a slot taken for a claim that does not happen goes back at once,
and a slot an ordinary claim renewed meanwhile is left alone. The cap holds throughout. RQ's
bookkeeping of starts and ends is one script."""

from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from reports.models import ReportTask, TaskStatus
from reports.services import claim_task, concurrency, submit_task
from reports.services.enqueue import enqueue_attempt
from reports.worker import rq_bridge
from reports.worker.worker import ReportWorker

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def capped(settings, redis_conn):
    settings.REPORT_KIND_CONCURRENCY = {"probe": 1}
    settings.REPORT_KIND_DEFAULT_CONCURRENCY = 0
    return settings


@pytest.fixture
def worker(redis_conn):
    return ReportWorker(["default"], name="rq-bridge-test")


def dequeue(worker):
    return rq_bridge.dequeue_many(worker, wanted=1)[0]


def claim(worker, job, queue):
    """As the worker claims a job: with the kind of the slot the dequeue took for it, and when that
    matches nothing, the slot given back and the claim made the ordinary way."""
    task_id, attempt = rq_bridge.report_attempt_of(job)
    return worker._claim(job, queue, SimpleNamespace(pid=1), task_id, attempt)


def redis_calls(redis_conn) -> int:
    return sum(stats["calls"] for stats in redis_conn.info("commandstats").values())


def test_the_dequeue_takes_the_slot_its_job_names_and_the_claim_is_one_statement(capped, worker, redis_conn):
    task = submit_task(kind="probe", params={"write_output": False}).task

    job, queue = dequeue(worker)

    slot = rq_bridge.taken_slot(job)
    assert slot is not None and slot[0] == "probe"
    assert set(concurrency.holders("probe")) == {f"{task.pk}:1"}
    calls = redis_calls(redis_conn)
    with CaptureQueriesContext(connection) as queries:
        claimed = claim(worker, job, queue)
    assert claimed.status == TaskStatus.RUNNING and claimed.kind == "probe"
    assert redis_calls(redis_conn) == calls + 1  # INFO itself: the claim waited for no Redis call
    statements = [query["sql"].split()[0] for query in queries]
    # PostgreSQL: the UPDATE and the attempt row in one statement, outside any transaction.
    assert statements == (["WITH"] if connection.vendor == "postgresql"
                          else ["BEGIN", "UPDATE", "INSERT", "COMMIT"])
    assert set(concurrency.holders("probe")) == {f"{task.pk}:1"}


def test_a_claim_that_does_not_happen_gives_the_slot_back(capped, worker):
    task = submit_task(kind="probe", params={"write_output": False}).task
    job, queue = dequeue(worker)
    ReportTask.objects.filter(pk=task.pk).update(status=TaskStatus.CANCELLED)  # the delivery is a phantom now

    assert claim(worker, job, queue) is None
    assert concurrency.holders("probe") == {}


def test_a_job_naming_another_kind_is_claimed_the_ordinary_way(capped, worker, redis_conn):
    task = submit_task(kind="sales_summary", params={}).task
    redis_conn.delete("rq:queue:default")
    enqueue_attempt(task_id=task.pk, attempt=1, priority="default", timeout=30, kind="probe")  # a forged hint

    job, queue = dequeue(worker)
    assert rq_bridge.taken_slot(job)[0] == "probe"
    claimed = claim(worker, job, queue)

    assert claimed.status == TaskStatus.RUNNING and claimed.kind == "sales_summary"
    assert concurrency.holders("probe") == {}


def test_no_slot_is_taken_for_an_attempt_holding_one_or_for_a_full_kind(capped, worker, redis_conn):
    first = submit_task(kind="probe", params={}).task
    second = submit_task(kind="probe", params={}).task
    assert concurrency.acquire(kind="probe", task_id=first.pk, attempt=1, lease_seconds=60)  # a duplicate's

    job, queue = dequeue(worker)
    assert job.id == f"report-{first.pk}-1" and rq_bridge.taken_slot(job) is None
    job, queue = dequeue(worker)
    assert job.id == f"report-{second.pk}-1" and rq_bridge.taken_slot(job) is None  # the cap is full
    assert set(concurrency.holders("probe")) == {f"{first.pk}:1"}


def test_a_slot_renewed_by_an_ordinary_claim_is_not_given_back(capped, worker):
    task = submit_task(kind="probe", params={}).task
    job, queue = dequeue(worker)
    kind, score = rq_bridge.taken_slot(job)
    # A duplicate delivery of the same attempt, claimed the ordinary way, renews the member.
    assert claim_task(task_id=task.pk, attempt=1, worker="w2", lease_seconds=12).status == TaskStatus.RUNNING

    concurrency.give_back(kind=kind, task_id=task.pk, attempt=1, score=score)

    assert set(concurrency.holders("probe")) == {f"{task.pk}:1"}


def test_a_retry_holding_its_slot_evicts_the_stale_slot_of_its_earlier_attempt(capped, worker, redis_conn):
    capped.REPORT_KIND_CONCURRENCY = {"probe": 2}
    task = submit_task(kind="probe", params={}).task
    redis_conn.delete("rq:queue:default")
    ReportTask.objects.filter(pk=task.pk).update(status=TaskStatus.RETRYING, attempt=1)
    # a killed worker's
    assert concurrency.acquire(kind="probe", task_id=task.pk, attempt=1, lease_seconds=600)
    enqueue_attempt(task_id=task.pk, attempt=2, priority="default", timeout=30, kind="probe")

    job, queue = dequeue(worker)
    assert claim(worker, job, queue).attempt == 2

    assert set(concurrency.holders("probe")) == {f"{task.pk}:2"}


def test_the_dequeue_releases_the_recorded_attempts_slots_before_taking_the_next(capped, worker):
    """With a cap of 1, the next task of the kind is claimed at once, not parked: the slot of the
    attempt just recorded is released in the same round trip, before the next job's slot is taken."""
    submit_task(kind="probe", params={})
    second = submit_task(kind="probe", params={}).task
    job, queue = dequeue(worker)
    running = claim(worker, job, queue)
    ended = rq_bridge.Ended(job, None, "done", running)

    [(job, queue)] = rq_bridge.dequeue_many(worker, wanted=1, releasing=[ended])

    assert ended.slot_released and job.id == f"report-{second.pk}-1"
    assert set(concurrency.holders("probe")) == {f"{second.pk}:1"}
    assert claim(worker, job, queue).status == TaskStatus.RUNNING


def test_the_dequeue_sends_its_script_by_digest_and_again_whole_to_a_redis_that_forgot_it(worker, redis_conn):
    tasks = [submit_task(kind="probe", params={"write_output": False}).task for _ in range(3)]
    redis_conn.script_flush()  # loaded by earlier tests on this server
    redis_conn.config_resetstat()

    taken = [dequeue(worker)[0].id]
    redis_conn.script_flush()  # what a restarted Redis has forgotten
    taken += [dequeue(worker)[0].id, dequeue(worker)[0].id]

    assert taken == [f"report-{task.pk}-1" for task in tasks]
    stats = redis_conn.info("commandstats")
    # The first dequeue's digest was unknown too (as to a new server): its whole text then as well.
    assert stats["cmdstat_evalsha"]["calls"] == 3
    assert stats["cmdstat_eval"]["calls"] == 2


def test_rqs_bookkeeping_frees_the_slot_wakes_its_waiter_and_goes_past_a_failing_command(
        capped, worker, redis_conn):
    """RQ's start and end of the jobs go as one script that also releases the slots not released
    yet: like a pipeline, a command that fails (here the worker's key is no hash) stops neither the
    others nor the wake-up of the slot's waiter, and the error is raised after."""
    from redis.exceptions import ResponseError
    from rq.job import JobStatus
    from rq.registry import FinishedJobRegistry

    submit_task(kind="probe", params={"write_output": False})
    waiting = submit_task(kind="probe", params={"write_output": False}).task
    job, queue = dequeue(worker)
    running = claim(worker, job, queue)
    redis_conn.delete("rq:queue:default")
    concurrency.park(kind="probe", task_id=waiting.pk, attempt=1, priority=waiting.priority, timeout=60)
    [execution] = rq_bridge.bookkeeping(worker, starting=[(job, queue)], ended=[], idle_after=False)
    assert execution is not None and redis_conn.hget(job.key, "status") == b"started"
    redis_conn.delete(worker.key)
    redis_conn.set(worker.key, "not a hash")

    with pytest.raises(ResponseError, match="WRONGTYPE"):
        rq_bridge.bookkeeping(worker, starting=[], ended=[rq_bridge.Ended(job, execution, "done", running)],
                              idle_after=True)

    assert redis_conn.hget(job.key, "status") == JobStatus.FINISHED.value.encode()
    assert FinishedJobRegistry("default", connection=redis_conn).get_job_ids() == [job.id]
    assert concurrency.holders("probe") == {}
    assert redis_conn.lrange("rq:queue:default", 0, -1) == [f"report-{waiting.pk}-1".encode()]


def test_a_worker_with_idle_horses_takes_a_job_for_each_in_one_round_trip_in_the_queues_order(
        capped, worker, redis_conn):
    capped.REPORT_KIND_CONCURRENCY = {"probe": 2}
    tasks = [submit_task(kind="probe", params={"write_output": False}).task for _ in range(3)]
    redis_conn.script_load(rq_bridge._POP)
    redis_conn.config_resetstat()

    jobs = rq_bridge.dequeue_many(worker, wanted=2)

    stats = redis_conn.info("commandstats")
    assert stats["cmdstat_evalsha"]["calls"] == 1 and "cmdstat_eval" not in stats
    assert [job.id for job, _ in jobs] == [f"report-{task.pk}-1" for task in tasks[:2]]
    assert [rq_bridge.taken_slot(job)[0] for job, _ in jobs] == ["probe", "probe"]
    assert redis_conn.lrange("rq:queue:default", 0, -1) == [f"report-{tasks[2].pk}-1".encode()]

    rq_bridge.put_back(worker, jobs)  # a stop before the hand-overs: both back at the head, in order

    assert redis_conn.lrange("rq:queue:default", 0, -1) == [f"report-{task.pk}-1".encode() for task in tasks]
    assert concurrency.holders("probe") == {}


def test_a_later_job_of_a_kind_at_its_cap_goes_back_and_ends_the_batch(capped, worker, redis_conn):
    """Cap 1: the first job takes the slot; the second cannot, so it goes back to the head (taken
    alone later, it is claimed the ordinary way, parked if the kind is still full)."""
    first, second = (submit_task(kind="probe", params={"write_output": False}).task for _ in range(2))

    jobs = rq_bridge.dequeue_many(worker, wanted=2)

    assert [job.id for job, _ in jobs] == [f"report-{first.pk}-1"]
    assert redis_conn.lrange("rq:queue:default", 0, -1) == [f"report-{second.pk}-1".encode()]
    assert set(concurrency.holders("probe")) == {f"{first.pk}:1"}


def test_a_worker_registers_again_when_redis_forgets_it(start_worker, redis_conn):
    """A flushed or restarted Redis drops the registrations of workers that live on: without the
    beat that notices, `rq info`, the console and the no-live-worker alert call them dead."""
    from rq import Worker

    from tests.conftest import wait_until

    worker = start_worker()
    assert worker.name in [w.name for w in Worker.all(connection=redis_conn)]
    redis_conn.flushall()
    assert Worker.all(connection=redis_conn) == []
    wait_until(lambda: worker.name in [w.name for w in Worker.all(connection=redis_conn)], timeout=30,
               message="the worker to register again")
    assert "registering it again" in worker.output()
