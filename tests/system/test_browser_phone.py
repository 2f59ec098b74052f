"""The pages a DingTalk alert opens, on a phone (390 x 844), light and dark, in English and in Chinese.

On each: no sideways scrolling, nothing cut off at the screen's edges, the filters folded away,
the primary action (Replay) on the first screen, and no axe-core violation.
"""

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from deadletters.models import BulkAction
from deadletters.services.replay import replay_dead_letter
from tests.conftest import browser_login
from tests.system.test_browser_accessibility import AXE, RUN_AXE
from tests.system.test_browser_pages import seed_realistic

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTH, HEIGHT = 390, 844

# Every visible element that ends past the screen's edges, except inside a region that scrolls by
# itself (a traceback, the params): "cut off" is what a thumb cannot reach by scrolling down.
CUT_OFF = """(width) => {
  const scrolls = el => { const s = getComputedStyle(el);
    return s.overflowX === "auto" || s.overflowX === "scroll"; };
  const inScroller = el => { for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
    if (scrolls(p)) return true; } return false; };
  const out = [];
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height || getComputedStyle(el).visibility === "hidden") continue;
    if (el.closest(".visually-hidden") || inScroller(el)) continue;
    if (r.right > width + 0.5 || r.left < -0.5) {
      out.push(el.tagName.toLowerCase() + (el.className && typeof el.className === "string"
                 ? "." + el.className.trim().split(/\\s+/).join(".") : "")
               + " [" + Math.round(r.left) + ".." + Math.round(r.right) + "] "
               + (el.textContent || "").trim().slice(0, 40));
    }
  }
  return out.slice(0, 15);
}"""


@pytest.fixture
def phone(_playwright_browser, live_server):
    """Phone-sized contexts, one per colour scheme and language (CSP bypassed so the injected axe can run)."""
    contexts = []

    def make(scheme: str, locale: str = "en-US"):
        context = _playwright_browser.new_context(
            locale=locale,
            base_url=live_server.url,
            viewport={"width": WIDTH, "height": HEIGHT},
            device_scale_factor=2,
            is_mobile=True,
            has_touch=True,
            color_scheme=scheme,
            bypass_csp=True,
        )
        context.set_default_timeout(15_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


def alert_pages(letters) -> list[tuple[str, str, str | None]]:
    """(name, path, the primary action as a CSS selector, or None) of the pages an alert leads to."""
    letter = letters[0]
    return [
        ("dead letter", f"/console/dead-letters/{letter.pk}/", "#letter-actions button.btn-primary"),
        ("replay confirmation", f"/console/dead-letters/{letter.pk}/replay/",
         "form.confirm-form button.btn-primary"),
        ("discard confirmation", f"/console/dead-letters/{letter.pk}/discard/",
         "form.confirm-form button.btn-danger"),
        ("groups", "/console/dead-letters/groups/", None),
        ("list", "/console/dead-letters/", None),
        ("list, all statuses", "/console/dead-letters/?status=all", None),
        ("dashboard", "/console/", None),
    ]


def layout_problems(page) -> list[str]:
    problems = []
    scroll_width = page.evaluate("document.documentElement.scrollWidth")
    if scroll_width > WIDTH:
        problems.append(f"scrolls sideways: {scroll_width} px wide")
    problems += [f"cut off: {item}" for item in page.evaluate(CUT_OFF, WIDTH)]
    return problems


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_alert_pages_fit_a_phone_in_light_and_dark(phone, operator, locale):
    letters = seed_realistic()
    replay_dead_letter(dead_letter_id=letters[1].pk, actor="operator", ip_address=None)
    BulkAction.objects.create(action="archive", status="completed", total=2, processed=2, succeeded=2,
                              actor="operator")
    found: dict[str, list] = {}
    for scheme in ("light", "dark"):
        page = phone(scheme, locale)
        browser_login(page, next_path="/console/")
        expect(page.locator("#dashboard-stats")).to_be_visible()
        for name, path, primary in alert_pages(letters):
            page.goto(path)
            if os.environ.get("SCREENSHOT_DIR"):  # look at them: SCREENSHOT_DIR=/tmp/phone pytest ...
                slug = name.replace(" ", "-").replace(",", "")
                shot = Path(os.environ["SCREENSHOT_DIR"]) / f"phone-{locale}-{scheme}-{slug}.png"
                page.screenshot(path=str(shot), full_page=True)
            problems = layout_problems(page)
            if primary:
                button = page.locator(primary).first
                expect(button).to_be_visible()
                box = button.bounding_box()
                if box["y"] + box["height"] > HEIGHT or box["x"] + box["width"] > WIDTH:
                    problems.append(f"{primary!r} is not on the first screen: {box}")
            filters = page.locator("form.filters")
            if filters.count():
                # Folded: the form's fields are hidden until the operator opens them.
                if page.locator("form.filters select, form.filters input[type=search]").first.is_visible():
                    problems.append("the filter form is open on load")
            page.add_script_tag(path=str(AXE))
            problems += [f"axe {v['id']}: {v['nodes']}" for v in page.evaluate(RUN_AXE)["violations"]]
            found[f"{scheme}: {name}"] = problems
    bad = {name: problems for name, problems in found.items() if problems}
    if bad:
        pytest.fail("\n".join(f"{name}:\n  " + "\n  ".join(problems) for name, problems in bad.items()))


def test_folded_filters_open_without_javascript_and_still_filter(_playwright_browser, live_server, operator):
    seed_realistic()
    context = _playwright_browser.new_context(
        base_url=live_server.url, viewport={"width": WIDTH, "height": HEIGHT}, java_script_enabled=False
    )
    try:
        page = context.new_page()
        browser_login(page, next_path="/console/dead-letters/")
        kind = page.locator("form.filters select[name=kind]")
        expect(kind).to_be_hidden()
        page.locator("label.filter-toggle-label").click()
        expect(kind).to_be_visible()
        kind.select_option("sales_summary")
        page.get_by_role("button", name="Apply").click()
        expect(page).to_have_url(re.compile(r"kind=sales_summary"))
        expect(page.locator("table.letters tbody tr")).to_have_count(4)
        # Folded again on the filtered page, whose chips say what narrows it.
        expect(kind).to_be_hidden()
        expect(page.locator(".chips")).to_contain_text("kind: sales_summary")
    finally:
        context.close()
