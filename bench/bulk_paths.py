"""Bench 2: bulk paths at scale, each step's time and peak memory beside its target.

Each verdict also prints the figure before the set-based paths (LANDED: PostgreSQL 15, 2 cores).

  submit    10,000 tasks in one POST /report/batch/submit (token auth, Django test client)
  replay    10,000 dead letters through the bulk action service, throttle out of the way
  throttle  real-time bulk replays at 10/s, 100/s and 1,000/s (measured rate vs configured),
            and a rate changed from 100/s to 1,000/s mid-run (how long until it took effect)
  archive   N expired dead letters with `manage.py archive_deadletters` (every row shares one
            expire_at, the case where a sort per batch would read everything)
  purge     the same N, archived, with `archive_deadletters --purge-archived-after 0`

    .venv/bin/python bench/bulk_paths.py [--submit 10000] [--replay 10000] [--throttle 10,100,1000]
        [--archive 1000000] [--postgres postgres://postgres@127.0.0.1:5432/postgres]

Each measured step runs in its own child process, so its peak RSS (ru_maxrss of that child,
from os.wait4) is the step's own, not the row generator's. Row generation is not timed.
"""

import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402

LANDED = {"replay": "151.7 s (66/s)", "archive": "178-224 s", "purge": "347 s"}
TARGET = {"replay": 5.0, "archive": 60.0, "purge": 60.0}
RSS_TARGET_MB = 150


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--step":
        return child(sys.argv[2], sys.argv[3:])
    p = _common.parser(__doc__.split("\n")[0])
    p.add_argument("--submit", type=int, default=10_000)
    p.add_argument("--replay", type=int, default=10_000)
    p.add_argument("--throttle", default="10,100,1000", help="comma-separated rates to measure ('' skips)")
    p.add_argument("--throttle-seconds", type=float, default=5.0)
    p.add_argument("--archive", default="1000000", help="comma-separated sizes")
    p.add_argument("--no-purge", action="store_true")
    _common.main(p, run, extra_env={"BULK_ACTION_MAX_RATE": "1000000", "ALLOWED_HOSTS": "testserver",
                                    "REPORT_BATCH_MAX_ITEMS": "1000000",
                                    "REPORT_BATCH_MAX_BODY_BYTES": "8388608"})


def run_step(step: str, *extra: str) -> tuple[dict, float]:
    """(the step's figures, its peak RSS in MiB), the step run by a child process of this script."""
    _, rss, out = _common.run_child([sys.executable, str(Path(__file__).resolve()), "--step", step, *extra])
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1]), rss


def verdict(seconds: float, step: str, rss: float | None = None) -> str:
    ok = seconds <= TARGET[step] and (rss is None or rss <= RSS_TARGET_MB)
    memory = f" and RSS <= {RSS_TARGET_MB} MB" if rss is not None else ""
    return f"  target <= {TARGET[step]:.0f} s{memory}: {'MEETS' if ok else 'MISSES'}; before: {LANDED[step]}"


def run(args) -> None:
    from django.db import connection

    if args.submit:
        figures, rss = run_step("submit", str(args.submit))
        print(f"submit {args.submit} tasks (POST /report/batch/submit, status {figures['status']}): "
              f"{figures['seconds']:.2f}s = {args.submit / figures['seconds']:.0f} tasks/s, "
              f"then the fan-out job enqueued {figures['enqueued']} RQ jobs in {figures['fan_out']:.2f}s; "
              f"peak RSS {rss:.0f} MiB", flush=True)
    if args.replay:
        _common.insert_dead_letters(args.replay, task_ids=_common.make_dead_tasks(args.replay), expired=False)
        connection.close()
        figures, rss = run_step("replay", str(args.replay))
        seconds = figures["seconds"]
        print(f"replay {args.replay} dead letters (bulk action, set-based, no throttle): {seconds:.2f}s = "
              f"{args.replay / seconds:.0f} letters/s, {figures['succeeded']} replayed, "
              f"{figures['batches']} batches, "
              f"{figures['statements']} SQL statements ({figures['statements'] / args.replay:.2f} a letter); "
              f"peak RSS {rss:.0f} MiB", flush=True)
        print(verdict(seconds, "replay"), flush=True)
    rates = [float(r) for r in args.throttle.split(",") if r]
    if rates:
        bench_throttle(rates, args.throttle_seconds)
    for size in (int(s) for s in args.archive.split(",") if s):
        bench_archive_and_purge(size, args)


def bench_throttle(rates: list[float], seconds: float) -> None:
    """Real clock: a bulk replay of rate*seconds letters at `rate`, measured start to finish."""
    from django.db import connection

    from deadletters.bulk.control import change_bulk_rate, start_bulk_action
    from deadletters.bulk.runner import run_bulk_action
    from deadletters.bulk.selection import build_selection
    from deadletters.models import BulkAction, DeadLetter, DeadLetterStatus

    def fresh(n: int):
        DeadLetter.objects.filter(status=DeadLetterStatus.OPEN).update(status=DeadLetterStatus.DISCARDED)
        _common.insert_dead_letters(n, task_ids=_common.make_dead_tasks(n), expired=False)
        connection.close()
        bulk, _ = start_bulk_action(selection=build_selection(action="replay", scope="filter"), actor="bench",
                                    ip_address=None, rate_per_second=rates[0], pause_threshold=1.0)
        return bulk

    for rate in rates:
        n = int(rate * seconds)
        bulk = fresh(n)
        BulkAction.objects.filter(pk=bulk.pk).update(rate_per_second=rate)
        start = time.perf_counter()
        outcome = run_bulk_action(bulk.pk, slice_seconds=3600)
        elapsed = time.perf_counter() - start
        measured = n / elapsed
        print(f"throttle {rate:g}/s: {n} letters in {elapsed:.2f}s = {measured:.1f}/s "
              f"({(measured / rate - 1) * 100:+.1f} % of the configured rate; target within +-5 %) "
              f"[{outcome}]", flush=True)

    # A rate change mid-run: 100/s for ~2 s, then 1,000/s; how soon does the new rate show?
    bulk = fresh(3000)
    BulkAction.objects.filter(pk=bulk.pk).update(rate_per_second=100)
    samples: list[tuple[float, int]] = []
    done = threading.Event()
    start = time.perf_counter()

    def watch():
        try:
            changed = False
            while not done.is_set():
                now = time.perf_counter() - start
                processed = BulkAction.objects.filter(pk=bulk.pk).values_list("processed", flat=True)[0]
                samples.append((now, processed))
                if not changed and now >= 2.0:
                    change_bulk_rate(bulk_id=bulk.pk, rate_per_second=1000, actor="bench")
                    samples.append((time.perf_counter() - start, -1))
                    changed = True
                time.sleep(0.02)
        finally:
            connection.close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    run_bulk_action(bulk.pk, slice_seconds=3600)
    done.set()
    watcher.join()
    change_at = next(t for t, p in samples if p == -1)
    points = [(t, p) for t, p in samples if p >= 0]
    before = [p for t, p in points if t <= change_at]
    effect = next((t for t, p in points if t > change_at and p - before[-1] >= 50), None)
    print(f"rate change 100/s -> 1000/s at t={change_at:.2f}s ({before[-1]} done by then): the next "
          f"letters went at the new rate {effect - change_at if effect else float('nan'):.2f}s later "
          f"(target: within 1 s); run ended at t={points[-1][0]:.2f}s", flush=True)


def bench_archive_and_purge(size: int, args) -> None:
    from django.db import connection

    from deadletters.models import DeadLetter, DeadLetterStatus

    DeadLetter.objects.filter(status=DeadLetterStatus.OPEN).update(status=DeadLetterStatus.DISCARDED)
    seconds = _common.insert_dead_letters(size, expired=True)
    print(f"  (inserted {size} expired letters sharing one expire_at in {seconds:.1f}s, not counted)")
    connection.close()
    elapsed, rss, out = _common.manage("archive_deadletters")
    archived = DeadLetter.objects.filter(status=DeadLetterStatus.ARCHIVED).count()
    print(f"archive {size} expired dead letters (manage.py archive_deadletters): {elapsed:.2f}s = "
          f"{size / elapsed:.0f} letters/s (process start included), {archived} archived; "
          f"peak RSS {rss:.0f} MiB; "
          f"it said: {out.strip().splitlines()[-1][:160]}", flush=True)
    print(verdict(elapsed, "archive", rss), flush=True)
    if args.no_purge:
        DeadLetter.objects.filter(status=DeadLetterStatus.ARCHIVED).update(status=DeadLetterStatus.DISCARDED)
        return
    connection.close()
    elapsed, rss, out = _common.manage("archive_deadletters", "--purge-archived-after", "0")
    left = DeadLetter.objects.filter(status=DeadLetterStatus.ARCHIVED).count()
    runs = sorted(Path(os.environ["ARCHIVE_DIR"]).glob("deadletters-*"))  # a run is a folder of parts
    size_mb = sum(part.stat().st_size for part in runs[-1].glob("part-*")) / 1e6 if runs else 0
    print(f"purge {archived} archived dead letters (--purge-archived-after 0): {elapsed:.2f}s = "
          f"{archived / elapsed:.0f} letters/s, {left} left, file {size_mb:.1f} MB; peak RSS {rss:.0f} MiB; "
          f"it said: {out.strip().splitlines()[-1][:200]}", flush=True)
    print(verdict(elapsed, "purge", rss), flush=True)


def child(step: str, argv: list[str]) -> None:
    import django

    django.setup()
    from transport.connection import redis_connection
    from transport.queues import get_queue

    if step == "submit":
        from django.test import Client

        from reports.services.tokens import create_api_token

        n = int(argv[0])
        # The probe is operator-only; a fresh token's submit budget takes one batch of any size.
        raw = create_api_token(name=f"bench-{time.time_ns()}", scopes=("submit", "operator"))[1]
        body = json.dumps({"items": [{"kind": "probe", "params": {"write_output": False}} for _ in range(n)]})
        client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
        redis_connection().flushall()
        start = time.perf_counter()
        response = client.generic("POST", "/report/batch/submit", body, content_type="application/json")
        seconds = time.perf_counter() - start
        if response.status_code not in (200, 201):
            raise SystemExit(f"batch submit answered {response.status_code}: {response.content[:500]!r}")
        from django.conf import settings

        from reports.models import ReportBatch
        from reports.worker.report_job import fan_out_batch

        # Large batches are enqueued by one job on the high queue; run it as a worker would.
        fan_out_start = time.perf_counter()
        if n > settings.REPORT_BATCH_INLINE_ENQUEUE_MAX:  # smaller ones the request enqueued itself
            fan_out_batch(ReportBatch.objects.latest("pk").pk)
        fan_out = time.perf_counter() - fan_out_start
        enqueued = get_queue("default").count
        print(json.dumps({"seconds": seconds, "status": response.status_code, "enqueued": enqueued,
                          "fan_out": fan_out}))
    elif step == "replay":
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from deadletters.bulk.control import start_bulk_action
        from deadletters.bulk.runner import run_bulk_action
        from deadletters.bulk.selection import build_selection
        from deadletters.models import BulkAction, BulkActionStatus

        start = time.perf_counter()
        selection = build_selection(action="replay", scope="filter", filter_qs="")
        bulk, _ = start_bulk_action(selection=selection, actor="bench", ip_address=None,
                                    rate_per_second=1_000_000, pause_threshold=1.0)
        runs = 0
        with CaptureQueriesContext(connection) as queries:
            while True:
                runs += 1
                outcome = run_bulk_action(bulk.pk, slice_seconds=3600)
                bulk.refresh_from_db()
                if bulk.status in (BulkActionStatus.COMPLETED, BulkActionStatus.CANCELLED,
                                   BulkActionStatus.FAILED, BulkActionStatus.PAUSED) or runs > 100:
                    break
        seconds = time.perf_counter() - start
        if bulk.status != BulkActionStatus.COMPLETED:
            raise SystemExit(f"bulk ended {bulk.status} ({outcome}): {bulk.paused_reason or bulk.error}")
        from deadletters.bulk.throttle import batch_size_for

        print(json.dumps({"seconds": seconds, "succeeded": BulkAction.objects.get(pk=bulk.pk).succeeded,
                          "runs": runs, "statements": len(queries),
                          "batches": -(-bulk.processed // batch_size_for(bulk.rate_per_second))}))
    else:
        raise SystemExit(f"unknown step {step}")


if __name__ == "__main__":
    main()
