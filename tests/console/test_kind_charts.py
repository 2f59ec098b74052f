"""The last-24-hours charts on the dashboard (every kind, or the one its selector picks) and on a
kind's own page: the figures drawn and tabulated are the rows' figures, an empty day says so, a
kind that is not one is ignored, and the panel polls and swaps itself."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from console import charts as console_charts
from deadletters.models import DeadLetter
from reports import charts as report_charts
from reports.models import AttemptOutcome, TaskAttempt, TaskStatus
from tests.factories import make_dead_letter, make_task

pytestmark = pytest.mark.django_db


def finished_attempt(*, kind, started, run, waited=1.0, outcome=AttemptOutcome.SUCCEEDED):
    task = make_task(kind=kind, status=TaskStatus.DONE, attempt=1)
    type(task).objects.filter(pk=task.pk).update(created_at=started - timedelta(seconds=waited))
    TaskAttempt.objects.create(
        task=task,
        number=1,
        started_at=started,
        finished_at=started + timedelta(seconds=run),
        outcome=outcome,
        duration_seconds=run,
    )


def a_known_day():
    """Two hours ago: 3 probe completions (1, 2, 4 s; waits 1, 1, 7 s), 1 probe death; an hour ago,
    1 sales_summary completion of 30 s."""
    now = timezone.now()
    start, _ = report_charts.hour_window(hours=24, now=now)
    two_ago, one_ago = start + timedelta(hours=21), start + timedelta(hours=22)
    for i, (run, waited) in enumerate([(1.0, 1.0), (2.0, 1.0), (4.0, 7.0)]):
        finished_attempt(kind="probe", started=two_ago + timedelta(minutes=10 * i), run=run, waited=waited)
    finished_attempt(kind="sales_summary", started=one_ago, run=30.0)
    letter = make_dead_letter()
    DeadLetter.objects.filter(pk=letter.pk).update(created_at=two_ago + timedelta(minutes=5))
    TaskAttempt.objects.filter(task=letter.task).update(
        started_at=two_ago - timedelta(hours=3), finished_at=two_ago - timedelta(hours=3)
    )
    return timezone.localtime(two_ago), timezone.localtime(one_ago)


def numbers_row(html: str, start) -> list[str]:
    row = re.search(rf"<tr><td class=\"nowrap\">{start:%a %H:%M}</td>(.*?)</tr>", html, re.S)
    assert row, html
    return [cell.strip() for cell in re.findall(r"<td class=\"num\">(.*?)</td>", row.group(1))]


def test_the_dashboard_charts_every_kind_and_tabulates_the_figures(admin_client):
    two_ago, one_ago = a_known_day()

    html = admin_client.get("/console/").content.decode()

    assert "Last 24 hours, all kinds" in html
    assert html.count('class="hour-svg') == 4
    assert "4 tasks completed, at most 3 in one hour" in html
    assert "1 task died" in html
    # Run times 1, 2, 4 s (exact median 2 s; p95 interpolated: 2 + 0.9 * 2 = 3.8 s); waits 1, 1, 7 s.
    assert numbers_row(html, two_ago) == ["3", "1", "2.00 s", "3.80 s", "1.00 s", "6.40 s"]
    assert numbers_row(html, one_ago) == ["1", "0", "30.0 s", "30.0 s", "1.00 s", "1.00 s"]
    assert 'hx-get="/console/charts/"' in html and 'hx-trigger="every 30s"' in html


def test_the_selector_narrows_to_one_kind(admin_client):
    two_ago, one_ago = a_known_day()

    html = admin_client.get("/console/?kind=sales_summary").content.decode()

    assert "Last 24 hours of sales_summary" in html
    assert '<option value="sales_summary" selected>' in html
    assert numbers_row(html, one_ago)[:3] == ["1", "0", "30.0 s"]
    assert numbers_row(html, two_ago) == ["0", "0", "—", "—", "—", "—"]
    assert "No deaths in the last 24 h." in html


@pytest.mark.parametrize("kind", ["nope", "<script>alert(1)</script>", "probe' OR '1'='1", "x" * 500])
def test_a_kind_that_is_not_one_shows_every_kind(admin_client, kind):
    response = admin_client.get("/console/", {"kind": kind})

    assert response.status_code == 200
    assert "Last 24 hours, all kinds" in response.content.decode()
    assert "<script>alert" not in response.content.decode()


def test_an_empty_day_says_so_on_every_chart(admin_client):
    html = admin_client.get("/console/").content.decode()

    assert 'class="hour-svg' not in html
    for text in (
        "No completions in the last 24 h.",
        "No deaths in the last 24 h.",
        "No finished attempts in the last 24 h.",
        "No first attempts started in the last 24 h.",
    ):
        assert text in html


def test_the_panel_polls_and_the_selector_moves_the_address_bar(admin_client):
    a_known_day()

    poll = admin_client.get("/console/charts/?kind=probe", HTTP_HX_REQUEST="true",
                            HTTP_HX_TARGET="kind-charts")
    picked = admin_client.get(
        "/console/charts/?kind=probe", HTTP_HX_REQUEST="true", HTTP_HX_TRIGGER="chart-kind-form"
    )
    plain = admin_client.get("/console/charts/?kind=probe")

    assert poll.status_code == 200
    html = poll.content.decode()
    assert html.lstrip().startswith("<section") and "Last 24 hours of probe" in html
    assert "HX-Push-Url" not in poll.headers
    assert picked.headers["HX-Push-Url"] == "/console/?kind=probe"
    assert plain.status_code == 302 and plain.headers["Location"] == "/console/?kind=probe"


def test_a_kind_page_shows_its_settings_and_its_charts(admin_client):
    two_ago, _ = a_known_day()
    make_task(kind="probe", status=TaskStatus.PENDING)

    response = admin_client.get("/console/kinds/probe/")
    partial = admin_client.get("/console/kinds/probe/", HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert "<h1>probe</h1>" in html and "Last 24 hours of probe" in html
    assert 'id="chart-kind-form"' not in html  # the page is the kind: no selector
    assert 'hx-get="/console/kinds/probe/"' in html
    assert numbers_row(html, two_ago) == ["3", "1", "2.00 s", "3.80 s", "1.00 s", "6.40 s"]
    assert re.search(r"Waiting tasks</dt><dd>1</dd>", html)
    assert partial.content.decode().lstrip().startswith("<section")
    assert admin_client.get("/console/kinds/nope/").status_code == 404
    assert 'href="/console/kinds/probe/"' in admin_client.get("/console/kinds/").content.decode()


def test_charts_are_shared_between_polls_for_the_cache_time(admin_client, settings):
    settings.CONSOLE_DASHBOARD_CACHE_SECONDS = 30
    first = admin_client.get("/console/charts/", HTTP_HX_REQUEST="true").content.decode()
    finished_attempt(kind="probe", started=timezone.now() - timedelta(minutes=1), run=1.0)

    again = admin_client.get("/console/charts/", HTTP_HX_REQUEST="true").content.decode()

    assert "No completions in the last 24 h." in again  # the shared figures, not yet the new row
    assert re.search(r"Figures as of [\d:]+ \(shared for up to 30 s\)", again)
    assert (re.search(r"Figures as of ([\d:]+)", first).group(1)
            == re.search(r"Figures as of ([\d:]+)", again).group(1))


def test_bars_and_step_lines_follow_the_figures():
    starts = [timezone.now() + timedelta(hours=i) for i in range(24)]
    bars = console_charts.bar_chart(starts, [0] * 20 + [1, 0, 1000, 500])
    assert [bar["height"] for bar in bars["bars"]][20:] == [1.5, 0, 100.0, 50.0]  # one event stays visible
    assert bars["total"] == 1501 and bars["peak"] == 1000 and bars["peak_at"] == starts[22]

    hours = [
        report_charts.HourFigures(start=s, count=0, measured=0, sampled=0, p50=None, p95=None) for s in starts
    ]
    hours[3] = report_charts.HourFigures(start=starts[3], count=2, measured=2, sampled=2, p50=1.0, p95=4.0)
    hours[4] = report_charts.HourFigures(start=starts[4], count=2, measured=2, sampled=2, p50=2.0, p95=2.0)
    hours[6] = report_charts.HourFigures(start=starts[6], count=1, measured=1, sampled=1, p50=3.0, p95=3.0)
    lines = console_charts.line_chart(starts, hours)
    # Hours 3-4 joined, a gap at 5, hour 6 alone; the scale's top is the highest p95 (4 s).
    assert lines["p95_path"] == "M30 0.0 H40 V50.0 H50 M60 25.0 H70"
    assert lines["p50_path"] == "M30 75.0 H40 V50.0 H50 M60 25.0 H70"
    assert lines["top"] == 4.0 and lines["count"] == 5 and (lines["p50_low"], lines["p50_high"]) == (1.0, 3.0)
