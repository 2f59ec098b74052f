"""The pool worker's memory over a long run: N no-op report tasks (100,000 by default) through one
PoolReportWorker with 2 horses, printing the resident set size of the worker process and of its
horses every --every tasks. Flat is the promise: the worker keeps nothing per task, and a horse
is replaced after REPORT_HORSE_MAX_TASKS attempts (printed: pass --max-tasks 0 to keep the
default, or a number to see a horse that is never recycled).

    .venv/bin/python bench/pool_rss.py [--n 100000] [--every 10000] [--max-tasks 0] [--postgres ADMIN_URL]
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402


def rss_mb(pid: int) -> float:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0.0


def horses_of(pid: int) -> list[int]:
    try:
        children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []
    return [c for c in children if os.getpgid(c) == c]


def main() -> None:
    p = _common.parser(__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--every", type=int, default=10_000)
    p.add_argument("--max-tasks", type=int, default=0, help="REPORT_HORSE_MAX_TASKS (0: the default)")
    args = p.parse_args()
    env = {"REPORT_WORKER_CONCURRENCY": "2"}
    if args.max_tasks:
        env["REPORT_HORSE_MAX_TASKS"] = str(args.max_tasks)
    bench = _common.setup(postgres=args.postgres, extra_env=env)
    try:
        run(bench, args)
    finally:
        bench.cleanup()


def run(bench, args) -> None:
    from django.conf import settings
    from django.db import connection

    from reports.models import ReportTask, TaskStatus
    from reports.services.enqueue import enqueue_attempts_many

    print(f"pool RSS: n={args.n}, 1 worker x 2 horses, "
          f"REPORT_HORSE_MAX_TASKS={settings.REPORT_HORSE_MAX_TASKS}, database {connection.vendor}")
    print(f"conditions: {_common.conditions()}")
    for start in range(0, args.n, 5000):
        rows = ReportTask.objects.bulk_create(
            ReportTask(kind="probe", params={"write_output": False}, max_attempts=3, timeout_seconds=60)
            for _ in range(min(5000, args.n - start))
        )
        enqueue_attempts_many((task.pk, 1, "default", 60) for task in rows)
    worker = _common.start_worker(bench, name="rss", burst=True,
                                  worker_class="reports.worker.worker.ReportWorker")
    started = time.perf_counter()
    next_mark = args.every
    while worker.poll() is None:
        done = ReportTask.objects.filter(status=TaskStatus.DONE).count()
        if done >= next_mark or done == args.n:
            horses = horses_of(worker.pid)
            print(f"{done:7d} done  {done / (time.perf_counter() - started):6.1f}/s  worker RSS "
                  f"{rss_mb(worker.pid):6.1f} MiB  "
                  f"horses {', '.join(f'{rss_mb(h):.1f}' for h in horses)} MiB  "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
            next_mark = (done // args.every + 1) * args.every
        time.sleep(1)
    print(f"conditions at the end: {_common.conditions()}")


if __name__ == "__main__":
    main()
