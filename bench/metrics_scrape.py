"""Bench: GET /metrics with 1,000,000 dead letters on PostgreSQL.

Loads 1,000,000 open dead letters with COPY (as bench/console_scale.py does, 50 causes, three
kinds), 100,000 done tasks finished over the last day (bench/console_charts.py's rows: so the
metrics' recent window is a slice of a larger attempts table), then scrapes /metrics through
Django's test client with a `metrics` token and prints the median and p95 of the whole scrape and
of each part of the collector. Target: p95 < 100 ms.

    .venv/bin/python bench/metrics_scrape.py [--n 1000000] [--done 100000] [--repeat 30]
        [--postgres postgres://postgres@127.0.0.1:5432/postgres]  (--postgres '' runs on SQLite)
        [--explain]  (the plans of the window queries)
"""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402
from bench._common import percentile, timed  # noqa: E402


def main() -> None:
    p = _common.parser(__doc__.split("\n")[0])
    p.set_defaults(postgres=_common.DEFAULT_PG)
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--done", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--explain", action="store_true", help="print the plans of the window queries")
    _common.main(p, run, extra_env={"ALLOWED_HOSTS": "testserver"})


def explain() -> None:
    from django.db import connection

    from reports import metrics

    durations = (metrics.recent_attempts(600).exclude(duration_seconds=None).annotate(kind=metrics._KIND)
                 .order_by().values("kind").annotate(n=metrics.Count("pk")))
    _common.print_plan("durations", *durations.query.sql_with_params())
    live = metrics.ReportTask.objects.filter(status__in=metrics.LIVE_STATUSES)
    _common.print_plan("live tasks", *live.query.sql_with_params())
    if connection.vendor == "postgresql":  # SQLite's queue waits are not one statement
        _common.print_plan("queue waits", *metrics.queue_wait_statement(600))


def run(args) -> None:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from api.metrics import PipelineCollector
    from reports.models import ApiScope
    from reports.services.tokens import create_api_token

    print(f"{args.n} dead letters, {args.done} done tasks, {args.repeat} scrapes "
          "(Django test client, a metrics token)")
    seconds = _common.insert_dead_letters(args.n, expired=False)
    if args.done:
        seconds += _common.load_tasks(args.done, 1.0)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:  # what autovacuum does to freshly loaded tables
            cursor.execute("VACUUM ANALYZE")
    print(f"(loaded the rows in {seconds:.1f}s, not counted)", flush=True)
    if args.explain:
        explain()
    raw = create_api_token(name="bench-prometheus", scopes=[ApiScope.METRICS])[1]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    response = client.get("/metrics")
    if response.status_code != 200:
        raise SystemExit(f"/metrics answered {response.status_code}: {response.content[:300]!r}")
    with CaptureQueriesContext(connection) as queries:
        client.get("/metrics")
    lines = response.content.count(b"\n")
    print(f"(one scrape: {len(response.content)} bytes, {lines} lines, {len(queries)} SQL queries)")
    timed("baseline: SELECT 1 (the machine's state)", lambda: connection.cursor().execute("SELECT 1"),
          args.repeat)
    times, cpu = [], []
    for _ in range(args.repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        client.get("/metrics")
        times.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    p95 = percentile(times, 0.95)
    # On a shared, overloaded machine the wall time is mostly waiting for a core; the CPU time the
    # scrape used in this process does not depend on that.
    print(f"CPU time of a scrape (this process) median {statistics.median(cpu):7.1f} ms   "
          f"p95 {percentile(cpu, 0.95):7.1f} ms")
    print(f"GET /metrics                 median {statistics.median(times):7.1f} ms   p95 {p95:7.1f} ms   "
          f"target p95 < 100 ms: {'MEETS' if p95 < 100 else 'MISSES'}", flush=True)
    collector = PipelineCollector()
    for name in ("_tasks", "_dead_letters", "_attempt_windows", "_alerts", "_transport"):
        part = getattr(collector, name)
        timed(f"  part {name}", lambda part=part: list(part()), max(5, args.repeat // 3))


if __name__ == "__main__":
    main()
