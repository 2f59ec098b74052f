"""Bench 1: pipeline overhead. N no-op report tasks (probe, write_output false) submitted and run
to `done` by our workers, against what a user could pick instead, all on the same Redis and
machine, in alternating rounds:

  ours fork     reports.worker.process.ReportWorker x W    (`manage.py rqworker --burst`), N report tasks
  bare fork     rq.Worker x W                       N no-op RQ jobs (bench.noop.noop)
  ours simple   reports.worker.process.SimpleReportWorker x W
  bare simple   rq.SimpleWorker x W
  celery        Celery prefork, W pool processes, task_acks_late (bench/workers.py), N no-op tasks

    .venv/bin/python bench/pipeline_overhead.py [--n 1000] [--rounds 3] [--workers 2]
        [--variants fork,simple,celery] [--postgres postgres://postgres@127.0.0.1:5432/postgres]

Figures per run:
  submit/s   tasks (ours: submit_task, one transaction + enqueue each) or jobs/messages enqueued
  run/s      N / (first started -> last finished), process start-up excluded. Ours: from the
             first claim to the last recorded outcome (the database's timestamps: everything the
             worker does per task is inside); RQ: the job hashes' started_at/ended_at; Celery:
             first task started -> queue and unacked set drained (polled every 2 ms)
  e2e/s      N / (submit time + the workers' wall time from launch to exit, start-up included)
The ratio ours/bare of run/s, per worker kind, is the figure the issue targets (>= 0.9).
"""

import importlib.util
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402

WORKER_CLASSES = {
    ("ours", "fork"): "reports.worker.worker.ReportWorker",  # its horses, reused
    ("bare", "fork"): "rq.Worker",
    ("ours", "simple"): "reports.worker.worker.ReportWorker",  # no in-process worker: the same
    ("bare", "simple"): "rq.SimpleWorker",
}


def main() -> None:
    p = _common.parser(__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3, help="rounds, each running every variant once")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--variants", default="fork,simple,celery", help="comma-separated: fork, simple, celery")
    args = p.parse_args()
    bench = _common.setup(postgres=args.postgres)
    try:
        run(bench, args)
    finally:
        bench.cleanup()


def run(bench, args) -> None:
    from django.conf import settings
    from django.db import connection
    from django.db.models import Max, Min
    from rq import Queue
    from rq.job import Job

    from reports.models import ReportTask, TaskAttempt, TaskStatus
    from reports.services import submit_task
    from transport.connection import redis_connection

    conn = redis_connection()
    pickled_queue = Queue("default", connection=conn)  # bare RQ as shipped: pickle, rq.Worker's default
    n = args.n
    kinds = [k.strip() for k in args.variants.split(",") if k.strip()]
    if "celery" in kinds and importlib.util.find_spec("celery") is None:
        print('celery is not installed (.venv/bin/pip install -e ".[bench]"): skipping that variant')
        kinds.remove("celery")
    variants = [(side, kind) for kind in kinds if kind != "celery" for side in ("ours", "bare")]
    variants += [("celery", "prefork")] if "celery" in kinds else []

    def run_workers(label: str, worker_class: str) -> float:
        start = time.perf_counter()
        procs = [
            _common.start_worker(bench, name=f"{label}-{i}-{time.monotonic_ns()}", burst=True,
                                 worker_class=worker_class)
            for i in range(args.workers)
        ]
        for proc in procs:
            if proc.wait() != 0:
                raise SystemExit(f"a worker exited with {proc.returncode}; logs in {bench.tmp}")
        return time.perf_counter() - start

    def ours(kind: str) -> dict:
        conn.flushall()
        first_new = (ReportTask.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1
        t0 = time.perf_counter()
        for _ in range(n):
            submit_task(kind="probe", params={"write_output": False})
        submit = time.perf_counter() - t0
        wall = run_workers(f"ours-{kind}", WORKER_CLASSES[("ours", kind)])
        done = ReportTask.objects.filter(pk__gte=first_new, status=TaskStatus.DONE).count()
        if done != n:
            raise SystemExit(f"only {done} of {n} tasks are done; logs in {bench.tmp}")
        span = TaskAttempt.objects.filter(task_id__gte=first_new).aggregate(a=Min("started_at"),
                                                                            b=Max("finished_at"))
        connection.close()
        return {"submit": n / submit, "run": n / (span["b"] - span["a"]).total_seconds(),
                "e2e": n / (submit + wall)}

    def bare(kind: str) -> dict:
        conn.flushall()
        t0 = time.perf_counter()
        ids = [pickled_queue.enqueue_call("bench.noop.noop", result_ttl=600).id for _ in range(n)]
        submit = time.perf_counter() - t0
        wall = run_workers(f"bare-{kind}", WORKER_CLASSES[("bare", kind)])
        starts, ends = [], []
        for i in range(0, n, 1000):
            for job in Job.fetch_many(ids[i:i + 1000], connection=conn):
                if job is None or job.ended_at is None:
                    raise SystemExit("a job hash is missing or unfinished")
                starts.append(job.started_at)
                ends.append(job.ended_at)
        return {"submit": n / submit, "run": n / (max(ends) - min(starts)).total_seconds(),
                "e2e": n / (submit + wall)}

    def celery(kind: str) -> dict:
        conn.flushall()
        os.environ["BENCH_CELERY_BROKER"] = settings.REDIS_URL
        from bench import workers as celery_side

        celery_side.app.conf.broker_url = settings.REDIS_URL
        t0 = time.perf_counter()
        with celery_side.app.producer_or_acquire() as producer:
            for _ in range(n):
                celery_side.noop.apply_async(producer=producer)
        submit = time.perf_counter() - t0
        log = open(bench.tmp / f"celery-{time.monotonic_ns()}.log", "w")
        launched = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "bench.workers", "worker", "--pool", "prefork",
             "--concurrency", str(args.workers), "--without-gossip", "--without-mingle",
             "--without-heartbeat", "--loglevel", "WARNING", "-Q", celery_side.QUEUE],
            # Without DJANGO_SETTINGS_MODULE: a bare Celery, not its Django fix-up.
            cwd=_common.BASE_DIR, env={k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
            stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        bench.workers.append(proc)
        while (conn.llen(celery_side.QUEUE) or conn.hlen("unacked")
               or not conn.exists(celery_side.FIRST_START_KEY)):
            if proc.poll() is not None:
                raise SystemExit(f"the celery worker exited with {proc.returncode}; log in {log.name}")
            time.sleep(0.002)
        drained = time.time()
        wall = time.perf_counter() - launched
        first = float(conn.get(celery_side.FIRST_START_KEY))
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
        return {"submit": n / submit, "run": n / (drained - first), "e2e": n / (submit + wall)}

    runners = {"ours": ours, "bare": bare, "celery": celery}
    print(f"bench 1 pipeline overhead: n={n}, {args.workers} workers (or pool processes) each, "
          f"database {connection.vendor}, rounds={args.rounds}")
    print(f"conditions: {_common.conditions()}")
    results: dict[tuple, list] = {variant: [] for variant in variants}
    for r in range(1, args.rounds + 1):
        for variant in variants:
            figures = runners[variant[0]](variant[1])
            results[variant].append(figures)
            print(f"round {r} {variant[0]:6} {variant[1]:7}: submit {figures['submit']:8.1f}/s  "
                  f"run {figures['run']:7.1f}/s  e2e {figures['e2e']:7.1f}/s", flush=True)
        print(f"  load average now {os.getloadavg()[0]:.2f}", flush=True)
    med = {v: {k: statistics.median(f[k] for f in rows) for k in ("submit", "run", "e2e")}
           for v, rows in results.items()}
    for variant, m in med.items():
        print(f"median {variant[0]:6} {variant[1]:7}: submit {m['submit']:8.1f}/s  run {m['run']:7.1f}/s  "
              f"e2e {m['e2e']:7.1f}/s")
    for kind in ("fork", "simple"):
        if ("ours", kind) not in results:
            continue
        per_round = [o["run"] / b["run"]
                     for o, b in zip(results[("ours", kind)], results[("bare", kind)], strict=True)]
        e2e = med[("ours", kind)]["e2e"] / med[("bare", kind)]["e2e"]
        print(f"ratio ours/bare {kind:6} run throughput: median {statistics.median(per_round):.3f} "
              f"(per round {', '.join(f'{x:.3f}' for x in per_round)}; target >= 0.9); end-to-end {e2e:.3f}")
    if ("celery", "prefork") in med and ("ours", "fork") in med:
        celery_run = med[("celery", "prefork")]["run"]
        print("against Celery prefork (acks_late), run throughput: "
              + ", ".join(f"{side} {kind} {med[(side, kind)]['run'] / celery_run:.2f}"
                          for side, kind in variants if side != "celery"))
    print(f"conditions at the end: {_common.conditions()}")


if __name__ == "__main__":
    main()
