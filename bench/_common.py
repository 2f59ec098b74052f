"""Shared set-up for the benchmarks: an own redis-server, an own database, Django configured.

Every benchmark calls `setup()` before importing anything from the project: it sets the
environment (DATABASE_URL, REDIS_URL, VAR_DIR, MEDIA_ROOT) that config.settings reads, runs
django.setup() and migrate, and returns a Bench whose cleanup() stops Redis and removes the
temporary directory (and the PostgreSQL scratch database when one was created). `main()` does
that around a script's run() and prints the conditions at its start and end. Below: timing a child
process (`run_child`, `manage`) and a repeated call (`timed`), plans, and the row loaders.
"""

import argparse
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))


@dataclass
class Bench:
    tmp: Path
    redis: object
    pg_scratch: str | None = None
    pg_admin_url: str | None = None
    workers: list = field(default_factory=list)

    def cleanup(self) -> None:
        for proc in self.workers:
            try:  # the whole group: RQ's scheduler and a horse are children of a worker
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        from django.db import connections

        connections.close_all()
        self.redis.stop()
        if self.pg_scratch:
            subprocess.run(
                ["dropdb", "--if-exists", "--force", *pg_args(self.pg_admin_url), self.pg_scratch],
                check=False,
            )
        shutil.rmtree(self.tmp, ignore_errors=True)


def pg_args(admin_url: str) -> list[str]:
    from urllib.parse import urlsplit

    parts = urlsplit(admin_url)
    args = ["-h", parts.hostname or "127.0.0.1", "-p", str(parts.port or 5432)]
    if parts.username:
        args += ["-U", parts.username]
    return args


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--postgres",
        metavar="ADMIN_URL",
        help="run on PostgreSQL: a server URL such as postgres://postgres@127.0.0.1:5432/postgres; "
        "a scratch database bench_scratch_<pid> is created there and dropped at the end",
    )
    return p


DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/postgres"


def main(p: argparse.ArgumentParser, run, extra_env: dict | None = None) -> None:
    """Parse p's arguments, set up (`--postgres ''` means SQLite), run(args), clean up."""
    args = p.parse_args()
    bench = setup(postgres=args.postgres or None, extra_env=extra_env)
    try:
        from django.db import connection

        print(f"{p.description.rstrip('.')}; database {connection.vendor}; {conditions()}", flush=True)
        run(args)
        print(f"peak RSS of this process {peak_rss_mb():.0f} MiB; end: {conditions()}")
    finally:
        bench.cleanup()


def setup(*, postgres: str | None = None, extra_env: dict | None = None) -> Bench:
    tmp = Path(tempfile.mkdtemp(prefix="bench-"))
    from config.embedded_redis import RedisServer

    redis = RedisServer(tmp / "redis").start()
    scratch = None
    if postgres:
        from urllib.parse import urlsplit, urlunsplit

        scratch = f"bench_scratch_{os.getpid()}"
        subprocess.run(["createdb", *pg_args(postgres), scratch], check=True)
        parts = urlsplit(postgres)
        database_url = urlunsplit(parts._replace(path=f"/{scratch}"))
    else:
        database_url = f"sqlite:///{tmp / 'bench.sqlite3'}"
    os.environ.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=database_url,
        REDIS_URL=redis.url,
        VAR_DIR=str(tmp / "var"),
        MEDIA_ROOT=str(tmp / "media"),
        ARCHIVE_DIR=str(tmp / "archive"),
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
        **(extra_env or {}),
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return Bench(tmp=tmp, redis=redis, pg_scratch=scratch, pg_admin_url=postgres)


def start_worker(bench: Bench, *, name: str, burst: bool, worker_class: str, queues=("default",),
                 scheduler=False, log: Path | None = None) -> subprocess.Popen:
    argv = [sys.executable, str(BASE_DIR / "manage.py"), "rqworker", *queues, "--name", name,
            "--worker-class", worker_class]
    if worker_class.startswith("rq."):
        # Bare RQ runs bench.noop.noop, which the project's job allowlist (transport.registry) refuses.
        argv += ["--job-class", "rq.job.Job"]
    if burst:
        argv.append("--burst")
    if scheduler:
        argv.append("--with-scheduler")
    out = open(log or (bench.tmp / f"{name}.log"), "w")
    proc = subprocess.Popen(argv, cwd=BASE_DIR, env=dict(os.environ), stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)
    bench.workers.append(proc)
    return proc


def peak_rss_mb(who=resource.RUSAGE_SELF) -> float:
    """Peak resident set size in MiB (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(who).ru_maxrss / 1024


def run_child(argv: list[str]) -> tuple[float, float, str]:
    """Run argv to its end: (seconds, its own peak RSS in MiB from os.wait4, its output); exit on failure."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[1:]} failed: {out[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024, out


def manage(*argv: str) -> tuple[float, float, str]:
    """`manage.py argv` in a child process: run_child's (seconds, peak RSS MiB, output)."""
    return run_child([sys.executable, str(BASE_DIR / "manage.py"), *argv])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def timed(label: str, work, repeat: int) -> list[float]:
    """Run work once to warm up, then `repeat` times; print and return the times in ms."""
    work()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1000)
    median, p95 = statistics.median(times), percentile(times, 0.95)
    print(f"{label:42} median {median:8.2f} ms   p95 {p95:8.2f} ms", flush=True)
    return times


def print_plan(name: str, sql: str, params=()) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) on PostgreSQL, EXPLAIN QUERY PLAN on SQLite."""
    from django.db import connection

    pg = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute(("EXPLAIN (ANALYZE, BUFFERS) " if pg else "EXPLAIN QUERY PLAN ") + sql, params)
        print(f"plan of {name}:\n" + "\n".join(str(row[0] if pg else row[-1]) for row in cursor.fetchall()))


def conditions() -> str:
    import platform

    load = os.getloadavg()
    return (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} cores; "
            f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; Python {platform.python_version()}")


# --- rows at scale ---------------------------------------------------------------------

KINDS = ("probe", "sales_summary", "http_export")
ERRORS = (
    ("reports.errors.TransientError", "upstream timed out after {n}s"),
    ("reports.errors.PermanentError", "bad parameter 'region' = {n}"),
    ("requests.exceptions.ConnectionError", "connection refused to host-{n}"),
    ("rq.timeouts.JobTimeoutException", "Task exceeded maximum timeout value ({n} seconds)"),
)


def make_dead_tasks(count: int) -> list[int]:
    """`count` dead ReportTask rows (bulk_create); returns their pks in order."""
    from reports.models import ReportTask, TaskStatus

    pks = []
    for start in range(0, count, 5000):
        rows = [
            ReportTask(kind="probe", params={}, status=TaskStatus.DEAD, attempt=3, max_attempts=3,
                       timeout_seconds=300, last_error="reports.errors.TransientError: bench")
            for _ in range(min(5000, count - start))
        ]
        pks += [t.pk for t in ReportTask.objects.bulk_create(rows)]
    return pks


def insert_dead_letters(count: int, *, task_ids: list[int] | None = None, expired: bool, days: int = 30
                        ) -> float:
    """Insert `count` open dead letters spread over the last `days` days (expired: all past expire_at),
    cycling through task_ids (1,000 new dead tasks by default); COPY on PostgreSQL, executemany on
    SQLite. Returns seconds taken."""
    import json
    import random
    from datetime import UTC, datetime, timedelta

    from django.db import connection, transaction

    from deadletters.models import DeadLetter

    task_ids = task_ids or make_dead_tasks(1000)
    rng = random.Random(7)
    table = DeadLetter._meta.db_table
    columns = ("task_id", "kind", "params", "error_type", "error_message", "traceback", "attempts",
               "fingerprint", "status", "created_at", "expire_at", "replayed_by")
    now = datetime.now(UTC)
    fingerprints = [f"{i:040x}" for i in range(1, 51)]
    params = json.dumps({"sleep_seconds": 0, "fail_attempts": 99})
    trace = "Traceback (most recent call last):\n  File \"reports/jobs.py\", line 70\n" * 5

    def row(i: int) -> tuple:
        error_type, message = ERRORS[i % len(ERRORS)]
        if expired:
            created = now - timedelta(days=8 + rng.random() * days)
        else:
            created = now - timedelta(seconds=rng.random() * days * 86400)
        expire = now - timedelta(hours=1) if expired else created + timedelta(days=7)
        return (task_ids[i % len(task_ids)], KINDS[i % len(KINDS)], params, error_type,
                message.format(n=i % 97), trace, 3, fingerprints[i % len(fingerprints)], "open", created,
                expire, "")

    start = time.perf_counter()
    batch = 20_000
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                raw = cursor.cursor
                with raw.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                    for i in range(count):
                        copy.write_row(row(i))
        else:
            sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})"
            with connection.cursor() as cursor:
                for first in range(0, count, batch):
                    cursor.executemany(sql, [row(i) for i in range(first, min(count, first + batch))])
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {table}")
    return time.perf_counter() - start


TASK_COLUMNS = ("public_id, kind, params, priority, status, attempt, max_attempts, attempts_before_run, "
                "timeout_seconds, submitted_by, last_error, output_file, created_at, updated_at, started_at, "
                "finished_at")
ATTEMPT_COLUMNS = ("task_id, number, worker, started_at, finished_at, outcome, error_type, error_message, "
                   "traceback, duration_seconds")


def load_tasks(n: int, days: float) -> float:
    """n done tasks, one every days*86400/n seconds back from now, waits of 0.2-20 s and run times of
    0.1-60 s by a fixed pattern; every 20th failed its first attempt and succeeded in a second.
    Returns seconds taken."""
    from django.db import connection

    from reports.models import ReportTask, TaskAttempt

    start = time.perf_counter()
    tasks, attempts = ReportTask._meta.db_table, TaskAttempt._meta.db_table
    step = days * 86400 / n
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"""INSERT INTO {tasks} ({TASK_COLUMNS})
                SELECT gen_random_uuid(), (ARRAY['http_export','probe','sales_summary'])[1 + mod(i, 3)],
                    '{{}}', 'default', 'done', 1 + (mod(i, 20) = 0)::int, 3, 0, 300, '', '', 'x.csv',
                    t - (0.2 + mod(i * 7, 100) * 0.2) * interval '1 s', t, t,
                    t + (0.1 + mod(i * 13, 600) * 0.1) * interval '1 s'
                FROM (SELECT i, now() - i * %s * interval '1 s' AS t FROM generate_series(1, %s) i) s""",
                [step, n],
            )
            cursor.execute(
                f"""INSERT INTO {attempts} ({ATTEMPT_COLUMNS})
                SELECT id, 1, 'bench', started_at, finished_at,
                    CASE WHEN attempt = 2 THEN 'failed' ELSE 'succeeded' END, '', '', '',
                    extract(epoch FROM finished_at - started_at) FROM {tasks} WHERE status = 'done'"""
            )
            cursor.execute(
                f"""INSERT INTO {attempts} ({ATTEMPT_COLUMNS})
                SELECT id, 2, 'bench', finished_at + interval '10 s', finished_at + interval '12 s',
                    'succeeded', '', '', '', 2.0 FROM {tasks} WHERE status = 'done' AND attempt = 2"""
            )
        else:
            _load_tasks_sqlite(cursor, n, step, tasks, attempts)
        cursor.execute(f"ANALYZE {tasks}")
        cursor.execute(f"ANALYZE {attempts}")
    return time.perf_counter() - start


def _load_tasks_sqlite(cursor, n: int, step: float, tasks: str, attempts: str) -> None:
    import uuid
    from datetime import UTC, datetime, timedelta

    from django.db import transaction

    now = datetime.now(UTC).replace(tzinfo=None)

    def fmt(moment: datetime) -> str:
        return moment.strftime("%Y-%m-%d %H:%M:%S.%f")

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
            kind = ("http_export", "probe", "sales_summary")[i % 3]
            task_rows.append((task_id, uuid.uuid4().hex, kind, "{}", "default", "done", 2 if retried else 1,
                              3, 0, 300, "", "", "x.csv", fmt(created), fmt(started), fmt(started),
                              fmt(finished)))
            outcome = "failed" if retried else "succeeded"
            attempt_rows.append((task_id, 1, "bench", fmt(started), fmt(finished), outcome, "", "", "",
                                 (finished - started).total_seconds()))
            if retried:
                again = finished + timedelta(seconds=10)
                attempt_rows.append((task_id, 2, "bench", fmt(again), fmt(again + timedelta(seconds=2)),
                                     "succeeded", "", "", "", 2.0))
        with transaction.atomic():
            cursor.executemany(f"INSERT INTO {tasks} (id, {TASK_COLUMNS}) VALUES ({', '.join(['%s'] * 17)})",
                               task_rows)
            cursor.executemany(f"INSERT INTO {attempts} ({ATTEMPT_COLUMNS}) "
                               f"VALUES ({', '.join(['%s'] * 10)})", attempt_rows)
