"""DingTalk alerts speak ALERT_LANGUAGE, one language per message, whatever language is active."""

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import translation

from deadletters.alerts.client import RobotConfig
from deadletters.alerts.messages import render_batch_summary, render_dead_letter, render_digest, render_test

ROBOT = RobotConfig(webhook="https://robot.invalid/")
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
CJK = re.compile(r"[\u4e00-\u9fff]")
# English words of the alert templates (user data in these payloads is lower-case ASCII ids and digits).
ENGLISH = re.compile(r"\b(Report|dead letter|Batch|Task|Kind|Error|Message|Attempts|Time|Done|Dead|Finished|digest|first|last|View|Open|Replay|batch|more)\b")


def _messages() -> list[tuple[str, dict]]:
    letter = {
        "dead_letter_id": 7,
        "task_id": str(uuid.uuid4()),
        "kind": "sales_summary",
        "error_type": "reports.errors.transient",
        "message": "timeout",
        "attempts": 3,
        "created_at": NOW.isoformat(),
    }
    batch = {"batch_id": str(uuid.uuid4()), "name": "nightly", "total": 3, "done": 2, "dead": 1, "finished_at": NOW}
    groups = [
        {"fingerprint": f"{n:040x}", "kinds": ["probe"], "error_type": "x.y", "message": "z", "count": 5 - n,
         "first": NOW, "last": NOW + timedelta(minutes=n)}
        for n in range(4)
    ] + [{"batch_id": batch["batch_id"], "name": "nightly", "count": 6, "first": NOW, "last": NOW, "message": "3/2/1"}]
    return [
        render_dead_letter(letter, ROBOT),
        render_batch_summary(batch, ROBOT),
        render_digest(groups, total=20, robot=ROBOT, max_groups=3),
        render_test(ROBOT, now=NOW),
    ]


def _words(title: str, body: dict) -> str:
    card = body["actionCard"]
    buttons = [card.get("singleTitle", "")] + [b["title"] for b in card.get("btns", [])]
    text = " ".join([title, card["title"], card["text"], *buttons])
    return re.sub(r"\(https?://[^)]*\)", "", text)  # the links' own words are not the alert's


@pytest.mark.parametrize("active", ["en", "zh-hans"])
def test_chinese_alerts_have_no_english_line(settings, active):
    settings.ALERT_LANGUAGE = "zh-hans"
    with translation.override(active):
        rendered = _messages()
    for title, body in rendered:
        text = _words(title, body)
        assert CJK.search(text), text
        assert not ENGLISH.search(text.replace("reports.errors.transient", "")), text
    digest = rendered[2][1]["actionCard"]["text"]
    # The batch summary (6 of the 20 alerts) is counted as a batch, not as dead letters or a cause.
    assert "### 报表死信告警汇总：共 14 条，4 类；6 个批次汇总" in digest and "……及其他 2 类，共 5 条" in digest
    assert "批次汇总 nightly" in digest


@pytest.mark.parametrize("active", ["en", "zh-hans"])
def test_english_alerts_have_no_chinese(settings, active):
    settings.ALERT_LANGUAGE = "en"
    with translation.override(active):
        rendered = _messages()
    for title, body in rendered:
        assert not CJK.search(_words(title, body)), _words(title, body)
    titles = [title for title, _ in rendered]
    assert titles == [
        "Report dead letter: sales_summary",
        "Report batch finished: nightly (1 dead letter)",
        "Dead-letter digest: 14 + 6 batches",
        "DingTalk test message",
    ]
    digest = rendered[2][1]["actionCard"]["text"]
    assert "### Dead-letter digest: 14 dead letters in 4 groups, 6 batch summaries" in digest
    assert "and 2 more groups, 5 dead letters" in digest


def test_rendering_leaves_the_active_language_alone(settings):
    settings.ALERT_LANGUAGE = "zh-hans"
    with translation.override("en"):
        _messages()
        assert translation.get_language() == "en"
