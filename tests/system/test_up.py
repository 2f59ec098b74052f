"""`manage.py up` as a user runs it: a real process on a free port with its own var dir (SQLite
and the embedded redis-server under it), its children real processes."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import redis

from reports.management.commands.up import derived_addresses, local_host_port
from tests.conftest import wait_until
from tests.system.private_postgres import PrivatePostgres

BASE_DIR = Path(__file__).resolve().parents[2]
# Variables the started `up` must not inherit from the test session (its own var dir decides).
INHERITED_SETTINGS = (
    "DATABASE_URL",
    "REDIS_URL",
    "VAR_DIR",
    "MEDIA_ROOT",
    "DEMO_SETUP",
    "CONSOLE_BASE_URL",
    "HTTP_EXPORT_URL",
    "HTTP_EXPORT_ALLOWED_HOSTS",
    "DINGTALK_WEBHOOK",
    "TIME_ZONE",
    "ALERT_LANGUAGE",
)
# `up` starts the replacement this soon (its backoff, 0.5 s, and its poll); the new worker then
# needs as long as a Python process with Django needs to boot, which on a loaded machine is seconds
# more: it must register, but its boot time is the machine's, not `up`'s.
RESTARTED_WITHIN_SECONDS = 5.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class UpProcess:
    def __init__(self, var_dir: Path, port: int, **env_overrides: str):
        self.var_dir = var_dir
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.env = {k: v for k, v in os.environ.items() if k not in INHERITED_SETTINGS}
        self.env.update(
            DJANGO_SETTINGS_MODULE="config.settings",
            VAR_DIR=str(var_dir),
            PYTHONUNBUFFERED="1",
            **env_overrides,
        )
        self.log_path = var_dir.parent / "up.log"
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "up", "--addr", f"127.0.0.1:{port}", "--workers", "2", "--no-seed"],
            cwd=BASE_DIR,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text()

    def redis(self) -> redis.Redis:
        return redis.Redis(unix_socket_path=str(self.var_dir / "redis.sock"))

    def workers(self) -> dict[str, int]:
        """Registered RQ workers (name -> pid)."""
        conn = self.redis()
        found = {}
        for key in conn.smembers("rq:workers"):
            name = key.decode().removeprefix("rq:worker:")
            pid = conn.hget(key, "pid")
            if pid is not None and not conn.hexists(key, "death"):
                found[name] = int(pid)
        return found

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=BASE_DIR, env=self.env, capture_output=True, text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    def stop(self) -> int:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self.log.close()
        return self.process.returncode


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture
def up(tmp_path_factory, request):
    started: list[UpProcess] = []

    def start(**env_overrides) -> UpProcess:
        process = UpProcess(tmp_path_factory.mktemp("up") / "var", free_port(), **env_overrides)
        started.append(process)
        wait_until(
            lambda: process.process.poll() is not None
            or (answers(f"{process.base}/healthz") and len(process.workers()) == 2),
            timeout=120,
            message="`up` to serve /healthz with two registered workers",
        )
        assert process.process.poll() is None, process.output()[-5000:]
        return process

    yield start
    for process in started:
        process.stop()
        if getattr(request.node, "rep_call_failed", False):
            print(f"--- output of up ---\n{process.output()[-8000:]}")


class HealthPoller(threading.Thread):
    """GET /healthz every 50 ms until stopped; counts the answers that were not 200."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url = url
        self.requests = 0
        self.failures: list[str] = []
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            self.requests += 1
            try:
                # Answered at all is the claim: a slow answer on a loaded machine still is one.
                with urllib.request.urlopen(self.url, timeout=30) as response:
                    if response.status != 200:
                        self.failures.append(f"HTTP {response.status}")
            except OSError as exc:
                self.failures.append(repr(exc))
            self.halt.wait(0.05)


def test_a_killed_worker_is_restarted_while_the_site_keeps_answering_and_a_crash_loop_stops_up(up):
    site = up(UP_RESTART_LIMIT="2", UP_RESTART_WINDOW="300")
    first = {name: pid for name, pid in site.workers().items() if name.endswith("-1")}
    assert len(first) == 1, site.workers()
    (victim, pid), = first.items()
    poller = HealthPoller(f"{site.base}/healthz")
    poller.start()

    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: "worker1 restarted (pid" in site.output(), timeout=60, interval=0.02,
               message="`up` to start a new worker1")
    started_after = time.monotonic() - killed_at
    restarted = wait_until(
        lambda: [name for name in site.workers() if name.endswith("-1-r1")],
        timeout=60,
        message="the new worker1 to register (under its restart name)",
    )
    registered_after = time.monotonic() - killed_at
    print(f"worker1 restarted {started_after:.2f} s and registered with RQ {registered_after:.2f} s after "
          f"SIGKILL; /healthz answered {poller.requests - len(poller.failures)} of {poller.requests} "
          "meanwhile")
    poller.halt.set()
    poller.join(10)
    assert not poller.failures, poller.failures[:5]
    assert poller.requests > 0
    assert started_after < RESTARTED_WITHIN_SECONDS, f"`up` took {started_after:.2f} s to restart worker1"
    assert "worker1 exited with -9 (SIGKILL); restarting it in 0.5 s" in site.output()
    assert site.process.poll() is None

    # Two more deaths within the window: the third exit is one more than UP_RESTART_LIMIT allows.
    second_pid = site.workers()[restarted[0]]
    os.kill(second_pid, signal.SIGKILL)
    third = wait_until(
        lambda: [name for name in site.workers() if name.endswith("-1-r2")], timeout=60,
        message="a second restart",
    )
    os.kill(site.workers()[third[0]], signal.SIGKILL)
    wait_until(lambda: site.process.poll() is not None, timeout=60,
               message="`up` to stop after the crash loop")
    assert site.process.returncode == 1
    assert "worker1 exited with -9 (SIGKILL): 3 exits within 300 s" in site.output()
    assert "a crash loop; stopping everything" in site.output()
    assert not answers(f"{site.base}/healthz")


def test_addr_sets_the_alert_links_and_the_demo_source_to_that_address(up, fake_dingtalk):
    robot = fake_dingtalk(secret="", configure=False)
    site = up(DINGTALK_WEBHOOK=robot.webhook)
    # One housekeeper runs every periodic duty (no reaper, sender or planner of their own).
    wait_until(lambda: "housekeeper started" in site.output(), timeout=60, message="the housekeeper's start")
    output = site.output()
    assert not any(f"\n{name} " in output for name in ("reaper", "alerts", "planner")), output[-3000:]
    assert f"CONSOLE_BASE_URL=http://127.0.0.1:{site.port}  (from --addr)" in output
    assert f"HTTP_EXPORT_URL=http://127.0.0.1:{site.port}/report/demo/orders.json  (from --addr)" in output
    assert f"HTTP_EXPORT_ALLOWED_HOSTS=127.0.0.1:{site.port}  (from --addr)" in output

    token = site.manage("create_api_token", "probe-client", "--scope", "submit", "--scope", "read",
                        "--scope", "operator").strip()

    def submit(kind: str, params: dict) -> str:
        request = urllib.request.Request(
            f"{site.base}/report/task/submit",
            data=json.dumps({"kind": kind, "params": params}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)["task_id"]

    def status(task_id: str) -> dict:
        request = urllib.request.Request(
            f"{site.base}/report/task/{task_id}/status", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    # The workers' default http_export source and allowlist: the site on this port.
    export = submit("http_export", {})
    dying = submit("probe", {"fail_permanently": True})
    finished = wait_until(
        lambda: (lambda s: s if s["status"] in ("done", "dead") else None)(status(export)),
        timeout=90,
        message="the default http_export to finish",
    )
    assert finished["status"] == "done", finished
    wait_until(lambda: status(dying)["status"] == "dead", timeout=90, message="the probe to die")

    # The dead letter's alert as `up`'s alert sender delivered it: its buttons link to this site.
    wait_until(lambda: robot.received, timeout=60, message="the dead letter's alert")
    cards = json.dumps([message.body for message in robot.received])
    assert f"http://127.0.0.1:{site.port}/console/" in cards, cards[:2000]
    assert "127.0.0.1:8000" not in cards


def test_the_default_source_from_the_environment_is_not_printed(up):
    """HTTP_EXPORT_URL may carry the source's credentials (a password, a key in its path or query):
    `up` says it is set, not what it is."""
    secrets = ("export-pass-5b5b", "k3y-77aa", "q-key-99")
    url = f"https://exporter:{secrets[0]}@data.internal/v1/{secrets[1]}/orders.json?apikey={secrets[2]}"
    site = up(HTTP_EXPORT_URL=url)
    output = site.output()
    assert "HTTP_EXPORT_URL=(set; not shown" in output
    assert not [secret for secret in secrets if secret in output]
    # The team's time zone and alert language are said at start (Chinese alerts: Shanghai time).
    assert "times shown in Asia/Shanghai, alerts in zh-hans" in output


def test_explicit_environment_values_win_over_the_derived_addresses():
    environ = {"CONSOLE_BASE_URL": "https://console.example.com", "HTTP_EXPORT_URL": " "}
    derived = derived_addresses("0.0.0.0:8811", environ, demo_setup=True)
    assert derived == {
        "HTTP_EXPORT_URL": "http://127.0.0.1:8811/report/demo/orders.json",
        "HTTP_EXPORT_ALLOWED_HOSTS": "127.0.0.1:8811",
    }
    assert derived_addresses("8811", {}, demo_setup=False) == {"CONSOLE_BASE_URL": "http://127.0.0.1:8811"}
    assert local_host_port("[::]:9000") == "[::1]:9000"
    assert local_host_port("console.internal:9000") == "console.internal:9000"


def test_a_killed_embedded_redis_is_restarted_and_the_system_works_on_without_a_person(up):
    site = up()
    old_pid = site.redis().info("server")["process_id"]
    poller = HealthPoller(f"{site.base}/healthz")
    poller.start()

    killed_at = time.monotonic()
    os.kill(old_pid, signal.SIGKILL)
    wait_until(lambda: "redis restarted (pid" in site.output(), timeout=60, interval=0.02,
               message="`up` to start a new redis-server")

    def new_redis_pid():
        try:
            return site.redis().info("server")["process_id"]
        except redis.ConnectionError:
            return None

    new_pid = wait_until(new_redis_pid, timeout=30, interval=0.02, message="the new redis-server to answer")
    answering_after = time.monotonic() - killed_at
    poller.halt.set()
    poller.join(10)
    print(f"redis-server answered again {answering_after:.2f} s after SIGKILL (pid {old_pid} -> {new_pid})")
    assert new_pid != old_pid
    took = f"`up` took {answering_after:.2f} s to bring redis back"
    assert answering_after < RESTARTED_WITHIN_SECONDS, took
    assert "redis exited with -9 (SIGKILL); restarting it in 0.5 s" in site.output()
    assert not poller.failures, poller.failures[:5]  # /healthz is the web process alone: it never stopped

    # Work goes on: workers are back in the new redis, and a task submitted now runs to the end.
    wait_until(lambda: len(site.workers()) == 2, timeout=90,
               message="two workers registered in the new redis")
    token = site.manage("create_api_token", "after-redis", "--scope", "submit", "--scope", "read",
                        "--scope", "operator").strip()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    request = urllib.request.Request(f"{site.base}/report/task/submit", method="POST", headers=headers,
                                     data=json.dumps({"kind": "probe", "params": {}}).encode())
    with urllib.request.urlopen(request, timeout=30) as response:
        task_id = json.load(response)["task_id"]

    def status():
        status_request = urllib.request.Request(f"{site.base}/report/task/{task_id}/status", headers=headers)
        with urllib.request.urlopen(status_request, timeout=30) as response:
            return json.load(response)["status"]

    wait_until(lambda: status() == "done", timeout=90,
               message="a task submitted after the restart to be done")
    assert site.process.poll() is None
    assert "housekeeper started" in site.output() and "housekeeper exited" not in site.output()  # rode it out
    assert site.stop() == 0
    assert new_redis_pid() is None  # stopped with the rest, last


def test_up_waits_for_a_database_that_does_not_answer_yet_and_then_starts(tmp_path_factory):
    database = PrivatePostgres()  # initialised, not started: a PostgreSQL still coming up beside `up`
    site = UpProcess(tmp_path_factory.mktemp("up") / "var", free_port(), DATABASE_URL=database.url)
    try:
        wait_until(lambda: "the database does not answer; waiting for it" in site.output()
                   or site.process.poll() is not None, timeout=60, message="`up` to wait for the database")
        assert site.process.poll() is None, site.output()[-3000:]
        database.start()
        wait_until(lambda: site.process.poll() is not None
                   or (answers(f"{site.base}/healthz") and len(site.workers()) == 2),
                   timeout=120, message="`up` to start everything once the database answers")
        assert site.process.poll() is None, site.output()[-3000:]
        assert "the database answers" in site.output()
    finally:
        site.stop()
        database.remove()
