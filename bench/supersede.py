"""Bench: supersession at a million dead letters, and a bulk replay of a cause that skips them.

Seeds N dead tasks (each its own params) with one open letter each (50 causes, as the other bulk
benches), and for every 7th task a later done task of the same report (plus as many done tasks
of other params). Then times:

  supersede  the housekeeper's duty (letters_supersede) to completion: every 7th letter marked
  replay     a bulk replay of one cause with `status=all` (superseded letters left out by the
             selection, not by the filter): preview, then the run to its end, no throttle; then
             of another cause with include_superseded, the same path without the skip
  count      the console's "N superseded, not shown" (list and groups)

Row generation is not timed.

    python bench/supersede.py [--letters 1000000] [--postgres postgres://postgres@127.0.0.1:5432/postgres]
"""

import json
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402

SUPERSEDE_TARGET = 60.0  # s at 1,000,000: as the archiver's walk (docs/performance.md)
REPLAY_BUDGET = 10_000 / 5.0  # letters/s: "bulk replay of 10,000 dead letters <= 5 s"
EVERY = 7  # one letter in EVERY has a later done task of the same report (prime to the 50 causes)


def main() -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--letters", type=int, default=1_000_000)
    _common.main(p, run)


def seed_tasks(n: int) -> list[int]:
    """n dead tasks of params {"n": i}, then a later done one for every EVERY-th and as many done
    ones of other params; returns the dead tasks' ids."""
    from django.db import connection, transaction

    from reports.models import ReportTask
    from reports.services.submission import params_digest

    table, now = ReportTask._meta.db_table, datetime.now(UTC)
    columns = ("public_id, kind, params, params_digest, priority, status, attempt, max_attempts, "
               "attempts_before_run, timeout_seconds, submitted_by, last_error, output_file, created_at, "
               "updated_at, finished_at")

    def rows(numbers, status: str):
        for i in numbers:
            yield (str(uuid.uuid4()), "probe", json.dumps({"n": i}), params_digest("probe", {"n": i}, None),
                   "default", status, 3 if status == "dead" else 1, 3, 0, 300, "bench", "", "", now, now, now)

    later = range(0, n, EVERY)  # the same reports, and as many others
    for numbers, status in ((range(n), "dead"), (later, "done"), ((-1 - i for i in later), "done")):
        with transaction.atomic(), connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                    for row in rows(numbers, status):
                        copy.write_row(row)
            else:
                cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * 16)})",
                                   rows(numbers, status))
    return list(ReportTask.objects.filter(status="dead").order_by("id").values_list("id", flat=True))


def run(args) -> None:
    from django.conf import settings
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from deadletters.bulk.control import start_bulk_action
    from deadletters.bulk.runner import run_bulk_action
    from deadletters.bulk.selection import build_selection, preview_bulk_action
    from deadletters.filters import DeadLetterFilters
    from deadletters.models import DeadLetter, DeadLetterStatus
    from deadletters.selectors.letters import superseded_apart
    from deadletters.services.supersession import BATCH_SIZE, letters_supersede, supersede_statement
    from reports.models import ReportTask

    n = args.letters
    start = time.perf_counter()
    _common.insert_dead_letters(n, task_ids=seed_tasks(n), expired=False)
    with connection.cursor() as cursor:  # as autovacuum and the daily archive leave them
        for model in (DeadLetter, ReportTask):
            cursor.execute(f"ANALYZE {model._meta.db_table}")
    print(f"  (seeded {n} dead tasks with one open letter each, {2 * n // EVERY} done tasks, in "
          f"{time.perf_counter() - start:.0f} s, not counted)", flush=True)
    with transaction.atomic():  # PostgreSQL runs EXPLAIN ANALYZE's UPDATE: rolled back
        _common.print_plan("a batch's UPDATE", supersede_statement(), [n // 2, n // 2 + BATCH_SIZE])
        transaction.set_rollback(True)

    with CaptureQueriesContext(connection) as queries:
        start = time.perf_counter()
        marked = letters_supersede()
        seconds = time.perf_counter() - start
    print(f"supersede: {marked} of {n} open letters marked in {seconds:.2f} s ({n / seconds:.0f} letters "
          f"walked/s), {len(queries)} SQL statements for {-(-n // BATCH_SIZE)} batches; target <= "
          f"{SUPERSEDE_TARGET:.0f} s: {'MEETS' if seconds <= SUPERSEDE_TARGET else 'MISSES'}", flush=True)

    settings.BULK_ACTION_MAX_RATE = 1_000_000  # no throttle: the set-based path alone, as bulk_paths
    causes = DeadLetter.objects.order_by("id").values_list("fingerprint", flat=True)[:2]
    for cause, include in zip(causes, (False, True), strict=True):
        start = time.perf_counter()
        selection = build_selection(action="replay", scope="filter", include_superseded=include,
                                    filter_qs=f"status=all&fingerprint={cause}")
        preview = preview_bulk_action(selection=selection)
        previewed = time.perf_counter() - start
        bulk, _ = start_bulk_action(selection=selection, actor="bench", ip_address=None,
                                    rate_per_second=1_000_000, pause_threshold=1.0)
        while run_bulk_action(bulk.pk, slice_seconds=3600) in ("continued", "handed-over"):
            pass
        seconds = time.perf_counter() - start - previewed
        bulk.refresh_from_db()
        left = DeadLetter.objects.filter(fingerprint=cause, status=DeadLetterStatus.SUPERSEDED).count()
        rate = bulk.succeeded / seconds
        print(f"bulk replay of one cause (status=all{', include_superseded' if include else ''}): preview "
              f"{previewed:.2f} s ({preview.count} to replay, {preview.superseded} superseded left out), "
              f"run {seconds:.2f} s = {rate:.0f} letters/s, {bulk.status}: {bulk.succeeded} replayed, {left} "
              f"still superseded; budget {REPLAY_BUDGET:.0f} letters/s (10,000 in 5 s): "
              f"{'MEETS' if rate >= REPLAY_BUDGET else 'MISSES'}", flush=True)
    _common.timed("'N superseded, not shown' (list, groups)", lambda: superseded_apart(DeadLetterFilters()),
                  20)


if __name__ == "__main__":
    main()
