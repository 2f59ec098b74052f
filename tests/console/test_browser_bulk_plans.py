"""Canary replays and scheduled runs as an operator drives them: a real browser, the live server,
real RQ workers and a real housekeeper (`manage.py housekeeper`). At 1280 px the canary with
the upstream still broken (it stops and says why) and fixed (it carries on by itself); at 390 x 844
the confirm form with its canary fieldset and start time, the scheduled run, and its cancel."""

import re
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from deadletters.models import BulkAction, BulkActionStatus, DeadLetter, DeadLetterStatus
from tests.conftest import browser_login
from tests.deadletters.bulk.test_actions import letters
from tests.system.test_browser_phone import CUT_OFF, HEIGHT, WIDTH

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TIMEOUT = 90_000


def start_canary_from_the_list(page, *, total: int, canary: str, share: str):
    browser_login(page, next_path="/console/dead-letters/?kind=probe")
    page.get_by_label("everything matching this filter").check()
    page.get_by_role("button", name="Replay…").click()
    expect(page.locator("#bulk-count")).to_have_text(str(total))
    page.fill("textarea[name=reason]", "upstream deploy 4711")
    page.locator("details.bulk-plan:not(.params-patch) > summary").click()
    canary_fields = page.get_by_role("group", name="Canary first")
    expect(canary_fields).to_contain_text("canary failed")  # the help says what happens
    canary_fields.get_by_label(re.compile("Letters to replay first")).fill(canary)
    canary_fields.get_by_label(re.compile("Share of them that must end done")).fill(share)
    page.get_by_role("button", name=f"Start bulk replay of {total}").click()
    expect(page.get_by_role("heading", name="Bulk replay")).to_be_visible()


def test_a_canary_with_the_upstream_still_broken_stops_after_it_and_says_why(
    page, operator, start_worker, start_housekeeper, fast_retries
):
    fast_retries.REPORT_MAX_ATTEMPTS = 1
    made = letters(12, params={"fail_attempts": 99})
    start_worker()
    start_worker()
    start_housekeeper()

    start_canary_from_the_list(page, total=12, canary="4", share="0.75")

    expect(page.locator(".canary-verdict")).to_contain_text("Canary failed: the run stopped.",
                                                            timeout=TIMEOUT)
    expect(page.locator(".bulk-status")).to_have_text("canary failed")
    expect(page.locator(".canary-verdict")).to_contain_text("at least 3 (75%) had to end done")
    expect(page.locator(".died-again")).to_contain_text("reports.errors.TransientError", timeout=TIMEOUT)
    expect(page.get_by_role("button", name="Resume")).to_have_count(0)
    bulk = BulkAction.objects.get()
    assert (bulk.status, bulk.processed, bulk.canary_size) == (BulkActionStatus.CANARY_FAILED, 4, 4)
    assert DeadLetter.objects.filter(pk__in=[x.pk for x in made], status=DeadLetterStatus.OPEN).count() == 8


def test_a_canary_with_the_upstream_fixed_carries_on_by_itself_to_the_end(
    page, operator, start_worker, start_housekeeper
):
    letters(12, params={"fail_attempts": 0})
    start_worker()
    start_worker()
    start_housekeeper()

    start_canary_from_the_list(page, total=12, canary="4", share="0.75")

    expect(page.locator(".bulk-status")).to_have_text("completed", timeout=TIMEOUT)
    expect(page.locator(".canary-passed-note")).to_contain_text("Canary passed:")
    expect(page.locator(".bulk-percent")).to_have_text("100%")
    bulk = BulkAction.objects.get()
    assert (bulk.processed, bulk.succeeded, bulk.canary_phase) == (12, 12, "passed")


@pytest.fixture
def phone_page(_playwright_browser, live_server):
    context = _playwright_browser.new_context(
        base_url=live_server.url, viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=2,
        is_mobile=True, has_touch=True,
    )
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


def test_on_a_phone_the_form_schedules_a_canary_replay_and_the_scheduled_list_cancels_it(
    phone_page, operator, settings
):
    settings.TIME_ZONE = "Asia/Shanghai"
    letters(6)
    page = phone_page
    browser_login(page, next_path="/console/dead-letters/")
    page.get_by_label("everything matching this filter").check()
    page.get_by_role("button", name="Replay…").click()

    page.locator("details.bulk-plan:not(.params-patch) > summary").click()
    canary_fields = page.get_by_role("group", name="Canary first")
    expect(canary_fields).to_be_visible()
    start_field = page.get_by_label("Start at (optional: empty starts now)")
    expect(page.locator("#start-at-help")).to_contain_text("Times are in Asia/Shanghai (UTC+08:00)")
    assert_fits(page, "the bulk confirm form")

    when = (timezone.now() + timedelta(hours=2)).astimezone(ZoneInfo("Asia/Shanghai")).replace(
        second=0, microsecond=0)
    page.fill("textarea[name=reason]", "after the 02:00 deploy")
    canary_fields.get_by_label(re.compile("Letters to replay first")).fill("2")
    start_field.fill(when.strftime("%Y-%m-%dT%H:%M"))
    page.get_by_role("button", name="Start bulk replay of 6").click()

    expect(page.locator(".headline-scheduled")).to_contain_text(
        f"Scheduled: starts at {when:%Y-%m-%d %H:%M}:00")
    expect(page.locator(".bulk-status")).to_have_text("scheduled")
    assert_fits(page, "the scheduled run's page")
    bulk = BulkAction.objects.get()
    assert (bulk.status, bulk.start_at, bulk.canary_size) == ("scheduled", when, 2)

    page.goto("/console/bulk/?state=scheduled")
    expect(page.get_by_role("heading", name="Scheduled bulk actions")).to_be_visible()
    assert_fits(page, "the Scheduled list")
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator(".messages")).to_contain_text("Bulk replay cancelled.")
    expect(page.get_by_text("No bulk action is waiting for its time.")).to_be_visible()
    assert BulkAction.objects.get().status == BulkActionStatus.CANCELLED


def assert_fits(page, what: str) -> None:
    width = page.evaluate("document.scrollingElement.scrollWidth")
    assert width <= WIDTH, f"{what}: scrolls sideways ({width} px wide)"
    assert page.evaluate(CUT_OFF, WIDTH) == [], f"{what}: cut off"
    assert page.viewport_size == {"width": WIDTH, "height": HEIGHT}
