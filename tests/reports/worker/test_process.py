"""Workers and RQ's scheduler take their Redis client from the project's one factory (retries,
Sentinel), not from django-rq's plain connection."""

import pytest
from django_rq.workers import get_worker

from config.redis_client import LoggedRetry
from reports.worker.process import ReportScheduler, ReportWorker, SimpleReportWorker


def _retry_of(client):
    return client.connection_pool.connection_kwargs["retry"]


@pytest.mark.parametrize("worker_class", [ReportWorker, SimpleReportWorker])
def test_rqworker_builds_workers_and_queues_on_the_factory_client(worker_class, redis_server):
    worker = get_worker("high", "default", "low", worker_class=worker_class)

    assert isinstance(_retry_of(worker.connection), LoggedRetry)
    assert all(queue.connection is worker.connection for queue in worker.queues)
    assert [queue.name for queue in worker.queues] == ["high", "default", "low"]
    assert worker.connection.ping()


def test_the_scheduler_builds_its_client_from_the_factory_in_its_own_process(redis_server):
    worker = get_worker("default", worker_class=ReportWorker)
    scheduler = ReportScheduler(worker.queues, connection=worker.connection)
    scheduler._connection = None  # what RQ does before forking the scheduler process

    assert isinstance(_retry_of(scheduler.connection), LoggedRetry)
    assert scheduler.connection.ping()

