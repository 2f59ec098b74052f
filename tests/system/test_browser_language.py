"""In a real browser: the header's language switch turns the console Chinese, and the choice sticks
after a logout and a login, on this browser and on another one."""

import pytest
from playwright.sync_api import expect

from console.models import OperatorPreference
from tests.conftest import browser_login
from tests.factories import make_dead_letter

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_header_switch_turns_the_console_chinese_and_the_choice_sticks(
    page, operator, _playwright_browser, live_server
):
    letter = make_dead_letter(error_message="orders API unreachable")
    browser_login(page, next_path=f"/console/dead-letters/{letter.pk}/")
    expect(page.get_by_role("heading", name=f"Dead letter #{letter.pk}")).to_be_visible()
    assert page.locator("html").get_attribute("lang") == "en"

    page.get_by_role("button", name="简体中文").click()

    # Back on the same page, now in Chinese, and the switch offers English.
    expect(page.get_by_role("heading", name=f"死信 #{letter.pk}")).to_be_visible()
    assert page.url.endswith(f"/console/dead-letters/{letter.pk}/")
    assert page.locator("html").get_attribute("lang") == "zh-Hans"
    expect(page.get_by_role("navigation", name="控制台").get_by_role("link", name="仪表盘")).to_be_visible()
    expect(page.get_by_role("button", name="English")).to_be_visible()
    assert OperatorPreference.objects.get(user=operator).language == "zh-hans"

    page.get_by_role("button", name="注销").click()
    expect(page.get_by_role("heading", name="登录报表控制台")).to_be_visible()
    browser_login(page, next_path="/console/")
    expect(page.get_by_role("heading", name="仪表盘")).to_be_visible()

    # Another browser (no cookie, asking for English): Chinese from the sign-in on.
    other = _playwright_browser.new_context(base_url=live_server.url, locale="en-US")
    try:
        laptop = other.new_page()
        laptop.goto("/console/login/")
        expect(laptop.get_by_role("heading", name="Sign in to the report console")).to_be_visible()
        browser_login(laptop, next_path="/console/tasks/")
        expect(laptop.get_by_role("heading", name="报表任务")).to_be_visible()
        # And back to English with the switch, stored for next time.
        laptop.get_by_role("button", name="English").click()
        expect(laptop.get_by_role("heading", name="Report tasks")).to_be_visible()
    finally:
        other.close()
    assert OperatorPreference.objects.get(user=operator).language == "en"
