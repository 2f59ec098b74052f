"""On a phone (390 x 844): the groups page shows each cause's sparkline and trend word, and the bulk
page its outcome by cause, with nothing scrolling sideways or cut off."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.conftest import browser_login
from tests.system.test_browser_pages import _bulk_whose_replays_died_again, seed_realistic
from tests.system.test_browser_phone import layout_problems, phone  # noqa: F401 - phone is a fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_groups_trends_and_bulk_outcome_by_cause_on_a_phone(phone, operator):  # noqa: F811
    letters = seed_realistic()  # the orders API cause died 9 times within the last hour: rising
    bulk = _bulk_whose_replays_died_again(letters[:3])
    page = phone("light")
    browser_login(page, next_path="/console/dead-letters/groups/")

    first = page.locator("table.groups tbody tr").first
    expect(first).to_contain_text("orders.internal")
    sparkline = first.locator("svg.sparkline")
    expect(sparkline).to_be_visible()
    assert "deaths in the last 24 hours; per hour, oldest first" in sparkline.get_attribute("aria-label")
    box = sparkline.bounding_box()
    assert box["width"] <= 80 and box["height"] <= 24  # small beside the count
    expect(first.locator(".trend")).to_be_visible()
    expect(first.locator(".trend")).to_contain_text("rising")
    assert layout_problems(page) == []
    screenshot(page, "groups")

    page.goto(f"/console/bulk/{bulk.public_id}/")
    table = page.locator("table.outcomes")
    expect(table).to_be_visible()
    expect(table.locator("tbody tr")).to_have_count(1)
    expect(table.locator('tbody td[data-label="Died again"]')).to_have_text("3")
    expect(table.locator('tbody td[data-label="Replayed"]')).to_have_text("3")
    assert layout_problems(page) == []
    screenshot(page, "bulk-outcome")


def screenshot(page, name: str) -> None:
    if os.environ.get("SCREENSHOT_DIR"):  # look at them: SCREENSHOT_DIR=/tmp/phone pytest ...
        page.screenshot(path=str(Path(os.environ["SCREENSHOT_DIR"]) / f"phone-trends-{name}.png"),
                        full_page=True)
