"""Submits through the production web server, beside a bare request of the same run.

gunicorn with config/gunicorn_conf.py (4 sync workers by default) on a free port, the database of
the run (SQLite, or PostgreSQL with --postgres) and its own Redis; `--clients` client processes
send requests over real HTTP for `--seconds` each phase, alternating /healthz and
POST /report/task/submit for `--rounds` rounds. Each client has its own API token (its own submit
budget, raised so that it never refuses, but charged as always) and sends an Idempotency-Key with
every submit. No worker runs: the jobs wait in Redis.

    .venv/bin/python bench/submit.py
    .venv/bin/python bench/submit.py --postgres postgres://postgres@127.0.0.1:5432/postgres
    .venv/bin/python bench/submit.py --conn-max-age 0      # a new database connection per request

Prints requests/s, p50 and p99 of each phase and submits/s as a fraction of /healthz/s.
"""

import http.client
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
import uuid

from _common import BASE_DIR, conditions, parser, setup

from config.embedded_redis import free_port


def client(port: int, path: str, token: str, seconds: float, start_at: float, out) -> None:
    """Requests one after another until `seconds` after `start_at`; sends (latencies, failures)."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    body = json.dumps({"kind": "sales_summary", "params": {}}).encode()
    latencies, failures = [], 0
    while time.time() < start_at:
        time.sleep(0.001)
    deadline = start_at + seconds
    while (now := time.perf_counter()) and time.time() < deadline:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        if path == "/healthz":
            conn.request("GET", path)
        else:
            conn.request("POST", path, body, {**headers, "Idempotency-Key": uuid.uuid4().hex})
        response = conn.getresponse()
        response.read()
        conn.close()
        latencies.append(time.perf_counter() - now)
        failures += response.status not in (200, 201)
    out.send((latencies, failures))


def phase(port: int, path: str, tokens: list[str], seconds: float) -> tuple[float, float, float, int]:
    """(requests/s, p50 ms, p99 ms, failed requests) of `len(tokens)` clients for `seconds`."""
    start_at = time.time() + 0.5
    pipes, procs = [], []
    for token in tokens:
        mine, theirs = multiprocessing.Pipe(duplex=False)
        proc = multiprocessing.Process(target=client, args=(port, path, token, seconds, start_at, theirs))
        proc.start()
        pipes.append(mine)
        procs.append(proc)
    latencies, failures = [], 0
    for pipe in pipes:
        got, failed = pipe.recv()
        latencies += got
        failures += failed
    for proc in procs:
        proc.join()
    cuts = statistics.quantiles(latencies, n=100)
    return len(latencies) / seconds, cuts[49] * 1000, cuts[98] * 1000, failures


def start_gunicorn(bench, workers: int, conn_max_age: int | None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = dict(os.environ, API_SUBMIT_RATE="100000000/minute")
    if conn_max_age is not None:
        env["DB_CONN_MAX_AGE"] = str(conn_max_age)
    argv = [sys.executable, "-m", "gunicorn", "-c", "python:config.gunicorn_conf",
            "--bind", f"127.0.0.1:{port}", "--workers", str(workers), "config.wsgi"]
    log = open(bench.tmp / "gunicorn.log", "w")
    proc = subprocess.Popen(
        argv, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    bench.workers.append(proc)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return proc, port
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"gunicorn did not answer: {(bench.tmp / 'gunicorn.log').read_text()[-2000:]}")


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=10.0, help="each phase (default 10)")
    p.add_argument("--rounds", type=int, default=2, help="healthz/submit pairs (default 2)")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--workers", type=int, default=4, help="gunicorn workers (default 4)")
    p.add_argument("--conn-max-age", type=int, default=None, help="DB_CONN_MAX_AGE (default: the settings')")
    args = p.parse_args()
    bench = setup(postgres=args.postgres)
    try:
        from django.db import connection

        from reports.services.tokens import create_api_token

        tokens = [create_api_token(name=f"bench-{i}", scopes=("submit",))[1] for i in range(args.clients)]
        _, port = start_gunicorn(bench, args.workers, args.conn_max_age)
        vendor = connection.vendor
        max_age = "default" if args.conn_max_age is None else args.conn_max_age
        print(f"submit vs /healthz: gunicorn {args.workers} workers, {args.clients} clients, {vendor}, "
              f"DB_CONN_MAX_AGE={max_age}; {conditions()}")
        phase(port, "/healthz", tokens, 1.0)  # warm-up: every worker imported and connected
        phase(port, "/report/task/submit", tokens, 1.0)
        ratios = []
        for n in range(1, args.rounds + 1):
            health = phase(port, "/healthz", tokens, args.seconds)
            submit = phase(port, "/report/task/submit", tokens, args.seconds)
            ratios.append(submit[0] / health[0])
            for name, (rate, p50, p99, failed) in (("healthz", health), ("submit", submit)):
                print(f"  round {n} {name:7}: {rate:7.1f}/s  p50 {p50:6.1f} ms  p99 {p99:6.1f} ms"
                      + (f"  FAILED {failed}" if failed else ""))
            print(f"  round {n} submits/s / healthz/s = {ratios[-1]:.2f}")
        print(f"submits/s / healthz/s: {statistics.median(ratios):.2f} (median of {len(ratios)} rounds); "
              f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        bench.cleanup()


if __name__ == "__main__":
    main()
