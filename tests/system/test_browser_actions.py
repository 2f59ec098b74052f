"""The actions as an operator uses them: a real browser, the live server, real RQ workers."""

import re

import pytest
from playwright.sync_api import expect

from deadletters.models import AuditEntry, BulkAction, DeadLetter, DeadLetterStatus
from reports.models import ReportTask, TaskStatus
from tests.conftest import browser_login
from tests.factories import make_dead_letter, make_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TIMEOUT = 30_000


def dead(kind="probe", params=None):
    task = make_task(kind=kind, params=params or {}, status=TaskStatus.DEAD, attempt=3)
    return make_dead_letter(task=task)


def mark_page(page):
    """A marker that a reload or navigation would wipe: proves the page updated itself."""
    page.evaluate("window.__noReload = true")


def test_replay_from_the_detail_page_and_watch_it_finish(page, operator, start_worker):
    start_worker()
    letter = dead()
    browser_login(page, next_path=f"/console/dead-letters/{letter.pk}/")

    # The detail page's Replay has its reason field right next to it (the DingTalk link's
    # confirmation page is test_dingtalk_replay_link_while_logged_out).
    replay = page.locator("form.action-replay")
    replay.get_by_label("Reason for replaying").fill("cause fixed")
    replay.get_by_role("button", name="Replay", exact=True).click()

    expect(page).to_have_url(re.compile(rf"/console/dead-letters/{letter.pk}/$"))
    expect(page.locator(".messages")).to_contain_text(f"Dead letter {letter.pk} replayed")
    mark_page(page)
    expect(page.locator("#task-state .badge")).to_have_text("done", timeout=TIMEOUT)
    assert page.evaluate("window.__noReload") is True
    entry = AuditEntry.objects.get(action="replay")
    assert (entry.actor, entry.reason, entry.ip_address) == ("operator", "cause fixed", "127.0.0.1")


def test_bulk_replay_of_a_filtered_set_shows_progress_to_100(page, operator, start_worker):
    start_worker()
    start_worker()
    for _ in range(200):
        dead(kind="probe")
    others = [dead(kind="sales_summary") for _ in range(3)]
    browser_login(page, next_path="/console/dead-letters/?kind=probe")

    page.get_by_label("everything matching this filter").check()
    page.get_by_role("button", name="Replay…").click()
    expect(page.locator("#bulk-count")).to_have_text("200")
    page.fill("textarea[name=reason]", "upstream back")
    page.get_by_role("button", name="Start bulk replay of 200").click()

    expect(page.get_by_role("heading", name="Bulk replay")).to_be_visible()
    mark_page(page)
    expect(page.locator(".bulk-percent")).to_have_text("100%", timeout=TIMEOUT)
    expect(page.locator(".bulk-status")).to_have_text("completed")
    expect(page.locator(".progress")).to_have_attribute("aria-valuenow", "100")
    assert page.evaluate("window.__noReload") is True
    bulk = BulkAction.objects.get()
    assert (bulk.total, bulk.processed, bulk.succeeded, bulk.reason) == (200, 200, 200, "upstream back")
    assert (
        DeadLetter.objects.filter(kind="probe", status=DeadLetterStatus.REPLAYED, replayed_in=bulk).count()
        == 200
    )
    assert all(DeadLetter.objects.get(pk=o.pk).status == DeadLetterStatus.OPEN for o in others)
    assert AuditEntry.objects.get(action="bulk_replay").item_count == 200


def test_edit_params_and_replay(page, operator, start_worker):
    start_worker()
    letter = dead(params={"fail_attempts": 99})
    browser_login(page, next_path=f"/console/dead-letters/{letter.pk}/")

    page.get_by_role("link", name="Replay with edited params…").click()
    # The JSON fallback, folded under the kind's fields.
    page.locator("details.json-fallback summary").click()
    params = page.locator("textarea[name=params]")
    expect(params).to_contain_text('"fail_attempts": 99')
    params.fill('{"fail_attempts": "lots"}')
    page.locator("details.json-fallback button.btn-primary").click()
    expect(page.locator("#params-error")).to_contain_text("fail_attempts: must be an integer")
    assert ReportTask.objects.get(pk=letter.task_id).status == TaskStatus.DEAD

    # The field of the kind's parameter, as a phone would fill it.
    expect(page.locator("#param-fail_attempts")).to_have_value("99")
    page.locator("#param-fail_attempts").fill("0")
    page.locator("form.param-form button.btn-primary").click()

    expect(page.locator(".messages")).to_contain_text("replayed with edited params")
    expect(page.locator("#task-state .badge")).to_have_text("done", timeout=TIMEOUT)
    diff = AuditEntry.objects.get(action="replay").details["params_diff"]
    assert (diff["before"]["fail_attempts"], diff["after"]["fail_attempts"]) == (99, 0)


def test_dingtalk_replay_link_while_logged_out(page, operator, start_worker):
    start_worker()
    letter = dead()
    link = f"/console/dead-letters/{letter.pk}/replay/"

    page.goto(link)  # what the DingTalk button opens: a GET, never a replay
    expect(page.locator("input[name=username]")).to_be_visible()
    assert ReportTask.objects.get(pk=letter.task_id).status == TaskStatus.DEAD
    page.fill("input[name=username]", "operator")
    page.fill("input[name=password]", "operator-pass-1")
    page.click("main button[type=submit]")

    expect(page.get_by_role("button", name="Confirm replay")).to_be_visible()
    assert page.url.endswith(link)
    assert ReportTask.objects.get(pk=letter.task_id).status == TaskStatus.DEAD
    page.get_by_role("button", name="Confirm replay").click()

    expect(page.locator(".messages")).to_contain_text("replayed")
    expect(page.locator("#task-state .badge")).to_have_text("done", timeout=TIMEOUT)
    assert DeadLetter.objects.get(pk=letter.pk).replayed_by == "operator"
