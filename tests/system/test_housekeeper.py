"""`manage.py housekeeper` while its database or its Redis is stopped, each a real server of the
test's own: it says so once, its readiness probe fails while its liveness holds, it never exits,
and once the server is back it carries on (a lost job is enqueued again)."""

import subprocess
import sys
import time

import pytest
import redis

from config.embedded_redis import RedisServer
from reports.services import submit_task
from tests.conftest import BASE_DIR, wait_until
from tests.system.private_postgres import PrivatePostgres

pytestmark = pytest.mark.django_db(transaction=True)
OUTAGE_SECONDS = 8


def probe(check: str, probe_file) -> bool:
    """`report-probe live|ready` (deploy/container/probe) for the housekeeper beating into probe_file."""
    done = subprocess.run([sys.executable, str(BASE_DIR / "deploy" / "container" / "probe"), check],
                          env={"PROBE_FILE": str(probe_file)}, capture_output=True, text=True, timeout=30)
    assert done.stdout.startswith(f"{check}: "), done.stdout + done.stderr  # it says why
    return done.returncode == 0


def rides_out(housekeeper, probe_file, stop, start, *, down: str) -> None:
    """Stop the server, watch the housekeeper hold on (said once, not ready but live), start it again."""
    wait_until(lambda: probe("live", probe_file), timeout=10, message="the housekeeper's first beat")
    stop()
    wait_until(lambda: f"{down} unreachable" in housekeeper.output(), timeout=30,
               message=f"the housekeeper to notice that {down} is down")
    wait_until(lambda: not probe("ready", probe_file), timeout=5,
               message="its readiness to fail (a beat a second)")
    held = time.monotonic()
    while time.monotonic() - held < OUTAGE_SECONDS:  # several of its asks, each answered "not yet"
        assert not probe("ready", probe_file) and probe("live", probe_file)
        assert housekeeper.process.poll() is None, housekeeper.output()[-3000:]
        time.sleep(0.5)
    start()
    wait_until(lambda: f"{down} reachable again" in housekeeper.output(), timeout=30,
               message=f"the housekeeper to carry on once {down} answers")
    wait_until(lambda: probe("ready", probe_file), timeout=10, message="the housekeeper to be ready again")
    output = housekeeper.output()
    assert output.count(f"{down} unreachable") == 1, output[-3000:]  # said once, not once a pass
    assert "gave up" not in output and "Traceback" not in output, output[-3000:]
    assert housekeeper.process.poll() is None, output[-3000:]


def test_a_redis_stopped_and_started_again_is_ridden_out(start_housekeeper, tmp_path):
    server = RedisServer(tmp_path / "redis").start()
    probes = tmp_path / "probe.json"
    try:
        housekeeper = start_housekeeper(PROBE_FILE=str(probes), REDIS_URL=server.url,
                                        REPORT_REENQUEUE_AFTER=0)
        # Enqueued in the session's Redis: for the housekeeper's own, a task whose job is lost.
        task = submit_task(kind="probe", params={}).task
        rides_out(housekeeper, probes, server.stop, server.start, down="redis")
        restarted = redis.Redis.from_url(server.url)
        wait_until(lambda: restarted.exists(f"rq:job:report-{task.pk}-1"), timeout=30,
                   message="the housekeeper to enqueue the lost job into the restarted Redis")
    finally:
        server.stop()


@pytest.mark.database_blind  # a PostgreSQL of its own
def test_a_postgresql_stopped_and_started_again_is_ridden_out(start_housekeeper, subprocess_env, redis_conn,
                                                              tmp_path):
    database = PrivatePostgres().start()
    try:
        env = {**subprocess_env(), "DATABASE_URL": database.url}
        manage = [sys.executable, str(BASE_DIR / "manage.py")]
        subprocess.run([*manage, "migrate", "-v0"], cwd=BASE_DIR, env=env, check=True, timeout=300)
        submitted = subprocess.run(
            [*manage, "shell", "-c", "from reports.services import submit_task; "
                                     "print(submit_task(kind='probe', params={}).task.pk)"],
            cwd=BASE_DIR, env=env, check=True, timeout=120, capture_output=True, text=True,
        )
        job = f"rq:job:report-{submitted.stdout.split()[-1]}-1"
        probes = tmp_path / "probe.json"
        housekeeper = start_housekeeper(PROBE_FILE=str(probes), DATABASE_URL=database.url,
                                        REPORT_REENQUEUE_AFTER=0)

        def stop_and_lose_the_job():
            database.stop()
            redis_conn.delete(job)  # lost meanwhile: only a housekeeper that carries on enqueues it again

        rides_out(housekeeper, probes, stop_and_lose_the_job, database.start, down="database")
        wait_until(lambda: redis_conn.exists(job), timeout=30,
                   message="the housekeeper to enqueue the lost job once the database is back")
    finally:
        database.remove()
