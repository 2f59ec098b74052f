"""Bench 2: bulk paths at scale, time and peak memory of each, each beside its target, the landed
figure (issue 13's table) and a baseline measured in this run with the landed algorithm.

  submit    10,000 tasks in one POST /report/batch/submit (token auth, Django test client)
  replay    10,000 dead letters through the bulk action service, throttle out of the way;
            baseline: the landed letter-by-letter path on --baseline-sample letters
  throttle  real-time bulk replays at 10/s, 100/s and 1,000/s (measured rate vs configured),
            and a rate changed from 100/s to 1,000/s mid-run (how long until it took effect)
  archive   N expired dead letters with `manage.py archive_deadletters` (every row shares one
            expire_at, the case that made the landed archiver sort everything per batch);
            baseline (PostgreSQL): the landed batch SELECT timed on the same table
  purge     the same N, archived, with `archive_deadletters --purge-archived-after 0`;
            baseline: the landed purge on --baseline-sample rows
  profile   (--profile-purge N, PostgreSQL) where a purge's time goes, per component

    .venv/bin/python bench/bulk_paths.py [--submit 10000] [--replay 10000] [--throttle 10,100,1000]
        [--archive 1000000] [--profile-purge 100000] [--postgres postgres://postgres@127.0.0.1:5432/postgres]

Each measured step runs in its own child process, so its peak RSS (ru_maxrss of that child,
from os.wait4) is the step's own, not the row generator's. Row generation is not timed.
"""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402

SCRIPT = Path(__file__).resolve()
# Issue 13's table: the landed figures (PostgreSQL 15, 2 cores) and the targets.
LANDED = {"replay": "151.7 s (66/s)", "archive": "178-224 s", "purge": "347 s"}
TARGET = {"replay": 5.0, "archive": 60.0, "purge": 60.0}
RSS_TARGET_MB = 150


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--step":
        return child(sys.argv[2], sys.argv[3:])
    p = _common.parser(__doc__.split("\n")[0])
    p.add_argument("--submit", type=int, default=10_000)
    p.add_argument("--replay", type=int, default=10_000)
    p.add_argument("--baseline-sample", type=int, default=1000, help="letters/rows the landed paths run on")
    p.add_argument("--throttle", default="10,100,1000", help="comma-separated rates to measure ('' skips)")
    p.add_argument("--throttle-seconds", type=float, default=5.0)
    p.add_argument("--archive", default="1000000", help="comma-separated sizes")
    p.add_argument("--no-purge", action="store_true")
    p.add_argument("--profile-purge", type=int, default=0, metavar="N")
    args = p.parse_args()
    bench = _common.setup(
        postgres=args.postgres,
        extra_env={"BULK_ACTION_MAX_RATE": "1000000", "ALLOWED_HOSTS": "testserver,127.0.0.1", "REPORT_BATCH_MAX_ITEMS": str(max(args.submit, 10_000)),
                   "REPORT_BATCH_MAX_BODY_BYTES": str(8 * 1024 * 1024)},
    )
    try:
        run(bench, args)
    finally:
        bench.cleanup()


def run_step(step: str, *extra: str) -> tuple[dict, float]:
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--step", step, *extra], env=dict(os.environ),
                            stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"step {step} failed ({proc.returncode}): {out[-2000:]}")
    return json.loads(out.strip().splitlines()[-1]), usage.ru_maxrss / 1024


def verdict(seconds: float, target: float, rss: float | None = None) -> str:
    ok = seconds <= target and (rss is None or rss <= RSS_TARGET_MB)
    return "MEETS" if ok else "MISSES"


def run(bench, args) -> None:
    from django.db import connection

    print(f"bench 2 bulk paths: database {connection.vendor}")
    print(f"conditions: {_common.conditions()}")
    if args.submit:
        figures, rss = run_step("submit", str(args.submit))
        print(f"submit {args.submit} tasks (POST /report/batch/submit, status {figures['status']}): "
              f"{figures['seconds']:.2f}s = {args.submit / figures['seconds']:.0f} tasks/s, "
              f"then the fan-out job enqueued {figures['enqueued']} RQ jobs in {figures['fan_out']:.2f}s; "
              f"peak RSS {rss:.0f} MiB", flush=True)
    if args.replay:
        bench_replay(args)
    rates = [float(r) for r in args.throttle.split(",") if r]
    if rates:
        bench_throttle(rates, args.throttle_seconds)
    for size in (int(s) for s in args.archive.split(",") if s):
        bench_archive_and_purge(size, args)
    if args.profile_purge:
        from bench import _purge_profile

        _purge_profile.run(args.profile_purge)
    print(f"end: {_common.conditions()}")


def bench_replay(args) -> None:
    from django.db import connection

    sample = args.baseline_sample
    tasks = _common.make_dead_tasks(args.replay + sample)
    _common.insert_dead_letters(args.replay + sample, task_ids=tasks, expired=False)
    connection.close()
    legacy, legacy_rss = run_step("replay-legacy", str(sample))
    figures, rss = run_step("replay", str(args.replay))
    seconds = figures["seconds"]
    legacy_rate = sample / legacy["seconds"]
    print(f"replay {args.replay} dead letters (bulk action, set-based, no throttle): {seconds:.2f}s = "
          f"{args.replay / seconds:.0f} letters/s, {figures['succeeded']} replayed, {figures['batches']} batches, "
          f"{figures['statements']} SQL statements ({figures['statements'] / args.replay:.2f} a letter); "
          f"peak RSS {rss:.0f} MiB", flush=True)
    print(f"  target <= {TARGET['replay']:.0f} s: {verdict(seconds, TARGET['replay'])}; landed {LANDED['replay']}; "
          f"baseline this run (letter by letter, {sample} letters): {legacy_rate:.0f} letters/s = "
          f"{args.replay / legacy_rate:.1f} s for {args.replay} (peak RSS {legacy_rss:.0f} MiB); "
          f"speed-up x{(args.replay / seconds) / legacy_rate:.1f}", flush=True)


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
        bulk, _ = start_bulk_action(selection=build_selection(action="replay", scope="filter"),
                                    actor="bench", ip_address=None, rate_per_second=rates[0], pause_threshold=1.0)
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
              f"({(measured / rate - 1) * 100:+.1f} % of the configured rate; target within +-5 %) [{outcome}]",
              flush=True)

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
                samples.append((now, BulkAction.objects.filter(pk=bulk.pk).values_list("processed", flat=True)[0]))
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
    from datetime import timedelta

    from django.db import connection
    from django.utils import timezone

    from bench import baselines_bulk
    from deadletters.models import DeadLetter, DeadLetterStatus

    DeadLetter.objects.filter(status=DeadLetterStatus.OPEN).update(status=DeadLetterStatus.DISCARDED)
    shared_tasks = _common.make_dead_tasks(1000)
    legacy_purge = None
    if not args.no_purge and args.baseline_sample:
        # The landed purge on rows of their own (archived long ago), before the big set exists.
        sample = max(args.baseline_sample, 5000)
        _common.insert_dead_letters(sample, task_ids=shared_tasks, expired=True)
        DeadLetter.objects.filter(status=DeadLetterStatus.OPEN).update(
            status=DeadLetterStatus.ARCHIVED, archived_at=timezone.now() - timedelta(days=90))
        Path(os.environ["ARCHIVE_DIR"]).mkdir(parents=True, exist_ok=True)
        rows, seconds = baselines_bulk.purge_batches(Path(os.environ["ARCHIVE_DIR"]) / "legacy.jsonl.gz",
                                              timezone.now() - timedelta(days=60), limit=sample)
        legacy_purge = rows / seconds
    seconds = _common.insert_dead_letters(size, task_ids=shared_tasks, expired=True)
    print(f"  (inserted {size} expired letters sharing one expire_at in {seconds:.1f}s, not counted)", flush=True)
    legacy_select = None
    if connection.vendor == "postgresql":
        times = baselines_bulk.archive_batch_select(timezone.now())
        legacy_select = sorted(times)[len(times) // 2]
    connection.close()

    elapsed, rss, out = run_command(["archive_deadletters"])
    archived = DeadLetter.objects.filter(status=DeadLetterStatus.ARCHIVED).count()
    print(f"archive {size} expired dead letters (manage.py archive_deadletters): {elapsed:.2f}s = "
          f"{size / elapsed:.0f} letters/s (process start included), {archived} archived; peak RSS {rss:.0f} MiB; "
          f"it said: {out.strip().splitlines()[-1][:160]}", flush=True)
    baseline = (f"baseline this run (landed batch SELECT at this size): {legacy_select * 1000:.0f} ms a batch "
                f"x {size // 1000} batches = {legacy_select * size / 1000:.0f} s in SELECTs alone"
                if legacy_select is not None else "baseline: PostgreSQL only")
    print(f"  target <= {TARGET['archive']:.0f} s and RSS <= {RSS_TARGET_MB} MB: "
          f"{verdict(elapsed, TARGET['archive'], rss)}; landed {LANDED['archive']}; {baseline}", flush=True)
    if args.no_purge:
        DeadLetter.objects.filter(status=DeadLetterStatus.ARCHIVED).update(status=DeadLetterStatus.DISCARDED)
        return
    connection.close()
    elapsed, rss, out = run_command(["archive_deadletters", "--purge-archived-after", "0"])
    left = DeadLetter.objects.filter(status=DeadLetterStatus.ARCHIVED).count()
    runs = sorted(Path(os.environ["ARCHIVE_DIR"]).glob("deadletters-*"))  # a run is a folder of parts
    size_mb = sum(part.stat().st_size for part in runs[-1].glob("part-*")) / 1e6 if runs else 0
    print(f"purge {archived} archived dead letters (--purge-archived-after 0): {elapsed:.2f}s = "
          f"{archived / elapsed:.0f} letters/s, {left} left, file {size_mb:.1f} MB; peak RSS {rss:.0f} MiB; "
          f"it said: {out.strip().splitlines()[-1][:200]}", flush=True)
    baseline = (f"baseline this run (landed purge, {max(args.baseline_sample, 5000)} rows): {legacy_purge:.0f} rows/s "
                f"= {archived / legacy_purge:.0f} s for {archived}" if legacy_purge else "no baseline")
    print(f"  target <= {TARGET['purge']:.0f} s and RSS <= {RSS_TARGET_MB} MB: {verdict(elapsed, TARGET['purge'], rss)}; "
          f"landed {LANDED['purge']}; {baseline}", flush=True)


def run_command(argv: list[str]) -> tuple[float, float, str]:
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(_common.BASE_DIR / "manage.py"), *argv],
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed: {out[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024, out


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
        from reports.models import ReportBatch
        from reports.worker.report_job import fan_out_batch

        # Large batches are enqueued by one job on the high queue; run it as a worker would.
        fan_out_start = time.perf_counter()
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
        bulk, _ = start_bulk_action(selection=selection, actor="bench", ip_address=None, rate_per_second=1_000_000,
                                    pause_threshold=1.0)
        runs = 0
        with CaptureQueriesContext(connection) as queries:
            while True:
                runs += 1
                outcome = run_bulk_action(bulk.pk, slice_seconds=3600)
                bulk.refresh_from_db()
                if bulk.status in (BulkActionStatus.COMPLETED, BulkActionStatus.CANCELLED, BulkActionStatus.FAILED,
                                   BulkActionStatus.PAUSED) or runs > 100:
                    break
        seconds = time.perf_counter() - start
        if bulk.status != BulkActionStatus.COMPLETED:
            raise SystemExit(f"bulk ended {bulk.status} ({outcome}): {bulk.paused_reason or bulk.error}")
        from deadletters.bulk.throttle import batch_size_for

        print(json.dumps({"seconds": seconds, "succeeded": BulkAction.objects.get(pk=bulk.pk).succeeded,
                          "runs": runs, "statements": len(queries),
                          "batches": -(-bulk.processed // batch_size_for(bulk.rate_per_second))}))
    elif step == "replay-legacy":
        from bench import baselines_bulk
        from deadletters.models import BulkAction, DeadLetter, DeadLetterStatus

        n = int(argv[0])
        bulk = BulkAction.objects.create(action="replay", actor="bench-legacy", total=n)
        ids = list(DeadLetter.objects.filter(status=DeadLetterStatus.OPEN).order_by("pk").values_list("pk", flat=True)[:n])
        print(json.dumps({"seconds": baselines_bulk.replay_letter_by_letter(bulk, ids)}))
    else:
        raise SystemExit(f"unknown step {step}")


if __name__ == "__main__":
    main()
