"""The other queues of bench/throughput.py, each run from its own virtualenv (var/bench-venvs/<name>,
made by bench/throughput.py with pip from PyPI) and with its own broker, as its users run it:

  celery         Celery prefork, task_acks_late (at-least-once), Redis
  dramatiq       Dramatiq, Redis broker (acknowledges after the actor ran)
  procrastinate  Procrastinate, PostgreSQL (its only broker)

    var/bench-venvs/celery/bin/python bench/rivals.py celery --redis URL --postgres URL \\
        --n 1000 --concurrency 2

It enqueues N no-op tasks, starts the worker with `concurrency` tasks at a time, and prints one
JSON line: {"submit": tasks/s, "run": tasks/s}. run = N / (first task started -> last finished):
each worker process notes its first start once (SET NX), and every task counts itself (one
INCR); the task that brings the count to N notes the end.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

import redis

FIRST, COUNT, END = "bench:rival:first", "bench:rival:count", "bench:rival:end"
HERE = os.path.dirname(os.path.abspath(__file__))
_client = None
_first_noted = False


def _redis():
    global _client
    if _client is None:
        _client = redis.Redis.from_url(os.environ["BENCH_REDIS"])
    return _client


def note_task() -> None:
    """What each rival's no-op does: one round trip, plus one SET NX per worker process."""
    global _first_noted
    conn = _redis()
    if not _first_noted:
        _first_noted = True
        conn.set(FIRST, repr(time.time()), nx=True)
    if conn.incr(COUNT) == int(os.environ["BENCH_N"]):
        conn.set(END, repr(time.time()))


# --- the apps, defined for the rival this process runs -------------------------------------

RIVAL = os.environ.get("BENCH_RIVAL", "")

if RIVAL == "celery":
    from celery import Celery

    celery_app = Celery("rivals", broker=os.environ["BENCH_REDIS"])
    celery_app.conf.update(
        task_acks_late=True, task_ignore_result=True, task_default_queue="bench-celery",
        worker_hijack_root_logger=False, broker_connection_retry_on_startup=True,
    )

    @celery_app.task(name="rivals.noop")
    def celery_noop():
        note_task()

elif RIVAL == "dramatiq":
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    dramatiq.set_broker(RedisBroker(url=os.environ["BENCH_REDIS"]))

    @dramatiq.actor(queue_name="bench-dramatiq", max_retries=0)
    def dramatiq_noop():
        note_task()

elif RIVAL == "procrastinate":
    import procrastinate

    procrastinate_app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=os.environ["BENCH_PG"]))

    @procrastinate_app.task(name="rivals.noop", queue="bench")
    def procrastinate_noop():
        note_task()


def submit(rival: str, n: int) -> None:
    if rival == "celery":
        with celery_app.producer_or_acquire() as producer:
            for _ in range(n):
                celery_noop.apply_async(producer=producer)
    elif rival == "dramatiq":
        for _ in range(n):
            dramatiq_noop.send()
    else:
        with procrastinate_app.open():
            for _ in range(n):
                procrastinate_noop.defer()


def worker_argv(rival: str, concurrency: int) -> list[str]:
    if rival == "celery":
        return [sys.executable, "-m", "celery", "-A", "rivals:celery_app", "worker", "--pool", "prefork",
                "--concurrency", str(concurrency), "--without-gossip", "--without-mingle",
                "--without-heartbeat", "--loglevel", "WARNING", "-Q", "bench-celery"]
    if rival == "dramatiq":
        return [sys.executable, "-m", "dramatiq", "rivals", "--processes", str(concurrency), "--threads", "1",
                "--queues", "bench-dramatiq"]
    return [sys.executable, "-m", "procrastinate", "--app=rivals.procrastinate_app", "worker",
            f"--concurrency={concurrency}", "--queues=bench"]


def prepare(rival: str) -> None:
    _redis().delete(FIRST, COUNT, END)
    if rival == "procrastinate":
        import psycopg

        with psycopg.connect(os.environ["BENCH_PG"], autocommit=True) as conn:
            applied = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()[0]
        if not applied:
            with procrastinate_app.open():
                procrastinate_app.schema_manager.apply_schema()
        with psycopg.connect(os.environ["BENCH_PG"], autocommit=True) as conn:
            conn.execute("DELETE FROM procrastinate_jobs")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("rival", choices=["celery", "dramatiq", "procrastinate"])
    p.add_argument("--redis", required=True)
    p.add_argument("--postgres", default="")
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--log", default=os.devnull)
    args = p.parse_args()
    os.environ.update(BENCH_RIVAL=args.rival, BENCH_REDIS=args.redis, BENCH_PG=args.postgres,
                      BENCH_N=str(args.n))
    if RIVAL != args.rival:  # define the app of the rival asked for: run again with the environment set
        os.execv(sys.executable, [sys.executable, *sys.argv])
    prepare(args.rival)
    started = time.perf_counter()
    submit(args.rival, args.n)
    submitted = time.perf_counter() - started
    with open(args.log, "a") as log:
        proc = subprocess.Popen(worker_argv(args.rival, args.concurrency), cwd=HERE, env=dict(os.environ),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    conn = _redis()
    try:
        deadline = time.monotonic() + 600
        while not conn.exists(END):
            if proc.poll() is not None:
                raise SystemExit(f"the {args.rival} worker exited with {proc.returncode}; log: {args.log}")
            if time.monotonic() > deadline:
                raise SystemExit(f"the {args.rival} worker did not finish; log: {args.log}")
            time.sleep(0.005)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    first, end = float(conn.get(FIRST)), float(conn.get(END))
    print(json.dumps({"submit": args.n / submitted, "run": args.n / (end - first)}))


if __name__ == "__main__":
    main()
