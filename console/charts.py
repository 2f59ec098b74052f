"""The last 24 hours of one report kind (or all of them) as the console draws it: completions and
deaths per hour as bars, the p50 and p95 of attempt run time and of queue wait as step lines.
The geometry is computed here and drawn as inline SVG by the templates (no JS chart library);
every figure is also in the page as text (aria labels, a table)."""

from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from deadletters.selectors import stats
from reports import charts as report_charts

HOURS = 24
# The SVG's own coordinates: 10 units per hour; the page stretches it to its width.
SLOT = 10
WIDTH = HOURS * SLOT
HEIGHT = 100
TICK_EVERY = 6


def kind_charts(kind: str | None) -> dict:
    """The charts of `kind` (None: every kind). The figures of every scope come from one pass over
    the day (reports/charts.py) and are shared between pages, kinds and polls for
    CONSOLE_DASHBOARD_CACHE_SECONDS, as the dashboard's counts are."""
    ttl = settings.CONSOLE_DASHBOARD_CACHE_SECONDS
    day = cache.get_or_set("console:charts", day_figures, ttl) if ttl else day_figures()
    return charts_of(day, kind)


def day_figures(*, now: datetime | None = None) -> dict:
    """Every kind's and all kinds' figures of the last HOURS hours: three statements in all."""
    now = now or timezone.now()
    start, _ = report_charts.hour_window(hours=HOURS, now=now)
    return {
        "generated_at": now,
        "starts": [start + timedelta(hours=i) for i in range(HOURS)],
        "finished": report_charts.finished_attempts_by_hour(hours=HOURS, now=now),
        "waits": report_charts.queue_wait_by_hour(hours=HOURS, now=now),
        "deaths": stats.deaths_per_hour_by_kind(hours=HOURS, now=now),
    }


def charts_of(day: dict, kind: str | None) -> dict:
    """One scope's charts (geometry, summaries, the hour-by-hour rows) from the day's figures."""
    starts = [timezone.localtime(start) for start in day["starts"]]
    empty = [report_charts.HourFigures(start=s, count=0, measured=0, sampled=0, p50=None, p95=None)
             for s in day["starts"]]
    finished = day["finished"].get(kind) or empty
    waits = day["waits"].get(kind) or empty
    deaths = day["deaths"].get(kind) or [0] * HOURS
    return {
        "kind": kind,
        "generated_at": day["generated_at"],
        "ticks": [start for i, start in enumerate(starts) if i % TICK_EVERY == 0],
        "completions": bar_chart(starts, [hour.completions for hour in finished]),
        "deaths": bar_chart(starts, deaths),
        "durations": line_chart(starts, finished),
        "waits": line_chart(starts, waits),
        "rows": [
            {
                "start": start,
                "completions": run.completions,
                "finished": run.count,
                "deaths": died,
                "duration_p50": run.p50,
                "duration_p95": run.p95,
                "waits": wait.count,
                "wait_p50": wait.p50,
                "wait_p95": wait.p95,
            }
            for start, run, died, wait in zip(starts, finished, deaths, waits, strict=True)
        ],
        # SQLite reads a sample of a busy hour (reports/charts.py): the page says so.
        "estimated": any(hour.estimated for hour in [*finished, *waits]),
        "sample": report_charts.PERCENTILE_SAMPLE,
        "width": WIDTH,
        "height": HEIGHT,
    }


def bar_chart(starts: list[datetime], counts: list[int]) -> dict:
    peak = max(counts, default=0)
    bars = []
    for i, (start, count) in enumerate(zip(starts, counts, strict=True)):
        height = round(count / peak * HEIGHT, 2) if peak else 0
        if count:
            height = max(height, 1.5)  # a single event stays visible next to a peak of thousands
        bars.append(
            {"x": i * SLOT + 1, "y": round(HEIGHT - height, 2), "width": SLOT - 2, "height": height,
             "count": count, "start": start}
        )  # fmt: skip
    peak_at = starts[counts.index(peak)] if peak else None
    return {"bars": bars, "total": sum(counts), "peak": peak, "peak_at": peak_at}


def line_chart(starts: list[datetime], hours: list) -> dict:
    """p50 and p95 per hour as step lines on one scale (0 to the highest p95); an hour without
    values leaves a gap."""
    top = max((hour.p95 for hour in hours if hour.p95 is not None), default=0.0)
    p95_peak = next((h for h in hours if h.p95 is not None and h.p95 == top), None)
    p50_values = [hour.p50 for hour in hours if hour.p50 is not None]
    return {
        "p50_path": _step_path([hour.p50 for hour in hours], top),
        "p95_path": _step_path([hour.p95 for hour in hours], top),
        "hours": [
            {"x": i * SLOT, "start": start, "count": hour.count, "p50": hour.p50, "p95": hour.p95}
            for i, (start, hour) in enumerate(zip(starts, hours, strict=True))
        ],
        "count": sum(hour.count for hour in hours),
        "top": top,
        "top_at": timezone.localtime(p95_peak.start) if p95_peak else None,
        "p50_low": min(p50_values, default=None),
        "p50_high": max(p50_values, default=None),
    }


def _step_path(values: list[float | None], top: float) -> str:
    """SVG path data: each hour a horizontal segment at its value, joined to the next hour's when
    both have one."""
    parts = []
    previous = None
    for i, value in enumerate(values):
        if value is None:
            previous = None
            continue
        y = round(HEIGHT - (value / top * HEIGHT if top else 0), 2)
        parts.append(f"V{y}" if previous is not None else f"M{i * SLOT} {y}")
        parts.append(f"H{(i + 1) * SLOT}")
        previous = y
    return " ".join(parts)
