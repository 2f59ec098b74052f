"""What a Chinese on-call operator met on a 390 px phone (issue 36, items 10, 14 and 15), in Chromium:
the "already replayed" page and a cause's bulk preview never wider than the screen, the Stop
controls and their confirmation at least 44 px tall, and error types that wrap only after a dot."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from deadletters.services.replay import replay_dead_letter
from reports.models import TaskAttempt, TaskStatus
from tests.conftest import browser_login
from tests.factories import make_dead_letter, make_task
from tests.system.test_browser_phone import layout_problems, phone  # noqa: F401 - the fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ERROR_TYPE = "reports.kinds.http_export.UpstreamAnswerRejectedError"
MESSAGE = "upstream https://orders.internal.example/api/v2/exports/monthly-close-ledger-summary answered 422"
# Each code element whose text is one error type, and how many lines it takes (more than one:
# it wrapped) and whether a line ends mid-word (inside a segment, not after a dot).
BROKEN_TYPES = """() => [...document.querySelectorAll("main code")]
  .filter(c => /^[\\w.]+$/.test(c.textContent.trim()))
  .map(code => {
    const text = code.textContent.trim(), range = document.createRange();
    let lineOf = [], top = null;
    for (const n of [...code.childNodes].filter(n => n.nodeType === 3)) {
      for (let i = 0; i < n.length; i++) {
        range.setStart(n, i); range.setEnd(n, i + 1);
        const r = range.getClientRects()[0]; if (r) lineOf.push(Math.round(r.top));
      }
    }
    const breaks = [];
    for (let i = 1; i < lineOf.length; i++) if (lineOf[i] > lineOf[i - 1] + 2) breaks.push(i);
    return {text, midWord: breaks.some(i => text.replace(/\\s/g, "")[i - 1] !== ".")};
  }).filter(c => c.midWord).map(c => c.text)"""


def _too_wide(page, name: str) -> list[str]:
    return [f"{name}: {problem}" for problem in layout_problems(page)]


def _short_controls(page, selector: str) -> list[str]:
    return [
        f"{box['what']}: {box['height']} px"
        for box in page.locator(selector).evaluate_all(
            "els => els.filter(e => e.offsetParent).map(e => ({"
            "what: (e.textContent || e.name || '').trim().slice(0, 30),"
            " height: Math.round(e.getBoundingClientRect().height)}))"
        )
        if box["height"] < 44
    ]


def test_the_pages_an_on_call_operator_reaches_fit_a_phone(phone, operator):  # noqa: F811 - the fixture
    letters = [make_dead_letter(error_type=ERROR_TYPE, error_message=MESSAGE) for _ in range(3)]
    replay_dead_letter(dead_letter_id=letters[0].pk, actor="operator", ip_address=None)
    now = timezone.now()
    running = make_task(status=TaskStatus.RUNNING, attempt=4, max_attempts=6, attempts_before_run=3,
                        started_at=now)
    TaskAttempt.objects.create(task=running, number=4, started_at=now,
                               worker="report-2.internal horse 4117 pid 4102")
    make_task(status=TaskStatus.RETRYING, attempt=1, next_retry_at=now + timedelta(seconds=20),
              last_error="x")
    page = phone("light", "zh-CN")
    browser_login(page, next_path="/console/")
    problems = []

    # The card's replay button, pressed a second time: the 409 "already replayed" page.
    response = page.goto(f"/console/dead-letters/{letters[0].pk}/replay/")
    assert response.status == 409
    problems += _too_wide(page, "409 page")
    # The rest of the cause, from the letter's page, in one action: the preview scoped to the cause.
    page.goto(f"/console/dead-letters/{letters[0].pk}/")
    page.locator(".same-cause-replay a").click()
    expect(page.locator("#bulk-count")).to_have_text("2")
    expect(page.locator("#bulk-scope")).to_contain_text("UpstreamAnswerRejectedError")
    problems += _too_wide(page, "bulk preview")

    for path in ("/console/dead-letters/", "/console/dead-letters/groups/",
                 f"/console/dead-letters/{letters[1].pk}/"):
        page.goto(path)
        problems += [f"{path}: {text} breaks mid-word" for text in page.evaluate(BROKEN_TYPES)]
        problems += _too_wide(page, path)

    page.goto("/console/running/")
    stop = page.locator("button[data-action=stop]")
    expect(stop).to_have_text("停止尝试 #4…")
    problems += [f"running: {p}" for p in _short_controls(page, ".task-controls button")]
    stop.click()
    expect(page.locator("input[name=then][value=retry]")).to_be_checked()
    short = _short_controls(page, ".stop-confirm .btn, .stop-confirm label.choice")
    problems += [f"stop confirmation: {p}" for p in short]
    problems += _too_wide(page, "stop confirmation")
    assert not problems, "\n".join(problems)
