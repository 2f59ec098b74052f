"""Broker failover: 200 probe tasks through 2 real workers on a Redis Sentinel setup (a master, a
replica, three sentinels, all started here on free ports); the master is SIGKILLed mid-run.

Just before the kill the replica is cut off and 20 more tasks are enqueued on the master alone:
the failover loses their jobs, as an asynchronous replica does. The workers, the housekeeper and
the web side (a live server probed over HTTP) reconnect to the promoted replica without a restart;
the housekeeper re-enqueues the lost jobs from the database. Every task ends as its kind says (done,
or dead for the permanent failures), within its attempt budget; the console and the API answer 2xx
or 503 (with Retry-After) throughout, never a 500. The failover figure, printed on every run
(README, "Production"): the time from the kill to the completion of the first task dequeued after it.
"""

import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
import redis
import requests
from django.db import connection
from django.db.models import Count, Max, Q
from django.utils import timezone

from config import redis_client
from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus
from reports.services import submit_task
from reports.services.enqueue import job_id_for
from tests.conftest import BASE_DIR, WorkerProcess, wait_until
from tests.system.sentinel_cluster import SentinelCluster
from transport.connection import _redis, redis_connection

# Redis fails over here; what the database does is proved elsewhere on both.
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.database_blind(on="postgresql")]

TASKS = 200
KILL_AFTER_DONE = 60
MAX_ATTEMPTS = 3
UNREPLICATED = 20
# Long enough that the lost jobs are still missing when the test looks at the promoted replica.
REENQUEUE_AFTER = 6


def task_mix() -> list[tuple[str, dict]]:
    """Most tasks succeed at once, some after one transient failure, a few fail permanently."""
    mix = []
    for number in range(TASKS):
        if number % 10 == 3:
            mix.append(("flaky", {"fail_attempts": 1, "sleep_seconds": 0.05}))
        elif number % 20 == 7:
            mix.append(("permanent", {"fail_permanently": True}))
        else:
            mix.append(("ok", {"sleep_seconds": 0.05}))
    return mix


@pytest.fixture
def sentinel_cluster(tmp_path, settings):
    (tmp_path / "sentinel").mkdir()
    cluster = SentinelCluster(tmp_path / "sentinel").start()
    settings.REDIS_URL = cluster.url
    # As config/settings.py builds it from a Sentinel REDIS_URL (the workers' own settings do).
    connection = redis_client.rq_queue_connection(cluster.url, socket_timeout=settings.REDIS_SOCKET_TIMEOUT)
    settings.RQ_QUEUES = {
        name: {**{key: value for key, value in config.items() if key != "URL"}, **connection}
        for name, config in settings.RQ_QUEUES.items()
    }
    _redis.cache_clear()
    yield cluster
    _redis.cache_clear()
    cluster.stop()


@pytest.fixture
def failover_settings(settings, fast_retries):
    settings.REPORT_MAX_ATTEMPTS = MAX_ATTEMPTS
    settings.REPORT_RETRY_BACKOFF = (0.5,)
    settings.REPORT_HEARTBEAT_SECONDS = 0.5
    settings.REPORT_LEASE_SECONDS = 3
    settings.REPORT_JOB_TIMEOUT = 20
    settings.REPORT_REENQUEUE_AFTER = REENQUEUE_AFTER
    return settings


class Prober(threading.Thread):
    """Asks the console and the API, over HTTP, what an operator and a client would, again and again."""

    def __init__(self, base_url: str, session_cookie: str, token: str):
        super().__init__(daemon=True)
        self.base_url = base_url
        self.console = requests.Session()
        self.console.cookies.set("sessionid", session_cookie)
        self.api = requests.Session()
        self.api.headers["Authorization"] = f"Bearer {token}"
        self.answers: Counter = Counter()
        self.bad: list[str] = []
        self.submitted: list[str] = []
        self.stop = threading.Event()

    def ask(self, label: str, call) -> None:
        try:
            response = call()
        except requests.RequestException as exc:
            self.bad.append(f"{label}: {type(exc).__name__}: {exc}")
            return
        self.answers[(label, response.status_code)] += 1
        if response.status_code == 503 and "Retry-After" not in response.headers:
            self.bad.append(f"{label}: 503 without Retry-After")
        elif response.status_code >= 500 and response.status_code != 503:
            self.bad.append(f"{label}: {response.status_code} {response.text[:300]}")
        elif label == "api submit" and response.status_code == 201:
            self.submitted.append(response.json()["task_id"])

    def run(self) -> None:
        url = self.base_url
        number = 0
        while not self.stop.is_set():
            number += 1
            self.ask("console dashboard", lambda: self.console.get(f"{url}/console/", timeout=60))
            self.ask("console tasks", lambda: self.console.get(f"{url}/console/tasks/", timeout=60))
            self.ask(
                "api submit",
                lambda n=number: self.api.post(
                    f"{url}/report/task/submit",
                    json={"kind": "probe", "params": {"sleep_seconds": 0.01},
                          "idempotency_key": f"probe-{n}"},
                    timeout=60,
                ),
            )
            self.ask("api dead letters", lambda: self.api.get(f"{url}/report/task/dead-letters", timeout=60))
            self.ask("readyz", lambda: requests.get(f"{url}/readyz", timeout=60))
            time.sleep(0.2)


def test_workers_web_and_housekeeper_ride_out_a_sentinel_failover(
    failover_settings, sentinel_cluster, subprocess_env, live_server, client, operator, api_token, tmp_path,
    capsys,
):
    env = dict(
        subprocess_env(),
        REDIS_URL=sentinel_cluster.url,
        REPORT_REENQUEUE_AFTER=str(REENQUEUE_AFTER),
        REAPER_INTERVAL="1",
        LOG_LEVEL="INFO",
    )
    master = redis_connection()
    workers = [
        WorkerProcess(env, tmp_path / f"failover-worker-{n}.log", name=f"failover-worker-{n}") for n in (1, 2)
    ]
    housekeeper_log = open(tmp_path / "housekeeper.log", "w")
    housekeeper = subprocess.Popen(
        [sys.executable, str(BASE_DIR / "manage.py"), "housekeeper"],
        cwd=BASE_DIR, env=env, stdout=housekeeper_log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    prober = None
    try:
        for worker in workers:
            worker.wait_ready(master)
        mix = task_mix()
        expected = {submit_task(kind="probe", params=params).task.pk: label for label, params in mix}

        wait_until(
            lambda: ReportTask.objects.filter(status=TaskStatus.DONE).count() >= KILL_AFTER_DONE,
            timeout=120,
            message="the first tasks to finish before the kill",
        )
        client.force_login(operator)
        prober = Prober(live_server.url, client.cookies["sessionid"].value, api_token)
        prober.start()

        old_master = sentinel_cluster.master_address()
        # Writes the replica never gets, as an asynchronous replica loses them in a real failover:
        # cut the replication link, enqueue a few more tasks on the master alone, then kill it.
        sentinel_cluster.cut_replication()
        unreplicated = {submit_task(kind="probe", params={"sleep_seconds": 0.02}).task.pk: "ok"
                        for _ in range(UNREPLICATED)}
        left = ReportTask.objects.exclude(status__in=(TaskStatus.DONE, TaskStatus.DEAD)).count()
        killed_at = timezone.now()
        kill_clock = time.monotonic()
        sentinel_cluster.kill_master()

        promoted = wait_until(
            lambda: (address := sentinel_cluster.master_address()) != old_master and address,
            timeout=30,
            message="the sentinels to name the promoted replica",
        )
        new_master = redis.Redis(host=promoted[0], port=promoted[1], socket_timeout=2)
        lost = sum(
            1
            for pk in unreplicated
            if not new_master.exists(f"rq:job:{job_id_for(pk, 1)}")
            and ReportTask.objects.filter(pk=pk, attempt=0).exists()
        )
        expected.update(unreplicated)
        # The failover figure: a task taken from the queue after the kill (so through the promoted
        # replica), run and completed; attempts already running at the kill finish without Redis.
        first_after = wait_until(
            lambda: TaskAttempt.objects.filter(outcome=AttemptOutcome.SUCCEEDED, started_at__gt=killed_at)
            .order_by("finished_at")
            .values_list("finished_at", flat=True)
            .first(),
            timeout=90,
            message=f"a task dequeued after the kill to complete ({sentinel_cluster.logs()})",
        )
        failover_seconds = (first_after - killed_at).total_seconds()
        assert lost > 0, "the cut-off replica should have missed the last enqueues"

        def all_finished() -> bool:
            return not ReportTask.objects.exclude(status__in=(TaskStatus.DONE, TaskStatus.DEAD)).exists()

        wait_until(all_finished, timeout=180, interval=0.5, message="every task to end done or dead")
        drained_seconds = time.monotonic() - kill_clock
        prober.stop.set()
        prober.join(90)

        # Nothing lost: every task submitted (before the kill and through the API during it) ended
        # as its kind says, within its attempt budget; no attempt was run twice in effect.
        api_tasks = set(ReportTask.objects.filter(public_id__in=prober.submitted)
                        .values_list("pk", flat=True))
        assert len(api_tasks) == len(set(prober.submitted))
        statuses = dict(ReportTask.objects.filter(pk__in=expected).values_list("pk", "status"))
        wrong = {pk: (label, statuses[pk]) for pk, label in expected.items()
                 if statuses[pk] != (TaskStatus.DEAD if label == "permanent" else TaskStatus.DONE)}
        assert not wrong, f"tasks ended otherwise than their kind says: {wrong}"
        assert not ReportTask.objects.filter(pk__in=api_tasks).exclude(status=TaskStatus.DONE).exists()
        over_budget = ReportTask.objects.annotate(runs=Count("attempts")).filter(runs__gt=MAX_ATTEMPTS)
        assert not over_budget.exists(), list(over_budget.values_list("pk", "runs"))
        assert not TaskAttempt.objects.filter(outcome=AttemptOutcome.RUNNING).exists()
        succeeded = Count("attempts", filter=Q(attempts__outcome=AttemptOutcome.SUCCEEDED))
        assert not ReportTask.objects.filter(status=TaskStatus.DONE).annotate(successes=succeeded).exclude(
            successes=1
        ).exists(), "a done task has exactly one successful attempt"

        # Reconnected without a restart: both workers are the processes started before the kill.
        for worker in workers:
            assert worker.process.poll() is None, f"{worker.name} exited:\n{worker.output()[-3000:]}"
        assert housekeeper.poll() is None, (tmp_path / "housekeeper.log").read_text()[-3000:]
        worker_logs = "".join(worker.output() for worker in workers)
        assert "failover seen" in worker_logs, worker_logs[-3000:]

        assert not prober.bad, prober.bad[:20]
        answered = {label for (label, status), count in prober.answers.items() if status < 300}
        assert {"console dashboard", "api submit", "readyz"} <= answered, prober.answers
        last_finish = ReportTask.objects.aggregate(last=Max("finished_at"))["last"]
        assert last_finish - killed_at < timedelta(seconds=180)

        with capsys.disabled():
            print(
                f"\nfailover: master {old_master[0]}:{old_master[1]} SIGKILLed with {left} of {TASKS} tasks "
                f"still to run on 2 workers ({connection.vendor}), {UNREPLICATED} of them enqueued after the "
                f"replica was cut off ({lost} of those lost with the old master, re-enqueued by the "
                f"housekeeper); sentinels promoted {promoted[0]}:{promoted[1]}; first task dequeued after "
                f"the kill completed {failover_seconds:.2f}s after it; all {len(expected) + len(api_tasks)} "
                f"tasks finished {drained_seconds:.1f}s after it"
            )
            print("failover: HTTP answers during and after the switch "
                  f"{dict(sorted(prober.answers.items()))}")
    finally:
        if prober is not None:
            prober.stop.set()
        for worker in workers:
            worker.stop()
        housekeeper.kill()
        housekeeper.wait(10)
        housekeeper_log.close()
