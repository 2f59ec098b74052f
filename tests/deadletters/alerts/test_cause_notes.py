"""A cause's runbook note in its alerts: its first line and first link reach the card of every
channel (real HTTP to the local fakes, real SMTP), in ALERT_LANGUAGE when the note has both
languages, and what the operator wrote carries no markup, link or invisible character into any."""

import json
from datetime import UTC, datetime

import pytest

from deadletters.alerts import render
from deadletters.alerts.sender import send_due_alerts
from deadletters.alerts.text import neutral
from deadletters.models import Alert, AlertCategory
from deadletters.services.cause_notes import cause_note_save
from tests.conftest import make_death

LINKS = ["https://wiki.example.com/runbooks/orders", "https://grafana.example.com/d/orders"]


def sent_texts(channels, fake_dingtalk, note: dict, links: list[str]) -> dict[str, str]:
    """One death of a cause with this note, sent to every channel type: what each service received."""
    fakes = channels(feishu={}, wecom={}, slack={}, webhook={}, email={})
    robot = fake_dingtalk()
    letter = make_death(kind="sales_summary", message="orders API unreachable")
    cause_note_save(fingerprint=letter.fingerprint, texts=note, links=links, actor="alice")
    reports = send_due_alerts()
    assert len(reports) == 6 and all(r.sent_messages == 1 for r in reports), reports
    received = {kind: fakes[kind].hits[0].raw.decode() for kind in ("feishu", "wecom", "slack", "webhook")}
    received["email"] = fakes["email"].mails[0].get_payload(decode=True).decode()
    received["dingtalk"] = json.dumps(robot.accepted[0].body, ensure_ascii=False)
    return received


@pytest.mark.django_db(transaction=True)
def test_the_notes_first_line_and_first_link_reach_every_channel(channels, fake_dingtalk, redis_conn):
    note = {"en": "Owner: payments team; check the orders API first.\nThen restart the exporter."}

    for channel, text in sent_texts(channels, fake_dingtalk, note, LINKS).items():
        assert "Runbook: Owner: payments team; check the orders API first." in text, channel
        assert "restart the exporter" not in text, channel
        assert LINKS[0] in text and LINKS[1] not in text, channel


@pytest.mark.django_db(transaction=True)
def test_markup_links_and_control_characters_in_a_note_are_inert_on_every_channel(
    channels, fake_dingtalk, redis_conn
):
    line = "Owner **ops** [click](https://evil.example/x) <b>bold</b> `code` \u202e# heading\x07"
    link = "https://wiki.example.com/a_(b)[x](javascript:alert(1))"

    for channel, text in sent_texts(channels, fake_dingtalk, {"en": line}, [link]).items():
        assert neutral(line.replace("\x07", "")) in text, channel
        for hostile in ("**ops**", "[click]", "https://evil.example", "<b>", "`code`", "\u202e", "\x07",
                        "](javascript", "[x]"):
            assert hostile not in text, (channel, hostile)
        assert "https://wiki.example.com/a_%28b%29%5Bx%5D%28javascript:alert%281%29%29" in text, channel


@pytest.mark.django_db
def test_the_card_picks_the_alert_languages_note_and_resolved_cards_carry_it(settings):
    settings.ALERT_LANGUAGE = "zh-hans"
    letter = make_death(message="orders API unreachable")
    both = {"en": "Owner: payments", "zh-hans": "负责人：支付组"}
    cause_note_save(fingerprint=letter.fingerprint, texts=both, links=[], actor="alice")
    death = Alert(category=AlertCategory.DEAD_LETTER, payload={"kind": "probe", "dead_letter_id": letter.pk},
                  fingerprint=letter.fingerprint, created_at=datetime(2026, 11, 23, tzinfo=UTC))
    resolved = Alert(category=AlertCategory.RESOLVED, payload={"fingerprint": letter.fingerprint})

    for card in (render.alert_card(death), render.alert_card(resolved)):
        assert "负责人：支付组" in card["lines"][0] and "payments" not in json.dumps(card)
    settings.ALERT_LANGUAGE = "en"  # a note in one language serves both
    cause_note_save(fingerprint=letter.fingerprint, texts={"zh-hans": both["zh-hans"]}, links=[], actor="bob")
    assert render.alert_card(death)["lines"][0] == "Runbook: 负责人：支付组"
