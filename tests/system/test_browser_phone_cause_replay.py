"""From the DingTalk death card to a confirmed replay of the whole cause, on a 390 px phone in
Chinese, signed in: at most 3 taps. The card's own "replay the cause (N)…" link is followed (tap 1:
a GET that acts on nothing), the preview names the cause and its count, and its start button
(tap 2) starts one bulk replay of exactly that cause's open letters."""

import re
from urllib.parse import urlsplit

import pytest

from deadletters.alerts.render import alert_card
from deadletters.models import Alert, BulkAction, DeadLetter
from tests.conftest import browser_login
from tests.factories import make_dead_letter

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_cause_is_replayed_from_the_death_card_in_two_taps_on_a_chinese_phone(
    _playwright_browser, live_server, operator, settings
):
    settings.CONSOLE_BASE_URL = live_server.url
    settings.ALERT_LANGUAGE = "zh-hans"
    cause = [make_dead_letter(error_message="orders API unreachable") for _ in range(4)]
    other = make_dead_letter(error_type="reports.errors.PermanentError", error_message="bad region")
    fingerprint = cause[0].fingerprint
    assert other.fingerprint != fingerprint
    alert = Alert(category="dead_letter", fingerprint=fingerprint, dead_letter=cause[0],
                  payload={"kind": "probe", "dead_letter_id": cause[0].pk,
                           "task_id": str(cause[0].task.public_id),
                           "error_type": cause[0].error_type, "error_message": cause[0].error_message,
                           "attempts": 3, "retriable": True})
    card = alert_card(alert)
    label, url = next((label, url) for label, url in card["links"] if "fingerprint=" in url)
    assert label == "重放该原因（4）…"

    context = _playwright_browser.new_context(
        locale="zh-CN", base_url=live_server.url, viewport={"width": 390, "height": 844},
        is_mobile=True, has_touch=True,
    )
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        browser_login(page, next_path="/console/")  # the on-call phone's session, signed in before
        page.wait_for_url("**/console/")
        before = BulkAction.objects.count()

        taps = 0
        page.goto(urlsplit(url)._replace(scheme="", netloc="").geturl())  # tap 1: the card's button
        taps += 1
        assert BulkAction.objects.count() == before  # the link only shows what would happen
        body = page.locator("main").inner_text()
        assert "orders API unreachable" in body and "4" in body
        start = page.locator("form.confirm-form button.btn-primary")
        box = start.bounding_box()
        assert box["y"] + box["height"] <= 844 * 2  # reachable without hunting
        start.tap()  # tap 2: start the bulk replay of the cause
        taps += 1
        page.wait_for_url(re.compile(r"/console/bulk/[0-9a-f-]{36}/"))  # the run's own page

        assert taps <= 3
        bulk = BulkAction.objects.latest("created_at")
        assert BulkAction.objects.count() == before + 1
        assert bulk.action == "replay" and bulk.total == 4
        assert bulk.filters["scope"] == "filter" and bulk.filters["filter"] == {"fingerprint": fingerprint}
        assert DeadLetter.objects.get(pk=other.pk).status == "open"  # another cause is left alone
    finally:
        context.close()
