"""Bench: a bulk replay of N dead letters with a params patch, beside the plain bulk replay of the same N.

Seeds N dead sales_summary tasks with a letter each (1 % of them ask for 2026-10-31, which the patch
turns into a day that does not exist, so they are refused), then, in one process and alternating:
the plain bulk replay of the N, and the same N replayed with the patch
{"set": {"format": "xlsx"}, "replace": {"*": {"from": "2026-10", "to": "2026-11"}}}; between runs
the tasks and letters are put back as they were (not timed). Also times the patch's preview (the
console's "Check the patch", the API's dry run). Throttle out of the way; no worker runs the tasks.

    .venv/bin/python bench/bulk_patch.py [--n 10000] [--rounds 2]
        [--postgres postgres://postgres@127.0.0.1:5432/postgres]
"""

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402

PATCH = {"set": {"format": "xlsx"}, "replace": {"*": {"from": "2026-10", "to": "2026-11"}}}


def main() -> None:
    p = _common.parser(__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=2)
    _common.main(p, run)


def seed(n: int) -> list[int]:
    from django.utils import timezone

    from deadletters.models import DeadLetter
    from reports.models import ReportTask, TaskStatus

    now, task_ids = timezone.now(), []
    for first in range(0, n, 5000):
        rows = []
        for i in range(first, min(n, first + 5000)):
            day = 31 if i % 100 == 99 else 1 + i % 30
            params = {"format": "csv", "group_by": "region", "date_from": f"2026-10-{day:02d}",
                      "date_to": f"2026-10-{max(day, 30)}"}
            rows.append(ReportTask(kind="sales_summary", params=params, status=TaskStatus.DEAD, attempt=3,
                                   max_attempts=3, timeout_seconds=300, finished_at=now))
        tasks = ReportTask.objects.bulk_create(rows)
        DeadLetter.objects.bulk_create(
            DeadLetter(task_id=t.pk, kind=t.kind, params=t.params, error_type="requests.HTTPError",
                       error_message="404 for October", attempts=3, fingerprint="b" * 40)
            for t in tasks
        )
        task_ids += [t.pk for t in tasks]
    return task_ids


def reset(task_ids: list[int], params: dict[int, dict]) -> None:
    """Tasks dead again with their old params, their letters open: the next run finds what the first did."""
    from django.db import transaction

    from deadletters.models import DeadLetter, DeadLetterStatus
    from reports.models import ReportTask, TaskStatus
    from transport.connection import redis_connection

    with transaction.atomic():
        ReportTask.objects.filter(pk__in=task_ids).update(status=TaskStatus.DEAD)
        edited = ReportTask.objects.filter(pk__in=task_ids, params__format="xlsx")
        tasks = [ReportTask(pk=pk, params=params[pk]) for pk in edited.values_list("pk", flat=True)]
        ReportTask.objects.bulk_update(tasks, ["params"], batch_size=2000)
        DeadLetter.objects.filter(task_id__in=task_ids).update(
            status=DeadLetterStatus.OPEN, replayed_at=None, replayed_by="", replayed_in=None)
    redis_connection().flushdb()


def replay(patch: dict | None) -> tuple[float, object]:
    from deadletters.bulk.control import start_bulk_action
    from deadletters.bulk.runner import run_bulk_action
    from deadletters.bulk.selection import build_selection
    from deadletters.models import BulkAction, BulkActionStatus

    start = time.perf_counter()
    bulk, _ = start_bulk_action(selection=build_selection(action="replay", scope="filter", filter_qs=""),
                                actor="bench", ip_address=None, reason="bench", pause_threshold=1.0,
                                params_patch=patch)
    BulkAction.objects.filter(pk=bulk.pk).update(rate_per_second=1_000_000)  # the throttle out of the way
    for _ in range(100):
        run_bulk_action(bulk.pk, slice_seconds=3600)
        bulk.refresh_from_db()
        if bulk.status != BulkActionStatus.RUNNING and bulk.status != BulkActionStatus.PENDING:
            break
    seconds = time.perf_counter() - start
    if bulk.status != BulkActionStatus.COMPLETED:
        raise SystemExit(f"bulk ended {bulk.status}: {bulk.paused_reason or bulk.error}")
    return seconds, bulk


def run(args) -> None:
    from deadletters.bulk.patch import preview_params_patch
    from deadletters.bulk.selection import build_selection
    from reports.models import ReportTask

    started = time.perf_counter()
    task_ids = seed(args.n)
    params = dict(ReportTask.objects.filter(pk__in=task_ids).values_list("pk", "params"))
    print(f"  (seeded {args.n} dead tasks and letters in {time.perf_counter() - started:.1f}s, not counted)",
          flush=True)
    selection = build_selection(action="replay", scope="filter", filter_qs="")
    start = time.perf_counter()
    preview = preview_params_patch(selection, PATCH, can_see=True)
    print(f"preview of the patch over {preview.checked} letters: {time.perf_counter() - start:.2f}s "
          f"({preview.changed} changed, {preview.invalid} invalid)", flush=True)
    times: dict[str, list[float]] = {"plain": [], "patched": []}
    for round_ in range(1, args.rounds + 1):
        for label, patch in (("plain", None), ("patched", PATCH)):
            seconds, bulk = replay(patch)
            times[label].append(seconds)
            print(f"round {round_} {label:7}: {args.n} letters in {seconds:.2f}s = {args.n / seconds:.0f}/s "
                  f"({bulk.succeeded} replayed, {bulk.refused} refused)", flush=True)
            reset(task_ids, params)
    plain, patched = statistics.median(times["plain"]), statistics.median(times["patched"])
    print(f"median: plain {plain:.2f}s, with the patch {patched:.2f}s ({patched / plain:.2f} x the plain "
          f"replay); load average now {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
          flush=True)


if __name__ == "__main__":
    main()
