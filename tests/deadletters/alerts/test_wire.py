"""Every channel's wire format (DingTalk's in test_sender): the documented request format and
signature, each service's errors and rate limits, and the outbox guarantees per channel (one down
holds up no other; never lost, never duplicated in effect). Real HTTP to local fakes
(tests/channel_fakes.py), real SMTP, real Redis."""

import email.header
import logging
import time

import pytest
from django.core import mail

from deadletters.alerts.channels import Channel
from deadletters.alerts.health import alert_health
from deadletters.alerts.sender import retry_failed_alerts, send_due_alerts
from deadletters.alerts.wire import dingtalk_sign, dingtalk_url, message_id
from deadletters.models import Alert, AlertMessage, AlertStatus
from tests.conftest import make_death
from tests.dingtalk_fake import FakeClock

pytestmark = pytest.mark.django_db(transaction=True)
CONSOLE = "https://console.example.invalid"


def by_name(reports):
    return {r.channel: r for r in reports}


def test_one_death_reaches_every_channel_once_in_its_documented_format(channels, redis_conn):
    fakes = channels(feishu={"secret": "feishu-secret-0123456789"}, wecom={}, slack={}, webhook={}, email={})
    letter = make_death(kind="sales_summary", message="region 'north' does not exist")
    assert set(Alert.objects.values_list("channel", flat=True)) == set(fakes)

    reports = by_name(send_due_alerts())

    assert all(r.sent_messages == 1 and r.sent_alerts == 1 for r in reports.values()), reports
    assert not Alert.objects.exclude(status=AlertStatus.SENT).exists()
    detail = f"{CONSOLE}/console/dead-letters/{letter.pk}/"
    # Feishu: a signed rich-text post (the fake checked timestamp and sign) with both links.
    [hit] = fakes["feishu"].hits
    assert hit.accepted and hit.body["msg_type"] == "post" and {"timestamp", "sign"} <= set(hit.body)
    text = fakes["feishu"].post_text(hit)
    assert "sales_summary" in text and "region" in text
    links = [
        el["href"]
        for row in hit.body["content"]["post"]["zh_cn"]["content"]
        for el in row
        if el["tag"] == "a"
    ]
    preview = f"{CONSOLE}/console/bulk/preview/?action=replay&fingerprint={letter.fingerprint}"
    assert links == [detail, f"{detail}replay/", preview]
    # WeCom: markdown with the links.
    [hit] = fakes["wecom"].hits
    assert (
        hit.accepted
        and hit.body["msgtype"] == "markdown"
        and f"]({detail})" in hit.body["markdown"]["content"]
    )
    # Slack: a header, the lines as plain text, link buttons.
    [hit] = fakes["slack"].hits
    assert (
        hit.accepted
        and hit.body["text"] == "New cause: sales_summary · PermanentError: region 'north' does not exist"
    )
    assert [b["type"] for b in hit.body["blocks"]] == ["header", "section", "actions"]
    assert hit.body["blocks"][2]["elements"][0]["url"] == detail
    # Webhook: signed (the fake verified it), with the message's uuid as the idempotency key.
    [hit] = fakes["webhook"].hits
    message = AlertMessage.objects.get(channel="webhook")
    assert hit.accepted and hit.headers["Idempotency-Key"] == str(message.msg_uuid) == hit.body["id"]
    assert (
        hit.body["event"] == "new_cause" and {"label": "Open dead letter", "url": detail} in hit.body["links"]
    )
    # Email through a real SMTP server.
    [received] = fakes["email"].mails
    # The first death of a cause never seen before says so.
    subject = str(email.header.make_header(email.header.decode_header(received["Subject"])))
    assert subject.startswith("New cause: sales_summary · ") and received["To"] == "oncall@example.com"
    assert received["Message-ID"] == message_id(str(AlertMessage.objects.get(channel="email").msg_uuid))
    assert detail in received.get_payload(decode=True).decode()


def test_email_format_through_the_locmem_backend(channels, settings, redis_conn):
    channels(email={"channel": {"to": ["a@example.com", "b@example.com"], "keyword": "OPS"}})
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    make_death(kind="probe", message="bad parameter 'x'")
    send_due_alerts()
    [sent] = mail.outbox
    assert (
        sent.subject == "[OPS] New cause: probe · PermanentError: bad parameter 'x'"
        and "New cause: first death of this fingerprint" in sent.body
        and sent.to == ["a@example.com", "b@example.com"]
    )
    assert sent.extra_headers["X-Alert-Event"] == "new_cause"
    assert (
        "Cause: PermanentError: bad parameter 'x'" in sent.body and "Replay this one: https://" in sent.body
    )
    make_death(kind="probe", message="bad parameter 'y'")  # the same cause again: no longer new
    send_due_alerts()
    assert len(mail.outbox) == 1  # folded: it goes out as the cause's follow-up
    send_due_alerts(clock=lambda: time.time() + 301)
    assert mail.outbox[1].subject == "[OPS] +1 more: PermanentError: bad parameter 'y'"
    assert "New cause" not in mail.outbox[1].body


def test_a_channel_that_rejects_its_configuration_holds_up_no_other(channels, settings, redis_conn, caplog):
    clock = FakeClock()
    fakes = channels(feishu={"secret": "the-right-secret-0123456789", "clock": clock}, slack={"clock": clock})
    settings.ALERT_CHANNELS[0]["secret"] = "a-wrong-secret-0123456789"
    make_death()
    with caplog.at_level(logging.INFO, logger="deadletters"):
        reports = by_name(send_due_alerts(clock=clock))

    assert reports["slack"].sent_messages == 1
    assert reports["feishu"].failed_messages == 1 and "configuration rejected" in reports["feishu"].paused
    failed = AlertMessage.objects.get(channel="feishu")
    assert failed.status == AlertStatus.FAILED and failed.last_errcode == 19021
    # The stored error and the log name the code, never the hook id or the secret.
    hook_id = fakes["feishu"].hook_id
    for text in (failed.last_error, caplog.text, str(failed.body)):
        assert hook_id not in text and "a-wrong-secret" not in text
    # A later death waits behind the pause on Feishu only, and goes out once the operator fixed it.
    make_death(message="another cause 'y'")
    clock.advance(2)
    reports = by_name(send_due_alerts(clock=clock))
    assert reports["slack"].sent_messages == 1 and reports["feishu"].sent_messages == 0
    settings.ALERT_CHANNELS[0]["secret"] = "the-right-secret-0123456789"
    assert retry_failed_alerts() == 1
    clock.advance(2)
    reports = by_name(send_due_alerts(clock=clock))
    assert reports["feishu"].sent_alerts == 2
    assert not Alert.objects.exclude(status=AlertStatus.SENT).exists()


def test_wecom_too_fast_pauses_the_channel_and_costs_no_attempt(channels, redis_conn):
    clock = FakeClock()
    fakes = channels(wecom={"clock": clock}, webhook={"clock": clock})
    make_death()
    fakes["wecom"].fail_next.append((200, {"errcode": 45009, "errmsg": "api freq out of limit"}, {}))

    reports = by_name(send_due_alerts(clock=clock))

    assert "throttled until" in reports["wecom"].paused and reports["webhook"].sent_messages == 1
    message = AlertMessage.objects.get(channel="wecom")
    assert message.status == AlertStatus.PENDING and message.attempts == 0 and message.last_errcode == 45009
    clock.advance(30)
    assert by_name(send_due_alerts(clock=clock))["wecom"].sent_messages == 0
    clock.advance(31)
    assert by_name(send_due_alerts(clock=clock))["wecom"].sent_messages == 1
    assert [h.code for h in fakes["wecom"].hits] == [45009, 0]


def test_slack_rate_limit_answer_is_honoured_by_its_retry_after(channels, redis_conn):
    clock = FakeClock()
    fakes = channels(slack={"clock": clock})
    make_death()
    fakes["slack"].fail_next.append((429, "rate_limited", {"Retry-After": "5"}))
    assert "throttled until" in send_due_alerts(clock=clock)[0].paused
    clock.advance(4)
    assert send_due_alerts(clock=clock)[0].sent_messages == 0
    clock.advance(2)
    assert send_due_alerts(clock=clock)[0].sent_messages == 1
    assert [h.status for h in fakes["slack"].hits] == [429, 200]


def test_a_channel_that_is_down_retries_with_backoff_and_loses_nothing(channels, redis_conn):
    clock = FakeClock()
    fakes = channels(webhook={"clock": clock}, wecom={"clock": clock})
    fakes["webhook"].mode = "500"
    for i in range(3):
        make_death(message=f"cause {i} 'z'")

    reports = by_name(send_due_alerts(clock=clock))
    assert reports["wecom"].sent_alerts == 3
    assert reports["webhook"].retries_scheduled == 1 and "unreachable" in reports["webhook"].paused
    # Deaths while it is down wait and coalesce; every one is delivered once it answers again.
    for i in range(30):
        make_death(message=f"later cause {i} 'w'")
    for _ in range(5):
        clock.advance(11)
        send_due_alerts(clock=clock)
    fakes["webhook"].mode = "ok"
    for _ in range(40):
        clock.advance(11)
        send_due_alerts(clock=clock)
    assert not Alert.objects.exclude(status=AlertStatus.SENT).exists()
    carried = sum(m.alerts.count() for m in AlertMessage.objects.filter(channel="webhook", status="sent"))
    assert carried == 33
    assert len(fakes["webhook"].effects) == AlertMessage.objects.filter(channel="webhook").count()


def test_a_crash_between_send_and_mark_resends_with_the_same_idempotency_key(channels, redis_conn):
    clock = FakeClock()
    fakes = channels(webhook={"clock": clock})
    make_death()
    send_due_alerts(clock=clock)
    message = AlertMessage.objects.get()
    # As if the sender died after the POST and before the mark: pending, its lease running.
    AlertMessage.objects.filter(pk=message.pk).update(
        status=AlertStatus.PENDING, attempts=0, next_attempt_at=message.sent_at
    )
    Alert.objects.update(status=AlertStatus.PENDING)
    clock.advance(60)
    send_due_alerts(clock=clock)
    keys = [h.headers["Idempotency-Key"] for h in fakes["webhook"].hits]
    assert keys == [str(message.msg_uuid)] * 2 and len(fakes["webhook"].effects) == 1
    assert Alert.objects.get().status == AlertStatus.SENT


def test_routing_rules_pick_channels_by_event_and_kind(channels, redis_conn):
    fakes = channels(
        routes={"wecom": {"kinds": ["sales_summary"]}, "slack": {"events": ["new_cause", "resolved"]}},
        wecom={},
        slack={},
        webhook={},
    )
    make_death(kind="probe")  # a new cause: Slack takes it
    make_death(kind="sales_summary")  # the same cause again: Slack does not
    assert sorted(Alert.objects.values_list("channel", flat=True)) == [
        "slack",
        "webhook",
        "webhook",
        "wecom",
    ]
    send_due_alerts()
    # The webhook's two deaths of one cause in one pass are one card that counts both.
    assert len(fakes["wecom"].accepted) == 1 and len(fakes["webhook"].accepted) == 1
    assert AlertMessage.objects.get(channel="webhook").alerts.count() == 2
    [hit] = fakes["slack"].accepted
    assert hit.body["text"].startswith("New cause: probe · ")


def test_an_unreachable_webhook_url_never_reaches_the_stored_error(channels, settings, redis_conn):
    channels(slack={})
    settings.ALERT_CHANNELS[0]["url"] = "http://127.0.0.1:9/services/T1/B1/secret-path-token-0123456789"
    make_death()
    report = send_due_alerts()[0]
    message = AlertMessage.objects.get()
    assert report.retries_scheduled == 1 and message.last_error
    assert "secret-path-token" not in message.last_error and "secret-path-token" not in report.summary()


def test_urllib3_debug_lines_never_show_a_hooks_secret_path(channels, redis_conn, caplog):
    fakes = channels(slack={})
    make_death()
    with caplog.at_level(logging.DEBUG, logger="urllib3.connectionpool"):
        send_due_alerts()
    assert fakes["slack"].accepted and "POST" in caplog.text
    assert "XXXXXXXXXXXXXXXXXXXXXXXX" not in caplog.text and "<redacted>" in caplog.text


def test_a_redirect_is_not_followed_and_the_channel_says_why(channels, redis_conn):
    fakes = channels(webhook={}, slack={})
    elsewhere = fakes["slack"]  # an address nobody configured for the webhook channel
    fakes["webhook"].fail_next.append((307, "", {"Location": f"{elsewhere.url}/internal"}))
    make_death()

    reports = by_name(send_due_alerts())

    assert [h.status for h in fakes["webhook"].hits] == [307]
    assert not [
        h for h in elsewhere.hits if h.path.endswith("/internal")
    ]  # the signed body went nowhere else
    message = AlertMessage.objects.get(channel="webhook")
    assert message.status == AlertStatus.FAILED and message.last_errcode == 307
    assert (
        "redirect, which is not followed" in message.last_error
        and "configuration" in reports["webhook"].paused
    )
    [status] = [c for c in alert_health().channels if c.name == "webhook"]
    assert status.paused == "config" and "redirect" in status.reason


# DingTalk's 加签, computed independently with
# `printf '1700000000000\nSECabc123' | openssl dgst -sha256 -hmac SECabc123 -binary | base64`.
EXPECTED_BASE64 = "N5P09a4+p1AMJIJWnIvQd2Yxw9+fu/oEBnPrjCcsLXk="


def test_dingtalk_signs_with_the_url_encoded_base64_hmac_of_timestamp_newline_secret():
    assert dingtalk_sign("SECabc123", 1700000000000) == (
        EXPECTED_BASE64.replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
    )
    robot = Channel(
        "dingtalk",
        "dingtalk",
        url="https://oapi.dingtalk.com/robot/send?access_token=abc",
        secret="SECabc123",
    )
    assert dingtalk_url(robot, now=1700000000.0) == (
        "https://oapi.dingtalk.com/robot/send?access_token=abc&timestamp=1700000000000"
        f"&sign={dingtalk_sign('SECabc123', 1700000000000)}"
    )
    unsigned = Channel("dingtalk", "dingtalk", url="https://oapi.dingtalk.com/robot/send?access_token=abc")
    assert dingtalk_url(unsigned, now=1700000000.0) == unsigned.url
