"""ReportWorker in this process: its Redis client comes from the project's one factory, and a claim
whose database connection was cut (a restarted server, a failover, a terminated backend) is made
again at once on a new connection, which the attempt number's fence makes safe: a dropped
connection costs a reconnect, not the 30 s until the housekeeper re-enqueues the task."""

from types import SimpleNamespace

import pytest
from django.db import connection
from django_rq.workers import get_worker

from config.redis_client import LoggedRetry
from reports.models import ReportTask, TaskStatus
from reports.services import submit_task
from reports.worker import rq_bridge
from reports.worker.worker import ReportWorker

pytestmark = pytest.mark.django_db(transaction=True)


def _retry_of(client):
    return client.connection_pool.connection_kwargs["retry"]


def test_rqworker_builds_the_worker_and_its_queues_on_the_factory_client(redis_server):
    worker = get_worker("high", "default", "low", worker_class=ReportWorker)

    assert isinstance(_retry_of(worker.connection), LoggedRetry)
    assert all(queue.connection is worker.connection for queue in worker.queues)
    assert [queue.name for queue in worker.queues] == ["high", "default", "low"]
    assert worker.connection.ping()


def test_the_scheduler_builds_its_client_from_the_factory_in_its_own_process(redis_server):
    worker = get_worker("default", worker_class=ReportWorker)
    scheduler = rq_bridge.ReportScheduler(worker.queues, connection=worker.connection)
    scheduler._connection = None  # what RQ does before forking the scheduler process

    assert isinstance(_retry_of(scheduler.connection), LoggedRetry)
    assert scheduler.connection.ping()


def cut_the_database_connection() -> None:
    """What a restart, a failover or pg_terminate_backend does to a worker's idle connection."""
    connection.ensure_connection()
    if connection.vendor == "postgresql":
        backend = connection.connection.info.backend_pid
        other = connection.get_new_connection(connection.get_connection_params())
        try:
            other.execute("SELECT pg_terminate_backend(%s)", [backend])
        finally:
            other.close()
    else:  # SQLite: the file stays; the connection under Django is closed
        connection.connection.close()


@pytest.mark.parametrize("capped", [False, True], ids=["uncapped", "capped"])
def test_a_claim_whose_connection_was_cut_reconnects_and_claims(redis_conn, settings, caplog, capped):
    settings.REPORT_KIND_CONCURRENCY = {"probe": 2} if capped else {}
    settings.REPORT_KIND_DEFAULT_CONCURRENCY = 0
    task = submit_task(kind="probe", params={"write_output": False}).task
    worker = ReportWorker(["default"], name="claim-reconnect-test")
    [(job, queue)] = rq_bridge.dequeue_many(worker, wanted=1)
    cut_the_database_connection()

    claimed = worker._claim(job, queue, SimpleNamespace(pid=4242), task.pk, 1)

    assert claimed is not None and claimed.status == TaskStatus.RUNNING
    assert f"claim of task {task.pk} attempt 1" in caplog.text and "reconnecting" in caplog.text
    row = ReportTask.objects.get(pk=task.pk)
    assert (row.status, row.attempt, row.attempts.count()) == (TaskStatus.RUNNING, 1, 1)
    assert row.attempts.get().worker == f"claim-reconnect-test horse 4242 pid {__import__('os').getpid()}"


@pytest.fixture
def busy_worker(redis_conn, settings):
    """A worker whose two horses each run an attempt, just after a hand-over."""
    settings.REPORT_KIND_CONCURRENCY = {"probe": 2}
    settings.REPORT_KIND_DEFAULT_CONCURRENCY = 0
    worker = ReportWorker(["default"], name="take-ahead-test")
    worker._running = {1001: "an attempt", 1002: "another"}  # by horse pid; only their number counts here
    worker._may_take_ahead = True
    return worker


def queued(redis_conn) -> list[str]:
    return [job_id.decode() for job_id in redis_conn.lrange("rq:queue:default", 0, -1)]


def test_a_busy_worker_takes_a_job_ahead_for_each_horse_and_puts_them_back_in_time(busy_worker, redis_conn):
    from reports.services import concurrency

    tasks = [submit_task(kind="probe", params={"write_output": False}).task for _ in range(3)]
    redis_conn.config_resetstat()

    busy_worker._take_ahead()
    busy_worker._take_ahead()  # no hand-over since: nothing more is taken

    assert redis_conn.info("commandstats")["cmdstat_evalsha"]["calls"] == 1
    assert [job.id for job, _ in busy_worker._ahead] == [f"report-{task.pk}-1" for task in tasks[:2]]
    assert queued(redis_conn) == [f"report-{tasks[2].pk}-1"]
    assert set(concurrency.holders("probe")) == {f"{task.pk}:1" for task in tasks[:2]}
    busy_worker._put_back_ahead()  # no horse freed in time: back to the head, in order, slots given back
    assert queued(redis_conn) == [f"report-{task.pk}-1" for task in tasks]
    assert concurrency.holders("probe") == {}


def test_a_job_of_a_kind_at_its_cap_is_not_taken_ahead(busy_worker, redis_conn, settings):
    from reports.services import concurrency

    settings.REPORT_KIND_CONCURRENCY = {"probe": 1}
    running, waiting = (submit_task(kind="probe", params={"write_output": False}).task for _ in range(2))
    rq_bridge.dequeue_many(busy_worker, wanted=1)  # the attempt a horse runs holds the kind's one slot

    busy_worker._take_ahead()

    assert busy_worker._ahead == []
    assert queued(redis_conn) == [f"report-{waiting.pk}-1"]
    assert set(concurrency.holders("probe")) == {f"{running.pk}:1"}
