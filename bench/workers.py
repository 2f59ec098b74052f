"""The Celery side of bench/pipeline_overhead.py: what a user might pick instead of this project.

A prefork Celery worker (`--pool prefork --concurrency N`, as many processes as the RQ side has
workers) with late acknowledgement (`task_acks_late`: a message is acknowledged after its task
ran, the at-least-once setting a reliable pipeline needs), on the same Redis, running a no-op.
Each pool process notes its first task's start once (one SET NX per process, not per task), so
the run time is measured the way the RQ side's is: first task started -> last task finished.

Needs the `bench` extra: `.venv/bin/pip install -e ".[bench]"`.
"""

import os
import time

from celery import Celery
from celery.signals import task_prerun

QUEUE = "bench-celery"
FIRST_START_KEY = "bench:celery:first-start"

app = Celery("bench", broker=os.environ.get("BENCH_CELERY_BROKER", "redis://127.0.0.1:6379/0"))
app.conf.update(
    task_acks_late=True,
    task_ignore_result=True,
    task_default_queue=QUEUE,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)

_noted = False


@task_prerun.connect
def _note_first_start(**kwargs) -> None:
    global _noted
    if not _noted:
        _noted = True
        app.backend  # noqa: B018 - keep Celery's lazy set-up out of the measured path
        with app.connection_for_write() as conn:
            conn.default_channel.client.set(FIRST_START_KEY, repr(time.time()), nx=True)


@app.task(name="bench.noop")
def noop() -> None:
    return None
