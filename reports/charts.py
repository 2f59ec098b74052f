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

from django.db import connection
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


def finished_attempts_statement(*, start, end, kind: str | None, sample: int) -> tuple[str, list]:
    """Attempts that finished per hour: (hour, count, succeeded, measured, p50, p95) on PostgreSQL;
    (hour, count, succeeded, measured, one sampled duration) rows elsewhere."""
    attempts, tasks = _tables()
    kind_sql, kind_params = (" AND t.kind = %s", [kind]) if kind else ("", [])
    if connection.vendor == "postgresql":
        sql = f"""SELECT date_trunc('hour', a.finished_at AT TIME ZONE 'UTC') AS hour, count(*),
            count(*) FILTER (WHERE a.outcome = %s), count(a.duration_seconds),
            percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY a.duration_seconds)
            FROM {attempts} a {_task_lookup("kind", tasks) if kind else ""}
            WHERE a.finished_at >= %s AND a.finished_at < %s{kind_sql} GROUP BY 1"""
        return sql, [AttemptOutcome.SUCCEEDED, start, end, *kind_params]
    hour = "strftime('%%Y-%%m-%%d %%H:00:00', a.finished_at)"
    sql = f"""SELECT hour, n, succeeded, measured, value FROM (
        SELECT {hour} AS hour, a.duration_seconds AS value,
            count(*) OVER per_hour AS n,
            sum(a.outcome = %s) OVER per_hour AS succeeded,
            count(a.duration_seconds) OVER per_hour AS measured,
            row_number() OVER (PARTITION BY {hour} ORDER BY a.duration_seconds IS NULL, {_HASH}) AS pick
        FROM {attempts} a {"JOIN " + tasks + " t ON t.id = a.task_id" if kind else ""}
        WHERE a.finished_at >= %s AND a.finished_at < %s{kind_sql}
        WINDOW per_hour AS (PARTITION BY {hour})
    ) WHERE pick <= %s"""
    return sql, [AttemptOutcome.SUCCEEDED, _db_time(start), _db_time(end), *kind_params, sample]


def queue_wait_statement(*, start, end, kind: str | None, sample: int) -> tuple[str, list]:
    """First attempts that started per hour and their wait: (hour, count, p50, p95) on PostgreSQL;
    (hour, count, one sampled wait) rows elsewhere. A wait below 0 (clocks of two hosts) counts as 0."""
    attempts, tasks = _tables()
    kind_sql, kind_params = (" AND t.kind = %s", [kind]) if kind else ("", [])
    if connection.vendor == "postgresql":
        sql = f"""SELECT date_trunc('hour', a.started_at AT TIME ZONE 'UTC') AS hour, count(*),
            percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (
                ORDER BY greatest(EXTRACT(EPOCH FROM a.started_at - t.created_at)::float8, 0))
            FROM {attempts} a {_task_lookup("kind, created_at", tasks)}
            WHERE a.number = 1 AND a.started_at >= %s AND a.started_at < %s{kind_sql} GROUP BY 1"""
        return sql, [start, end, *kind_params]
    hour = "strftime('%%Y-%%m-%%d %%H:00:00', a.started_at)"
    sql = f"""SELECT hour, n, value FROM (
        SELECT {hour} AS hour,
            max({_sqlite_seconds_between("t.created_at", "a.started_at")}, 0) AS value,
            count(*) OVER (PARTITION BY {hour}) AS n,
            row_number() OVER (PARTITION BY {hour} ORDER BY {_HASH}) AS pick
        FROM {attempts} a JOIN {tasks} t ON t.id = a.task_id
        WHERE a.number = 1 AND a.started_at >= %s AND a.started_at < %s{kind_sql}
    ) WHERE pick <= %s"""
    return sql, [_db_time(start), _db_time(end), *kind_params, sample]


def _sqlite_seconds_between(earlier: str, later: str) -> str:
    """Seconds from one stored time to another, to the microsecond: whole days by julianday() of the
    dates, the rest from the time of day as text ("YYYY-MM-DD HH:MM:SS[.ffffff]", UTC, as Django
    stores it). julianday() of the full times would be off by up to ~0.1 ms."""

    def time_of_day(column: str) -> str:
        return f"(substr({column}, 12, 2) * 3600 + substr({column}, 15, 2) * 60 + substr({column}, 18))"

    days = f"(julianday(substr({later}, 1, 10)) - julianday(substr({earlier}, 1, 10)))"
    return f"({days} * 86400.0 + {time_of_day(later)} - {time_of_day(earlier)})"


def finished_attempts_by_hour(
    *, hours: int = 24, kind: str | None = None, now: datetime | None = None, sample: int = PERCENTILE_SAMPLE
) -> list[HourFigures]:
    """Every hour of the window, oldest first (empty hours with count 0 and no percentiles)."""
    start, end = hour_window(hours=hours, now=now)
    rows = _fetch(*finished_attempts_statement(start=start, end=end, kind=kind, sample=sample))
    if connection.vendor == "postgresql":
        found = {
            _utc_hour(hour): HourFigures(
                start=_utc_hour(hour),
                count=n,
                completions=succeeded,
                measured=measured,
                sampled=measured,
                p50=quantiles[0] if quantiles else None,
                p95=quantiles[1] if quantiles else None,
            )
            for hour, n, succeeded, measured, quantiles in rows
        }
    else:
        found = _from_samples(rows, lambda row: {"count": row[1], "completions": row[2], "measured": row[3]})
    return _every_hour(found, start, hours)


def queue_wait_by_hour(
    *, hours: int = 24, kind: str | None = None, now: datetime | None = None, sample: int = PERCENTILE_SAMPLE
) -> list[HourFigures]:
    """Every hour of the window, oldest first: the first attempts that started in it and their wait."""
    start, end = hour_window(hours=hours, now=now)
    rows = _fetch(*queue_wait_statement(start=start, end=end, kind=kind, sample=sample))
    if connection.vendor == "postgresql":
        found = {
            _utc_hour(hour): HourFigures(
                start=_utc_hour(hour), count=n, measured=n, sampled=n, p50=quantiles[0], p95=quantiles[1]
            )
            for hour, n, quantiles in rows
        }
    else:
        found = _from_samples(rows, lambda row: {"count": row[1], "measured": row[1]})
    return _every_hour(found, start, hours)


def _from_samples(rows, counts) -> dict[datetime, HourFigures]:
    """Group the SQLite statement's sampled rows by hour: counts from any row, percentiles of the values."""
    by_hour: dict[datetime, tuple[dict, list[float]]] = {}
    for row in rows:
        hour = _utc_hour(row[0])
        _, values = by_hour.setdefault(hour, (counts(row), []))
        if row[-1] is not None:
            values.append(float(row[-1]))
    return {
        hour: HourFigures(
            start=hour,
            sampled=len(values),
            p50=percentile_cont(values, 0.5),
            p95=percentile_cont(values, 0.95),
            **fields,
        )
        for hour, (fields, values) in by_hour.items()
    }


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


def _fetch(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()
