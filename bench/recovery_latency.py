"""Bench 4: recovery latency, with the DEFAULT lease settings (REPORT_JOB_TIMEOUT 300 s,
REPORT_HEARTBEAT_SECONDS 3, REPORT_LEASE_SECONDS 12) and a real `manage.py housekeeper` with
its default intervals (REAPER_INTERVAL, 5 s), against 2 `manage.py rqworker` processes:

(a) SIGKILL at a random moment of a running attempt (a probe sleeping 3 s), of
      horse    the work-horse only (the OOM killer's usual victim): its worker records it
      worker   the worker's whole process group (worker, scheduler, horse): the housekeeper, once
               the heartbeat lapsed, takes the attempt back
      parent   the worker process only: its horse dies with it; the housekeeper as above
    -> the attempt recorded `abandoned` (retry decided) and -> the next attempt running (claimed
    by a worker). The retry backoff is set to 1 s (no jitter), so "decided -> running" shows what
    promoting a due retry costs beyond its backoff, whichever process died: the due time is on
    the task row (reports/services/engine.py), promoted by the housekeeper, not in a scheduler's lock.
(b) A task's final failure (the dead letter's created_at) -> the request at a local fake DingTalk
    robot (tests/dingtalk_fake.py), delivered by the send job the death kicks onto the `high` queue.

    .venv/bin/python bench/recovery_latency.py [--rounds 5] [--postgres ADMIN_URL] [--worker-class PATH]

The workers are RQ["WORKER_CLASS"] (the pool worker) unless --worker-class names another.
"""

import os
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402
from tests.dingtalk_fake import FakeDingTalk  # noqa: E402

SECRET = "SECbench-robot-secret-0123456789"


def main() -> None:
    p = _common.parser(__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--scenarios", default="horse,worker,parent")
    p.add_argument("--worker-class", default="")
    args = p.parse_args()
    robot = FakeDingTalk(secret=SECRET).start()
    bench = _common.setup(
        postgres=args.postgres,
        extra_env={
            "REPORT_RETRY_BACKOFF": "1",
            "REPORT_RETRY_JITTER": "0",
            "DINGTALK_WEBHOOK": robot.webhook,
            "DINGTALK_SECRET": SECRET,
            "DINGTALK_TIMEOUT": "2",
            "CONSOLE_BASE_URL": "https://console.example.invalid",
        },
    )
    try:
        run(bench, robot, args)
    finally:
        bench.cleanup()
        robot.stop()


def wait_for(predicate, timeout=120.0, interval=0.01, what="a condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(interval)


def horses_of(worker_pid: int) -> list[int]:
    """A worker's children in process groups of their own: its horse, or its pool of horses."""
    try:
        children = Path(f"/proc/{worker_pid}/task/{worker_pid}/children").read_text().split()
    except FileNotFoundError:
        return []
    horses = []
    for child in map(int, children):
        try:
            if os.getpgid(child) == child:
                horses.append(child)
        except ProcessLookupError:
            continue
    return horses


def horse_of(worker_pid: int) -> int | None:
    return next(iter(horses_of(worker_pid)), None)


def run(bench, robot, args) -> None:
    from django.conf import settings
    from django.db import connection

    from deadletters.models import DeadLetter
    from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus
    from reports.services import submit_task

    worker_class = args.worker_class or settings.RQ["WORKER_CLASS"]
    print(f"bench 4 recovery latency: rounds={args.rounds}, 2 x rqworker ({worker_class}) with "
          f"scheduler, job timeout {settings.REPORT_JOB_TIMEOUT} s, "
          f"heartbeat {settings.REPORT_HEARTBEAT_SECONDS:g} s, lease {settings.REPORT_LEASE_SECONDS:g} s, "
          f"housekeeper's reaper every {settings.REAPER_INTERVAL} s, "
          f"retry backoff 1 s, database {connection.vendor}")
    print(f"conditions: {_common.conditions()}")
    workers: dict[str, subprocess.Popen] = {}

    def start() -> None:
        name = f"latency-{len(workers) + 1}"  # a new name: the dead worker's key lingers in Redis
        workers[name] = _common.start_worker(bench, name=name, burst=False, worker_class=worker_class,
                                             queues=("high", "default", "low"), scheduler=True)

    for _ in (1, 2):
        start()
    reaper_log = open(bench.tmp / "housekeeper.log", "w")
    reaper = subprocess.Popen([sys.executable, str(_common.BASE_DIR / "manage.py"), "housekeeper"],
                              cwd=_common.BASE_DIR, env=dict(os.environ), stdout=reaper_log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    bench.workers.append(reaper)
    rng = random.Random(4)
    figures: dict[str, list[tuple[float, float]]] = {}
    for scenario in [s.strip() for s in args.scenarios.split(",") if s.strip()]:
        for r in range(1, args.rounds + 1):
            task = submit_task(kind="probe", params={"sleep_seconds": 3}).task
            attempt = wait_for(lambda t=task: TaskAttempt.objects.filter(task=t, number=1).first(),
                               what=f"attempt 1 of task {task.pk} (logs in {bench.tmp})")
            time.sleep(rng.uniform(0.3, 2.5))  # mid-task, at a random moment of the heartbeat cycle
            name, _, pooled = attempt.worker.rsplit(" pid ", 1)[0].partition(" horse ")
            worker_pid = int(attempt.worker.rsplit(" pid ", 1)[1])
            horse = int(pooled) if pooled else horse_of(worker_pid)  # a pool worker names it
            if horse is None and scenario == "horse":
                raise SystemExit(f"no work-horse found under worker {worker_pid}")
            killed = time.time()
            if scenario == "horse":
                os.kill(horse, signal.SIGKILL)
            elif scenario == "worker":  # as an OOM kill of the container would
                os.killpg(worker_pid, signal.SIGKILL)
                for child in horses_of(worker_pid):
                    os.kill(child, signal.SIGKILL)
            else:
                os.kill(worker_pid, signal.SIGKILL)
            second = wait_for(lambda t=task: TaskAttempt.objects.filter(task=t, number=2).first(),
                              interval=0.005, what=f"attempt 2 of task {task.pk} (logs in {bench.tmp})")
            first = TaskAttempt.objects.get(task=task, number=1)
            assert first.outcome == AttemptOutcome.ABANDONED, first.outcome
            decided = first.finished_at.timestamp() - killed
            running = second.started_at.timestamp() - killed
            figures.setdefault(scenario, []).append((decided, running))
            print(f"{scenario:6} round {r}: kill -> retry decided {decided:6.2f}s, -> next attempt running "
                  f"{running:6.2f}s; decided -> running {running - decided:5.2f}s (backoff 1 s) "
                  f"({first.error_type.rsplit('.', 1)[1]})", flush=True)
            if scenario != "horse":
                workers[name].wait(10)
                start()  # the supervisor (systemd, `manage.py up`) starts a worker again
            wait_for(lambda t=task: ReportTask.objects.get(pk=t.pk).status == TaskStatus.DONE,
                     what=f"task {task.pk} to finish (logs in {bench.tmp})")
    for scenario, rows in figures.items():
        decided, running = [row[0] for row in rows], [row[1] for row in rows]
        rerun = [row[1] - row[0] for row in rows]
        print(f"{scenario:6}: kill -> next attempt running median {statistics.median(running):.2f}s "
              f"(max {max(running):.2f}s); kill -> retry decided median {statistics.median(decided):.2f}s "
              f"(max {max(decided):.2f}s); decided -> running median {statistics.median(rerun):.2f}s "
              f"(max {max(rerun):.2f}s, backoff 1 s)")

    # Once: a cause's first death is sent at once; later deaths of the same cause join its digest.
    task = submit_task(kind="probe", params={"fail_permanently": True}).task
    letter = wait_for(lambda t=task: DeadLetter.objects.filter(task=t).first())
    wait_for(lambda: robot.accepted and robot.received)
    latency = robot.received[0].at - letter.created_at.timestamp()
    print(f"final failure -> DingTalk request: {latency * 1000:.1f} ms", flush=True)
    print(f"conditions at the end: {_common.conditions()}")
    for proc in [*workers.values(), reaper]:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in [*workers.values(), reaper]:
        proc.wait(30)


if __name__ == "__main__":
    main()
