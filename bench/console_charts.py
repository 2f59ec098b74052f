"""Bench: the console's last-24-hours charts (console/charts.py) with 1,000,000 report tasks.

Loads N tasks spread evenly over the last --days days (100,000 a day by default), each with a first
attempt (5 % of them failed once and have a second), and --letters dead letters over 30 days (COPY
on PostgreSQL), then computes the day's figures of every kind and of each kind, uncached (three
statements: finished attempts, queue waits, deaths), and prints the median and p95 of each
statement, of the whole, and of the dashboard and a kind page with the charts uncached.
--explain prints the statements' plans.

    .venv/bin/python bench/console_charts.py [--n 1000000] [--days 10] [--letters 1000000]
        [--repeat 15] [--explain] [--postgres postgres://postgres@127.0.0.1:5432/postgres]
        (--postgres '' runs it on SQLite)
"""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402
from bench.console_scale import DEFAULT_PG, percentile  # noqa: E402

KINDS = ("http_export", "probe", "sales_summary")


def main() -> None:
    p = _common.parser(__doc__.split("\n")[0])
    p.set_defaults(postgres=DEFAULT_PG)
    p.add_argument("--n", type=int, default=1_000_000, help="report tasks (each with one or two attempts)")
    p.add_argument("--days", type=float, default=10.0, help="spread the tasks over this many days")
    p.add_argument("--letters", type=int, default=1_000_000, help="dead letters, over the last 30 days")
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--explain", action="store_true", help="print the plans of the chart statements")
    args = p.parse_args()
    bench = _common.setup(postgres=args.postgres or None, extra_env={"ALLOWED_HOSTS": "testserver"})
    try:
        run(args)
    finally:
        bench.cleanup()


def load_tasks(n: int, days: float) -> float:
    """n done tasks, one every days*86400/n seconds back from now, waits of 0.2-20 s and run times of
    0.1-60 s by a fixed pattern; every 20th failed its first attempt and succeeded in a second."""
    from django.db import connection

    from reports.models import ReportTask, TaskAttempt

    start = time.perf_counter()
    tasks, attempts = ReportTask._meta.db_table, TaskAttempt._meta.db_table
    step = days * 86400 / n
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"""INSERT INTO {tasks} (public_id, kind, params, priority, status, attempt, max_attempts,
                    attempts_before_run, timeout_seconds, submitted_by, last_error, output_file, created_at,
                    updated_at, started_at, finished_at)
                SELECT gen_random_uuid(), (ARRAY['http_export','probe','sales_summary'])[1 + mod(i, 3)], '{{}}',
                    'default', 'done', 1 + (mod(i, 20) = 0)::int, 3, 0, 300, '', '', 'x.csv',
                    t - (0.2 + mod(i * 7, 100) * 0.2) * interval '1 s', t, t, t + (0.1 + mod(i * 13, 600) * 0.1) * interval '1 s'
                FROM (SELECT i, now() - i * %s * interval '1 s' AS t FROM generate_series(1, %s) i) s""",
                [step, n],
            )
            cursor.execute(
                f"""INSERT INTO {attempts} (task_id, number, worker, started_at, finished_at, outcome, error_type,
                    error_message, traceback, duration_seconds)
                SELECT id, 1, 'bench', started_at, finished_at, CASE WHEN attempt = 2 THEN 'failed' ELSE 'succeeded' END,
                    '', '', '', extract(epoch FROM finished_at - started_at) FROM {tasks} WHERE status = 'done'"""
            )
            cursor.execute(
                f"""INSERT INTO {attempts} (task_id, number, worker, started_at, finished_at, outcome, error_type,
                    error_message, traceback, duration_seconds)
                SELECT id, 2, 'bench', finished_at + interval '10 s', finished_at + interval '12 s', 'succeeded',
                    '', '', '', 2.0 FROM {tasks} WHERE status = 'done' AND attempt = 2"""
            )
            cursor.execute(f"ANALYZE {tasks}; ANALYZE {attempts}")
        else:
            _load_tasks_sqlite(cursor, n, step, tasks, attempts)
    return time.perf_counter() - start


def _load_tasks_sqlite(cursor, n: int, step: float, tasks: str, attempts: str) -> None:
    import uuid
    from datetime import UTC, datetime, timedelta

    from django.db import transaction

    now = datetime.now(UTC).replace(tzinfo=None)
    fmt = "%Y-%m-%d %H:%M:%S.%f"
    chunk = 50_000
    first_id = (cursor.execute(f"SELECT COALESCE(MAX(id), 0) FROM {tasks}").fetchone()[0]) + 1
    for low in range(1, n + 1, chunk):
        task_rows, attempt_rows = [], []
        for i in range(low, min(low + chunk, n + 1)):
            started = now - timedelta(seconds=i * step)
            created = started - timedelta(seconds=0.2 + (i * 7 % 100) * 0.2)
            finished = started + timedelta(seconds=0.1 + (i * 13 % 600) * 0.1)
            retried = i % 20 == 0
            task_id = first_id + i - 1
            task_rows.append((task_id, uuid.uuid4().hex, KINDS[i % 3], "{}", "default", "done", 2 if retried else 1,
                              3, 0, 300, "", "", "x.csv", created.strftime(fmt), started.strftime(fmt),
                              started.strftime(fmt), finished.strftime(fmt)))  # fmt: skip
            run = (finished - started).total_seconds()
            attempt_rows.append((task_id, 1, "bench", started.strftime(fmt), finished.strftime(fmt),
                                 "failed" if retried else "succeeded", "", "", "", run))  # fmt: skip
            if retried:
                again = finished + timedelta(seconds=10)
                attempt_rows.append((task_id, 2, "bench", again.strftime(fmt),
                                     (again + timedelta(seconds=2)).strftime(fmt), "succeeded", "", "", "", 2.0))  # fmt: skip
        with transaction.atomic():
            cursor.executemany(
                f"""INSERT INTO {tasks} (id, public_id, kind, params, priority, status, attempt, max_attempts,
                    attempts_before_run, timeout_seconds, submitted_by, last_error, output_file, created_at,
                    updated_at, started_at, finished_at) VALUES ({", ".join(["%s"] * 17)})""",
                task_rows,
            )
            cursor.executemany(
                f"""INSERT INTO {attempts} (task_id, number, worker, started_at, finished_at, outcome, error_type,
                    error_message, traceback, duration_seconds) VALUES ({", ".join(["%s"] * 10)})""",
                attempt_rows,
            )
    cursor.execute(f"ANALYZE {tasks}")
    cursor.execute(f"ANALYZE {attempts}")


def explain() -> None:
    from django.db import connection

    from reports import charts

    start, end = charts.hour_window(hours=24)
    statements = {
        "finished attempts": charts.finished_attempts_statement(start=start, end=end, sample=charts.PERCENTILE_SAMPLE),
        "queue waits": charts.queue_wait_statement(start=start, end=end, sample=charts.PERCENTILE_SAMPLE),
    }
    from django.db import transaction

    with transaction.atomic(), connection.cursor() as cursor:
        for name, (sql, params) in statements.items():
            if connection.vendor == "postgresql":
                for setting in charts._PG_SETTINGS:  # as the charts run them
                    cursor.execute(setting)
                cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", params)
                print(f"plan of {name}:\n" + "\n".join(row[0] for row in cursor.fetchall()))
            else:
                cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
                print(f"plan of {name}:\n" + "\n".join(str(row[-1]) for row in cursor.fetchall()))
    from django.test.utils import CaptureQueriesContext

    from deadletters.selectors import stats

    with CaptureQueriesContext(connection) as queries:
        stats.deaths_per_hour_by_kind(hours=24)
    with connection.cursor() as cursor:
        prefix = "EXPLAIN (ANALYZE, BUFFERS) " if connection.vendor == "postgresql" else "EXPLAIN QUERY PLAN "
        cursor.execute(prefix + queries.captured_queries[0]["sql"])
        print("plan of deaths:\n" + "\n".join(str(row[0] if connection.vendor == "postgresql" else row[-1])
                                                        for row in cursor.fetchall()))  # fmt: skip


def timed(label: str, work, repeat: int) -> None:
    work()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1000)
    print(f"{label:40} median {statistics.median(times):8.1f} ms   p95 {percentile(times, 0.95):8.1f} ms", flush=True)


def run(args) -> None:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from console.charts import charts_of, day_figures
    from deadletters.selectors import stats
    from reports import charts

    print(f"console charts at scale: {args.n} tasks over {args.days:g} days, {args.letters} dead letters, "
          f"database {connection.vendor}, {args.repeat} computations each, uncached")
    print(f"conditions: {_common.conditions()}")
    seconds = load_tasks(args.n, args.days)
    if args.letters:
        seconds += _common.insert_dead_letters(args.letters, task_ids=_common.make_dead_tasks(1000), expired=False)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    start, _ = charts.hour_window(hours=24)
    in_window = charts.TaskAttempt.objects.filter(finished_at__gte=start).count()
    print(f"(loaded the rows in {seconds:.1f}s, not counted; {in_window} attempts finished in the charts' 24 hours)", flush=True)
    if args.explain:
        explain()
    settings.CONSOLE_DASHBOARD_CACHE_SECONDS = 0
    timed("finished attempts (every scope)", lambda: charts.finished_attempts_by_hour(), args.repeat)
    timed("queue waits (every scope)", lambda: charts.queue_wait_by_hour(), args.repeat)
    timed("deaths (every scope)", lambda: stats.deaths_per_hour_by_kind(hours=24), args.repeat)
    timed("the day's figures (the three)", day_figures, args.repeat)
    day = day_figures()
    timed("one kind's charts from them", lambda: [charts_of(day, kind) for kind in KINDS], args.repeat)
    user = get_user_model().objects.create_superuser("bench", "bench@example.invalid", "bench-pass-1")
    client = Client()
    client.force_login(user)
    timed("dashboard page (charts of every kind)", lambda: client.get("/console/"), args.repeat)
    timed("kind page (http_export)", lambda: client.get("/console/kinds/http_export/"), args.repeat)
    print(f"peak RSS {_common.peak_rss_mb():.0f} MiB; end: {_common.conditions()}")


if __name__ == "__main__":
    main()
