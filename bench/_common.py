"""Shared set-up for the benchmarks: an own redis-server, an own database, Django configured.

Every benchmark calls `setup()` before importing anything from the project: it sets the
environment (DATABASE_URL, REDIS_URL, VAR_DIR, MEDIA_ROOT) that config.settings reads, runs
django.setup() and migrate, and returns a Bench whose cleanup() stops Redis and removes the
temporary directory (and the PostgreSQL scratch database when one was created).
"""

import argparse
import os
import resource
import shutil
import signal
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
                ["dropdb", "--if-exists", "--force", *pg_args(self.pg_admin_url), self.pg_scratch], check=False
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


class Timer:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start


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


def insert_dead_letters(count: int, *, task_ids: list[int], expired: bool, days: int = 30) -> float:
    """Insert `count` open dead letters spread over the last `days` days (expired: all past expire_at),
    cycling through task_ids; COPY on PostgreSQL, executemany on SQLite. Returns seconds taken."""
    import json
    import random
    from datetime import UTC, datetime, timedelta

    from django.db import connection, transaction

    from deadletters.models import DeadLetter

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
                message.format(n=i % 97), trace, 3, fingerprints[i % len(fingerprints)], "open", created, expire, "")

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
