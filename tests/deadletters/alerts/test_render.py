"""The one renderer: every notice in ALERT_LANGUAGE alone, times in the team's zone with its name,
a death card that decides, and user-supplied values that cannot add markup or links (bare domains,
e-mail addresses, backslashed schemes and IPs included) to any channel's message."""

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.http import QueryDict
from django.utils import translation

from deadletters.alerts import render, wire
from deadletters.alerts.channels import Channel
from deadletters.alerts.text import neutral
from deadletters.bulk.selection import build_selection, preview_bulk_action
from deadletters.models import Alert, AlertCategory, OpenLetterCount
from tests.factories import make_dead_letter

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
FP = "f" * 40
ROBOTS = [
    Channel("dingtalk", "dingtalk", url="https://robot.invalid/"),
    Channel("dingtalk", "dingtalk", url="https://robot.invalid/", at_mobiles=("13800000000",)),
]
HOSTILE = (
    "evil\n\n> quoted block\n# heading\n- item\n[click](https://evil.example/) **bold** `code` <font>x</font>"
)
MARKUP = ("\n>", "\n#", "[", "](", "**", "`", "<", ">")


def letter(**extra) -> dict:
    return {
        "dead_letter_id": 7,
        "task_id": str(uuid.uuid4()),
        "kind": "sales_summary",
        "error_type": "reports.errors.TransientError",
        "message": "timeout",
        "attempts": 3,
        "permanent": False,
        "created_at": NOW.isoformat(),
        **extra,
    }


def alert(category=AlertCategory.DEAD_LETTER, payload=None, fingerprint=FP) -> Alert:
    return Alert(category=category, payload=payload or letter(), fingerprint=fingerprint, created_at=NOW)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("see https://evil.example/x", "see hxxps://evil(.)example/x"),
        ("see https:\\\\evil.example\\x", "see hxxps://evil(.)example\\x"),
        ("mail ops@evil.example now", "mail ops(at)evil(.)example now"),
        ("open evil.example.com today", "open evil(.)example(.)com today"),
        ("host 10.0.0.5 refused", "host 10(.)0(.)0(.)5 refused"),
        ("www.evil.cn", "www(.)evil(.)cn"),
        ("reports.errors.TransientError", "reports.errors.TransientError"),  # a name, not a domain
        ("a\u202ebidi\u200bzero", "abidizero"),
    ],
)
def test_neutral_defangs_every_link_a_chat_client_would_make(value, shown):
    assert neutral(value) == shown


@pytest.mark.parametrize("robot", ROBOTS)
def test_hostile_values_carry_no_markup_of_their_own(robot, settings):
    settings.ALERT_LANGUAGE = "en"
    hostile = wire.dingtalk_body(
        robot, render.alert_card(alert(payload=letter(kind=HOSTILE, message=HOSTILE)))
    )
    benign = wire.dingtalk_body(robot, render.alert_card(alert()))
    card, plain = (
        hostile.get("actionCard") or hostile["markdown"],
        benign.get("actionCard") or benign["markdown"],
    )
    for markup in MARKUP:
        assert card["text"].count(markup) == plain["text"].count(markup), markup
        assert markup not in card["title"]
    assert "https://evil" not in card["text"] and "hxxps://evil(.)example/" in card["text"]


def test_a_death_card_decides(settings):
    settings.ALERT_LANGUAGE, settings.CONSOLE_BASE_URL = "zh-hans", "https://console.example"
    OpenLetterCount.objects.create(kind="sales_summary", fingerprint=FP, count=4)
    OpenLetterCount.objects.create(kind="http_export", fingerprint=FP, count=2)
    transient = render.alert_card(alert())
    permanent = render.alert_card(
        alert(payload=letter(permanent=True, error_type="reports.errors.PermanentError"))
    )

    assert "上游恢复后可直接重放" in "\n".join(transient["lines"])
    assert "原样重放会再失败" in "\n".join(permanent["lines"])
    assert (
        "原因：TransientError: timeout" in transient["lines"] and "同一原因未处理：6 条" in transient["lines"]
    )
    assert FP not in transient["title"] + "".join(transient["lines"])  # the cause by its words
    assert transient["links"] == [
        ["查看死信", "https://console.example/console/dead-letters/7/"],
        ["重放这一条", "https://console.example/console/dead-letters/7/replay/"],
        ["重放该原因（6）…", f"https://console.example/console/bulk/preview/?action=replay&fingerprint={FP}"],
    ]


def test_times_are_shown_in_the_team_zone_with_its_name(settings):
    settings.ALERT_LANGUAGE, settings.TIME_ZONE = "zh-hans", "Asia/Shanghai"
    card = render.alert_card(alert())
    assert "时间：2026-11-23 20:00:00 Asia/Shanghai" in card["lines"]


def test_a_digest_of_one_batch_counts_the_batch_deaths(settings):
    settings.ALERT_LANGUAGE = "zh-hans"
    batch = alert(
        AlertCategory.BATCH_SUMMARY,
        {"batch_id": str(uuid.uuid4()), "name": "nightly", "total": 40, "done": 10, "dead": 30},
        "batch:x",
    )
    card = render.digest_card(
        [{"sample": batch, "count": 1, "first": NOW, "last": NOW, "kinds": []}], max_groups=5
    )
    assert "共 30 条" in card["title"] and "共 0 条" not in card["title"]


def notices() -> list[dict]:
    bulk = {
        "kind": "",
        "action": "replay",
        "bulk_id": str(uuid.uuid4()),
        "total": 30,
        "succeeded": 20,
        "skipped": 1,
        "start_at": NOW.isoformat(),
    }
    resolved = {
        **letter(),
        "fingerprint": FP,
        "deaths": 9,
        "started_at": NOW.isoformat(),
        "last_death_at": (NOW + timedelta(minutes=3)).isoformat(),
        "duration_seconds": 180,
        "quiet_seconds": 1800,
        "replayed": 2,
    }
    groups = [
        {"sample": alert(), "count": 5, "first": NOW, "last": NOW, "kinds": ["sales_summary"]},
        {
            "sample": alert(payload=letter(new=True)),
            "count": 2,
            "first": NOW,
            "last": NOW,
            "kinds": ["probe"],
        },
    ]
    cards = [
        render.alert_card(alert()),
        render.alert_card(alert(payload=letter(new=True, release="v1.9", permanent=True))),
        render.alert_card(alert(), more=8, minutes=5, follow_up=True),
        render.alert_card(alert(), more=2, minutes=1),
        render.alert_card(
            alert(
                AlertCategory.BATCH_SUMMARY,
                {"batch_id": str(uuid.uuid4()), "name": "nightly", "total": 3, "done": 2, "dead": 1},
                "",
            )
        ),
        render.alert_card(alert(AlertCategory.RESOLVED, resolved)),
        render.alert_card(
            alert(
                AlertCategory.RESOLVED,
                {"notice": "kind_resumed", "kind": "sales_summary", "waiting": 4, "muted": 3},
                "",
            )
        ),
        render.alert_card(
            alert(
                AlertCategory.RESOLVED,
                {
                    "notice": "snooze_ended",
                    "fingerprint": FP,
                    "kind": "",
                    "error_type": "x.TransientError",
                    "message": "timeout",
                    "reason": "deploy",
                    "deaths": 3,
                    "started_at": NOW.isoformat(),
                    "until": NOW.isoformat(),
                },
            )
        ),
        render.alert_card(
            alert(
                AlertCategory.RESOLVED,
                {
                    "notice": "snooze_ended",
                    "fingerprint": "",
                    "kind": "sales_summary",
                    "reason": "deploy",
                    "deaths": 0,
                },
            )
        ),
        render.alert_card(
            alert(AlertCategory.RESOLVED, {"notice": "bulk_finished", "status": "completed", **bulk})
        ),
        render.alert_card(
            alert(AlertCategory.RESOLVED, {"notice": "bulk_finished", "status": "cancelled", **bulk})
        ),
        render.alert_card(
            alert(
                AlertCategory.RESOLVED,
                {
                    "notice": "bulk_paused",
                    "status": "paused",
                    "died": 6,
                    "finished": 10,
                    "ratio": 60,
                    "threshold": 50,
                    **bulk,
                },
            )
        ),
        render.alert_card(
            alert(
                AlertCategory.RESOLVED,
                {
                    "notice": "canary_failed",
                    "status": "canary_failed",
                    "replayed": 5,
                    "done": 1,
                    "died": 4,
                    "needed": 4,
                    **bulk,
                },
            )
        ),
        render.alert_card(
            alert(
                AlertCategory.RESOLVED,
                {"notice": "not_started", "status": "failed", "error": "timeout", **bulk},
            )
        ),
        render.alert_card(alert(AlertCategory.TEST, {}, "")),
        render.digest_card(groups, max_groups=1),
    ]
    return cards


# What may stay Latin in a Chinese notice: the names and ids it quotes (kinds, error types, the
# error's own text, the zone, the operator's reason, a release), never a word of the template.
NAMES = re.compile(
    r"https?://\S+|[0-9a-f-]{36}|sales_summary|probe|nightly|deploy|v1\.9|Asia/Shanghai|"
    r"(?:reports\.errors\.|x\.)?(?:Transient|Permanent)Error|timeout"
)


@pytest.mark.parametrize("active", ["en", "zh-hans"])
def test_every_notice_in_chinese_has_no_english_word_outside_names_and_ids(settings, active):
    settings.ALERT_LANGUAGE, settings.TIME_ZONE = "zh-hans", "Asia/Shanghai"
    with translation.override(active):
        cards = notices()
    for card in cards:
        for channel in ROBOTS:  # as DingTalk shows it: title, text and buttons
            body = wire.dingtalk_body(channel, card)
            shown = body.get("actionCard") or body["markdown"]
            words = [shown["title"], shown["text"], shown.get("singleTitle", "")]
            words += [b["title"] for b in shown.get("btns", [])]
            left = NAMES.sub(" ", " ".join(words))
            assert re.search(r"[\u4e00-\u9fff]", left), card
            assert not re.search(r"[A-Za-z]{2,}", left), (re.findall(r"[A-Za-z]{2,}", left), card["title"])


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("a\x00b\x07c\x1b[31md\x7f", "abc(31md"),
        ("left\u2066right\u2069\u200e\u200f\u061c", "leftright"),
        ("line\u2028sep\u2029para\x85next", "line sep para next"),
        ("x" * 500, "x" * 159 + "…"),
    ],
)
def test_neutral_drops_control_and_bidi_characters_and_caps_the_length(value, shown):
    assert neutral(value) == shown


PHISHING = "nightly https://login.evil.example/sso?next=console \u202egnp.exe\u202c www.evil.example/x dingtalk://dingtalkclient/page/link?url=x"


@pytest.mark.parametrize("robot", ROBOTS)
def test_a_batch_name_with_a_bare_url_and_a_right_to_left_override_is_defanged(robot, settings):
    settings.CONSOLE_BASE_URL = "https://console.example"
    payload = {"batch_id": str(uuid.uuid4()), "name": PHISHING, "total": 3, "done": 3, "dead": 0}
    body = wire.dingtalk_body(robot, render.alert_card(alert(AlertCategory.BATCH_SUMMARY, payload, "")))
    shown = body.get("actionCard") or body["markdown"]
    for rendered in (shown["title"], shown["text"]):
        for linkable in ("https://login", "www.evil", "evil.example", "dingtalk://dingtalkclient", "\u202e"):
            assert linkable not in rendered, linkable
    assert "hxxps://login(.)evil(.)example/sso" in shown["title"]
    assert "www(.)evil(.)example/x" in shown["text"] and "dingtalk(:)//ding" in shown["text"]


@pytest.mark.parametrize(
    "robot", [*ROBOTS, Channel("dingtalk", "dingtalk", url="https://r.invalid/", keyword="报警")]
)
def test_a_digest_stays_within_what_dingtalk_accepts(robot, settings):
    settings.CONSOLE_BASE_URL = "https://console.example"
    groups = [
        {
            "sample": alert(payload=letter(error_type="E" * 200, message="m" * 300), fingerprint=f"{n:040x}"),
            "count": 100 - n,
            "first": NOW,
            "last": NOW,
            "kinds": ["k" * 100] * 3,
        }
        for n in range(60)
    ]
    body = wire.dingtalk_body(robot, render.digest_card(groups, max_groups=60))
    text = (body.get("actionCard") or body["markdown"])["text"]
    assert len(text) <= wire.DINGTALK_TEXT_MAX
    if robot.keyword:
        assert text.endswith(robot.keyword)


def test_the_cause_button_opens_a_preview_scoped_to_exactly_that_cause(settings):
    settings.CONSOLE_BASE_URL = "https://console.example"
    mine = [make_dead_letter(error_message="upstream refused") for _ in range(3)]
    make_dead_letter(error_type="reports.errors.PermanentError", error_message="bad region")  # another cause
    card = render.alert_card(alert(fingerprint=mine[0].fingerprint))
    label, url = card["links"][-1]
    assert label == "Replay the cause (3)…"
    path, query = url.split("?", 1)
    assert path == "https://console.example/console/bulk/preview/"
    params = QueryDict(query)
    assert params["action"] == "replay"  # what the preview would do; the page acts on a POST only
    filters = QueryDict(mutable=True)
    filters.update({k: v for k, v in params.items() if k != "action"})
    selection = build_selection(action=params["action"], scope="filter", filter_qs=filters.urlencode())
    preview = preview_bulk_action(selection=selection)
    assert preview.count == 3 and {x.pk for x in preview.sample} == {x.pk for x in mine}
