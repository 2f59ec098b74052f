"""reports/worker/registration.py against a real worker process and a real Redis."""

import pytest
from rq import Worker

from tests.conftest import wait_until


@pytest.mark.parametrize("worker_class", [None, "reports.worker.process.SimpleReportWorker"])
def test_a_worker_registers_again_when_redis_forgets_it(worker_class, start_worker, redis_conn):
    """A flushed or restarted Redis drops the registrations of workers that live on: without the
    beat that notices, `rq info`, the console and the no-live-worker alert call them dead."""
    worker = start_worker(worker_class=worker_class)
    assert worker.name in [w.name for w in Worker.all(connection=redis_conn)]
    redis_conn.flushall()
    assert Worker.all(connection=redis_conn) == []
    wait_until(lambda: worker.name in [w.name for w in Worker.all(connection=redis_conn)], timeout=30,
               message="the worker to register again")
    assert "registering it again" in worker.output()
