"""Bench: retention at scale, `manage.py prune_data` over N done tasks finished long ago.

Each task has one or two attempts and names a report file; 10,000 recent tasks are kept beside
them. Prints the time and the child's peak RSS against the target (<= 60 s at 1,000,000 on
PostgreSQL, flat memory).

    python bench/retention.py [--tasks 1000000] [--postgres postgres://postgres@127.0.0.1:5432/postgres]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402

TARGET_SECONDS = 60


def main() -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=1_000_000)
    _common.main(p, run, extra_env={"RETENTION_DAYS": "tasks=30,audit=0"})


def run(args) -> None:
    from django.db import connection

    from reports.models import ReportTask

    count, kept = args.tasks, 10_000
    seconds = _common.load_tasks(count + kept, 20)  # newest first: the first `kept` ids stay recent
    with connection.cursor() as cursor:  # the others finished 31-51 days ago
        postgres = connection.vendor == "postgresql"
        column = "finished_at - interval '31 days'" if postgres else "datetime(finished_at, '-31 days')"
        first = ReportTask.objects.order_by("id").values_list("id", flat=True).first()
        table = ReportTask._meta.db_table
        cursor.execute(f"UPDATE {table} SET finished_at = {column} WHERE id >= %s", [first + kept])
    print(f"  (loaded {count} old and {kept} recent done tasks in {seconds:.0f} s, not counted)", flush=True)
    connection.close()
    elapsed, rss, out = _common.manage("prune_data", "--verbosity", "0")
    left = ReportTask.objects.count()
    print(f"prune {count} done tasks (manage.py prune_data): {elapsed:.1f} s = "
          f"{count / elapsed:.0f} tasks/s, peak RSS {rss:.0f} MiB, {left} tasks left (expected {kept}); "
          f"it said: {' / '.join(out.split())}")
    verdict = "met" if elapsed <= TARGET_SECONDS and left == kept else "NOT met"
    print(f"  target <= {TARGET_SECONDS} s at 1,000,000 with flat memory: {verdict}")


if __name__ == "__main__":
    main()
