"""What the pipeline adds to a real report: `sales_summary` (CSV) over the 10,000 demo orders,
called directly (its kind's generate(), in this process, warm) and run as report tasks one at a
time through one PoolReportWorker with one horse (submit -> claim -> horse -> stored file ->
recorded outcome). Prints both per report, the overhead (the difference) and the ratio
generate / pipeline.

    .venv/bin/python bench/report_overhead.py [--n 50] [--postgres ADMIN_URL]
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402


def main() -> None:
    p = _common.parser(__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=50)
    args = p.parse_args()
    bench = _common.setup(postgres=args.postgres, extra_env={"REPORT_WORKER_CONCURRENCY": "1"})
    try:
        run(bench, args)
    finally:
        bench.cleanup()


def run(bench, args) -> None:
    from django.core.management import call_command
    from django.db import connection
    from django.db.models import Max, Min

    from reports.kinds import get_kind
    from reports.kinds.base import RunContext
    from reports.models import ReportTask, TaskAttempt, TaskStatus
    from reports.services import submit_task

    call_command("seed_demo_data", rows=10_000, verbosity=0)
    kind = get_kind("sales_summary")
    params = kind.validate({"format": "csv"})
    print(f"report overhead: sales_summary csv over 10,000 orders, n={args.n}, database {connection.vendor}")
    print(f"conditions: {_common.conditions()}")
    direct = []
    with tempfile.TemporaryDirectory() as scratch:
        for i in range(args.n):
            ctx = RunContext(task_id=i, public_id=f"direct-{i}", attempt=1, output_dir=Path(scratch))
            started = time.perf_counter()
            kind.generate(params, ctx)
            direct.append(time.perf_counter() - started)
    tasks = [submit_task(kind="sales_summary", params={"format": "csv"}).task.pk for _ in range(args.n)]
    worker = _common.start_worker(bench, name="overhead", burst=True, worker_class="reports.worker.pool.PoolReportWorker")
    if worker.wait() != 0 or ReportTask.objects.filter(pk__in=tasks, status=TaskStatus.DONE).count() != args.n:
        raise SystemExit(f"the reports did not all finish; logs in {bench.tmp}")
    span = TaskAttempt.objects.filter(task_id__in=tasks).aggregate(a=Min("started_at"), b=Max("finished_at"))
    through = (span["b"] - span["a"]).total_seconds() / args.n
    generate = statistics.median(direct)
    print(f"generate() directly: median {generate * 1000:.1f} ms per report")
    print(f"through the pool worker, one at a time: {through * 1000:.1f} ms per report "
          f"(first claim -> last recorded outcome / n)")
    print(f"overhead per report {max(through - generate, 0) * 1000:.1f} ms; generate / pipeline {generate / through:.2f}")
    print(f"conditions at the end: {_common.conditions()}")


if __name__ == "__main__":
    main()
