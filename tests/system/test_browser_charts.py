"""The last-24-hours charts in a real browser, at 1280 px and on a phone (390 px), light and dark:
every chart is drawn and as wide as its column, nothing scrolls sideways or is cut off, the
hour-by-hour table opens, the kind selector swaps the panel and moves the address bar, and axe
finds nothing."""

import os
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus
from tests.conftest import browser_login
from tests.system.test_browser_accessibility import AXE, RUN_AXE
from tests.system.test_browser_pages import seed_realistic
from tests.system.test_browser_phone import CUT_OFF

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SIZES = {"desktop": (1280, 900), "phone": (390, 844)}


def seed_a_day_of_work():
    """72 attempts over the last 21 hours (the charts' window always holds at least 23 of them),
    http_export the slowest."""
    now = timezone.now()
    for i in range(72):
        started = now - timedelta(minutes=18 * i + 1)
        kind = ("http_export", "sales_summary", "probe")[i % 3]
        task = ReportTask.objects.create(kind=kind, params={}, max_attempts=3, timeout_seconds=300,
                                         status=TaskStatus.DONE, attempt=1)  # fmt: skip
        ReportTask.objects.filter(pk=task.pk).update(
            created_at=started - timedelta(seconds=0.2 + (i % 7) * 3))
        run = 0.4 + (i % 5) * (4 if kind == "http_export" else 1)
        TaskAttempt.objects.create(
            task=task, number=1, started_at=started, finished_at=started + timedelta(seconds=run),
            outcome=AttemptOutcome.SUCCEEDED, duration_seconds=run,
        )  # fmt: skip


@pytest.fixture
def sized(_playwright_browser, live_server):
    contexts = []

    def make(size: str, scheme: str):
        width, height = SIZES[size]
        context = _playwright_browser.new_context(
            base_url=live_server.url,
            viewport={"width": width, "height": height},
            color_scheme=scheme,
            is_mobile=size == "phone",
            has_touch=size == "phone",
            bypass_csp=True,  # the injected axe script
        )
        context.set_default_timeout(15_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


def chart_problems(page, width: int) -> list[str]:
    problems = []
    scroll_width = page.evaluate("document.documentElement.scrollWidth")
    if scroll_width > width:
        problems.append(f"scrolls sideways: {scroll_width} px wide")
    problems += [f"cut off: {item}" for item in page.evaluate(CUT_OFF, width)]
    panel = page.locator("#kind-charts")
    figures = panel.locator("figure.hour-chart")
    if figures.count() != 4:
        problems.append(f"{figures.count()} charts, not 4")
    for svg in panel.locator("svg.hour-svg").all():
        box = svg.bounding_box()
        column = svg.locator("xpath=..").bounding_box()
        if not box or box["height"] < 80 or abs(box["width"] - column["width"]) > 1:
            problems.append(f"a chart is drawn {box} in a column of {column}")
    for label in panel.locator(".hour-axis span").all():
        if label.bounding_box()["width"] < 20:
            problems.append(f"an hour label is squeezed: {label.bounding_box()}")
    page.add_script_tag(path=str(AXE))
    problems += [f"axe {v['id']}: {v['nodes']}" for v in page.evaluate(RUN_AXE)["violations"]]
    return problems


def test_the_charts_fit_a_desktop_and_a_phone_in_light_and_dark(sized, operator):
    seed_realistic()
    seed_a_day_of_work()
    found = {}
    for size, (width, _) in SIZES.items():
        for scheme in ("light", "dark"):
            page = sized(size, scheme)
            browser_login(page, next_path="/console/")
            for path in ("/console/", "/console/kinds/http_export/"):
                page.goto(path)
                expect(page.locator("#kind-charts svg.hour-svg").first).to_be_visible()
                page.locator("#kind-charts details.chart-numbers > summary").click()
                expect(page.locator("#kind-charts details.chart-numbers table")).to_be_visible()
                if os.environ.get("SCREENSHOT_DIR"):  # look at them: SCREENSHOT_DIR=/tmp/charts pytest ...
                    shot = (Path(os.environ["SCREENSHOT_DIR"])
                            / f"charts-{size}-{scheme}-{path.strip('/').replace('/', '-')}.png")
                    page.locator("#kind-charts").screenshot(path=str(shot))
                found[f"{size} {scheme} {path}"] = chart_problems(page, width)
    bad = {name: problems for name, problems in found.items() if problems}
    if bad:
        pytest.fail("\n".join(f"{name}:\n  " + "\n  ".join(problems) for name, problems in bad.items()))


def test_the_kind_selector_swaps_the_panel_and_the_address_bar_follows(page, operator):
    seed_a_day_of_work()
    browser_login(page, next_path="/console/")
    expect(page.locator("#kind-charts-title")).to_have_text("Last 24 hours, all kinds")
    every_kind = page.locator("#kind-charts figcaption").first.inner_text()

    page.locator("#chart-kind").select_option("http_export")

    expect(page.locator("#kind-charts-title")).to_have_text("Last 24 hours of http_export")
    expect(page).to_have_url(re.compile(r"/console/\?kind=http_export$"))
    assert "24 tasks completed" in page.locator("#kind-charts figcaption").first.inner_text()
    assert "72 tasks completed" in every_kind
    page.reload()
    expect(page.locator("#chart-kind")).to_have_value("http_export")
    page.get_by_role("link", name="http_export page").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("http_export")
