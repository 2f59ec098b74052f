"""The Containerfile builds with podman from the project's own files, without an image registry,
and compose.yaml runs the whole system: reports submitted through the API are generated, and a
dead letter is replayed.

No registry answers here, so the base images come from Debian's packages (mmdebstrap piped into
`podman import`): one with Python for the application (the Containerfile's BASE argument; users
build FROM python:3.11-slim), one with PostgreSQL and Redis that an override file puts in place of
the compose file's postgres and redis images. Both tars are kept under /var/tmp between runs
(a cold machine builds them in about 4 minutes). The wheels are downloaded on the host for the
base's Python and installed in the build from the context, as the Containerfile allows.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parents[2]
CACHE = Path("/var/tmp/report-console-containers")
TOOLS = {"podman": "podman", "mmdebstrap": "mmdebstrap", "runc": "runc", "podman-compose": "podman-compose"}
BASE_PACKAGES = "python3,python3-venv,ca-certificates"
SERVICE_PACKAGES = "postgresql-15,redis-server"
PG = "/usr/lib/postgresql/15/bin"
OVERRIDE = f"""
services:
  postgres:
    image: localhost/report-services:test
    environment: {{}}
    command:
      - sh
      - -c
      - >-
        D=/var/lib/postgresql/data; mkdir -p $$D && chown postgres $$D && chmod 700 $$D
        && if [ ! -s $$D/PG_VERSION ]; then
        runuser -u postgres -- {PG}/initdb -D $$D -U report --auth=trust >/dev/null
        && echo 'host all all 0.0.0.0/0 trust' >> $$D/pg_hba.conf
        && echo 'CREATE DATABASE report' | runuser -u postgres --
        {PG}/postgres --single -D $$D postgres >/dev/null;
        fi
        && exec runuser -u postgres -- {PG}/postgres -D $$D -c listen_addresses=*
        -c unix_socket_directories=/tmp
  redis:
    image: localhost/report-services:test
"""
# Limits podman may only lower on machines like CI's, and crun refuses hybrid cgroups.
CONTAINERS_CONF = """
[engine]
runtime = "runc"
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
"""


def run(argv, *, timeout=600, check=True, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, argv))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
    return done


def install_tools() -> None:
    missing = [package for tool, package in TOOLS.items() if shutil.which(tool) is None]
    if missing:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        apt = ["apt-get", "-o", "DPkg::Lock::Timeout=600"]
        if run([*apt, "install", "-y", "-q", *missing], check=False, env=env).returncode != 0:
            run([*apt, "update", "-q"], env=env)  # a stale list fails once
            run([*apt, "install", "-y", "-q", *missing], env=env)


def debian_image(tag: str, packages: str, env: dict) -> None:
    """A Debian bookworm image with these packages, its tar cached across runs."""
    CACHE.mkdir(parents=True, exist_ok=True)
    tar = CACHE / f"{packages.replace(',', '_')}.tar"
    if tar.is_dir():  # an earlier run's mmdebstrap wrote a directory there
        shutil.rmtree(tar)
    if not tar.exists():
        partial = tar.with_suffix(".partial")
        # --format: mmdebstrap takes the format from the name's suffix, and ".partial" is none.
        run(
            ["mmdebstrap", "--variant=minbase", "--format=tar", f"--include={packages}", "bookworm",
             str(partial)],
            timeout=900,
        )
        partial.rename(tar)
    run(["podman", "import", str(tar), tag], env=env)


def wheels_for_base(context_wheels: Path) -> None:
    """The dependencies' wheels for the base's Python (Debian's 3.11.2, which also needs async-timeout)."""
    deps = tomllib.loads((BASE_DIR / "pyproject.toml").read_text())["project"]["dependencies"]
    platforms = [
        "manylinux_2_28_x86_64",
        "manylinux2014_x86_64",
        "manylinux_2_17_x86_64",
        "manylinux_2_5_x86_64",
        "manylinux2010_x86_64",
        "manylinux_2_12_x86_64",
        "manylinux1_x86_64",
        "any",
    ]
    shutil.rmtree(context_wheels, ignore_errors=True)
    run(
        [
            os.path.join(os.path.dirname(sys.executable), "pip"),
            "download",
            "-q",
            "--only-binary=:all:",
            "--python-version",
            "3.11",
            "--implementation",
            "cp",
            "--abi",
            "cp311",
            "--abi",
            "abi3",
            "--abi",
            "none",
            *[arg for platform in platforms for arg in ("--platform", platform)],
            "-d",
            str(context_wheels),
            *deps,
            "async-timeout>=4.0.3",
        ]
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http(method: str, url: str, token: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def wait_for(what: str, check, timeout: float):
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except OSError:
            result = None
        if result:
            return result
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.5)


@pytest.mark.database_blind(on="postgresql")  # the image brings its own database
@pytest.mark.slow
def test_the_image_builds_without_a_registry_and_compose_runs_the_whole_system(tmp_path):
    install_tools()
    conf = tmp_path / "containers.conf"
    conf.write_text(CONTAINERS_CONF)
    env = dict(os.environ, CONTAINERS_CONF=str(conf))
    debian_image("localhost/report-base:test", BASE_PACKAGES, env)
    debian_image("localhost/report-services:test", SERVICE_PACKAGES, env)
    wheels_for_base(BASE_DIR / "var" / "wheels")
    run(
        [
            "podman",
            "build",
            "--build-arg",
            "BASE=localhost/report-base:test",
            "--build-arg",
            "PIP_NO_INDEX=1",
            "-t",
            "localhost/report-console:test",
            str(BASE_DIR),
        ],
        env=env,
        timeout=900,
    )
    size = int(
        run(
            ["podman", "image", "inspect", "--format", "{{.Size}}", "localhost/report-console:test"], env=env
        ).stdout
    )
    print(f"image size: {size / 1e6:.0f} MB")
    assert size < 400e6

    override = tmp_path / "override.yaml"
    override.write_text(OVERRIDE)
    port = free_port()
    project = f"reportci{port}"
    env.update(
        SECRET_KEY="container-test-" + "x" * 40,
        REPORT_IMAGE="localhost/report-console:test",
        WEB_PORT=str(port),
        COMPOSE_PROJECT_NAME=project,
    )
    compose = ["podman-compose", "-p", project, "-f", str(BASE_DIR / "compose.yaml"), "-f", str(override)]
    try:
        run([*compose, "up", "-d", "--no-build"], env=env, cwd=BASE_DIR, timeout=300)
        base = f"http://127.0.0.1:{port}"
        wait_for("/readyz", lambda: urllib.request.urlopen(f"{base}/readyz", timeout=5).status == 200, 180)
        web = f"{project}_web_1"
        token = run(
            [
                "podman",
                "exec",
                web,
                "python",
                "manage.py",
                "create_api_token",
                "container-test",
                "--scope",
                "submit",
                "--scope",
                "read",
                "--scope",
                "replay",
                "--scope",
                "operator",
            ],
            env=env,
        ).stdout.strip()

        ids = []
        for n in range(3):
            status, answer = http(
                "POST",
                f"{base}/report/task/submit",
                token,
                {"kind": "sales_summary", "params": {}, "idempotency_key": f"c-{n}"},
            )
            assert status in (200, 201, 202), answer
            ids.append(answer["task_id"])
        status, answer = http(
            "POST",
            f"{base}/report/task/submit",
            token,
            {"kind": "probe", "params": {"fail_permanently": True, "write_output": False}},
        )
        assert status in (200, 201, 202), answer
        doomed = answer["task_id"]
        for task_id in ids:
            wait_for(
                f"task {task_id} done",
                lambda task_id=task_id: (
                    http("GET", f"{base}/report/task/{task_id}/status", token)[1].get("status") == "done"
                ),
                120,
            )
        wait_for(
            "the probe's death",
            lambda: http("GET", f"{base}/report/task/{doomed}/status", token)[1].get("status") == "dead",
            120,
        )
        status, answer = http("POST", f"{base}/report/task/{doomed}/replay", token, {})
        assert status == 200 and answer.get("ok") is True, answer
        # The replay runs again (and dies again: the probe was told to): a second attempt is recorded.
        wait_for(
            "the replayed probe's second death",
            lambda: (lambda s: s.get("status") == "dead" and s.get("attempt", 0) >= 2)(
                http("GET", f"{base}/report/task/{doomed}/status", token)[1]
            ),
            120,
        )

        for service in ("worker-1", "worker-2", "housekeeper"):
            assert (
                run(
                    ["podman", "exec", f"{project}_{service}_1", "report-probe", "live"], env=env, check=False
                ).returncode
                == 0
            ), service
        started = time.monotonic()
        run(["podman", "restart", web], env=env)
        wait_for(
            "/healthz after a restart",
            lambda: urllib.request.urlopen(f"{base}/healthz", timeout=5).status == 200,
            60,
        )
        print(f"web restarted and answering in {time.monotonic() - started:.1f} s")
    finally:
        run([*compose, "down", "-v"], env=env, cwd=BASE_DIR, check=False, timeout=300)
