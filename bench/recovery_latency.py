"""Bench 4: recovery latency.

(a) SIGKILL of a work-horse mid-task -> the task running again (the next attempt's started_at).
    The lease is short (REPORT_JOB_TIMEOUT=2, REPORT_LEASE_GRACE=0); this script plays the reaper
    loop (`manage.py reap_tasks --loop`) every --reaper-interval seconds. Expected: the lease time
    left at the kill + up to one reaper interval + the pick-up by the worker.
(b) A task's final failure (the dead letter's created_at) -> the request at a local fake DingTalk
    robot (tests/dingtalk_fake.py), delivered by the send job the death kicks onto the `high` queue.

    .venv/bin/python bench/recovery_latency.py [--rounds 5] [--reaper-interval 1.0]
"""

import os
import signal
import statistics
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
    p.add_argument("--reaper-interval", type=float, default=1.0)
    args = p.parse_args()
    robot = FakeDingTalk(secret=SECRET).start()
    bench = _common.setup(
        postgres=args.postgres,
        extra_env={
            "REPORT_JOB_TIMEOUT": "2",
            "REPORT_LEASE_GRACE": "0",
            "REPORT_RETRY_BACKOFF": "0",
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


def wait_for(predicate, timeout=60.0, interval=0.01, tick=None):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        if tick:
            tick()
        time.sleep(interval)


def run(bench, robot, args) -> None:
    from django.db import connection

    from deadletters.models import DeadLetter
    from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus
    from reports.services import reap_tasks, submit_task

    print(f"bench 4 recovery latency: rounds={args.rounds}, 1 x rq.Worker with scheduler, lease 2 s, "
          f"reaper every {args.reaper_interval:g} s, database {connection.vendor}")
    print(f"conditions: {_common.conditions()}")
    worker = _common.start_worker(bench, name="latency", burst=False, worker_class="rq.Worker",
                                  queues=("high", "default", "low"), scheduler=True)
    last_reap = [0.0]

    def reaper():
        if time.monotonic() - last_reap[0] >= args.reaper_interval:
            reap_tasks(use_lock=False)
            last_reap[0] = time.monotonic()

    totals, lease_left, after_lease = [], [], []
    for r in range(1, args.rounds + 1):
        task = submit_task(kind="probe", params={"sleep_seconds": 1.5}).task
        attempt = wait_for(lambda t=task: TaskAttempt.objects.filter(task=t, number=1).first(), timeout=120)
        time.sleep(0.3)  # mid-task: the horse is sleeping inside generate()
        pid = int(attempt.worker.rsplit("pid ", 1)[1])
        killed_wall = time.time()
        os.kill(pid, signal.SIGKILL)
        lease = ReportTask.objects.get(pk=task.pk).lease_expires_at.timestamp()
        second = wait_for(lambda t=task: TaskAttempt.objects.filter(task=t, number=2).first(), tick=reaper)
        wait_for(lambda t=task: ReportTask.objects.get(pk=t.pk).status == TaskStatus.DONE, tick=reaper)
        first = TaskAttempt.objects.get(task=task, number=1)
        assert first.outcome == AttemptOutcome.ABANDONED
        total = second.started_at.timestamp() - killed_wall
        totals.append(total)
        lease_left.append(lease - killed_wall)
        after_lease.append(second.started_at.timestamp() - lease)
        print(f"round {r}: kill -> running again {total:6.2f}s (lease left at kill {lease - killed_wall:5.2f}s, "
              f"lease end -> next attempt started {second.started_at.timestamp() - lease:5.2f}s)", flush=True)
    print(f"kill -> running again: median {statistics.median(totals):.2f}s, max {max(totals):.2f}s; "
          f"after the lease ended: median {statistics.median(after_lease):.2f}s, max {max(after_lease):.2f}s")

    alert_lat = []
    for r in range(1, args.rounds + 1):
        before = len(robot.received)
        task = submit_task(kind="probe", params={"fail_permanently": True}).task
        letter = wait_for(lambda t=task: DeadLetter.objects.filter(task=t).first(), timeout=120)
        wait_for(lambda b=before: len(robot.accepted) > b and len(robot.received) > b, timeout=120)
        received = robot.received[before]
        latency = received.at - letter.created_at.timestamp()
        alert_lat.append(latency)
        print(f"round {r}: dead letter created -> robot request {latency * 1000:7.1f} ms", flush=True)
    print(f"final failure -> DingTalk request: median {statistics.median(alert_lat) * 1000:.1f} ms, "
          f"max {max(alert_lat) * 1000:.1f} ms ({len(robot.accepted)} accepted by the fake robot)")
    worker.send_signal(signal.SIGTERM)
    worker.wait(30)


if __name__ == "__main__":
    main()
