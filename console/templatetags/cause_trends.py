"""The groups page's sparkline of a cause: its deaths per hour over 24 hours as a small inline SVG
(no script, no inline style: the Content-Security-Policy allows neither), with the numbers in
words for screen readers and as a tooltip, and the trend word beside it."""

from django import template
from django.utils.translation import gettext, ngettext, pgettext

register = template.Library()

WIDTH, HEIGHT = 72, 20  # px: 3 per hour, small enough for a phone card
BAR_WIDTH = 2
TREND_WORDS = {
    "rising": lambda: pgettext("cause trend", "rising"),
    "steady": lambda: pgettext("cause trend", "steady"),
    "falling": lambda: pgettext("cause trend", "falling"),
}
TREND_MARKS = {"rising": "▲", "steady": "▬", "falling": "▼"}


def sparkline_bars(counts, *, width: int = WIDTH, height: int = HEIGHT) -> list[dict]:
    """One bar per non-empty hour, scaled to the busiest hour; an empty hour draws nothing (the
    baseline shows it)."""
    peak = max(counts, default=0)
    if not peak:
        return []
    slot = width / len(counts)
    bars = []
    for i, count in enumerate(counts):
        if not count:
            continue
        h = max(round(count / peak * (height - 1), 1), 1.5)
        bars.append({"x": round(i * slot, 2), "y": round(height - 1 - h, 2), "height": h, "count": count})
    return bars


def sparkline_words(counts) -> str:
    total = sum(counts)
    if not total:
        return gettext("No deaths in the last 24 hours.")
    return ngettext(
        "%(total)d death in the last 24 hours; per hour, oldest first: %(counts)s.",
        "%(total)d deaths in the last 24 hours; per hour, oldest first: %(counts)s.",
        total,
    ) % {"total": total, "counts": gettext(", ").join(str(n) for n in counts)}


@register.inclusion_tag("console/_sparkline.html")
def cause_sparkline(trend):
    """`trend` is a deadletters.selectors.trends.CauseTrend."""
    return {
        "bars": sparkline_bars(trend.deaths_24h),
        "width": WIDTH,
        "height": HEIGHT,
        "bar_width": BAR_WIDTH,
        "baseline": HEIGHT - 0.5,
        "words": sparkline_words(trend.deaths_24h),
        "trend": trend.trend,
        "trend_word": TREND_WORDS[trend.trend](),
        "trend_mark": TREND_MARKS[trend.trend],
        "window_words": gettext("deaths in the last 6 hours: %(recent)d; in the 6 hours before: %(before)d")
        % {"recent": trend.recent, "before": trend.before},
    }
