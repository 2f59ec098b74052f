"""The console's other pages on a phone (390 x 844), light and dark, in English and in Chinese, and
the keyboard on the pages a DingTalk alert opens.

Running, Retrying, the snoozes, the kinds, a task, the task search, the bulk pages and the audit
log: no sideways scrolling, nothing cut off at the screen's edges, the primary action on the first
screen. On the alert's pages (a dead letter, its replay confirmation, the groups, the list, the
dashboard) Tab moves down the page as it reads: each focused element is no higher than the one
before (a row's elements share its line), so nothing the eye skips is reached out of turn.
"""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.conftest import browser_login
from tests.system.test_browser_pages import seed_live, seed_realistic
from tests.system.test_browser_phone import HEIGHT, WIDTH, layout_problems, phone  # noqa: F401 - the fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The same line: a row's button may sit a few pixels above the text beside it.
SAME_LINE = 8
# Enough presses to walk the longest of these pages; the walk ends earlier when focus leaves the page.
MAX_TABS = 160
FOCUSED = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const r = el.getBoundingClientRect();
  return {top: Math.round(r.top + window.scrollY), left: Math.round(r.left), height: Math.round(r.height),
          what: el.tagName.toLowerCase() + (el.name ? "[name=" + el.name + "]" : "") + " "
                + (el.getAttribute("aria-label") || el.textContent || el.value || "").trim()
                  .replace(/\\s+/g, " ").slice(0, 40)};
}"""


def other_pages(seeded) -> list[tuple[str, str, str | None]]:
    """(name, path, the primary action as a CSS selector, or None): the same in either language."""
    return [
        ("running", "/console/running/", "button[data-action=stop]"),
        ("retrying", "/console/retrying/", "button[data-action=retry-now]"),
        ("snoozes", "/console/alerts/snoozes/", "form[action*='/lift/'] button"),
        ("kinds", "/console/kinds/", "form[action$='/resume/'] button"),
        ("task, pending", f"/console/tasks/{seeded['pending'].public_id}/", "button[data-action=cancel]"),
        ("task, running", f"/console/tasks/{seeded['running'].public_id}/", "button[data-action=stop]"),
        ("task, dead", f"/console/tasks/{seeded['letters'][0].task.public_id}/", None),
        ("task search", "/console/tasks/?q=orders", "form.filters button[type=submit]"),
        ("task search, bad filter", "/console/tasks/?status=nonsense", "form.filters button[type=submit]"),
        ("bulk actions", "/console/bulk/", None),
        ("bulk action, paused", f"/console/bulk/{seeded['paused_bulk'].public_id}/",
         "form[action$='/resume/'] button"),
        ("audit", "/console/audit/", "form.filters button[type=submit]"),
    ]


def first_screen_problem(page, selector: str) -> str | None:
    button = page.locator(selector).first
    expect(button).to_be_visible()
    box = button.bounding_box()
    if box["y"] < 0 or box["y"] + box["height"] > HEIGHT or box["x"] < 0 or box["x"] + box["width"] > WIDTH:
        return f"{button.inner_text()!r} ({selector}) is not on the first screen: {box}"
    return None


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_the_other_pages_fit_a_phone_in_light_and_dark(phone, operator, locale):  # noqa: F811 - the fixture
    seeded = seed_live()
    found: dict[str, list] = {}
    for scheme in ("light", "dark"):
        page = phone(scheme, locale)
        browser_login(page, next_path="/console/")
        expect(page.locator("#dashboard-stats")).to_be_visible()
        for name, path, primary in other_pages(seeded):
            page.goto(path)
            if os.environ.get("SCREENSHOT_DIR"):  # look at them: SCREENSHOT_DIR=/tmp/phone pytest ...
                slug = name.replace(" ", "-").replace(",", "")
                shot = Path(os.environ["SCREENSHOT_DIR"]) / f"phone-{locale}-{scheme}-{slug}.png"
                page.screenshot(path=str(shot), full_page=True)
            problems = layout_problems(page)
            if primary:
                problem = first_screen_problem(page, primary)
                problems += [problem] if problem else []
            found[f"{scheme}: {name}"] = problems
        # The bulk preview, a POST's answer: reached from the groups page as an operator does.
        page.goto("/console/dead-letters/groups/")
        page.locator("table.groups tbody tr button[value=replay]").first.click()
        expect(page.locator("#bulk-count")).to_be_visible()
        problems = layout_problems(page)
        problem = first_screen_problem(page, "form.confirm-form button.btn-primary")
        found[f"{scheme}: bulk preview"] = problems + ([problem] if problem else [])
    bad = {name: problems for name, problems in found.items() if problems}
    if bad:
        pytest.fail("\n".join(f"{name}:\n  " + "\n  ".join(problems) for name, problems in bad.items()))


def focus_walk(page) -> list[dict]:
    """Tab from the top of the page until focus leaves it (or MAX_TABS): each focused element's place."""
    page.evaluate("window.scrollTo(0, 0); document.activeElement && document.activeElement.blur()")
    walk = []
    for _ in range(MAX_TABS):
        page.keyboard.press("Tab")
        place = page.evaluate(FOCUSED)
        if place is None or (walk and place == walk[0]):
            break
        walk.append(place)
    return walk


def out_of_order(walk: list[dict]) -> list[str]:
    """Each step where focus went up the page (beyond a line's height) instead of down."""
    problems = []
    for before, after in zip(walk, walk[1:], strict=False):
        if after["top"] < before["top"] - SAME_LINE and after["top"] + after["height"] <= before["top"]:
            problems.append(f"{before['what']!r} at {before['top']} px, "
                            f"then up to {after['what']!r} at {after['top']} px")
    return problems


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_tab_follows_the_visual_order_on_the_pages_an_alert_opens(_playwright_browser, live_server, operator,
                                                                  language):
    letters = seed_realistic()
    context = _playwright_browser.new_context(
        base_url=live_server.url, viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=2,
        is_mobile=True, has_touch=True, locale=language,
    )
    context.set_default_timeout(15_000)
    try:
        page = context.new_page()
        browser_login(page, next_path="/console/")
        pages = [
            ("dead letter", f"/console/dead-letters/{letters[0].pk}/"),
            ("replay confirmation", f"/console/dead-letters/{letters[0].pk}/replay/"),
            ("discard confirmation", f"/console/dead-letters/{letters[0].pk}/discard/"),
            ("groups", "/console/dead-letters/groups/"),
            ("list", "/console/dead-letters/"),
            ("dashboard", "/console/"),
        ]
        found, lengths = {}, {}
        for name, path in pages:
            page.goto(path)
            if name == "dashboard":
                page.locator("#pause-refresh").check()  # a refresh mid-walk would move focus back to the top
            walk = focus_walk(page)
            lengths[name] = len(walk)
            found[name] = out_of_order(walk)
            if name == "dead letter":
                # The Actions come first on a phone: Replay is reached before what died and why.
                order = [step["what"] for step in walk]
                replay = next(i for i, what in enumerate(order) if what in ("button 重放", "button Replay"))
                cause = next(i for i, what in enumerate(order) if letters[0].fingerprint[:12] in what)
                assert replay < cause, order
    finally:
        context.close()
    assert all(length >= 5 for length in lengths.values()), lengths
    bad = {name: problems for name, problems in found.items() if problems}
    assert not bad, "\n".join(f"{name}:\n  " + "\n  ".join(problems) for name, problems in bad.items())
