"""Bench: an upstream outage met by the circuit breaker, with the DEFAULT breaker of http_export
(open after 5 upstream failures within 60 s; probed every 10 s, 5 s timeout; closed after 3 passing
probes and a canary of 2) run by a real `manage.py housekeeper`, against 2 `manage.py rqworker`
processes (2 horses each; the kind's default concurrency cap, 4).

http_export's default source is a local server (tests/upstream_fake.py). 100 tasks are submitted
while it holds its answers (those running are in flight, the rest queued), then it fails (503);
100 more are submitted during the outage, which lasts --outage seconds (60 by default: shorter than
the issue's 5 minutes, which only adds waiting to the same path). Then it answers again.
Prints the time from recovery to the last task done, split into its steps (probes, the caches'
settle, the canary, the rest), and what the outage cost: dead letters, attempts charged, cards.

    .venv/bin/python bench/breaker.py [--outage 60] [--tasks 100] [--postgres ADMIN_URL]
"""

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402
from tests.upstream_fake import FakeUpstream  # noqa: E402


def main() -> None:
    p = _common.parser(__doc__.split("\n")[0])
    p.add_argument("--outage", type=float, default=60.0, help="seconds the upstream fails")
    p.add_argument("--tasks", type=int, default=100, help="submitted before the outage, and again during it")
    args = p.parse_args()
    upstream = FakeUpstream().start()
    bench = _common.setup(postgres=args.postgres, extra_env={
        "HTTP_EXPORT_URL": upstream.url, "HTTP_EXPORT_ALLOWED_HOSTS": upstream.host_port,
        "REPORT_WORKER_CONCURRENCY": "2", "CONSOLE_BASE_URL": "https://console.example.invalid",
    })
    try:
        run(bench, upstream, args)
    finally:
        bench.cleanup()
        upstream.stop()


def wait_for(predicate, *, timeout=600.0, what="a condition"):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)
    return value


def run(bench, upstream, args) -> None:
    from django.conf import settings
    from django.db import connection
    from django.db.models import Max, Sum

    from deadletters.models import Alert, DeadLetter
    from reports.models import KindBreaker, ReportTask, TaskAttempt, TaskStatus
    from reports.services import submit_task

    print(f"bench breaker: {args.tasks} + {args.tasks} http_export tasks, outage {args.outage:g} s, "
          f"2 x rqworker (2 horses), a real housekeeper, database {connection.vendor}")
    print(f"conditions: {_common.conditions()}", flush=True)
    for n in (1, 2):
        _common.start_worker(bench, name=f"breaker-{n}", burst=False, scheduler=True,
                             worker_class=settings.RQ["WORKER_CLASS"], queues=("high", "default", "low"))
    log = open(bench.tmp / "housekeeper.log", "w")
    bench.workers.append(subprocess.Popen(
        [sys.executable, str(_common.BASE_DIR / "manage.py"), "housekeeper"], cwd=_common.BASE_DIR,
        env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    def submit(n: int) -> list[int]:
        return [submit_task(kind="http_export", params={}, priority="high" if i % 2 else "low").task.pk
                for i in range(n)]

    upstream.mode = "hold"
    ids = submit(args.tasks)
    wait_for(lambda: upstream.held >= 4, what="4 fetches in flight")
    upstream.release(then="down")
    down = time.time()
    breaker = wait_for(lambda: KindBreaker.objects.filter(kind="http_export", state="open").first(),
                       what="the breaker to open")
    ids += submit(args.tasks)
    print(f"outage: breaker open {breaker.opened_at.timestamp() - down:.2f} s after the upstream failed; "
          f"{len(ids)} tasks waiting", flush=True)
    time.sleep(max(args.outage - (time.time() - down), 0))  # the outage itself: its length is the input
    upstream.mode = "up"
    recovered = time.time()
    closed = wait_for(lambda: KindBreaker.objects.filter(kind="http_export", state="closed").first(),
                      what="the breaker to close")
    tasks = ReportTask.objects.filter(pk__in=ids)
    wait_for(lambda: tasks.filter(status__in=(TaskStatus.DONE, TaskStatus.DEAD)).count() == len(ids),
             what="every task to end")
    last = tasks.aggregate(last=Max("finished_at"))["last"].timestamp()
    resumed = TaskAttempt.objects.filter(task_id__in=ids, started_at__gte=closed.half_open_at).order_by(
        "started_at").first().started_at.timestamp()
    since = {"half open (probes passed)": closed.half_open_at.timestamp(), "canary running": resumed,
             "closed (canary done)": closed.changed_at.timestamp(), "last task done": last}
    print(f"recovery -> last task done: {last - recovered:.2f} s; "
          + ", ".join(f"-> {step} {moment - recovered:.2f} s" for step, moment in since.items()))
    sums = tasks.aggregate(attempts=Sum("attempt"), budget=Sum("max_attempts"))
    free = sums["budget"] - settings.REPORT_MAX_ATTEMPTS * len(ids)  # each uncharged failure added one
    done = tasks.filter(status=TaskStatus.DONE).count()
    cards = [alert.payload.get("notice") for alert in Alert.objects.all()]
    print(f"cost: dead letters {DeadLetter.objects.count()}, done {done}; failed attempts "
          f"{sums['attempts'] - done}, of them not charged {free}; cards: opened "
          f"{cards.count('breaker_opened')}, closed {cards.count('breaker_closed')}; logs in {bench.tmp}")


if __name__ == "__main__":
    main()
