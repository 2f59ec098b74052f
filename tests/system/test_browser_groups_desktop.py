"""At a laptop's width (1280 x 800) the groups table fits: every column of a cause (count, trend,
message, kinds, times, actions) is in view without scrolling the table or the page sideways."""

import pytest
from playwright.sync_api import expect

from tests.conftest import browser_login
from tests.system.test_browser_pages import seed_realistic

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTH = 1280


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_groups_table_fits_a_laptop_screen(_playwright_browser, live_server, operator, locale):
    seed_realistic()
    context = _playwright_browser.new_context(
        locale=locale, base_url=live_server.url, viewport={"width": WIDTH, "height": 800}
    )
    try:
        page = context.new_page()
        browser_login(page, next_path="/console/dead-letters/groups/")
        table = page.locator("table.groups")
        expect(table).to_be_visible()
        widths = page.evaluate(
            """() => {
                const table = document.querySelector('table.groups');
                return {page: document.documentElement.scrollWidth,
                        table: table.getBoundingClientRect().right,
                        holder: table.parentElement.getBoundingClientRect().right,
                        holderScroll: table.parentElement.scrollWidth - table.parentElement.clientWidth};
            }"""
        )
        assert widths["page"] <= WIDTH, widths
        assert widths["table"] <= WIDTH, widths
        assert widths["holderScroll"] <= 1, widths
    finally:
        context.close()
