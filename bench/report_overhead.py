"""What the pipeline adds to a real report: `sales_summary` (CSV) over the 10,000 demo orders,
called directly (its kind's generate(), in this process, warm) and run as report tasks one at a
time through one PoolReportWorker with one horse (dequeue -> claim -> horse -> stored file ->
recorded outcome -> RQ's bookkeeping), in alternating rounds so that both sides see the same load.
Prints per report, as the medians of the rounds: wall time both ways, the overhead (the
difference) and the ratio generate / pipeline; then the CPU time both ways (the worker's and its
horse's, read from /proc; the database and Redis servers' own CPU is not in it), which a loaded
machine distorts far less than wall time.

    .venv/bin/python bench/report_overhead.py [--n 500] [--rounds 5] [--postgres ADMIN_URL]
"""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def main() -> None:
    p = _common.parser(__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=500, help="reports each way, spread over the rounds")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    bench = _common.setup(postgres=args.postgres, extra_env={"REPORT_WORKER_CONCURRENCY": "1"})
    try:
        run(bench, args)
    finally:
        bench.cleanup()


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process and of its live children (the worker and its horse)."""
    total = 0.0
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / TICKS
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            total += sum(cpu_seconds(int(child)) for child in children.read().split())
    except OSError:
        pass
    return total


def wait_until(predicate, *, timeout: float, message: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def run(bench, args) -> None:
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.db.models import Max, Min

    from reports.kinds import get_kind
    from reports.kinds.base import RunContext
    from reports.models import ReportTask, TaskAttempt, TaskStatus
    from reports.services import submit_task
    from transport.connection import redis_connection

    call_command("seed_demo_data", rows=10_000, verbosity=0)
    kind = get_kind("sales_summary")
    params = kind.validate({"format": "csv"})
    per_round = max(args.n // args.rounds, 1)
    print(f"report overhead: sales_summary csv over 10,000 orders, {per_round} x {args.rounds} rounds "
          f"each way, database {connection.vendor}")
    print(f"conditions: {_common.conditions()}")
    worker = _common.start_worker(bench, name="overhead", burst=False,
                                  worker_class="reports.worker.worker.ReportWorker")
    wait_until(lambda: redis_connection().sismember("rq:workers", "rq:worker:overhead")
               or worker.poll() is not None, timeout=60, message="the worker to start")

    def through_pool(count: int) -> tuple[float, float]:
        """Per report: wall (first claim -> last recorded outcome / count) and the worker's CPU."""
        cpu_before = cpu_seconds(worker.pid)
        with transaction.atomic():  # enqueued together at the commit: the worker always has a backlog
            tasks = [submit_task(kind="sales_summary", params={"format": "csv"}).task.pk
                     for _ in range(count)]
        wait_until(lambda: ReportTask.objects.filter(pk__in=tasks, status=TaskStatus.DONE).count() == count
                   or worker.poll() is not None, timeout=600, interval=0.02, message="the round's reports")
        if worker.poll() is not None:
            raise SystemExit(f"the worker exited; logs in {bench.tmp}")
        cpu = cpu_seconds(worker.pid) - cpu_before
        span = TaskAttempt.objects.filter(task_id__in=tasks).aggregate(a=Min("started_at"),
                                                                       b=Max("finished_at"))
        return (span["b"] - span["a"]).total_seconds() / count, cpu / count

    def directly(count: int, scratch: Path) -> tuple[float, float]:
        walls, cpus = [], []
        for i in range(count):
            ctx = RunContext(task_id=i, public_id=f"direct-{i}", attempt=1, output_dir=scratch)
            wall, cpu = time.perf_counter(), time.thread_time()
            kind.generate(params, ctx)
            cpus.append(time.thread_time() - cpu)
            walls.append(time.perf_counter() - wall)
        return statistics.median(walls), statistics.median(cpus)

    with tempfile.TemporaryDirectory() as scratch:
        directly(5, Path(scratch))  # warm both sides: the first report of a process pays its imports
        through_pool(5)
        rounds = []
        for number in range(1, args.rounds + 1):
            direct_wall, direct_cpu = directly(per_round, Path(scratch))
            pool_wall, pool_cpu = through_pool(per_round)
            rounds.append((direct_wall, pool_wall, direct_cpu, pool_cpu))
            print(f"round {number}: generate() {direct_wall * 1000:6.1f} ms, "
                  f"through the pool {pool_wall * 1000:6.1f} ms"
                  f" (CPU {direct_cpu * 1000:5.1f} / {pool_cpu * 1000:5.1f} ms); "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
    direct_wall, pool_wall, direct_cpu, pool_cpu = (
        statistics.median(column) for column in zip(*rounds, strict=True))
    print(f"generate() directly: median {direct_wall * 1000:.1f} ms per report")
    print(f"through the pool worker, one at a time: {pool_wall * 1000:.1f} ms per report "
          f"(first claim -> last recorded outcome / n)")
    print(f"overhead per report {max(pool_wall - direct_wall, 0) * 1000:.1f} ms; generate / pipeline "
          f"{direct_wall / pool_wall:.2f}")
    print(f"CPU per report: generate() {direct_cpu * 1000:.1f} ms, "
          f"worker and horse {pool_cpu * 1000:.1f} ms: "
          f"{max(pool_cpu - direct_cpu, 0) * 1000:.1f} ms more (/proc counts in clock ticks of "
          f"{1000 / TICKS:.0f} ms: a figure for many reports, not one)")
    print(f"conditions at the end: {_common.conditions()}")


if __name__ == "__main__":
    main()
