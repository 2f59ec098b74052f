"""The last hours of report work, hour by hour, for the console's charts, overall or for one kind:
the attempts that finished (how many, how many succeeded, the p50 and p95 of their run time) and
the queue wait of first attempts (p50 and p95).

One statement per family, grouped by hour in the database, never one per hour.

Percentiles: PostgreSQL computes them exactly (percentile_cont). SQLite has no such aggregate: its
statement returns each hour's exact counts and at most `sample` of the hour's values, chosen by a
fixed hash of the attempt id (a pseudo-random sample that is the same on every refresh), and Python
interpolates between ranks as percentile_cont does. An hour of at most `sample` values is exact on
both; above it, the figure is the value at a rank within reports.percentiles.sample_rank_margin of
the exact one (1.5 points for p95, 3.4 for p50, with 2,000 values).

Queue wait: an attempt row holds when it started, not when it was enqueued. A first attempt (number
1) became due when its task was submitted, so its wait is its start minus the task's created_at.
Later attempts are left out: a retry's due time (a backoff with random jitter) and a replay's time
are on no attempt row; /metrics' queue-wait histogram follows the same rule.

Every attempt of the window reads its task (kind, created_at) by primary key: the cost follows the
window, never the history of tasks."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from reports.models import AttemptOutcome, ReportTask, TaskAttempt
from reports.percentiles import percentile_cont

# Values per hour the SQLite path reads to estimate a percentile (see the module's docstring).
PERCENTILE_SAMPLE = 2000
# A fixed pseudo-random order of attempt ids (Knuth's multiplicative hash), for the sample.
_HASH = "((a.id * 2654435761) %% 4294967296)"


@dataclass(frozen=True)
class HourFigures:
    start: datetime  # the hour's first instant, UTC
    count: int  # attempts that finished in it (or first attempts that started in it)
    p50: float | None  # seconds
    p95: float | None
    measured: int  # of those, how many have a value (a run time; every first attempt has a wait)
    sampled: int  # how many values the percentiles were computed from: `measured`, or a sample of it
    completions: int = 0  # of the finished attempts, those that succeeded

    @property
    def estimated(self) -> bool:
        return self.sampled < self.measured


def hour_window(*, hours: int, now: datetime | None = None) -> tuple[datetime, datetime]:
    """The last `hours` whole hours up to the end of the current one, in UTC."""
    now = (now or timezone.now()).astimezone(UTC)
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return end - timedelta(hours=hours), end


def _tables() -> tuple[str, str]:
    qn = connection.ops.quote_name
    return qn(TaskAttempt._meta.db_table), qn(ReportTask._meta.db_table)


def _task_lookup(columns: str, tasks: str) -> str:
    # OFFSET 0 keeps PostgreSQL from turning the per-attempt lookup into a join that may scan every task.
    fence = " OFFSET 0" if connection.vendor == "postgresql" else ""
    return f"CROSS JOIN LATERAL (SELECT {columns} FROM {tasks} WHERE id = a.task_id{fence}) t"


def finished_attempts_statement(*, start, end, sample: int) -> tuple[str, list]:
    """Attempts that finished per hour, for every kind together and for each kind. PostgreSQL:
    (kind or None, hour, count, succeeded, measured, [p50, p95]) per group; elsewhere (kind, hour,
    count, succeeded, measured, picked for every kind, picked for its kind, one duration) per sampled row."""
    attempts, tasks = _tables()
    if connection.vendor == "postgresql":
        sql = f"""SELECT CASE WHEN GROUPING(t.kind) = 0 THEN t.kind END,
            date_trunc('hour', a.finished_at AT TIME ZONE 'UTC') AS hour, count(*),
            count(*) FILTER (WHERE a.outcome = %s), count(a.duration_seconds),
            percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY a.duration_seconds)
            FROM {attempts} a {_task_lookup("kind", tasks)}
            WHERE a.finished_at >= %s AND a.finished_at < %s
            GROUP BY GROUPING SETS ((hour), (t.kind, hour))"""
        return sql, [AttemptOutcome.SUCCEEDED, start, end]
    hour = "strftime('%%Y-%%m-%%d %%H:00:00', a.finished_at)"
    order = f"ORDER BY a.duration_seconds IS NULL, {_HASH}"
    sql = f"""SELECT kind, hour, n, succeeded, measured, pick_all <= %s, pick_kind <= %s, value FROM (
        SELECT t.kind AS kind, {hour} AS hour, a.duration_seconds AS value,
            count(*) OVER per_kind AS n,
            sum(a.outcome = %s) OVER per_kind AS succeeded,
            count(a.duration_seconds) OVER per_kind AS measured,
            row_number() OVER (PARTITION BY {hour} {order}) AS pick_all,
            row_number() OVER (PARTITION BY t.kind, {hour} {order}) AS pick_kind
        FROM {attempts} a JOIN {tasks} t ON t.id = a.task_id
        WHERE a.finished_at >= %s AND a.finished_at < %s
        WINDOW per_kind AS (PARTITION BY t.kind, {hour})
    ) WHERE pick_all <= %s OR pick_kind <= %s"""
    return sql, [sample, sample, AttemptOutcome.SUCCEEDED, _db_time(start), _db_time(end), sample, sample]


def queue_wait_statement(*, start, end, sample: int) -> tuple[str, list]:
    """First attempts that started per hour and their wait, for every kind together and for each
    kind. PostgreSQL: (kind or None, hour, count, [p50, p95]) per group; elsewhere (kind, hour,
    count, picked for every kind, picked for its kind, one wait) per sampled row. A wait below 0
    (the clocks of two hosts) counts as 0."""
    attempts, tasks = _tables()
    if connection.vendor == "postgresql":
        sql = f"""SELECT CASE WHEN GROUPING(t.kind) = 0 THEN t.kind END,
            date_trunc('hour', a.started_at AT TIME ZONE 'UTC') AS hour, count(*),
            percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (
                ORDER BY greatest(EXTRACT(EPOCH FROM a.started_at - t.created_at)::float8, 0))
            FROM {attempts} a {_task_lookup("kind, created_at", tasks)}
            WHERE a.number = 1 AND a.started_at >= %s AND a.started_at < %s
            GROUP BY GROUPING SETS ((hour), (t.kind, hour))"""
        return sql, [start, end]
    hour = "strftime('%%Y-%%m-%%d %%H:00:00', a.started_at)"
    sql = f"""SELECT kind, hour, n, pick_all <= %s, pick_kind <= %s, value FROM (
        SELECT t.kind AS kind, {hour} AS hour,
            max({_sqlite_seconds_between("t.created_at", "a.started_at")}, 0) AS value,
            count(*) OVER (PARTITION BY t.kind, {hour}) AS n,
            row_number() OVER (PARTITION BY {hour} ORDER BY {_HASH}) AS pick_all,
            row_number() OVER (PARTITION BY t.kind, {hour} ORDER BY {_HASH}) AS pick_kind
        FROM {attempts} a JOIN {tasks} t ON t.id = a.task_id
        WHERE a.number = 1 AND a.started_at >= %s AND a.started_at < %s
    ) WHERE pick_all <= %s OR pick_kind <= %s"""
    return sql, [sample, sample, _db_time(start), _db_time(end), sample, sample]


def _sqlite_seconds_between(earlier: str, later: str) -> str:
    """Seconds from one stored time to another, to the microsecond: whole days by julianday() of the
    dates, the rest from the time of day as text ("YYYY-MM-DD HH:MM:SS[.ffffff]", UTC, as Django
    stores it). julianday() of the full times would be off by up to ~0.1 ms."""

    def time_of_day(column: str) -> str:
        return f"(substr({column}, 12, 2) * 3600 + substr({column}, 15, 2) * 60 + substr({column}, 18))"

    days = f"(julianday(substr({later}, 1, 10)) - julianday(substr({earlier}, 1, 10)))"
    return f"({days} * 86400.0 + {time_of_day(later)} - {time_of_day(earlier)})"


EVERY_KIND = None  # the key of the figures of every kind together

ByKind = dict[str | None, list[HourFigures]]


def finished_attempts_by_hour(*, hours: int = 24, now: datetime | None = None, sample: int = PERCENTILE_SAMPLE) -> ByKind:
    """{None: every kind together, kind: that kind}, each every hour of the window oldest first
    (empty hours with count 0 and no percentiles); a kind without attempts in the window is absent."""
    start, end = hour_window(hours=hours, now=now)
    rows = _fetch(*finished_attempts_statement(start=start, end=end, sample=sample))
    found: dict[str | None, dict[datetime, HourFigures]] = {EVERY_KIND: {}}
    if connection.vendor == "postgresql":
        for kind, hour, n, succeeded, measured, quantiles in rows:
            found.setdefault(kind, {})[_utc_hour(hour)] = HourFigures(
                start=_utc_hour(hour),
                count=n,
                completions=succeeded,
                measured=measured,
                sampled=measured,
                p50=quantiles[0] if quantiles else None,
                p95=quantiles[1] if quantiles else None,
            )
    else:
        found = _from_samples(rows, counts=lambda row: {"count": row[2], "completions": row[3], "measured": row[4]})
    return {kind: _every_hour(figures, start, hours) for kind, figures in found.items()}


def queue_wait_by_hour(*, hours: int = 24, now: datetime | None = None, sample: int = PERCENTILE_SAMPLE) -> ByKind:
    """As finished_attempts_by_hour, of the first attempts that started in each hour and their wait."""
    start, end = hour_window(hours=hours, now=now)
    rows = _fetch(*queue_wait_statement(start=start, end=end, sample=sample))
    found: dict[str | None, dict[datetime, HourFigures]] = {EVERY_KIND: {}}
    if connection.vendor == "postgresql":
        for kind, hour, n, quantiles in rows:
            found.setdefault(kind, {})[_utc_hour(hour)] = HourFigures(
                start=_utc_hour(hour), count=n, measured=n, sampled=n, p50=quantiles[0], p95=quantiles[1]
            )
    else:
        found = _from_samples(rows, counts=lambda row: {"count": row[2], "measured": row[2]})
    return {kind: _every_hour(figures, start, hours) for kind, figures in found.items()}


def _from_samples(rows, *, counts) -> dict[str | None, dict[datetime, HourFigures]]:
    """The SQLite statement's rows (one per sampled value, each carrying its kind's counts and
    whether it is in the sample of every kind and of its kind) grouped into figures: counts per
    kind, summed for every kind; percentiles of each sample."""
    per_kind: dict[tuple, tuple[dict, list[float]]] = {}
    every: dict[datetime, list[float]] = {}
    for row in rows:
        kind, hour, value = row[0], _utc_hour(row[1]), row[-1]
        in_every, in_kind = row[-3], row[-2]
        fields, values = per_kind.setdefault((kind, hour), (counts(row), []))
        if value is not None and in_kind:
            values.append(float(value))
        if value is not None and in_every:
            every.setdefault(hour, []).append(float(value))
    found: dict[str | None, dict[datetime, HourFigures]] = {EVERY_KIND: {}}
    totals: dict[datetime, dict] = {}
    for (kind, hour), (fields, values) in per_kind.items():
        found.setdefault(kind, {})[hour] = _figures(hour, fields, values)
        summed = totals.setdefault(hour, dict.fromkeys(fields, 0))
        for name, value in fields.items():
            summed[name] += value
    for hour, fields in totals.items():
        found[EVERY_KIND][hour] = _figures(hour, fields, every.get(hour, []))
    return found


def _figures(hour: datetime, fields: dict, values: list[float]) -> HourFigures:
    return HourFigures(
        start=hour, sampled=len(values), p50=percentile_cont(values, 0.5), p95=percentile_cont(values, 0.95), **fields
    )


def _every_hour(found: dict[datetime, HourFigures], start: datetime, hours: int) -> list[HourFigures]:
    moments = [start + timedelta(hours=i) for i in range(hours)]
    empty = {"count": 0, "measured": 0, "sampled": 0, "p50": None, "p95": None}
    return [found.get(m) or HourFigures(start=m, **empty) for m in moments]


def _utc_hour(value) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _db_time(value: datetime):
    return connection.ops.adapt_datetimefield_value(value)


# PostgreSQL, for these statements only: JIT compilation costs more (~0.5 s) than a day of attempts
# takes to read; parallel workers only fight the web process for a core; a day's values sort in memory.
_PG_SETTINGS = ("SET LOCAL jit = off", "SET LOCAL max_parallel_workers_per_gather = 0", "SET LOCAL work_mem = '32MB'")


def _fetch(sql: str, params: list) -> list[tuple]:
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            for setting in _PG_SETTINGS:
                cursor.execute(setting)
        cursor.execute(sql, params)
        return cursor.fetchall()
