"""The console's read side in a real browser (Playwright + chromium): login, dashboard, filter, detail.

Also takes the README's screenshots (docs/screenshots/) from realistic data.
"""

import os
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from deadletters.alerts.snooze import snooze_alerts
from deadletters.models import Alert, AlertMessage, AlertStatus, AuditEntry, BulkAction
from deadletters.services.kind_pauses import pause_kind
from deadletters.services.replay import replay_dead_letter
from reports.models import ReportBatch, ReportTask, TaskAttempt, TaskStatus
from tests.conftest import browser_login
from tests.factories import make_dead_letter, make_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


CONNECTION_ERROR = "requests.exceptions.ConnectionError"
INVALID_PARAMS = "reports.errors.InvalidParams"
TIMEOUT = "rq.timeouts.JobTimeoutException"


def _traceback(error_type: str, message: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/reports/jobs.py", line 58, in run_report_task\n'
        "    relative = kind.generate(task, output_dir)\n"
        '  File "/srv/app/reports/kinds/http_export.py", line 41, in generate\n'
        "    response = session.get(url, timeout=settings.HTTP_EXPORT_TIMEOUT)\n"
        '  File "/srv/app/.venv/lib/python3.11/site-packages/requests/sessions.py", line 602, in get\n'
        '    return self.request("GET", url, **kwargs)\n'
        '  File "/srv/app/.venv/lib/python3.11/site-packages/requests/adapters.py", line 519, in send\n'
        "    raise ConnectionError(e, request=request)\n"
        f"{error_type}: {message}\n"
    )


def seed_realistic(now=None):
    """A night of failures: one noisy cause (the orders API is down), a few bad params, a timeout."""
    now = now or timezone.now()
    batch = ReportBatch.objects.create(name="month-end-2026-10", submitted_by="finance-scheduler", total=40)
    letters = []
    specs = (
        [
            (
                "http_export",
                CONNECTION_ERROR,
                f"HTTPConnectionPool(host='orders.internal', port=8080): Max retries exceeded with url: "
                f"/export?page={i}",
                batch,
                3,
            )
            for i in range(9)
        ]
        + [
            ("sales_summary", INVALID_PARAMS, f"region 'APAC-{i}' is not one of: eu, us, cn", None, 1)
            for i in range(3)
        ]
        + [("sales_summary", TIMEOUT, "Task exceeded maximum timeout value (300 seconds)", None, 3)]
    )
    for i, (kind, error_type, message, task_batch, attempts) in enumerate(specs):
        died = now - timedelta(minutes=7 * i + 3)
        task = make_task(
            kind=kind,
            params={"region": "eu", "month": "2026-10", "format": "xlsx"}
            if kind == "sales_summary"
            else {"url": "http://orders.internal:8080/export", "format": "csv"},
            status=TaskStatus.DEAD,
            attempt=attempts,
            batch=task_batch,
            submitted_by="finance-scheduler",
            finished_at=died,
            last_error=f"{error_type}: {message}",
        )
        for n in range(1, attempts + 1):
            started = died - timedelta(seconds=75 * (attempts - n) + 40)
            TaskAttempt.objects.create(
                task=task,
                number=n,
                worker=f"rq:worker:report-{n % 2 + 1} pid {4100 + n}",
                started_at=started,
                finished_at=started + timedelta(seconds=30.5 + n),
                outcome="timeout" if error_type == TIMEOUT else "failed",
                error_type=error_type,
                error_message=message,
                traceback=_traceback(error_type, message),
                duration_seconds=30.5 + n,
            )
        letter = make_dead_letter(
            task=task,
            error_type=error_type,
            error_message=message,
            created_at=died,
            traceback=_traceback(error_type, message),
        )
        letters.append(letter)
    first = letters[0]
    message = AlertMessage.objects.create(
        title="9 reports died: ConnectionError",
        is_digest=True,
        status=AlertStatus.SENT,
        attempts=1,
        sent_at=now,
    )
    Alert.objects.create(
        dead_letter=first, fingerprint=first.fingerprint, status=AlertStatus.SENT, message=message
    )
    AuditEntry.objects.create(
        actor="system",
        action="alert",
        source="worker",
        dead_letter=first,
        task=first.task,
        details={"digest": True, "letters": 9},
    )
    return letters


def seed_live():
    """A night with live work besides the dead letters: running, retrying and waiting tasks, bulk
    runs, a muted cause and a paused kind."""
    letters = seed_realistic()
    now = timezone.now()
    replay_dead_letter(dead_letter_id=letters[1].pk, actor="operator", ip_address=None)
    running = make_task(
        kind="http_export", status=TaskStatus.RUNNING, attempt=2, started_at=now - timedelta(seconds=95),
        lease_expires_at=now + timedelta(seconds=20), submitted_by="finance-scheduler",
    )
    TaskAttempt.objects.create(task=running, number=2, started_at=now - timedelta(seconds=95),
                               worker="report-2.internal pid 4102")
    retrying = make_task(
        kind="sales_summary", status=TaskStatus.RETRYING, attempt=1, next_retry_at=now + timedelta(minutes=3),
        last_error="requests.exceptions.ConnectionError: HTTPConnectionPool(host='orders.internal', "
        "port=8080): Max retries exceeded",
    )
    pending = make_task(kind="sales_summary", status=TaskStatus.PENDING,
                        params={"region": "eu", "month": "2026-10"})
    paused = BulkAction.objects.create(
        action="replay", status="paused", total=120, processed=48, succeeded=40, skipped=8, actor="operator",
        reason="orders API back", rate_per_second=10, pause_threshold=0.5,
        paused_reason="Paused by operator.",
        filters={"scope": "filter", "filter": {"status": "open", "kind": "http_export"},
                 "max_id": letters[-1].pk},
    )
    BulkAction.objects.create(action="archive", status="completed", total=2, processed=2, succeeded=2,
                              actor="operator")
    snooze_alerts(fingerprint=letters[0].fingerprint, minutes=120, reason="orders API maintenance window",
                  actor="operator")
    pause_kind(kind="http_export", actor="operator", reason="orders API down until 04:00")
    return {"letters": letters, "running": running, "retrying": retrying, "pending": pending,
            "paused_bulk": paused}


def test_login_lands_on_the_page_asked_for_and_dashboard_refreshes_itself(page, operator):
    make_dead_letter(error_message="first death")
    page.goto("/console/dead-letters/?status=all")
    expect(page).to_have_url(re.compile(r"/console/login/\?next="))
    page.fill("input[name=username]", "operator")
    page.fill("input[name=password]", "wrong-password")
    page.click("main button[type=submit]")
    expect(page.get_by_role("alert")).to_contain_text("Wrong username or password")
    page.fill("input[name=password]", "operator-pass-1")
    page.click("main button[type=submit]")
    expect(page).to_have_url(re.compile(r"/console/dead-letters/\?status=all$"))
    expect(page.locator("table.letters")).to_contain_text("first death")

    page.get_by_role("link", name="Dashboard").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    open_count = page.locator("#dashboard-stats .counts a[href$='status=open'] .num")
    expect(open_count).to_have_text("1")
    expect(page.locator("svg.chart-svg")).to_have_count(2)
    # A new death appears without a reload: the stats partial polls every 5 s.
    make_dead_letter(error_message="second death")
    expect(open_count).to_have_text("2", timeout=15_000)

    # "Pause auto-refresh" holds the numbers still; unticking it resumes.
    page.check("#pause-refresh")
    wait_for_skipped_poll = """() => new Promise(resolve => document.addEventListener("htmx:beforeRequest",
        e => { if (e.target.id === "dashboard-stats" && e.defaultPrevented) resolve(true); }))"""
    page.evaluate(wait_for_skipped_poll)
    make_dead_letter(error_message="third death")
    page.evaluate(wait_for_skipped_poll)
    expect(open_count).to_have_text("2")
    page.uncheck("#pause-refresh")
    expect(open_count).to_have_text("3", timeout=15_000)


def test_filter_the_list_by_fingerprint_from_the_groups_view(page, operator):
    letters = seed_realistic()
    browser_login(page, next_path="/console/dead-letters/groups/")
    expect(page.get_by_role("heading", name="Dead letters by cause")).to_be_visible()
    rows = page.locator("table.groups tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first).to_contain_text(CONNECTION_ERROR)
    rows.first.get_by_role("link", name="Show 9").click()

    expect(page).to_have_url(re.compile(rf"fingerprint={letters[0].fingerprint}"))
    expect(page.locator("table.letters tbody tr")).to_have_count(9)
    expect(page.locator(".chips")).to_contain_text("cause:")
    page.check("#select-all")
    expect(page.locator("#bulk-form input[name=ids]:checked")).to_have_count(9)
    expect(page.locator("#bulk-form input[name=filter_qs]")).to_have_value(
        f"fingerprint={letters[0].fingerprint}"
    )
    page.uncheck("#select-all")
    expect(page.locator("#bulk-form input[name=ids]:checked")).to_have_count(0)
    expect(page.locator(".summary")).to_contain_text("9 open dead letters match")

    # Another death of the same cause while the operator looks: the first page says so within 10 s.
    make_dead_letter(
        error_type=CONNECTION_ERROR,
        error_message="HTTPConnectionPool(host='orders.internal', port=8080): Max retries exceeded with url: "
        "/export?page=99",
    )
    expect(page.locator("#new-letters")).to_contain_text("1 new dead letter", timeout=15_000)
    page.locator("#new-letters").get_by_role("link", name="Show it").click()
    expect(page.locator("table.letters tbody tr")).to_have_count(10)

    # Changing a select re-filters through htmx and pushes the shareable URL.
    page.select_option("select[name=kind]", "sales_summary")
    expect(page.locator(".empty")).to_contain_text("No dead letters match these filters")
    expect(page).to_have_url(re.compile(r"kind=sales_summary"))
    page.get_by_role("link", name="clear the filters").click()
    expect(page.locator("table.letters tbody tr")).to_have_count(14)


def test_open_a_dead_letter_and_watch_its_replay_finish(page, operator, media_root):
    letters = seed_realistic()
    letter = letters[0]
    evil = make_dead_letter(
        error_message="<script>window.__pwned = 1</script>", params={"x": "<img src=x onerror=alert(1)>"}
    )
    browser_login(page, next_path="/console/dead-letters/?q=Max+retries")
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.locator(f"table.letters a[href='/console/dead-letters/{letter.id}/']").first.click()

    expect(page.get_by_role("heading", name=re.compile(rf"Dead letter #{letter.id}"))).to_be_visible()
    summary = page.locator(".summary-card")
    expect(summary).to_contain_text(CONNECTION_ERROR)
    expect(summary).to_contain_text("9 open dead letters with this cause, this one included")
    expect(page.locator("pre.traceback").first).to_contain_text("raise ConnectionError")
    expect(page.locator("ol.timeline > li")).to_have_count(3)
    expect(page.locator("#task-state")).to_contain_text("Still dead")

    # The task is replayed elsewhere (another operator, the API): the state polls, then shows the result.
    task = ReportTask.objects.get(pk=letter.task_id)
    ReportTask.objects.filter(pk=task.pk).update(status=TaskStatus.PENDING, max_attempts=6)
    page.reload()
    expect(page.locator("#task-state")).to_contain_text("Waiting for a worker")
    (media_root / "reports").mkdir(parents=True, exist_ok=True)
    (media_root / "reports" / "orders.csv").write_text("order,total\n1,9.99\n")
    ReportTask.objects.filter(pk=task.pk).update(
        status=TaskStatus.DONE, attempt=4, output_file="reports/orders.csv", finished_at=timezone.now()
    )
    expect(page.locator("#task-state")).to_contain_text("Done", timeout=15_000)
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download the report").click()
    assert Path(download_info.value.path()).read_text() == "order,total\n1,9.99\n"

    # Hostile text is shown as text, never run.
    page.goto(f"/console/dead-letters/{evil.id}/")
    expect(page.locator(".summary-card")).to_contain_text("<script>window.__pwned = 1</script>")
    expect(page.locator("pre.json").first).to_contain_text("<img src=x onerror=alert(1)>")
    assert page.evaluate("window.__pwned") is None
    assert dialogs == []


def test_screenshots_for_the_readme(page, operator, tmp_path):
    letters = seed_realistic()
    # The README's copies are refreshed on request (SCREENSHOT_DIR=docs/screenshots): a plain
    # test run never rewrites tracked files.
    SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR") or tmp_path)  # noqa: N806
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser_login(page, next_path="/console/dead-letters/")
    expect(page.locator("table.letters tbody tr")).to_have_count(13)
    page.screenshot(path=str(SCREENSHOTS / "dead-letter-list.png"), full_page=True)
    page.goto(f"/console/dead-letters/{letters[0].id}/")
    expect(page.locator("ol.timeline > li")).to_have_count(3)
    expect(page.locator(".exception-line")).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / "dead-letter-detail.png"), full_page=True)
    page.goto("/console/dead-letters/groups/")
    expect(page.locator("table.groups tbody tr")).to_have_count(3)
    page.screenshot(path=str(SCREENSHOTS / "dead-letter-groups.png"), full_page=True)
    bulk = _bulk_whose_replays_died_again(letters[:9])
    page.goto(f"/console/bulk/{bulk.public_id}/")
    expect(page.locator(".bulk-headline")).to_contain_text("Every replayed task died again")
    page.screenshot(path=str(SCREENSHOTS / "bulk-outcome.png"), full_page=True)
    for name in ("dead-letter-list", "dead-letter-detail", "dead-letter-groups", "bulk-outcome"):
        assert (SCREENSHOTS / f"{name}.png").stat().st_size > 10_000


def _bulk_whose_replays_died_again(letters):
    """A bulk replay of the orders-API cause run while the API was still down: every task died again."""
    from deadletters.models import BulkAction
    from deadletters.services.replay import replay_dead_letter

    bulk = BulkAction.objects.create(
        action="replay", status="completed", total=len(letters), processed=len(letters),
        succeeded=len(letters), actor="operator", reason="orders API back?", rate_per_second=200,
        pause_threshold=0.5, filters={"scope": "filter", "max_id": letters[0].pk,
                                      "filter": {"fingerprint": letters[0].fingerprint}},
        finished_at=timezone.now(),
    )
    for letter in letters:
        replay_dead_letter(dead_letter_id=letter.pk, actor="operator", ip_address=None, bulk=bulk)
        ReportTask.objects.filter(pk=letter.task_id).update(status=TaskStatus.DEAD)
        make_dead_letter(
            task=ReportTask.objects.get(pk=letter.task_id),
            error_type=letter.error_type,
            error_message=letter.error_message,
            traceback=letter.traceback,
        )
    return bulk
