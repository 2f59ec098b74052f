"""The dashboard: what is dying, how fast, of which causes; DingTalk delivery; RQ queues and workers."""

from django.conf import settings
from django.core.cache import cache
from django.shortcuts import render
from django.utils import timezone

from console.access import VIEW_PERMISSION, console_view
from console.views.charts import chart_kind, dashboard_charts_context
from console.views.common import wants_partial
from deadletters.alerts.health import alert_health
from deadletters.models import AlertStatus
from deadletters.selectors import stats
from deadletters.services.retention import data_kept
from reports.metrics import infrastructure_waits
from reports.selectors import task_status_counts
from reports.services.pausing import paused_kinds
from transport.overview import queue_overview


def _chart(buckets, *, width: int = 720, height: int = 120, label_every: int = 6) -> dict:
    """Geometry for an inline SVG bar chart, computed on the server (no JS chart library)."""
    peak = max((b.count for b in buckets), default=0)
    n = len(buckets) or 1
    slot = width / n
    bar_width = max(slot * 0.8, 1)
    bars = []
    for i, bucket in enumerate(buckets):
        h = 0 if not peak else max(round(bucket.count / peak * height, 1), 1.5 if bucket.count else 0)
        local = timezone.localtime(bucket.start)
        bars.append(
            {
                "x": round(i * slot, 2),
                "y": round(height - h, 2),
                "width": round(bar_width, 2),
                "height": h,
                "count": bucket.count,
                "start": local,
                "tick": i % label_every == 0,
            }
        )
    return {
        # The template formats the ticks, in the page's language (the chart is cached across pages).
        "label_format": "H:i" if n <= 48 else "D H:i",
        "bars": bars,
        "peak": peak,
        "total": sum(b.count for b in buckets),
        "width": width,
        "height": height,
        "first": bars[0]["start"] if bars else None,
        "last": bars[-1]["start"] if bars else None,
    }


def _dashboard_aggregates() -> dict:
    return {
        "task_counts": task_status_counts(),
        "letter_counts": stats.dead_letter_status_counts(),
        "open_overview": stats.open_letters_overview(),
        "chart_24h": _chart(stats.deaths_per_hour(hours=24), label_every=3),
        "chart_7d": _chart(stats.deaths_per_hour(hours=24 * 7), label_every=24),
        "top_groups": stats.top_fingerprints(limit=8),
        "kept": data_kept(),
        "retention_days": settings.RETENTION_DAYS,
        "generated_at": timezone.now(),
    }


def _dashboard_context() -> dict:
    # The table-wide aggregates cost up to seconds at a million dead letters; every open
    # dashboard polls every few seconds, so they are shared for a short while. Alerts and
    # queues stay live.
    ttl = settings.CONSOLE_DASHBOARD_CACHE_SECONDS
    aggregates = (
        cache.get_or_set("console:dashboard", _dashboard_aggregates, ttl) if ttl else _dashboard_aggregates()
    )
    return {
        **aggregates,
        "aggregates_ttl": ttl,
        "live_at": timezone.now(),
        "alerts": _alert_health(),
        "rq": queue_overview(),
        "infra_waits": infrastructure_waits(),
        "paused_kinds": list(paused_kinds().values()),
        "paused_bulks": stats.paused_bulk_actions(),
    }


def _alert_health() -> dict:
    """The DingTalk outbox as the dashboard shows it (the selector copes with Redis being down)."""
    health = alert_health()
    return {
        "alerts": {s: health.alerts_by_status.get(s, 0) for s in AlertStatus.values},
        "messages": {s: health.messages_by_status.get(s, 0) for s in AlertStatus.values},
        "last_sent": {"sent_at": health.last_sent_at} if health.last_sent_at else None,
        "last_error": (
            {"last_error": health.last_error, "last_errcode": health.last_errcode, "at": health.last_error_at}
            if health.last_error
            else None
        ),
        "configured": health.configured,
        "config_error": health.config_error,
        "throttled_until": health.throttled_until,
        "sent_last_minute": health.sent_last_minute,
        "rate_per_minute": health.rate_per_minute,
        "oldest_pending_at": health.oldest_pending_at,
        "healthy": health.ok,
        "channels": health.channels,
        "failing": [c for c in health.channels if c.failing],
    }


@console_view(VIEW_PERMISSION)
def dashboard(request):
    context = _dashboard_context()
    if wants_partial(request):
        return render(request, "console/_dashboard_stats.html", context)
    return render(request, "console/dashboard.html",
                  {**context, **dashboard_charts_context(chart_kind(request))})
