"""Bench 1: pipeline overhead. N no-op report tasks (probe, write_output false) submitted and run
to `done`, versus bare RQ running N no-op functions (bench.noop.noop): same Redis, same worker
class, same number of `manage.py rqworker --burst` processes, rounds alternating ours/bare.

    .venv/bin/python bench/pipeline_overhead.py [--n 2000] [--rounds 3] [--workers 2]
        [--worker-class fork|simple|fork-preload] [--postgres postgres://postgres@127.0.0.1/postgres]

Figures per round:
  submit/s   tasks (ours: submit_task, one transaction + enqueue each) or jobs (bare: enqueue_call)
  run/s      N / (last job ended - first job started), read from RQ's own job hashes: the
             workers' processing rate, without process start-up
  e2e/s      N / (submit time + worker wall time from launch to exit, start-up included)
The ratio ours/bare of run/s is the figure the issue targets (>= 0.9).
"""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402

WORKER_CLASSES = {
    "fork": "rq.Worker",
    "simple": "rq.SimpleWorker",
    "fork-preload": "bench.workers.PreloadedWorker",
}


def main() -> None:
    p = _common.parser(__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3, help="rounds of (ours, bare); 3 by default")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--worker-class", choices=sorted(WORKER_CLASSES), default="fork")
    args = p.parse_args()
    bench = _common.setup(postgres=args.postgres)
    try:
        run(bench, args)
    finally:
        bench.cleanup()


def run(bench, args) -> None:
    from django.db import connection
    from rq.job import Job

    from reports import queueing
    from reports.models import ReportTask, TaskStatus
    from reports.services import submit_task

    conn = queueing.redis_connection()
    queue = queueing.get_queue("default")
    worker_class = WORKER_CLASSES[args.worker_class]
    n = args.n

    def run_workers(label: str) -> float:
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

    def span(job_ids: list[str]) -> float:
        starts, ends = [], []
        for i in range(0, len(job_ids), 1000):
            for job in Job.fetch_many(job_ids[i:i + 1000], connection=conn):
                if job is None or job.ended_at is None:
                    raise SystemExit("a job hash is missing or unfinished")
                starts.append(job.started_at)
                ends.append(job.ended_at)
        return (max(ends) - min(starts)).total_seconds()

    def ours() -> dict:
        conn.flushall()
        first_new = (ReportTask.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1
        t0 = time.perf_counter()
        ids = [submit_task(kind="probe", params={"write_output": False}).task.pk for _ in range(n)]
        submit = time.perf_counter() - t0
        wall = run_workers("ours")
        done = ReportTask.objects.filter(pk__gte=first_new, status=TaskStatus.DONE).count()
        if done != n:
            raise SystemExit(f"only {done} of {n} tasks are done; logs in {bench.tmp}")
        connection.close()
        run_s = span([queueing.job_id_for(pk, 1) for pk in ids])
        return {"submit": n / submit, "run": n / run_s, "e2e": n / (submit + wall)}

    def bare() -> dict:
        conn.flushall()
        t0 = time.perf_counter()
        ids = [queue.enqueue_call("bench.noop.noop", result_ttl=600).id for _ in range(n)]
        submit = time.perf_counter() - t0
        wall = run_workers("bare")
        run_s = span(ids)
        return {"submit": n / submit, "run": n / run_s, "e2e": n / (submit + wall)}

    print(f"bench 1 pipeline overhead: n={n}, {args.workers} x {worker_class} (burst), "
          f"database {connection.vendor}, rounds={args.rounds}")
    print(f"conditions: {_common.conditions()}")
    results = {"ours": [], "bare": []}
    for r in range(1, args.rounds + 1):
        for label, fn in (("ours", ours), ("bare", bare)):
            figures = fn()
            results[label].append(figures)
            print(f"round {r} {label:4}: submit {figures['submit']:8.1f}/s  run {figures['run']:7.1f}/s  "
                  f"e2e {figures['e2e']:7.1f}/s", flush=True)
    med = {label: {k: statistics.median(f[k] for f in rows) for k in ("submit", "run", "e2e")}
           for label, rows in results.items()}
    for label in ("ours", "bare"):
        m = med[label]
        print(f"median {label:4}: submit {m['submit']:8.1f}/s  run {m['run']:7.1f}/s  e2e {m['e2e']:7.1f}/s")
    per_round = [o["run"] / b["run"] for o, b in zip(results["ours"], results["bare"], strict=True)]
    print(f"ratio ours/bare run throughput: median {statistics.median(per_round):.3f} "
          f"(per round {', '.join(f'{x:.3f}' for x in per_round)}; target >= 0.9)")
    print(f"ratio ours/bare end-to-end (submit + run): {med['ours']['e2e'] / med['bare']['e2e']:.3f}")


if __name__ == "__main__":
    main()
