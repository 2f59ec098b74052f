"""Throughput: 1,000 no-op tasks, 2 at a time, through our default worker and what a user would
compare it with, in alternating rounds on one machine, each with its own broker:

  ours 1x2    PoolReportWorker, 1 worker process, REPORT_WORKER_CONCURRENCY=2 (the database asked)
  ours 2x1    PoolReportWorker, 2 worker processes of 1 horse each
  ours fork   the same with REPORT_HORSE_MAX_TASKS=1: a fork per task, as bare rq.Worker does
  rq          bare rq.Worker x 2 (a fork per job), Redis
  rq-simple   bare rq.SimpleWorker x 2, Redis
  celery, dramatiq, procrastinate   bench/rivals.py, each in its own virtualenv under
              var/bench-venvs/ (created here with pip from PyPI on first use)

    .venv/bin/python bench/throughput.py [--n 1000] [--rounds 3]
        [--postgres postgres://postgres@127.0.0.1:5432/postgres]

Without --postgres our side runs on SQLite (Procrastinate always needs PostgreSQL: give --postgres,
or --procrastinate-postgres for the SQLite run). Ours: N / (first claim -> last recorded outcome,
the database's timestamps); bare RQ: the job hashes' started_at/ended_at; the rivals: first task
started -> last finished (bench/rivals.py). Prints tasks/s per round, the load average after each
round, the medians and the ratio ours/each.
"""

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402

VENVS = _common.BASE_DIR / "var" / "bench-venvs"
RIVAL_PACKAGES = {
    "celery": ["celery[redis]"],
    "dramatiq": ["dramatiq[redis]"],
    "procrastinate": ["procrastinate[psycopg]", "psycopg[binary]", "redis"],
}
POOL = "reports.worker.worker.ReportWorker"


def rival_python(name: str) -> Path:
    python = VENVS / name / "bin" / "python"
    if not python.exists():
        print(f"creating {VENVS / name} (pip install {' '.join(RIVAL_PACKAGES[name])})", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENVS / name)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *RIVAL_PACKAGES[name]], check=True)
    return python


def main() -> None:
    p = _common.parser(__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--variants",
                   default="ours-1x2,ours-2x1,ours-fork,rq,rq-simple,celery,dramatiq,procrastinate")
    p.add_argument("--procrastinate-postgres",
                   help="PostgreSQL server URL for Procrastinate when ours runs on SQLite")
    args = p.parse_args()
    bench = _common.setup(postgres=args.postgres)
    try:
        run(bench, args)
    finally:
        bench.cleanup()


def run(bench, args) -> None:
    from django.db import connection
    from django.db.models import Max, Min
    from rq import Queue
    from rq.job import Job

    from reports.models import ReportTask, TaskAttempt, TaskStatus
    from reports.services import submit_task
    from transport.connection import redis_connection

    conn = redis_connection()
    n = args.n
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    pg_server = args.postgres or args.procrastinate_postgres
    if "procrastinate" in variants and not pg_server:
        print("procrastinate needs PostgreSQL (--postgres or --procrastinate-postgres): left out")
        variants.remove("procrastinate")
    procrastinate_db = None
    if "procrastinate" in variants:
        from urllib.parse import urlsplit, urlunsplit

        procrastinate_db = f"bench_procrastinate_{os.getpid()}"
        subprocess.run(["createdb", *_common.pg_args(pg_server), procrastinate_db], check=True)
        procrastinate_db_url = urlunsplit(urlsplit(pg_server)._replace(path=f"/{procrastinate_db}"))

    def workers(label: str, count: int, worker_class: str, **env) -> None:
        saved = dict(os.environ)
        os.environ.update({k: str(v) for k, v in env.items()})
        try:
            procs = [
                _common.start_worker(bench, name=f"{label}-{i}-{time.monotonic_ns()}", burst=True,
                                     worker_class=worker_class)
                for i in range(count)
            ]
        finally:
            os.environ.clear()
            os.environ.update(saved)
        for proc in procs:
            if proc.wait() != 0:
                raise SystemExit(f"a worker exited with {proc.returncode}; logs in {bench.tmp}")

    def ours(processes: int, concurrency: int, **env) -> float:
        conn.flushall()
        first_new = (ReportTask.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1
        for _ in range(n):
            submit_task(kind="probe", params={"write_output": False})
        workers(f"ours-{processes}x{concurrency}", processes, POOL,
                REPORT_WORKER_CONCURRENCY=concurrency, **env)
        done = ReportTask.objects.filter(pk__gte=first_new, status=TaskStatus.DONE).count()
        if done != n:
            raise SystemExit(f"only {done} of {n} tasks are done; logs in {bench.tmp}")
        span = TaskAttempt.objects.filter(task_id__gte=first_new).aggregate(
            a=Min("started_at"), b=Max("finished_at"))
        connection.close()
        return n / (span["b"] - span["a"]).total_seconds()

    def bare(worker_class: str) -> float:
        conn.flushall()
        queue = Queue("default", connection=conn)  # bare RQ as shipped: pickle
        ids = [queue.enqueue_call("bench.noop.noop", result_ttl=600).id for _ in range(n)]
        workers("bare", 2, worker_class)
        starts, ends = [], []
        for i in range(0, n, 1000):
            for job in Job.fetch_many(ids[i:i + 1000], connection=conn):
                if job is None or job.ended_at is None:
                    raise SystemExit("a job hash is missing or unfinished")
                starts.append(job.started_at)
                ends.append(job.ended_at)
        return n / (max(ends) - min(starts)).total_seconds()

    def rival(name: str) -> float:
        import json

        from django.conf import settings

        conn.flushall()
        argv = [str(rival_python(name)), str(_common.BASE_DIR / "bench" / "rivals.py"), name,
                "--redis", settings.REDIS_URL, "--n", str(n), "--concurrency", "2",
                "--log", str(bench.tmp / f"{name}.log")]
        if name == "procrastinate":
            argv += ["--postgres", procrastinate_db_url]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        if out.returncode != 0:
            raise SystemExit(f"{name} failed:\n{out.stderr[-3000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])["run"]

    runners = {
        "ours-1x2": lambda: ours(1, 2),
        "ours-2x1": lambda: ours(2, 1),
        "ours-fork": lambda: ours(2, 1, REPORT_HORSE_MAX_TASKS=1),
        "rq": lambda: bare("rq.Worker"),
        "rq-simple": lambda: bare("rq.SimpleWorker"),
        "celery": lambda: rival("celery"),
        "dramatiq": lambda: rival("dramatiq"),
        "procrastinate": lambda: rival("procrastinate"),
    }
    for name in ("celery", "dramatiq", "procrastinate"):
        if name in variants:
            rival_python(name)
    print(f"throughput: n={n} no-op tasks, 2 at a time, our database {connection.vendor}, "
          f"rounds={args.rounds}")
    print(f"conditions: {_common.conditions()}")
    results: dict[str, list[float]] = {v: [] for v in variants}
    try:
        for r in range(1, args.rounds + 1):
            for variant in variants:
                results[variant].append(runners[variant]())
                print(f"round {r} {variant:14}: {results[variant][-1]:8.1f} tasks/s", flush=True)
            print(f"  load average after round {r}: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
                  flush=True)
    finally:
        if procrastinate_db:
            subprocess.run(["dropdb", "--if-exists", "--force", *_common.pg_args(pg_server),
                            procrastinate_db], check=False)
    medians = {v: statistics.median(rows) for v, rows in results.items()}
    for variant, value in medians.items():
        print(f"median {variant:14}: {value:8.1f} tasks/s")
    for side in (v for v in variants if v.startswith("ours")):
        print(f"{side}: " + ", ".join(f"{medians[side] / medians[o]:.2f} x {o}"
                                      for o in variants if not o.startswith("ours")))
    print(f"conditions at the end: {_common.conditions()}")


if __name__ == "__main__":
    main()
