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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402
from bench._common import timed  # noqa: E402


def main() -> None:
    p = _common.parser(__doc__.split("\n")[0])
    p.set_defaults(postgres=_common.DEFAULT_PG)
    p.add_argument("--n", type=int, default=1_000_000, help="report tasks (each with one or two attempts)")
    p.add_argument("--days", type=float, default=10.0, help="spread the tasks over this many days")
    p.add_argument("--letters", type=int, default=1_000_000, help="dead letters, over the last 30 days")
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--explain", action="store_true", help="print the plans of the chart statements")
    _common.main(p, run, extra_env={"ALLOWED_HOSTS": "testserver"})


def explain() -> None:
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from deadletters.selectors import stats
    from reports import charts

    start, end = charts.hour_window(hours=24)
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                for setting in charts._PG_SETTINGS:  # as the charts run them
                    cursor.execute(setting)
        sample = charts.PERCENTILE_SAMPLE
        finished = charts.finished_attempts_statement(start=start, end=end, sample=sample)
        _common.print_plan("finished attempts", *finished)
        _common.print_plan("queue waits", *charts.queue_wait_statement(start=start, end=end, sample=sample))
    with CaptureQueriesContext(connection) as queries:
        stats.deaths_per_hour_by_kind(hours=24)
    _common.print_plan("deaths", queries.captured_queries[0]["sql"])


def run(args) -> None:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from console.charts import charts_of, day_figures
    from deadletters.selectors import stats
    from reports import charts

    print(f"{args.n} tasks over {args.days:g} days, {args.letters} dead letters, "
          f"{args.repeat} computations each")
    seconds = _common.load_tasks(args.n, args.days)
    if args.letters:
        seconds += _common.insert_dead_letters(args.letters, expired=False)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    start, _ = charts.hour_window(hours=24)
    in_window = charts.TaskAttempt.objects.filter(finished_at__gte=start).count()
    print(f"(loaded the rows in {seconds:.1f}s, not counted; {in_window} attempts finished in the charts' "
          "24 hours)")
    if args.explain:
        explain()
    settings.CONSOLE_DASHBOARD_CACHE_SECONDS = 0
    timed("finished attempts (every scope)", lambda: charts.finished_attempts_by_hour(), args.repeat)
    timed("queue waits (every scope)", lambda: charts.queue_wait_by_hour(), args.repeat)
    timed("deaths (every scope)", lambda: stats.deaths_per_hour_by_kind(hours=24), args.repeat)
    timed("the day's figures (the three)", day_figures, args.repeat)
    day = day_figures()
    timed("each kind's charts from them", lambda: [charts_of(day, k) for k in _common.KINDS], args.repeat)
    user = get_user_model().objects.create_superuser("bench", "bench@example.invalid", "bench-pass-1")
    client = Client()
    client.force_login(user)
    timed("dashboard page (charts of every kind)", lambda: client.get("/console/"), args.repeat)
    timed("kind page (http_export)", lambda: client.get("/console/kinds/http_export/"), args.repeat)


if __name__ == "__main__":
    main()
