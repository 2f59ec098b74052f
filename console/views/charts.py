"""The last-24-hours charts panel (console/charts.py): on the dashboard, for every kind or the one
picked in its selector, and on each kind's page. The panel refreshes itself by polling the URL it
was drawn with."""

from urllib.parse import urlencode

from django.conf import settings
from django.shortcuts import redirect, render
from django.urls import reverse
from django_htmx.http import push_url

from console.access import VIEW_PERMISSION, console_view
from console.charts import kind_charts
from console.views.common import param, wants_partial
from reports.kinds import KINDS

SELECTOR_FORM_ID = "chart-kind-form"


def chart_kind(request) -> str | None:
    """The kind the query string asks for; anything but a known kind means every kind."""
    kind = param(request, "kind", 64)
    return kind if kind in KINDS else None


def charts_context(kind: str | None, *, poll_url: str, selector: bool) -> dict:
    return {
        "charts": kind_charts(kind),
        "charts_poll_url": poll_url,
        "charts_ttl": settings.CONSOLE_DASHBOARD_CACHE_SECONDS,
        "kind_choices": sorted(KINDS) if selector else None,
    }


def dashboard_charts_context(kind: str | None) -> dict:
    query = f"?{urlencode({'kind': kind})}" if kind else ""
    return charts_context(kind, poll_url=f"{reverse('console:charts')}{query}", selector=True)


@console_view(VIEW_PERMISSION)
def charts(request):
    """The dashboard's panel alone, for its poll and its kind selector."""
    kind = chart_kind(request)
    dashboard_url = reverse("console:dashboard") + (f"?{urlencode({'kind': kind})}" if kind else "")
    if not wants_partial(request):
        return redirect(dashboard_url)
    response = render(request, "console/_kind_charts.html", dashboard_charts_context(kind))
    if request.htmx.trigger == SELECTOR_FORM_ID:
        # The address bar follows the selector, so a reload or a shared link shows the same kind.
        response = push_url(response, dashboard_url)
    return response
