"""Chaos: mixed report tasks through 3 real worker processes while the test, at random moments,
SIGKILLs work-horses and worker parents, restarts Redis (and once flushes it), drops the
database connections and makes the DingTalk robot time out. Then, for every task: exactly one
of done or dead; a done task's output was written by exactly one successful attempt and is the
only file of the task; a dead task has exactly one open dead letter, carried by a sent alert; no
attempt is left running; no work-horse outlives its worker.

The run is driven by one seeded RNG (task mix, fault order, the moments between faults).
Replay a failure with the seed it printed:

    CHAOS_SEED=<n> .venv/bin/python -m pytest tests/system/test_chaos.py -s
    CHAOS_TASKS=500 .venv/bin/python -m pytest tests/system/test_chaos.py -s      # the issue's full size
"""

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path
from unittest.mock import patch

import pytest
from django.conf import settings
from django.db import DatabaseError, connection
from redis.exceptions import RedisError

from deadletters.alerts import sender
from deadletters.models import Alert, AlertMessage, AlertStatus, DeadLetter, DeadLetterStatus
from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus
from reports.services import submit_task
from tests.conftest import children_of, wait_until
from tests.reaping import reap_tasks
from transport.connection import _redis

pytestmark = [pytest.mark.chaos, pytest.mark.django_db(transaction=True)]

SEED = int(os.environ.get("CHAOS_SEED") or random.SystemRandom().randrange(1, 2**31))
TASKS = int(os.environ.get("CHAOS_TASKS") or 150)
WORKERS = 3
ROBOT_SECRET = "SECchaos-robot-secret-0123456789"
# Faults per run; the order and the pauses between them come from the seed.
FAULT_PLAN = (
    ["kill_horse"] * 6
    + ["kill_parent"] * 3
    + ["restart_redis"] * 2
    + ["flush_redis"]
    + ["drop_db_connections"] * 2
    + ["robot_timeout"] * 2
)


def mixed_params(rng: random.Random) -> tuple[str, dict]:
    r = rng.random()
    if r < 0.40:
        return "fast", {}
    if r < 0.60:
        return "slow", {"sleep_seconds": round(rng.uniform(0.3, 1.2), 2)}
    if r < 0.85:
        return "flaky", {"fail_attempts": rng.randint(1, 2), "sleep_seconds": round(rng.uniform(0, 0.3), 2)}
    return "permanent", {"fail_permanently": True}


def pid_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def orphan_horse_alive(pid: int) -> bool:
    """A horse left by a killed parent still running (a reused pid, e.g. a new worker started by
    this test, does not count: its parent is this process)."""
    if not pid_alive(pid) or parent_pid(pid) == os.getpid():
        return False
    try:
        return b"rqworker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False


def horses_of(worker_pid: int) -> list[int]:
    """The work-horses a worker runs now (its children in a process group of their own)."""
    horses = []
    for child in children_of(worker_pid):
        try:
            if os.getpgid(child) == child:
                horses.append(child)
        except ProcessLookupError:
            continue
    return horses


def horse_of(worker_pid: int) -> int | None:
    return next(iter(horses_of(worker_pid)), None)


def parent_pid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None


def attempt_pid(worker: str) -> int:
    return int(worker.rsplit("pid ", 1)[1])


class Chaos:
    def __init__(self, *, rng, start_worker, redis_server, redis_conn, robot, worker_env, log):
        self.rng = rng
        self.start_worker = start_worker
        self.redis_server = redis_server
        self.redis_conn = redis_conn
        self.robot = robot
        self.worker_env = worker_env
        self.log = log
        self.pool = []
        self.orphaned_horses: list[int] = []  # horses whose worker was SIGKILLed under them
        self.done_faults: Counter = Counter()
        self.worker_exits = 0
        self.robot_ok_at: float | None = None
        self.reap_errors = 0
        self.started = time.monotonic()

    def note(self, text: str) -> None:
        self.log.append(f"{time.monotonic() - self.started:7.2f}s {text}")

    # --- keeping the system running, as systemd and the reaper's cron would ----------

    def spawn(self) -> None:
        self.pool.append(self.start_worker(**self.worker_env))

    def supervise(self) -> None:
        for worker in list(self.pool):
            if worker.process.poll() is not None:
                self.pool.remove(worker)
                self.worker_exits += 1
                self.note(f"worker {worker.name} exited with {worker.process.returncode}; restarting")
        while len(self.pool) < WORKERS:
            self.spawn()

    def tick(self) -> None:
        self.supervise()
        if self.robot_ok_at is not None and time.monotonic() >= self.robot_ok_at:
            self.robot.set_mode("ok")
            self.robot_ok_at = None
            self.note("robot answers again")
        try:
            reap_tasks(use_lock=False)
        except (RedisError, DatabaseError) as exc:  # the periodic reaper logs and carries on
            self.reap_errors += 1
            connection.close()
            self.note(f"reaper pass failed: {type(exc).__name__}")

    def run_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.tick()
            time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))

    # --- faults ----------------------------------------------------------------------

    def inject(self, fault: str) -> None:
        done = getattr(self, fault)()
        if done:
            self.done_faults[fault] += 1

    def kill_horse(self) -> bool:
        """SIGKILL the work-horse of a running attempt (the parent survives and carries on)."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            parents = {w.name: w.pid for w in self.pool}
            running = list(
                TaskAttempt.objects.filter(outcome=AttemptOutcome.RUNNING).values_list("task_id", "worker")
            )
            self.rng.shuffle(running)
            for task_id, worker in running:
                # The attempt names the worker process, and a pool worker the horse it handed
                # the attempt to; a forking worker's horse is the child it forked.
                name, _, horse = worker.rsplit(" pid ", 1)[0].partition(" horse ")
                if name in parents and attempt_pid(worker) == parents[name]:
                    pid = int(horse) if horse else horse_of(parents[name])
                    if pid is None:
                        continue
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    self.note(f"SIGKILL horse {pid} of {name} running task {task_id}")
                    return True
            self.tick()
            time.sleep(0.05)
        self.note("kill_horse: no running attempt within 5s, skipped")
        return False

    def kill_parent(self) -> bool:
        """SIGKILL a worker parent: its horse dies with it; the reaper takes the attempt back."""
        worker = self.rng.choice(self.pool)
        horses = horses_of(worker.pid)
        worker.kill(signal.SIGKILL)
        self.pool.remove(worker)
        self.orphaned_horses.extend(horses)
        self.note(f"SIGKILL worker parent {worker.name} ({worker.pid})")
        self.supervise()
        return True

    def restart_redis(self) -> bool:
        self.redis_server.restart()
        _redis.cache_clear()
        self.note("Redis restarted (everything in it is gone)")
        return True

    def flush_redis(self) -> bool:
        self.redis_conn.flushall()
        self.note("Redis FLUSHALL")
        return True

    def drop_db_connections(self) -> bool:
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
                terminated = cursor.fetchone()[0]
            self.note(f"terminated {terminated} PostgreSQL backend(s) of the other processes")
        else:
            # SQLite has no server side to cut: restart a worker (warm shutdown, new connections).
            worker = self.rng.choice(self.pool)
            # A warm shutdown finishes the running attempt and records it; on SQLite that record may
            # wait for the write lock up to REPORT_WORKER_DB_TIMEOUT (30 s) under this much load.
            worker.kill(signal.SIGTERM, timeout=settings.REPORT_WORKER_DB_TIMEOUT + 15)
            self.pool.remove(worker)
            self.note(f"SQLite: worker {worker.name} restarted (SIGTERM, warm shutdown)")
            self.supervise()
        connection.close()
        return True

    def robot_timeout(self) -> bool:
        self.robot.set_mode("timeout")
        self.robot_ok_at = time.monotonic() + self.rng.uniform(2.0, 5.0)
        self.note("robot stops answering (requests time out)")
        return True


@pytest.fixture
def chaos_settings(settings, fake_dingtalk):
    settings.REPORT_JOB_TIMEOUT = 3
    settings.REPORT_LEASE_GRACE = 1
    settings.REPORT_HEARTBEAT_SECONDS = 0.5
    settings.REPORT_LEASE_SECONDS = 2
    settings.REPORT_MAX_ATTEMPTS = 4
    settings.REPORT_RETRY_BACKOFF = (0.5, 1.0)
    settings.REPORT_RETRY_JITTER = 0.5
    settings.REPORT_REENQUEUE_AFTER = 2
    robot = fake_dingtalk(secret=ROBOT_SECRET, limit_per_minute=30, mute_seconds=2)
    settings.DINGTALK_RATE_PER_MINUTE = 30
    settings.DINGTALK_TIMEOUT = 1.0
    settings.DINGTALK_RETRY_BACKOFF = (0.5, 1.0, 2.0)
    settings.DINGTALK_THROTTLE_BACKOFF_SECONDS = 2
    settings.DINGTALK_MAX_SEND_ATTEMPTS = 50
    worker_env = {
        "DINGTALK_WEBHOOK": robot.webhook,
        "DINGTALK_SECRET": ROBOT_SECRET,
        "DINGTALK_RATE_PER_MINUTE": 30,
        "DINGTALK_TIMEOUT": 1.0,
        "DINGTALK_RETRY_BACKOFF": "0.5,1,2",
        "DINGTALK_THROTTLE_BACKOFF_SECONDS": 2,
        "DINGTALK_MAX_SEND_ATTEMPTS": 50,
        "CONSOLE_BASE_URL": settings.CONSOLE_BASE_URL,
        "LOG_LEVEL": "WARNING",
    }
    return robot, worker_env


def test_nothing_lost_nothing_done_twice_under_faults(
    chaos_settings, start_worker, redis_server, redis_conn, media_root, capsys
):
    robot, worker_env = chaos_settings
    rng = random.Random(SEED)
    with capsys.disabled():
        print(f"\nchaos: CHAOS_SEED={SEED} CHAOS_TASKS={TASKS} database={connection.vendor}")
    log: list[str] = []
    chaos = Chaos(
        rng=rng,
        start_worker=start_worker,
        redis_server=redis_server,
        redis_conn=redis_conn,
        robot=robot,
        worker_env=worker_env,
        log=log,
    )
    replay = f"replay with CHAOS_SEED={SEED} CHAOS_TASKS={TASKS}"

    def context() -> str:
        return f"{replay}\n" + "\n".join(log[-60:])

    for _ in range(WORKERS):
        chaos.spawn()
    plan = list(FAULT_PLAN)
    rng.shuffle(plan)
    mix = [mixed_params(rng) for _ in range(TASKS)]
    chunks = [mix[i :: len(plan) + 1] for i in range(len(plan) + 1)]
    submitted: dict[int, str] = {}

    def submit(chunk) -> None:
        for label, params in chunk:
            submitted[submit_task(kind="probe", params=params).task.pk] = label

    submit(chunks[0])
    for fault, chunk in zip(plan, chunks[1:], strict=True):
        chaos.run_for(rng.uniform(0.3, 2.0))
        chaos.inject(fault)
        submit(chunk)
    chaos.note("all faults injected; draining")
    if chaos.robot_ok_at is not None:
        chaos.robot_ok_at = time.monotonic()

    def all_terminal() -> bool:
        chaos.tick()
        return not ReportTask.objects.exclude(status__in=(TaskStatus.DONE, TaskStatus.DEAD)).exists()

    wait_until(all_terminal, timeout=180, interval=0.25, message=f"every task to finish ({context()})")
    drained_at = time.monotonic() - chaos.started

    # Horses of a killed parent die with it: none may be left running (or writing files).
    wait_until(
        lambda: not any(orphan_horse_alive(pid) for pid in chaos.orphaned_horses),
        timeout=30,
        message=f"the horses of killed workers to be gone ({chaos.orphaned_horses})",
    )

    # Every dead letter's alert reaches the robot (senders in the workers, plus passes here, which
    # send a cause's further deaths at once instead of folding them into a follow-up minutes later).
    def alerts_delivered() -> bool:
        try:
            with patch.object(sender, "FOLD_SECONDS", 0):
                sender.send_due_alerts()
        except (RedisError, DatabaseError):
            connection.close()
        chaos.tick()
        return not DeadLetter.objects.exclude(
            alerts__status=AlertStatus.SENT, alerts__message__status=AlertStatus.SENT
        ).exists()

    wait_until(alerts_delivered, timeout=120, interval=0.5, message=f"every alert to be sent ({context()})")
    elapsed = time.monotonic() - chaos.started

    # --- the invariants, task by task --------------------------------------------------
    assert set(ReportTask.objects.values_list("pk", flat=True)) == set(submitted), (
        "a task was lost or invented")
    assert not TaskAttempt.objects.filter(outcome=AttemptOutcome.RUNNING).exists(), (
        "an attempt is left running")
    accepted_uuids = {r.msg_uuid for r in robot.accepted}
    orphans = []
    statuses = Counter()
    outcomes = Counter(TaskAttempt.objects.values_list("outcome", flat=True))
    media = Path(media_root) / "reports"
    for task in ReportTask.objects.prefetch_related("attempts", "dead_letters"):
        label = submitted[task.pk]
        statuses[(label, task.status)] += 1
        attempts = {a.number: a for a in task.attempts.all()}
        succeeded = [n for n, a in attempts.items() if a.outcome == AttemptOutcome.SUCCEEDED]
        files = sorted((media / str(task.public_id)).glob("attempt-*/*"))
        where = f"task {task.pk} ({label}, {task.params}) {context()}"
        assert task.status in (TaskStatus.DONE, TaskStatus.DEAD), where
        if task.status == TaskStatus.DONE:
            assert succeeded == [task.attempt], f"done by attempts {succeeded}: {where}"
            assert not task.dead_letters.exists(), where
            output = media.parent / task.output_file
            assert task.output_file == f"reports/{task.public_id}/attempt-{task.attempt}/probe.csv", where
            assert output.is_file(), f"output missing: {where}"
            assert output.read_text().strip().splitlines()[-1] == f"{task.public_id},{task.attempt}", where
        else:
            assert not succeeded, f"a dead task has a successful attempt: {where}"
            letters = list(task.dead_letters.all())
            assert len(letters) == 1 and letters[0].status == DeadLetterStatus.OPEN, where
            sent = Alert.objects.filter(dead_letter=letters[0],
                                        status=AlertStatus.SENT).select_related("message")
            assert any(
                a.message and a.message.status == AlertStatus.SENT
                and str(a.message.msg_uuid) in accepted_uuids
                for a in sent
            ), f"dead letter {letters[0].pk} is in no message the robot accepted: {where}"
            if label == "permanent":
                assert letters[0].error_type == "reports.errors.PermanentError", where
            else:
                # It asked to succeed eventually: only injected faults may have used up its budget.
                assert any(
                    a.outcome != AttemptOutcome.FAILED or a.error_type != "reports.errors.TransientError"
                    for a in attempts.values()
                ), f"died of its own flakiness alone: {where}"
        if label == "permanent":
            assert task.status == TaskStatus.DEAD, where
        # Counting the writes: a done task's file is its only one; an attempt that did not succeed
        # (a horse killed between writing and recording, an attempt taken back) leaves none.
        expected = [media.parent / task.output_file] if task.status == TaskStatus.DONE else []
        orphans += [(task.pk, path.parent.name, attempts[int(path.parent.name.split("-", 1)[1])].outcome)
                    for path in files if path not in expected]
    assert not orphans, f"files outlived their attempts: {orphans[:10]} {context()}"
    for fault in set(FAULT_PLAN) - {"kill_horse"}:
        assert chaos.done_faults[fault] >= 1, f"fault {fault} never ran: {context()}"
    assert chaos.done_faults["kill_horse"] >= 1, f"no horse was ever killed: {context()}"

    with capsys.disabled():
        print(f"chaos: seed {SEED}, {TASKS} tasks, {WORKERS} workers, {connection.vendor}: drained in "
              f"{drained_at:.1f}s, alerts delivered at {elapsed:.1f}s")
        print(f"chaos: faults {dict(chaos.done_faults)}; worker exits seen {chaos.worker_exits}; "
              f"failed reaper passes {chaos.reap_errors}")
        print(f"chaos: outcomes {dict(sorted(statuses.items()))}")
        print(f"chaos: attempts {dict(outcomes)}; robot requests {len(robot.received)}, accepted "
              f"{len(robot.accepted)}; "
              f"messages {AlertMessage.objects.filter(status=AlertStatus.SENT).count()} "
              f"sent ({AlertMessage.objects.filter(is_digest=True).count()} digests)")
        print(f"chaos: files left by attempts that never succeeded: {len(orphans)} {orphans[:10]}")
