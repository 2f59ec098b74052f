"""The work-horse runs only the report kind: no database connection of its own until a report
reads data, and never its worker's (which the worker keeps for its whole life). Connections are
counted from outside our code, by Django's connection_created signal in every process."""

import os
from pathlib import Path

import pytest
from django.core.management import call_command

from reports.models import ReportTask, TaskStatus
from reports.services import submit_task
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

COUNTER = Path(__file__).resolve().parent / "connection_counter"


def all_done(tasks) -> bool:
    done = ReportTask.objects.filter(pk__in=[t.pk for t in tasks], status=TaskStatus.DONE).count()
    return done == len(tasks)


def test_no_op_probes_open_no_connection_in_their_work_horses(start_worker, tmp_path):
    log = tmp_path / "connections.log"
    call_command("seed_demo_data", rows=50, verbosity=0)
    probes = [submit_task(kind="probe", params={"write_output": False}).task for _ in range(10)]
    worker = start_worker(
        PYTHONPATH=os.pathsep.join(filter(None, [str(COUNTER), os.environ.get("PYTHONPATH")])),
        DB_CONNECTION_LOG=log,
    )
    wait_until(lambda: all_done(probes), message="the probes to finish")
    reading = [submit_task(kind="sales_summary", params={"format": "csv"}).task for _ in range(3)]
    wait_until(lambda: all_done(reading), message="the sales reports to finish")
    more = [submit_task(kind="probe", params={}).task for _ in range(5)]
    wait_until(lambda: all_done(more), message="the probes after them to finish")

    lines = [line.split() for line in log.read_text().splitlines()]
    horses = [job for pid, parent, job in lines if int(parent) == worker.pid]
    own = [pid for pid, parent, job in lines if int(pid) == worker.pid]
    # The counter works: the horses opened connections for the reports that read the orders (a
    # horse keeps its connection for its next report)...
    assert horses and set(horses) <= {f"report-{task.pk}-1" for task in reading}, lines
    assert len(horses) <= len(reading)
    # ...no probe opened any, and the worker needed a single connection all along: no horse
    # used or closed it.
    assert len(own) == 1, lines
