"""Several machines: three worker processes posing as three hosts (own worker names, own local
MEDIA_ROOT and TMPDIR, so no local disk is shared by accident) and one web process with local
directories of its own, all on one database, one Redis and one S3 bucket. Every report any
worker makes is downloadable over HTTP from the web."""

import subprocess
import sys

import pytest
import requests

from reports.models import ReportTask, TaskStatus
from tests.conftest import BASE_DIR, wait_until
from tests.storage_server import _free_ports

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

HOSTS = ("host-a", "host-b", "host-c")
TASKS = 30


@pytest.fixture
def web(subprocess_env, tmp_path, report_storage):
    local = tmp_path / "web"
    env = dict(subprocess_env(), MEDIA_ROOT=str(local / "media"), TMPDIR=str((local / "tmp").resolve()))
    (local / "tmp").mkdir(parents=True)
    [port] = _free_ports(1)
    log = open(tmp_path / "web.log", "w")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(
        [sys.executable, str(BASE_DIR / "manage.py"), "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def answers():
        assert process.poll() is None, (tmp_path / "web.log").read_text()
        try:
            return requests.get(f"{url}/report/openapi.json", timeout=10).ok
        except (requests.ConnectionError, requests.Timeout):  # still booting on a loaded machine
            return False

    wait_until(answers, timeout=60, message="the web process to answer")
    yield url, local
    process.terminate()
    process.wait(10)
    log.close()


@pytest.mark.parametrize("report_storage", ["s3"], indirect=True)
def test_every_report_made_on_any_host_downloads_from_the_web(
    start_worker, web, api_token, tmp_path, fast_retries
):
    url, web_dir = web
    hosts = {}
    for host in HOSTS:
        local = tmp_path / host
        (local / "tmp").mkdir(parents=True)
        hosts[host] = local
        start_worker(name_prefix=host, MEDIA_ROOT=local / "media", TMPDIR=(local / "tmp").resolve())
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {api_token}"

    submitted = []
    for n in range(TASKS):
        response = session.post(
            f"{url}/report/task/submit",
            json={"kind": "probe", "params": {"sleep_seconds": 0.1, "fail_attempts": 1 if n % 3 == 0 else 0}},
            timeout=10,
        )
        assert response.status_code == 201, response.text
        submitted.append(response.json()["task_id"])

    wait_until(
        lambda: ReportTask.objects.filter(status=TaskStatus.DONE).count() == TASKS,
        timeout=120,
        interval=0.2,
        message="every task to finish",
    )
    made_on = set()
    for task in ReportTask.objects.all():
        made_on |= {host for attempt in task.attempts.all() for host in HOSTS
                    if attempt.worker.startswith(f"{host}-")}
        response = session.get(f"{url}/report/task/{task.public_id}/output", timeout=10)
        assert response.status_code == 200, (task.public_id, response.text)
        assert response.headers["Content-Type"] == "text/csv; charset=utf-8"
        body = response.content.decode("utf-8-sig")  # CSV reports start with a byte order mark
        assert body.splitlines() == ["task,attempt", f"{task.public_id},{task.attempt}"]
    assert made_on == set(HOSTS), "every host made reports"
    assert sorted(str(task.public_id) for task in ReportTask.objects.all()) == sorted(submitted)
    for local in (*hosts.values(), web_dir):
        assert not (local / "media").exists(), f"{local} kept report files on its local disk"
        # The pool's live horses keep one scratch directory each, emptied after every report.
        left = [p for p in (local / "tmp").rglob("*")
                if p.is_file() or not p.name.startswith("report-horse-")]
        assert left == [], f"{local} left scratch files behind"
