"""Bench 2: bulk paths, time and peak memory of each.

  submit   10,000 tasks in one POST /report/batch/submit (token auth, Django test client)
  replay   10,000 dead letters through the bulk action service (start_bulk_action + run_bulk_action,
           throttle raised out of the way so the figure is the service's own speed)
  archive  100,000 and 1,000,000 expired dead letters with `manage.py archive_deadletters`

    .venv/bin/python bench/bulk_paths.py [--submit 10000] [--replay 10000]
        [--archive 100000,1000000] [--postgres postgres://postgres@127.0.0.1/postgres]

Each measured step runs in its own child process, so its peak RSS (ru_maxrss of that child,
from os.wait4) is the step's own, not the row generator's. Row generation is not timed.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402

SCRIPT = Path(__file__).resolve()


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--step":
        return child(sys.argv[2], sys.argv[3:])
    p = _common.parser(__doc__.split("\n")[0])
    p.add_argument("--submit", type=int, default=10_000)
    p.add_argument("--replay", type=int, default=10_000)
    p.add_argument("--archive", default="100000,1000000", help="comma-separated sizes")
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


def run(bench, args) -> None:
    from django.db import connection

    from deadletters.models import DeadLetter, DeadLetterStatus

    print(f"bench 2 bulk paths: database {connection.vendor}")
    print(f"conditions: {_common.conditions()}")

    try:
        from reports import batches  # noqa: F401
        have_batches = True
    except ImportError:
        have_batches = False
    if not have_batches:
        print("submit: SKIPPED, reports/batches.py (the batch API) does not exist in this checkout yet")
    else:
        figures, rss = run_step("submit", str(args.submit))
        print(f"submit {args.submit} tasks (POST /report/batch/submit, status {figures['status']}): "
              f"{figures['seconds']:.2f}s = {args.submit / figures['seconds']:.0f} tasks/s, "
              f"then the fan-out job enqueued {figures['enqueued']} RQ jobs in {figures['fan_out']:.2f}s; "
              f"peak RSS {rss:.0f} MiB", flush=True)

    tasks = _common.make_dead_tasks(args.replay)
    _common.insert_dead_letters(args.replay, task_ids=tasks, expired=False)
    connection.close()
    figures, rss = run_step("replay", str(args.replay))
    print(f"replay {args.replay} dead letters (bulk action service): {figures['seconds']:.2f}s = "
          f"{args.replay / figures['seconds']:.0f} letters/s, {figures['succeeded']} replayed, "
          f"{figures['runs']} job slice(s); peak RSS {rss:.0f} MiB", flush=True)

    shared_tasks = _common.make_dead_tasks(1000)
    for size in (int(s) for s in args.archive.split(",") if s):
        DeadLetter.objects.filter(status=DeadLetterStatus.OPEN).update(status=DeadLetterStatus.DISCARDED)
        seconds = _common.insert_dead_letters(size, task_ids=shared_tasks, expired=True)
        connection.close()
        print(f"  (inserted {size} expired letters in {seconds:.1f}s, not counted)", flush=True)
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, str(_common.BASE_DIR / "manage.py"), "archive_deadletters"],
                                env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"archive_deadletters failed: {out[-2000:]}")
        archived = DeadLetter.objects.filter(status=DeadLetterStatus.ARCHIVED).count()
        print(f"archive {size} expired dead letters (manage.py archive_deadletters): {elapsed:.2f}s = "
              f"{size / elapsed:.0f} letters/s (process start included), {archived} archived in total; "
              f"peak RSS {usage.ru_maxrss / 1024:.0f} MiB; it said: {out.strip().splitlines()[-1][:160]}",
              flush=True)
        DeadLetter.objects.filter(status=DeadLetterStatus.ARCHIVED).update(status=DeadLetterStatus.DISCARDED)


def child(step: str, argv: list[str]) -> None:
    import django

    django.setup()
    from reports import queueing

    if step == "submit":
        from django.test import Client

        from reports.tokens import create_api_token

        n = int(argv[0])
        raw = create_api_token(name=f"bench-{time.time_ns()}")[1]
        body = json.dumps({"items": [{"kind": "probe", "params": {"write_output": False}} for _ in range(n)]})
        client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
        queueing.redis_connection().flushall()
        start = time.perf_counter()
        response = client.generic("POST", "/report/batch/submit", body, content_type="application/json")
        seconds = time.perf_counter() - start
        if response.status_code not in (200, 201):
            raise SystemExit(f"batch submit answered {response.status_code}: {response.content[:500]!r}")
        from reports.jobs import fan_out_batch
        from reports.models import ReportBatch

        # Large batches are enqueued by one job on the high queue; run it as a worker would.
        fan_out_start = time.perf_counter()
        fan_out_batch(ReportBatch.objects.latest("pk").pk)
        fan_out = time.perf_counter() - fan_out_start
        enqueued = queueing.get_queue("default").count
        print(json.dumps({"seconds": seconds, "status": response.status_code, "enqueued": enqueued,
                          "fan_out": fan_out}))
    elif step == "replay":
        from deadletters.models import BulkAction, BulkActionStatus
        from deadletters.services.bulk import build_selection, run_bulk_action, start_bulk_action

        start = time.perf_counter()
        selection = build_selection(action="replay", scope="filter", filter_qs="")
        bulk, _ = start_bulk_action(selection=selection, actor="bench", ip_address=None, rate_per_second=1_000_000,
                                    pause_threshold=1.0)
        runs = 0
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
        print(json.dumps({"seconds": seconds, "succeeded": BulkAction.objects.get(pk=bulk.pk).succeeded,
                          "runs": runs}))
    else:
        raise SystemExit(f"unknown step {step}")


if __name__ == "__main__":
    main()
