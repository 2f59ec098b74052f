"""axe-core over every console page: no violation, in English and in Simplified Chinese, in the
light and the dark colour scheme, on a desktop (1280 px) and on a phone (390 x 844).

axe runs from the vendored copy in tests/vendor/axe-core (no network at test time). The pages get
the data an operator at 3 a.m. would see (tests/system/test_browser_pages.seed_live), and each
page is checked as served, with its htmx polling live.
"""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from deadletters.models import BulkAction, DeadLetter, DeadLetterStatus
from reports.models import ReportBatch
from tests.conftest import browser_login
from tests.console.test_traceback_view import CHAINED
from tests.factories import make_dead_letter
from tests.system.test_browser_pages import CONNECTION_ERROR, seed_live

# The pages' markup and contrast are the templates' and the CSS's, whichever database fills them.
pytestmark = [pytest.mark.browser, pytest.mark.database_blind, pytest.mark.django_db(transaction=True)]

AXE = Path(__file__).resolve().parents[1] / "vendor" / "axe-core" / "axe.min.js"
AXE_VERSION = "4.14.1"
RUN_AXE = """async () => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return {version: axe.version, violations: result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map(n => n.target.join(" ") + " :: "
      + (n.failureSummary || "").split("\\n").slice(0, 2).join(" "))
  }))};
}"""


def console_pages(seeded) -> list[tuple[str, str]]:
    """(name, path) of every console page, with ids from the seeded data."""
    letter = seeded["letters"][0]
    replayed = DeadLetter.objects.filter(status=DeadLetterStatus.REPLAYED).first()
    bulk = seeded["paused_bulk"]
    finished = BulkAction.objects.filter(status="completed").first()
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
        ("task search", "/console/tasks/?q=orders&status=dead"),
        ("task search, bad filter", "/console/tasks/?status=nonsense"),
        ("task, dead", f"/console/tasks/{letter.task.public_id}/"),
        ("task, pending", f"/console/tasks/{seeded['pending'].public_id}/"),
        ("task, running", f"/console/tasks/{seeded['running'].public_id}/"),
        ("running", "/console/running/"),
        ("retrying", "/console/retrying/"),
        ("snoozed alerts", "/console/alerts/snoozes/"),
        ("audit", "/console/audit/"),
        ("bulk actions", "/console/bulk/"),
        ("bulk action, paused", f"/console/bulk/{bulk.public_id}/"),
        ("bulk action, finished", f"/console/bulk/{finished.public_id}/"),
        ("batches", "/console/batches/"),
        ("batch", f"/console/batches/{batch.public_id}/"),
        ("kinds", "/console/kinds/"),
        ("not found (404)", "/console/dead-letters/999999/"),
    ]


def violations_of(page) -> list:
    page.add_script_tag(path=str(AXE))
    result = page.evaluate(RUN_AXE)
    assert result["version"] == AXE_VERSION
    return result["violations"]


VIEWPORTS = {
    "desktop": {"viewport": {"width": 1280, "height": 900}},
    "phone": {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2, "is_mobile": True,
              "has_touch": True},
}
# What the browser asks for; the page must then say it in <html lang>.
LANGUAGES = {"en": "en", "zh-CN": "zh-Hans"}


@pytest.fixture
def axe_context(_playwright_browser, live_server):
    """Contexts that let the injected axe script run despite the pages' Content-Security-Policy."""
    contexts = []

    def make(*, scheme: str, locale: str, viewport: str):
        context = _playwright_browser.new_context(
            base_url=live_server.url, color_scheme=scheme, locale=locale, bypass_csp=True,
            **VIEWPORTS[viewport],
        )
        context.set_default_timeout(15_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


def _special_views(page, seeded, letter_with_chain) -> dict[str, list]:
    """Views that are not a plain GET: every fold open, a POST's answer, a refused form."""
    found = {}
    page.goto(f"/console/dead-letters/{letter_with_chain.pk}/")
    for summary in page.locator("main details > summary").all():
        summary.click()
    expect(page.locator("details.tb-raw pre.traceback")).to_be_visible()
    found["dead letter, unfolded"] = violations_of(page)
    # A bulk preview, reached as an operator does: a cause's Replay button.
    page.goto("/console/dead-letters/groups/")
    page.locator("table.groups tbody tr button[value=replay]").first.click()
    expect(page.locator("#bulk-count")).to_be_visible()
    found["bulk preview"] = violations_of(page)
    # The edit page answering invalid params (every error listed).
    page.goto(f"/console/dead-letters/{seeded['letters'][0].pk}/replay/edit/")
    page.locator("details.json-fallback summary").click()
    page.locator("textarea[name=params]").fill('{"format": "pdf", "colour": 1}')
    page.locator("details.json-fallback button.btn-primary").click()
    expect(page.locator("#params-error")).to_be_visible()
    found["replay edit, invalid"] = violations_of(page)
    # A refused snooze (400) and a refused task control (409).
    page.goto("/console/alerts/snoozes/")
    page.locator("input[name=minutes]").fill("0")
    page.locator("input[name=kind]").fill("probe")
    page.locator("input[name=reason]").fill("noise")
    page.evaluate("document.querySelector('input[name=minutes]').removeAttribute('min')")
    page.locator("form[action$='/alerts/snooze/'] button[type=submit]").click()
    expect(page.locator(".notice.error")).to_be_visible()
    found["snooze refused (400)"] = violations_of(page)
    return found


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
@pytest.mark.parametrize("locale", list(LANGUAGES))
def test_every_console_page_has_no_axe_violation(axe_context, operator, django_user_model, locale, viewport):
    seeded = seed_live()
    letter_with_chain = make_dead_letter(error_type=CONNECTION_ERROR, traceback=CHAINED,
                                         error_message="refused")
    outsider = django_user_model.objects.create_user("viewer", password="viewer-pass-1", is_staff=True)
    assert not outsider.has_perm("deadletters.view_deadletter")
    found: dict[str, list] = {}
    for scheme in ("light", "dark"):
        page = axe_context(scheme=scheme, locale=locale, viewport=viewport)
        assert page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches") is (scheme == "dark")
        page.goto("/console/login/")
        found[f"{scheme}: login"] = violations_of(page)
        browser_login(page, next_path="/console/")
        expect(page.locator("#dashboard-stats")).to_be_visible()
        for name, path in console_pages(seeded):
            page.goto(path)
            assert page.locator("html").get_attribute("lang") == LANGUAGES[locale], name
            found[f"{scheme}: {name}"] = violations_of(page)
        for name, violations in _special_views(page, seeded, letter_with_chain).items():
            found[f"{scheme}: {name}"] = violations
        # 403 for a staff account without the permission.
        page.context.clear_cookies()
        browser_login(page, username="viewer", password="viewer-pass-1", next_path="/console/")
        expect(page.locator("main h1")).to_contain_text("403")
        found[f"{scheme}: forbidden (403)"] = violations_of(page)
    bad = {name: v for name, v in found.items() if v}
    print(f"\naxe {AXE_VERSION}, {locale} at {viewport}: {len(found)} page views checked (light and dark), "
          f"{sum(len(v) for v in bad.values())} violations")
    assert bad == {}, "\n".join(f"{name}: {v}" for name, v in bad.items())
