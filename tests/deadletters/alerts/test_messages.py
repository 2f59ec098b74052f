"""User-supplied strings reach DingTalk as one neutral line each: a batch name, kind, error type or
message cannot add lines, quotes, headings, links (bare URLs included), emphasis or tags to an alert,
nor reorder or hide text with bidi or control characters; a message stays within DingTalk's length."""

import uuid
from datetime import UTC, datetime

import pytest

from deadletters.alerts.client import RobotConfig
from deadletters.alerts.messages import (
    TEXT_MAX,
    neutral,
    render_batch_summary,
    render_dead_letter,
    render_digest,
)

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
    assert "＞ quoted block ＃ heading - item (click)(hxxps://evil(.)example/)" in text
    assert "https://evil" not in text


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


PHISHING = "nightly https://login.evil.example/sso?next=console \u202egnp.exe\u202c www.evil.example/x dingtalk://dingtalkclient/page/link?url=x"


@pytest.mark.parametrize("robot", ROBOTS)
def test_a_batch_name_with_a_bare_url_and_a_right_to_left_override_is_defanged(robot, settings):
    """What a client named its batch became the card's title, with a link and a reversed name."""
    settings.CONSOLE_BASE_URL = "https://console.example"
    payload = {"batch_id": str(uuid.uuid4()), "name": PHISHING, "total": 3, "done": 3, "dead": 0, "finished_at": NOW}
    title, body = render_batch_summary(payload, robot)
    text = _card(body)["text"]
    for rendered in (title, text):
        for linkable in ("https://login", "www.evil", "evil.example", "dingtalk://dingtalkclient"):
            assert linkable not in rendered, linkable
        assert "\u202e" not in rendered and "\u202c" not in rendered
    assert "hxxps://login(.)evil(.)example/sso" in title
    assert "www(.)evil(.)example/x" in text and "dingtalk(:)//dingtalkclient/page" in text
    assert "console.example" in str(body)  # the alert's own links are untouched


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("a\x00b\x07c\x1b[31md\x7f", "abc(31md"),
        ("left\u2066right\u2069\u200e\u200f\u061c", "leftright"),
        ("zero\u200bwidth\ufeff", "zerowidth"),
        ("line\u2028sep\u2029para\x85next", "line sep para next"),
        ("x" * 500, "x" * 159 + "…"),
    ],
)
def test_neutral_drops_control_and_bidi_characters_and_caps_the_length(value, shown):
    assert neutral(value) == shown


@pytest.mark.parametrize("robot", [*ROBOTS, RobotConfig(webhook="https://robot.invalid/", keyword="报警")])
def test_a_digest_stays_within_what_dingtalk_accepts(robot, settings):
    settings.CONSOLE_BASE_URL = "https://console.example"
    groups = [
        {"fingerprint": f"{n:016x}", "count": 100 - n, "first": NOW, "last": NOW, "kinds": ["k" * 100] * 3,
         "error_type": "E" * 200, "message": "m" * 300}
        for n in range(60)
    ]
    _, body = render_digest(groups, total=sum(g["count"] for g in groups), robot=robot, max_groups=60)
    text = _card(body)["text"]
    assert len(text) <= TEXT_MAX
    assert text.count("(https://console.example/") + text.count("console.example") >= 1
    if robot.keyword:
        assert text.endswith(robot.keyword)
