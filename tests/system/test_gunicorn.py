"""The production web server for real: gunicorn with config/gunicorn_conf.py on a free port,
the test database and the test Redis, probed over HTTP as a load balancer and an operator would."""

import subprocess
import sys
from pathlib import Path

import pytest
import requests

from config.embedded_redis import free_port
from tests.conftest import BASE_DIR, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def gunicorn(subprocess_env, tmp_path):
    started = []

    def start(conf: str = "python:config.gunicorn_conf", **env_overrides) -> tuple[str, Path]:
        port = free_port()
        log = tmp_path / f"gunicorn-{port}.log"
        env = dict(subprocess_env(), **env_overrides)
        # gunicorn's own flags override the config file's defaults.
        flags = ["--bind", f"127.0.0.1:{port}", "--workers", "2"]
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", conf, *flags, "config.wsgi"],
            cwd=BASE_DIR,
            env=env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        started.append(process)
        base = f"http://127.0.0.1:{port}"

        def answers() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"gunicorn exited: {log.read_text()[-3000:]}")
            try:
                return requests.get(f"{base}/healthz", timeout=10).status_code == 200
            except (requests.ConnectionError, requests.Timeout):
                # The socket is bound before a worker is ready: on a loaded machine the first
                # requests wait; not an answer yet, and no reason to stop polling.
                return False

        wait_until(answers, timeout=60, interval=0.2, message="gunicorn to answer /healthz")
        return base, log

    yield start
    for process in started:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def test_gunicorn_serves_probes_and_the_console(gunicorn, operator):
    base, log = gunicorn()

    assert requests.get(f"{base}/healthz", timeout=10).json() == {"status": "ok"}
    ready = requests.get(f"{base}/readyz", timeout=10)
    assert ready.status_code == 200, ready.text
    assert ready.json()["status"] == "ready"
    assert {name for name, check in ready.json()["checks"].items() if check["ok"]} == {"database", "redis"}

    session = requests.Session()
    login = session.get(f"{base}/console/login/", timeout=10)
    assert login.status_code == 200
    signed_in = session.post(
        f"{base}/console/login/",
        data={
            "username": "operator",
            "password": "operator-pass-1",
            "csrfmiddlewaretoken": session.cookies["csrftoken"],
            "next": "/console/",
        },
        headers={"Referer": f"{base}/console/login/"},
        timeout=10,
    )
    assert signed_in.status_code == 200 and signed_in.url == f"{base}/console/", signed_in.url
    assert "Queues and workers" in signed_in.text
    static = session.get(f"{base}/static/js/console.js", timeout=10)
    assert static.status_code == 200

    secret = "rpt_query-secret-never-logged"
    session.get(f"{base}/console/dead-letters/?q={secret}", timeout=10)
    wait_until(lambda: "/console/dead-letters/" in log.read_text(), timeout=30, message="the access log line")
    assert secret not in log.read_text()


def test_readyz_names_what_failed_when_redis_is_down(gunicorn):
    base, _ = gunicorn(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")

    ready = requests.get(f"{base}/readyz", timeout=10)

    assert ready.status_code == 503
    assert ready.json()["status"] == "unavailable"
    assert ready.json()["checks"]["database"]["ok"] is True
    assert ready.json()["checks"]["redis"]["ok"] is False
    assert requests.get(f"{base}/healthz", timeout=10).status_code == 200


def test_readyz_names_the_database_when_it_is_down(gunicorn):
    base, _ = gunicorn(DATABASE_URL=f"postgres://nobody@127.0.0.1:{free_port()}/nothing")

    ready = requests.get(f"{base}/readyz", timeout=20)

    assert ready.status_code == 503
    assert ready.json()["checks"]["database"]["ok"] is False
    assert ready.json()["checks"]["redis"]["ok"] is True
    assert "nobody" not in ready.text


def test_gunicorn_opens_no_control_socket_unless_asked_and_then_under_var(gunicorn, tmp_path):
    """gunicorn 25+ puts a control socket (add/kill workers, reload) under $HOME by default."""
    home, runtime, var = tmp_path / "home", tmp_path / "run", tmp_path / "var"
    for folder in (home, runtime, var):
        folder.mkdir()
    gunicorn(HOME=str(home), XDG_RUNTIME_DIR=str(runtime), VAR_DIR=str(var))
    assert not [p for p in (*home.rglob("*"), *runtime.rglob("*"), *var.rglob("*.ctl"))]

    turned_on = tmp_path / "control_socket_conf.py"
    turned_on.write_text("from config.gunicorn_conf import *  # noqa: F403\ncontrol_socket_disable = False\n")
    gunicorn(str(turned_on), HOME=str(home), XDG_RUNTIME_DIR=str(runtime), VAR_DIR=str(var))
    socket_path = var / "gunicorn.ctl"
    wait_until(socket_path.exists, timeout=10, message="the control socket under var/")
    assert oct(socket_path.stat().st_mode & 0o777) == "0o600"
    assert not [p for p in (*home.rglob("*"), *runtime.rglob("*"))]
