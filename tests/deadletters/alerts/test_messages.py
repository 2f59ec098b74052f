"""User-supplied strings reach DingTalk as one neutral line each: a batch name, kind, error type or
message cannot add lines, quotes, headings, links, emphasis or tags to an alert."""

import uuid
from datetime import UTC, datetime

import pytest

from deadletters.alerts.client import RobotConfig
from deadletters.alerts.messages import render_batch_summary, render_dead_letter, render_digest

HOSTILE = "evil\n\n> quoted block\n# heading\n- item\n[click](https://evil.example/) ![i](x) **bold** `code` <font color=red>x</font>"
MARKUP = ("\n", "\n>", "\n#", "\n-", "[", "](", "**", "`", "<", ">", "#")
ROBOTS = [RobotConfig(webhook="https://robot.invalid/"), RobotConfig(webhook="https://robot.invalid/", at_mobiles=("13800000000",))]
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC).isoformat()


def _card(body: dict) -> dict:
    return body.get("actionCard") or body.get("markdown")


def _assert_neutral(title: str, body: dict, benign_body: dict):
    """The hostile rendering carries exactly the markup of a benign one: only the template's own."""
    text, benign = _card(body)["text"], _card(benign_body)["text"]
    for markup in MARKUP:
        assert markup not in title
        assert text.count(markup) == benign.count(markup), markup
    assert "＞ quoted block ＃ heading - item (click)(https://evil.example/)" in text


def _dead_letter_payload(value: str) -> dict:
    return {
        "dead_letter_id": 7,
        "task_id": str(uuid.uuid4()),
        "kind": value,
        "error_type": value,
        "message": value,
        "attempts": 3,
        "created_at": NOW,
    }


@pytest.mark.parametrize("robot", ROBOTS)
def test_dead_letter_alert_neutralises_kind_error_and_message(robot, settings):
    settings.CONSOLE_BASE_URL = "https://console.example"
    title, body = render_dead_letter(_dead_letter_payload(HOSTILE), robot)
    _, benign = render_dead_letter(_dead_letter_payload("fine"), robot)
    _assert_neutral(title, body, benign)


@pytest.mark.parametrize("robot", ROBOTS)
def test_batch_summary_neutralises_the_batch_name(robot, settings):
    settings.CONSOLE_BASE_URL = "https://console.example"

    def payload(name):
        return {"batch_id": str(uuid.uuid4()), "name": name, "total": 3, "done": 2, "dead": 1, "finished_at": NOW}

    title, body = render_batch_summary(payload(HOSTILE), robot)
    _, benign = render_batch_summary(payload("nightly"), robot)
    _assert_neutral(title, body, benign)


@pytest.mark.parametrize("robot", ROBOTS)
def test_digest_neutralises_names_kinds_errors_and_messages(robot, settings):
    settings.CONSOLE_BASE_URL = "https://console.example"

    def groups(value):
        return [
            {"fingerprint": "a" * 16, "count": 5, "first": NOW, "last": NOW, "kinds": [value, "probe"],
             "error_type": value, "message": value},
            {"fingerprint": "batch:x", "count": 1, "first": NOW, "last": NOW, "kinds": ["probe"],
             "batch_id": str(uuid.uuid4()), "name": value, "message": ""},
        ]

    title, body = render_digest(groups(HOSTILE), total=6, robot=robot, max_groups=10)
    _, benign = render_digest(groups("fine"), total=6, robot=robot, max_groups=10)
    _assert_neutral(title, body, benign)
