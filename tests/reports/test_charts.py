"""The hourly chart figures equal what the attempt rows hold: tasks with known run times and
waits (explicit timestamps), counted and their p50/p95 computed independently here
(statistics.quantiles, method "inclusive", is percentile_cont's interpolation). The same tests run
on SQLite and on PostgreSQL (DATABASE_URL); a busy hour read from a sample on SQLite stays within
the documented rank margin of the exact figure, which PostgreSQL gives."""

import json
import statistics
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from reports import charts
from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus
from reports.percentiles import percentile_cont, sample_rank_margin

pytestmark = pytest.mark.django_db


def exact(values: list[float], fraction: float) -> float:
    if len(values) == 1:
        return values[0]
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {0.5: statistics.median(values), 0.95: cuts[94]}[fraction]


def add_task(*, kind: str, created, attempts: list[dict]) -> ReportTask:
    """A task submitted at `created` and its attempts: dicts of number, started, run (seconds, None
    while running) and outcome."""
    last = attempts[-1]
    task = ReportTask.objects.create(
        kind=kind,
        params={},
        max_attempts=5,
        timeout_seconds=300,
        status=TaskStatus.RUNNING if last["run"] is None else TaskStatus.DONE,
        attempt=last["number"],
    )
    ReportTask.objects.filter(pk=task.pk).update(created_at=created)  # auto_now_add ignores a given value
    for attempt in attempts:
        finished = None if attempt["run"] is None else attempt["started"] + timedelta(seconds=attempt["run"])
        TaskAttempt.objects.create(
            task=task,
            number=attempt["number"],
            started_at=attempt["started"],
            finished_at=finished,
            outcome=attempt.get("outcome", AttemptOutcome.SUCCEEDED if finished else AttemptOutcome.RUNNING),
            duration_seconds=attempt["run"],
        )
    return task


@pytest.fixture
def window():
    now = timezone.now()
    start, end = charts.hour_window(hours=24, now=now)
    return {
        "now": now,
        "start": start,
        "busy": start + timedelta(hours=20),
        "quiet": start + timedelta(hours=17),
    }


def test_finished_attempts_and_waits_per_hour_equal_the_rows(window):
    busy = window["busy"]
    runs = [0.25, 1.0, 1.5, 2.0, 3.5, 4.0, 8.0, 12.5, 30.0, 61.0]
    waits = [0.1, 0.4, 2.0, 3.0, 5.0, 7.5, 9.0, 20.0, 45.0, 300.0]
    for i, (run, wait) in enumerate(zip(runs, waits, strict=True)):
        started = busy + timedelta(minutes=i * 5)
        outcome = AttemptOutcome.FAILED if i % 4 == 3 else AttemptOutcome.SUCCEEDED
        add_task(
            kind="probe",
            created=started - timedelta(seconds=wait),
            attempts=[{"number": 1, "started": started, "run": run, "outcome": outcome}],
        )
    # A retry that finished in the busy hour: a run time, but no queue wait (its due time is on no row).
    add_task(
        kind="probe",
        created=busy - timedelta(hours=2),
        attempts=[
            {"number": 1, "started": busy - timedelta(hours=2), "run": 1.0, "outcome": AttemptOutcome.FAILED},
            {"number": 2, "started": busy + timedelta(minutes=1), "run": 5.0},
        ],
    )
    # Still running: it waited (counted in the hour it started), it has not finished.
    add_task(kind="probe", created=busy + timedelta(minutes=58), attempts=[
        {"number": 1, "started": busy + timedelta(minutes=59), "run": None}])  # fmt: skip
    # Another kind in the same hour, and attempts outside the window.
    add_task(
        kind="sales_summary",
        created=busy,
        attempts=[{"number": 1, "started": busy + timedelta(seconds=90), "run": 600.0}],
    )
    add_task(kind="probe", created=window["start"] - timedelta(hours=3), attempts=[
        {"number": 1, "started": window["start"] - timedelta(hours=2), "run": 7.0}])  # fmt: skip

    every_finished = charts.finished_attempts_by_hour(now=window["now"])
    every_waited = charts.queue_wait_by_hour(now=window["now"])
    finished, waited = every_finished["probe"], every_waited["probe"]

    assert len(finished) == len(waited) == 24
    assert [h.start for h in finished] == [window["start"] + timedelta(hours=i) for i in range(24)]
    hour = finished[20]
    probe_runs = [*runs, 5.0]
    assert hour.count == 11 and hour.measured == 11 and not hour.estimated
    assert hour.completions == 11 - 2  # two first attempts failed (i = 3, 7)
    assert hour.p50 == pytest.approx(exact(probe_runs, 0.5))
    assert hour.p95 == pytest.approx(exact(probe_runs, 0.95))
    probe_waits = [*waits, 60.0]
    wait = waited[20]
    assert wait.count == 11
    assert wait.p50 == pytest.approx(exact(probe_waits, 0.5), abs=1e-3)
    assert wait.p95 == pytest.approx(exact(probe_waits, 0.95), abs=1e-3)
    # The retry's first attempt ran two hours before the busy hour: counted there, with a wait of 0.
    assert finished[18].count == 1 and waited[18].count == 1 and waited[18].p50 == pytest.approx(0, abs=1e-3)
    assert sum(h.count for h in finished) == 12 and sum(h.count for h in waited) == 12

    every_kind = every_finished[charts.EVERY_KIND]
    assert every_kind[20].count == 12 and every_kind[20].completions == 10
    assert every_kind[20].p95 == pytest.approx(exact([*probe_runs, 600.0], 0.95))
    assert every_kind[18].count == 1 and sum(h.count for h in every_kind) == 13
    assert (every_finished["sales_summary"][20].p50 == 600.0
            and every_finished["sales_summary"][20].count == 1)
    assert every_waited[charts.EVERY_KIND][20].count == 12
    assert every_waited[charts.EVERY_KIND][20].p95 == pytest.approx(exact([*probe_waits, 90.0], 0.95),
                                                                    abs=1e-3)
    assert set(every_finished) == set(every_waited) == {None, "probe", "sales_summary"}


def test_empty_hours_have_no_percentiles(window):
    finished = charts.finished_attempts_by_hour(now=window["now"])
    assert list(finished) == [charts.EVERY_KIND]
    assert all(h.count == 0 and h.p50 is None and h.p95 is None for h in finished[None])
    assert all(h.count == 0 and h.p50 is None for h in charts.queue_wait_by_hour(now=window["now"])[None])


def test_a_negative_wait_counts_as_zero(window):
    started = window["quiet"] + timedelta(minutes=10)
    add_task(
        kind="probe",
        created=started + timedelta(seconds=2),
        attempts=[{"number": 1, "started": started, "run": 1.0}],
    )

    assert charts.queue_wait_by_hour(now=window["now"])["probe"][17].p95 == pytest.approx(0, abs=1e-3)


def test_a_busy_hour_read_from_a_sample_stays_within_the_documented_margin(window):
    """1,000 attempts in one hour, run times 1..1000 s in an order unrelated to their ids, read with
    a sample of 100: PostgreSQL is exact, SQLite within sample_rank_margin (of the values it read)
    of the exact ranks."""
    busy, n, sample = window["busy"], 1000, 100
    runs = [float((i * 337) % n + 1) for i in range(n)]  # a permutation of 1..1000
    ReportTask.objects.bulk_create(
        ReportTask(kind="probe", status=TaskStatus.DONE, attempt=1, max_attempts=3, timeout_seconds=60)
        for _ in range(n)
    )
    ids = list(ReportTask.objects.order_by("pk").values_list("pk", flat=True))
    ReportTask.objects.update(created_at=busy)
    TaskAttempt.objects.bulk_create(
        TaskAttempt(task_id=task_id, number=1, started_at=busy + timedelta(seconds=i % 3000),
                    finished_at=busy + timedelta(seconds=i % 3000 + 1), outcome=AttemptOutcome.SUCCEEDED,
                    duration_seconds=run)
        for i, (task_id, run) in enumerate(zip(ids, runs, strict=True))
    )  # fmt: skip

    by_kind = charts.finished_attempts_by_hour(now=window["now"], sample=sample)

    assert by_kind[None][20].count == by_kind["probe"][20].count == n
    hours = [(kind, by_kind[kind][20], fraction) for kind in (None, "probe") for fraction in (0.5, 0.95)]
    for kind, hour, fraction in hours:
        figure = hour.p50 if fraction == 0.5 else hour.p95
        assert hour.count == hour.completions == hour.measured == n, kind
        if connection.vendor == "postgresql":
            assert not hour.estimated
            assert figure == pytest.approx(exact(runs, fraction))
        else:
            assert hour.estimated and sample / 2 < hour.sampled < sample * 2
            margin = sample_rank_margin(fraction, hour.sampled)
            low = percentile_cont(runs, max(fraction - margin, 0.0))
            high = percentile_cont(runs, min(fraction + margin, 1.0))
            assert low <= figure <= high, (fraction, figure, low, high)


def test_percentile_cont_interpolates_between_ranks():
    assert percentile_cont([], 0.5) is None
    assert percentile_cont([7.0], 0.95) == 7.0
    assert percentile_cont([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile_cont([10.0, 0.0, 5.0], 0.95) == pytest.approx(9.5)
    assert sample_rank_margin(0.95, 2000) == pytest.approx(0.0146, abs=1e-4)


def explain(sql: str, params: list) -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
            return json.dumps(cursor.fetchone()[0])
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


@pytest.mark.parametrize(
    "statement", [charts.finished_attempts_statement, charts.queue_wait_statement], ids=["finished", "waits"]
)
def test_the_chart_statements_read_the_day_by_index_and_tasks_by_primary_key(statement):
    """10 days of tasks, 300 a day: the day's attempts are a range of an index on their time (the
    queue-wait one partial, of first attempts), their tasks lookups by primary key, never a scan of
    every task or of every task of a kind."""
    now = timezone.now()
    ReportTask.objects.bulk_create(
        ReportTask(kind=("probe", "sales_summary", "http_export")[i % 3], status=TaskStatus.DONE, attempt=1,
                   max_attempts=3, timeout_seconds=60)
        for i in range(3000)
    )  # fmt: skip
    TaskAttempt.objects.bulk_create(
        TaskAttempt(task_id=task_id, number=1, started_at=now - timedelta(minutes=i * 4.8),
                    finished_at=now - timedelta(minutes=i * 4.8) + timedelta(seconds=2),
                    outcome=AttemptOutcome.SUCCEEDED, duration_seconds=2.0)
        for i, task_id in enumerate(ReportTask.objects.order_by("pk").values_list("pk", flat=True))
    )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {ReportTask._meta.db_table}")
        cursor.execute(f"ANALYZE {TaskAttempt._meta.db_table}")
    start, end = charts.hour_window(hours=24, now=now)

    shown = explain(*statement(start=start, end=end, sample=charts.PERCENTILE_SAMPLE))

    index = ("attempt_finished_at" if statement is charts.finished_attempts_statement
             else "attempt_first_started")
    if connection.vendor == "postgresql":
        scans = [node for node in shown.split('"Node Type": ')[1:] if node.startswith('"Seq Scan"')]
        assert not [scan for scan in scans if '"Relation Name": "reports_reporttask"' in scan], shown
        assert f'"Index Name": "{index}"' in shown, shown
        assert '"Index Name": "task_kind_status"' not in shown, shown
    else:
        assert f"SEARCH a USING INDEX {index}" in shown, shown
        assert "reports_reporttask" not in shown.replace("SEARCH t USING INTEGER PRIMARY KEY", ""), shown
        assert "task_kind_status" not in shown and "SCAN t" not in shown, shown
