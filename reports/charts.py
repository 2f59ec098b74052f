"""The last hours of report work, hour by hour, for the console's charts, for every kind together
and for each kind: the attempts that finished (how many, how many succeeded, the p50 and p95 of
their run time) and the queue wait of first attempts (p50 and p95).

One statement per family for every kind and every hour at once, never one per hour or per kind.

Percentiles: PostgreSQL computes them exactly in the database (percentile_cont, grouped by
GROUPING SETS). SQLite has no such aggregate: its statement returns each (kind, hour)'s exact counts
(a GROUP BY) and the values themselves, and Python interpolates between ranks as percentile_cont
does (reports/percentiles.py), so both databases agree exactly. The values read are bounded: when
the window holds more than `sample` values, a pseudo-random sample of about `sample` of them is
read instead (those whose id falls under a threshold of a fixed multiplicative hash: the same
sample on every refresh), and an hour's figure is then within sample_rank_margin of its sampled
count of the exact rank (HourFigures.estimated; the page says so).

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

# At most about this many values per family the SQLite path reads (see the module's docstring).
PERCENTILE_SAMPLE = 200_000
# A fixed pseudo-random number in [0, 2^32) per attempt id (Knuth's multiplicative hash), for the sample.
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
    (kind or None, hour, count, succeeded, measured, [p50, p95]) per group; SQLite: see
    _sqlite_statement."""
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
    window = "a.finished_at >= %s AND a.finished_at < %s"
    return _sqlite_statement(
        counts="count(*), sum(a.outcome = %s), count(a.duration_seconds)",
        count_params=[AttemptOutcome.SUCCEEDED],
        value="a.duration_seconds",
        hour="a.finished_at",
        where=window,
        where_params=[_db_time(start), _db_time(end)],
        sample=sample,
    )


def queue_wait_statement(*, start, end, sample: int) -> tuple[str, list]:
    """First attempts that started per hour and their wait, for every kind together and for each
    kind. PostgreSQL: (kind or None, hour, count, [p50, p95]) per group; SQLite: see
    _sqlite_statement. A wait below 0 (the clocks of two hosts) counts as 0."""
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
    return _sqlite_statement(
        counts="count(*), 0, count(*)",
        count_params=[],
        value=f"max({_sqlite_seconds_between('t.created_at', 'a.started_at')}, 0)",
        hour="a.started_at",
        where="a.number = 1 AND a.started_at >= %s AND a.started_at < %s",
        where_params=[_db_time(start), _db_time(end)],
        sample=sample,
    )


def _sqlite_statement(*, counts, count_params, value, hour, where, where_params, sample) -> tuple[str, list]:
    """Rows (kind, hour, count, succeeded, measured, None) of exact counts per (kind, hour), then
    rows (kind, hour, None, None, None, value) of the values, all of them or the hash sample when the
    window holds more than `sample`. The hour is the stored time's first 13 characters
    ("YYYY-MM-DD HH", UTC, as Django stores it): no date function per row."""
    attempts, tasks = _tables()
    source = f"FROM {attempts} a JOIN {tasks} t ON t.id = a.task_id WHERE {where}"
    rate = f"%s * 1.0 / max(%s, (SELECT count(*) FROM {attempts} a WHERE {where}))"
    sql = f"""SELECT t.kind, substr({hour}, 1, 13), {counts}, NULL {source} GROUP BY 1, 2
        UNION ALL
        SELECT t.kind, substr({hour}, 1, 13), NULL, NULL, NULL, {value} {source}
            AND {value} IS NOT NULL AND {_HASH} < 4294967296 * ({rate})"""
    params = [*count_params, *where_params, *where_params, sample, sample, *where_params]
    return sql, params


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


def finished_attempts_by_hour(*, hours: int = 24, now: datetime | None = None,
                              sample: int = PERCENTILE_SAMPLE) -> ByKind:
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
        found = _from_sqlite_rows(rows, fields=("count", "completions", "measured"))
    return {kind: _every_hour(figures, start, hours) for kind, figures in found.items()}


def queue_wait_by_hour(*, hours: int = 24, now: datetime | None = None,
                       sample: int = PERCENTILE_SAMPLE) -> ByKind:
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
        found = _from_sqlite_rows(rows, fields=("count", "completions", "measured"))
    return {kind: _every_hour(figures, start, hours) for kind, figures in found.items()}


def _from_sqlite_rows(rows, *, fields) -> dict[str | None, dict[datetime, HourFigures]]:
    """The SQLite statement's rows into figures: counts per (kind, hour), summed for every kind; the
    percentiles of each group's values, and of every kind's values of the hour."""
    counts: dict[tuple, dict] = {}
    values: dict[tuple, list[float]] = {}
    hours: dict[str, datetime] = {}
    for kind, hour_text, n, succeeded, measured, value in rows:
        hour = hours.get(hour_text) or hours.setdefault(hour_text, _utc_hour(f"{hour_text}:00:00"))
        if n is not None:
            totals = dict(zip(fields, (n, succeeded, measured), strict=True))
            for key in ((kind, hour), (EVERY_KIND, hour)):
                known = counts.setdefault(key, dict.fromkeys(fields, 0))
                for name, number in totals.items():
                    known[name] += number
        else:
            values.setdefault((kind, hour), []).append(value)
    for (_kind, hour), sample in list(values.items()):
        values.setdefault((EVERY_KIND, hour), []).extend(sample)
    found: dict[str | None, dict[datetime, HourFigures]] = {EVERY_KIND: {}}
    for (kind, hour), known in counts.items():
        sample = values.get((kind, hour), [])
        found.setdefault(kind, {})[hour] = HourFigures(
            start=hour,
            sampled=len(sample),
            p50=percentile_cont(sample, 0.5),
            p95=percentile_cont(sample, 0.95),
            **known,
        )
    return found


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
_PG_SETTINGS = ("SET LOCAL jit = off", "SET LOCAL max_parallel_workers_per_gather = 0",
                "SET LOCAL work_mem = '32MB'")


def _fetch(sql: str, params: list) -> list[tuple]:
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            for setting in _PG_SETTINGS:
                cursor.execute(setting)
        cursor.execute(sql, params)
        return cursor.fetchall()
