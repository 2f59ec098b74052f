"""Bench 3: the console with 1,000,000 dead letters on PostgreSQL.

Median and p95 of the dead-letter list (first page, a filtered page, a deep page reached through
its keyset cursor), the detail page and the dashboard, through Django's test client (in process,
logged in as a superuser: template rendering included, no network). Rows are loaded with COPY.

    .venv/bin/python bench/console_scale.py [--n 1000000] [--repeat 30]
        [--postgres postgres://postgres@127.0.0.1:5432/postgres]
        (--postgres '' runs it on SQLite instead)
"""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _common  # noqa: E402

DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/postgres"


def main() -> None:
    p = _common.parser(__doc__.split("\n")[0])
    p.set_defaults(postgres=DEFAULT_PG)
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=30)
    args = p.parse_args()
    bench = _common.setup(postgres=args.postgres or None, extra_env={"ALLOWED_HOSTS": "testserver"})
    try:
        run(args)
    finally:
        bench.cleanup()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run(args) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from deadletters.models import DeadLetter, DeadLetterStatus
    from deadletters.selectors import Cursor

    print(f"bench 3 console at scale: {args.n} dead letters, database {connection.vendor}, "
          f"{args.repeat} requests per page (Django test client, superuser)")
    print(f"conditions: {_common.conditions()}")
    tasks = _common.make_dead_tasks(1000)
    seconds = _common.insert_dead_letters(args.n, task_ids=tasks, expired=False)
    print(f"(loaded {args.n} rows in {seconds:.1f}s, not counted)", flush=True)
    newest = DeadLetter.objects.filter(status=DeadLetterStatus.OPEN).order_by("-created_at", "-id")
    deep = newest.values("created_at", "id")[args.n // 2]
    deep_cursor = Cursor(created_at=deep["created_at"], id=deep["id"]).encode()
    detail_id = newest.values_list("id", flat=True)[args.n // 3]
    user = get_user_model().objects.create_superuser("bench", "bench@example.invalid", "bench-pass-1")
    client = Client()
    client.force_login(user)
    pages = [
        ("list, first page", "/console/dead-letters/"),
        ("list, filtered (kind + error type)",
         "/console/dead-letters/?kind=http_export&error_type=requests.exceptions.ConnectionError"),
        ("list, filtered (fingerprint)", f"/console/dead-letters/?fingerprint={1:040x}"),
        ("list, text search q=host-42", "/console/dead-letters/?q=host-42"),
        (f"list, deep page (row {args.n // 2})", f"/console/dead-letters/?cursor={deep_cursor}"),
        ("detail page", f"/console/dead-letters/{detail_id}/"),
        ("dashboard", "/console/"),
    ]
    for label, url in pages:
        response = client.get(url)  # warm-up, and a check that the page works
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}: {response.content[:300]!r}")
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            client.get(url)
            times.append((time.perf_counter() - start) * 1000)
        print(f"{label:42} median {statistics.median(times):8.1f} ms   p95 {percentile(times, 0.95):8.1f} ms",
              flush=True)


if __name__ == "__main__":
    main()
