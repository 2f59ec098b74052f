"""axe-core over every console page, in the light and the dark colour scheme: no violation.

axe runs from the vendored copy in tests/vendor/axe-core (no network at test time). The pages get
the data an operator at 3 a.m. would see (tests/system/test_browser_pages.seed_realistic), and each
page is checked as served, with its htmx polling live.
"""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from deadletters.models import BulkAction, DeadLetter, DeadLetterStatus
from deadletters.services.replay import replay_dead_letter
from reports.models import ReportBatch
from tests.conftest import browser_login
from tests.console.test_traceback_view import CHAINED
from tests.factories import make_dead_letter
from tests.system.test_browser_pages import CONNECTION_ERROR, seed_realistic

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = Path(__file__).resolve().parents[1] / "vendor" / "axe-core" / "axe.min.js"
AXE_VERSION = "4.14.1"
RUN_AXE = """async () => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return {version: axe.version, violations: result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map(n => n.target.join(" ") + " :: " + (n.failureSummary || "").split("\\n").slice(0, 2).join(" "))
  }))};
}"""


def console_pages(letters) -> list[tuple[str, str]]:
    """(name, path) of every console page, with ids from the seeded data."""
    letter = letters[0]
    replayed = DeadLetter.objects.filter(status=DeadLetterStatus.REPLAYED).first()
    bulk = BulkAction.objects.get()
    batch = ReportBatch.objects.get()
    return [
        ("dashboard", "/console/"),
        ("dead-letter list", "/console/dead-letters/"),
        ("dead-letter list, all statuses", "/console/dead-letters/?status=all"),
        ("dead-letter list, nothing matches", "/console/dead-letters/?kind=nothing"),
        ("dead-letter list, bad filter", "/console/dead-letters/?created_from=yesterday"),
        ("groups", "/console/dead-letters/groups/"),
        ("dead letter", f"/console/dead-letters/{letter.pk}/"),
        ("replayed dead letter", f"/console/dead-letters/{replayed.pk}/"),
        ("replay confirmation", f"/console/dead-letters/{letter.pk}/replay/"),
        ("replay with edited params", f"/console/dead-letters/{letter.pk}/replay/edit/"),
        ("discard confirmation", f"/console/dead-letters/{letter.pk}/discard/"),
        ("already replayed (409)", f"/console/dead-letters/{replayed.pk}/replay/"),
        ("tasks", "/console/tasks/"),
        ("task", f"/console/tasks/{letter.task.public_id}/"),
        ("audit", "/console/audit/"),
        ("bulk actions", "/console/bulk/"),
        ("bulk action", f"/console/bulk/{bulk.public_id}/"),
        ("batches", "/console/batches/"),
        ("batch", f"/console/batches/{batch.public_id}/"),
        ("kinds", "/console/kinds/"),
        ("not found (404)", "/console/dead-letters/999999/"),
    ]


def violations_of(page) -> dict:
    page.add_script_tag(path=str(AXE))
    return page.evaluate(RUN_AXE)


@pytest.fixture
def axe_context(_playwright_browser, live_server):
    """Contexts that let the injected axe script run despite the pages' Content-Security-Policy."""
    contexts = []

    def make(scheme: str):
        context = _playwright_browser.new_context(
            base_url=live_server.url, viewport={"width": 1280, "height": 900}, color_scheme=scheme, bypass_csp=True
        )
        context.set_default_timeout(15_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


def test_every_console_page_has_no_axe_violation_in_light_and_dark(axe_context, operator, django_user_model):
    letters = seed_realistic()
    letter_with_chain = make_dead_letter(error_type=CONNECTION_ERROR, traceback=CHAINED, error_message="refused")
    replay_dead_letter(dead_letter_id=letters[1].pk, actor="operator", ip_address=None)
    BulkAction.objects.create(action="archive", status="completed", total=2, processed=2, succeeded=2, actor="operator")
    outsider = django_user_model.objects.create_user("viewer", password="viewer-pass-1", is_staff=True)
    assert not outsider.has_perm("deadletters.view_deadletter")
    found: dict[str, list] = {}
    checked = 0
    for scheme in ("light", "dark"):
        page = axe_context(scheme)
        assert page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches") is (scheme == "dark")
        page.goto("/console/login/")
        result = violations_of(page)
        assert result["version"] == AXE_VERSION
        found[f"{scheme}: login"] = result["violations"]
        browser_login(page, next_path="/console/")
        expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
        for name, path in console_pages(letters):
            page.goto(path)
            found[f"{scheme}: {name}"] = violations_of(page)["violations"]
            checked += 1
        # The dead letter with every fold open: library frames, earlier exceptions, the raw text.
        page.goto(f"/console/dead-letters/{letter_with_chain.pk}/")
        for summary in page.locator("main details > summary").all():
            summary.click()
        expect(page.locator("details.tb-raw pre.traceback")).to_be_visible()
        found[f"{scheme}: dead letter, unfolded"] = violations_of(page)["violations"]
        # A bulk preview (a POST's answer), reached as an operator does: a cause's Replay button.
        page.goto("/console/dead-letters/groups/")
        page.locator("table.groups tbody tr").first.get_by_role("button", name="Replay…").click()
        expect(page.locator("#bulk-count")).to_be_visible()
        found[f"{scheme}: bulk preview"] = violations_of(page)["violations"]
        # The edit page answering invalid params (every error listed).
        page.goto(f"/console/dead-letters/{letters[0].pk}/replay/edit/")
        page.locator("textarea[name=params]").fill('{"format": "pdf", "colour": 1}')
        page.get_by_role("button", name="Replay with these params").click()
        expect(page.locator("#params-error")).to_be_visible()
        found[f"{scheme}: replay edit, invalid"] = violations_of(page)["violations"]
        # 403 for a staff account without the permission.
        page.context.clear_cookies()
        browser_login(page, username="viewer", password="viewer-pass-1", next_path="/console/")
        expect(page.get_by_role("heading", name="403 · Not allowed")).to_be_visible()
        found[f"{scheme}: forbidden (403)"] = violations_of(page)["violations"]
        checked += 6
    bad = {page: v for page, v in found.items() if v}
    print(f"\naxe {AXE_VERSION}: {checked} page views checked (light and dark), "
          f"{sum(len(v) for v in bad.values())} violations")
    assert bad == {}


def test_every_console_page_in_chinese_has_no_axe_violation(_playwright_browser, live_server, operator):
    """The same pages in Simplified Chinese (a browser asking for zh-CN): <html lang> says zh-Hans, and
    axe finds nothing either."""
    letters = seed_realistic()
    replay_dead_letter(dead_letter_id=letters[1].pk, actor="operator", ip_address=None)
    BulkAction.objects.create(action="archive", status="completed", total=2, processed=2, succeeded=2, actor="operator")
    context = _playwright_browser.new_context(
        base_url=live_server.url, viewport={"width": 1280, "height": 900}, locale="zh-CN", bypass_csp=True
    )
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        page.goto("/console/login/")
        expect(page.get_by_role("heading", name="登录报表控制台")).to_be_visible()
        found = {"login": violations_of(page)["violations"]}
        browser_login(page, next_path="/console/")
        expect(page.get_by_role("heading", name="仪表盘")).to_be_visible()
        for name, path in console_pages(letters):
            page.goto(path)
            assert page.locator("html").get_attribute("lang") == "zh-Hans", name
            found[name] = violations_of(page)["violations"]
        page.goto("/console/dead-letters/groups/")
        page.locator("table.groups tbody tr").first.get_by_role("button", name="重放…").click()
        expect(page.locator("#bulk-count")).to_be_visible()
        found["bulk preview"] = violations_of(page)["violations"]
    finally:
        context.close()
    bad = {name: v for name, v in found.items() if v}
    print(f"\naxe {AXE_VERSION}: {len(found)} page views checked in zh-hans, {sum(len(v) for v in bad.values())} violations")
    assert bad == {}
