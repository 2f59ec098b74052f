"""The on-call review's fixes as an operator meets them: a real browser, the live server, real workers.

Covers the traceback view (exception first, frames folded, keyboard-reachable), the groups page's
action per cause, the bulk outcome followed live until every replay settled, "nothing ticked" said
inline, and no Content-Security-Policy violation on the main pages.
"""

import re

import pytest
from playwright.sync_api import expect

from deadletters.models import BulkAction, DeadLetter, DeadLetterStatus
from reports.models import TaskStatus
from tests.conftest import browser_login
from tests.factories import make_dead_letter, make_task
from tests.system.test_browser_pages import CONNECTION_ERROR, seed_realistic

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TIMEOUT = 30_000


def dead_probe(*, error_message: str, **params):
    task = make_task(kind="probe", params=params, status=TaskStatus.DEAD, attempt=3)
    return make_dead_letter(task=task, error_message=error_message)


def mark_page(page):
    """A marker that a reload or navigation would wipe: proves the page updated itself."""
    page.evaluate("window.__noReload = true")


def test_traceback_shows_the_exception_first_your_frames_open_and_is_keyboard_reachable(page, operator):
    letter = seed_realistic()[0]
    browser_login(page, next_path=f"/console/dead-letters/{letter.pk}/")

    exception = page.locator(".exception-line")
    expect(exception).to_contain_text(f"{CONNECTION_ERROR}: HTTPConnectionPool(host='orders.internal'")
    first_frame = page.locator(".tb-frames .frame-project").first
    assert exception.bounding_box()["y"] < first_frame.bounding_box()["y"]
    # Your code is open and marked; the library frames (requests) are folded under one line.
    expect(page.locator(".tb-frames .frame-project .frame-path")).to_have_text(
        ["reports/kinds/http_export.py", "reports/jobs.py"]
    )
    expect(page.locator(".tb-frames .frame-project pre.frame-code").first).to_contain_text("session.get(url")
    library = page.locator(".tb-frames .frame-library")
    expect(library.first).to_be_hidden()
    page.get_by_text("2 library frames").click()
    expect(library).to_have_count(2)
    expect(library.first).to_be_visible()

    # The frames box is reachable with the keyboard alone, and says what it is.
    page.locator("body").focus()
    reached = None
    for _ in range(80):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('tb-frames')"):
            reached = page.evaluate("document.activeElement.getAttribute('aria-label')")
            break
    assert reached == "Stack frames of the final exception, most recent call first"


def test_a_cause_is_replayed_from_the_groups_page_and_the_outcome_followed_live(page, operator, start_worker):
    start_worker()
    fixed = [dead_probe(error_message="warehouse API down") for _ in range(4)]
    dead_probe(error_message="some other cause")
    browser_login(page, next_path="/console/dead-letters/groups/")

    row = page.locator("table.groups tbody tr", has_text="warehouse API down")
    row.get_by_role("button", name="Replay…").click()

    expect(page.locator("#bulk-count")).to_have_text("4")
    # The cause by its error, as the operator knows it, not by its 40 hex digits.
    expect(page.locator("#bulk-scope")).to_contain_text(
        "every open one with cause TransientError: warehouse API down")
    expect(page.locator("#bulk-scope")).not_to_contain_text(fixed[0].fingerprint)
    page.fill("textarea[name=reason]", "warehouse back")
    page.get_by_role("button", name="Start bulk replay of 4").click()

    expect(page.get_by_role("heading", name="Bulk replay")).to_be_visible()
    mark_page(page)
    expect(page.locator(".bulk-headline")).to_contain_text(
        "All 4 replayed tasks finished; none died again.", timeout=TIMEOUT
    )
    expect(page.locator(".bulk-status")).to_have_text("completed")
    assert page.evaluate("window.__noReload") is True
    assert DeadLetter.objects.filter(status=DeadLetterStatus.OPEN).count() == 1  # the other cause


def test_bulk_page_follows_replays_that_die_again_and_links_them(page, operator, start_worker):
    start_worker()
    for _ in range(5):
        dead_probe(error_message="probe asked to fail permanently", fail_permanently=True)
    browser_login(page, next_path="/console/dead-letters/?kind=probe")

    page.get_by_label("everything matching this filter").check()
    page.get_by_role("button", name="Replay…").click()
    expect(page.locator("#bulk-count")).to_have_text("5")
    page.get_by_role("button", name="Start bulk replay of 5").click()
    expect(page.get_by_role("heading", name="Bulk replay")).to_be_visible()
    mark_page(page)

    # The run completes in a moment; the page keeps following until every replay died again.
    expect(page.locator(".bulk-headline")).to_contain_text(
        "Every replayed task died again (5 of 5)", timeout=TIMEOUT
    )
    expect(page.locator(".bulk-status")).to_have_class(re.compile(r"\boutcome-bad\b"))
    expect(page.locator(".bulk-outcome")).to_contain_text("5 requeued · 0 done · 5 died again")
    assert page.evaluate("window.__noReload") is True
    assert "hx-get" not in page.locator("#bulk-progress").evaluate("e => e.outerHTML.slice(0, 300)")

    page.locator(".died-again").get_by_role("link", name=re.compile(r"5 × ")).click()
    expect(page.locator("table.letters tbody tr.row-open")).to_have_count(5)  # the 5 new deaths
    assert BulkAction.objects.get().status == "completed"


def test_replay_with_nothing_ticked_says_so_next_to_the_buttons(page, operator):
    dead_probe(error_message="boom")
    browser_login(page, next_path="/console/dead-letters/")
    posted = []
    page.on("request", lambda r: posted.append(r.url) if r.method == "POST" else None)

    page.get_by_role("button", name="Replay…").click()

    expect(page.locator("#bulk-error")).to_be_visible()
    expect(page.locator("#bulk-error")).to_contain_text("Tick at least one dead letter first")
    assert page.url.endswith("/console/dead-letters/")
    assert posted == []
    page.locator("#bulk-form input[name=ids]").first.check()
    page.get_by_role("button", name="Replay…").click()
    expect(page.locator("#bulk-count")).to_have_text("1")


CSP_LISTENER = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", e => window.__csp.push(
  e.violatedDirective + " " + (e.blockedURI || "inline") + " " + (e.sourceFile || "") + ":" + e.lineNumber));
"""


def test_the_main_pages_raise_no_content_security_policy_violation(page, operator):
    letters = seed_realistic()
    page.add_init_script(CSP_LISTENER)
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    browser_login(page, next_path="/console/")
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    assert "script-src 'self'" in page.evaluate("""async () => (await fetch("/console/")).headers.get(
        "content-security-policy")""")
    seen = {}

    def check(name):
        seen[name] = page.evaluate("window.__csp")

    # The dashboard's own poll swaps its stats in: htmx at work under the policy.
    with page.expect_response(lambda r: r.url.endswith("/console/") and r.request.headers.get("hx-request")):
        pass
    check("dashboard")
    page.goto("/console/dead-letters/")
    page.select_option("select[name=kind]", "sales_summary")  # an htmx swap of the results
    expect(page).to_have_url(re.compile(r"kind=sales_summary"))
    page.check("#select-all")  # console.js, not an inline handler
    expect(page.locator("#bulk-form input[name=ids]:checked")).to_have_count(4)
    check("list")
    for name, path in [
        ("groups", "/console/dead-letters/groups/"),
        ("detail", f"/console/dead-letters/{letters[0].pk}/"),
        ("edit", f"/console/dead-letters/{letters[0].pk}/replay/edit/"),
        ("tasks", "/console/tasks/"),
        ("audit", "/console/audit/"),
        ("batches", "/console/batches/"),
        ("kinds", "/console/kinds/"),
    ]:
        page.goto(path)
        expect(page.locator("main")).to_be_visible()
        check(name)
    page.context.clear_cookies()
    page.goto("/console/login/")
    check("login")
    assert {name: v for name, v in seen.items() if v} == {}
    assert [e for e in errors if "Content Security Policy" in e] == []
