"""How a pool worker takes jobs for its horses (reports/worker/pool_taken.py): with every horse
busy it takes the next jobs ahead, one for each horse, in one round trip, so that a horse that
finishes gets its next job at once; jobs that waited TAKE_AHEAD_SECONDS for a horse go back to the
heads of their queues, their concurrency slots given back, for whichever worker is free; a job of
a kind at its cap is never taken ahead."""

import pytest

from reports.services import concurrency, submit_task
from reports.worker import pool_rq, pool_taken
from reports.worker.pool import PoolReportWorker

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def busy_worker(redis_conn, settings):
    """A pool worker whose two horses each run an attempt, just after a hand-over."""
    settings.REPORT_KIND_CONCURRENCY = {"probe": 2}
    settings.REPORT_KIND_DEFAULT_CONCURRENCY = 0
    worker = PoolReportWorker(["default"], name="pool-taken-test")
    worker._idle = []
    worker._inflight = {1001: "an attempt", 1002: "another"}  # by horse pid; only their number counts here
    worker._may_take_ahead = True
    return worker


def queued(redis_conn) -> list[str]:
    return [job_id.decode() for job_id in redis_conn.lrange("rq:queue:default", 0, -1)]


def test_a_busy_worker_takes_a_job_ahead_for_each_horse_in_one_round_trip(busy_worker, redis_conn):
    tasks = [submit_task(kind="probe", params={"write_output": False}).task for _ in range(3)]
    redis_conn.script_load(pool_rq._POP)
    redis_conn.config_resetstat()

    busy_worker._take_ahead()
    busy_worker._take_ahead()  # no hand-over since: nothing more is taken

    assert redis_conn.info("commandstats")["cmdstat_evalsha"]["calls"] == 1
    assert [job.id for job, _ in busy_worker._taken] == [f"report-{task.pk}-1" for task in tasks[:2]]
    assert queued(redis_conn) == [f"report-{tasks[2].pk}-1"]
    assert set(concurrency.holders("probe")) == {f"{task.pk}:1" for task in tasks[:2]}
    # The horses that finish get them without another look at the queues, in the queue's order.
    assert [busy_worker._dequeue_now()[0].id for _ in range(2)] == [f"report-{task.pk}-1" for task in tasks[:2]]
    assert queued(redis_conn) == [f"report-{tasks[2].pk}-1"]


def test_a_job_taken_ahead_goes_back_to_the_head_of_its_queue_when_no_horse_frees_in_time(busy_worker, redis_conn):
    tasks = [submit_task(kind="probe", params={"write_output": False}).task for _ in range(3)]
    busy_worker._take_ahead()

    busy_worker._put_back_if_waited_too_long()  # not yet: they may still wait
    assert len(busy_worker._taken) == 2
    busy_worker._taken_until -= pool_taken.TAKE_AHEAD_SECONDS  # its time is up
    busy_worker._put_back_if_waited_too_long()

    assert busy_worker._taken == []
    assert queued(redis_conn) == [f"report-{task.pk}-1" for task in tasks]
    assert concurrency.holders("probe") == {}


def test_a_job_of_a_kind_at_its_cap_is_not_taken_ahead(busy_worker, redis_conn, settings):
    settings.REPORT_KIND_CONCURRENCY = {"probe": 1}
    running, waiting = (submit_task(kind="probe", params={"write_output": False}).task for _ in range(2))
    pool_rq.dequeue(busy_worker)  # the attempt a horse runs holds the kind's one slot

    busy_worker._take_ahead()

    assert busy_worker._taken == []
    assert queued(redis_conn) == [f"report-{waiting.pk}-1"]
    assert set(concurrency.holders("probe")) == {f"{running.pk}:1"}
