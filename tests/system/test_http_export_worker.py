"""http_export through a real worker process: the demo source on a live server is fetched and
tabulated, and a closed port and a port that answers another protocol leave the same last_error."""

import socket
import threading
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from reports.models import ReportTask, TaskStatus
from reports.services import submit_task
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


class RedisLikePort:
    """Accepts and answers as Redis does to an HTTP request."""

    def __init__(self):
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.settimeout(0.1)
        self.port = self.socket.getsockname()[1]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.socket.accept()
            except OSError:  # the accept timeout included
                continue
            with conn:
                conn.sendall(b"-ERR unknown command 'GET', with args beginning with: '/'\r\n")

    def close(self):
        self.stopped.set()
        self.thread.join(5)
        self.socket.close()


@pytest.fixture
def redis_like_port():
    port = RedisLikePort()
    yield port.port
    port.close()


def test_a_worker_fetches_an_allowed_source_and_cannot_tell_closed_ports_from_open_ones(
    live_server, start_worker, redis_like_port, fast_retries
):
    call_command("seed_demo_data", rows=25, verbosity=0)
    with socket.create_server(("127.0.0.1", 0)) as probe:
        closed = probe.getsockname()[1]
    live_port = int(live_server.url.rsplit(":", 1)[1])
    allowed = [f"127.0.0.1:{port}" for port in (live_port, closed, redis_like_port)]
    settings.HTTP_EXPORT_ALLOWED_HOSTS = allowed
    settings.REPORT_MAX_ATTEMPTS = 1
    start_worker(HTTP_EXPORT_ALLOWED_HOSTS=",".join(allowed), DEMO_SETUP="true")

    export = submit_task(
        kind="http_export",
        params={"url": f"http://127.0.0.1:{live_port}/report/demo/orders.json", "records_path": "data.items"},
    ).task
    probes = [
        submit_task(kind="http_export", params={"url": f"http://127.0.0.1:{port}/"}).task
        for port in (closed, redis_like_port)
    ]
    ids = [export.pk, *(task.pk for task in probes)]
    wait_until(
        lambda: ReportTask.objects.filter(
            pk__in=ids, status__in=(TaskStatus.DONE, TaskStatus.DEAD)).count() == 3,
        message="the three exports to finish",
    )

    export.refresh_from_db()
    assert export.status == TaskStatus.DONE, export.last_error
    assert len((Path(settings.MEDIA_ROOT) / export.output_file).read_text().splitlines()) == 26
    errors = {ReportTask.objects.get(pk=task.pk).last_error for task in probes}
    assert len(errors) == 1
    assert "could not get an HTTP answer from the source" in errors.pop()
