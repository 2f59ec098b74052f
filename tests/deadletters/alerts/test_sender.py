"""DingTalk alerts for dead letters: outbox, signed actionCards, errcodes, retries, redaction.

Every test talks real HTTP to a fake robot (tests/dingtalk_fake.py) and uses the real Redis."""

import io
import json
import re
import time

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.db.models import Min
from rq import Queue

from config.embedded_redis import free_port
from deadletters.alerts.health import alert_health
from deadletters.alerts.outbox import KICK_KEY, enqueue_batch_summary_alert
from deadletters.alerts.sender import FOLD_SECONDS, send_due_alerts
from deadletters.models import Alert, AlertMessage, AlertStatus, DeadLetter
from deadletters.selectors.letters import alerts_for_dead_letter
from reports.models import ReportBatch, ReportTask, TaskStatus
from reports.services import submit_task
from tests.conftest import make_death, wait_until
from tests.dingtalk_fake import FakeClock

pytestmark = pytest.mark.django_db(transaction=True)


def send_pending_alerts(**kwargs):
    """One pass; the robot is the only channel here."""
    [report] = send_due_alerts(**kwargs)
    return report


CONSOLE = "https://console.example.invalid"


ALERT_TEXTS = {
    # ALERT_LANGUAGE: (title start, heading, a field line, the buttons), each in that language alone.
    "zh-hans": (
        "[报表告警] 新原因：sales_summary",
        "### 新原因：sales_summary",
        "- 尝试次数：1",
        ["查看死信", "重放这一条", "重放该原因（1）…"],
    ),
    "en": (
        "[报表告警] New cause: sales_summary",
        "### New cause: sales_summary",
        "- Attempts: 1",
        ["Open dead letter", "Replay this one", "Replay the cause (1)…"],
    ),
}


@pytest.mark.parametrize("language", ["zh-hans", "en"])
def test_one_death_sends_one_signed_action_card_with_both_links(
    fake_dingtalk, redis_conn, settings, language
):
    settings.ALERT_LANGUAGE = language
    robot = fake_dingtalk(keyword="报表告警")
    title, heading, field, buttons = ALERT_TEXTS[language]

    letter = make_death(kind="sales_summary", message="region 'north' does not exist\nsecond line")

    [alert] = Alert.objects.filter(dead_letter=letter)
    assert alert.status == AlertStatus.PENDING and alert.message is None
    # The death's commit kicked one send pass on the high queue.
    assert any(job_id.startswith("alerts-send-") for job_id in Queue("high", connection=redis_conn).job_ids)

    report = send_pending_alerts()

    assert report.sent_messages == 1 and report.sent_alerts == 1
    [received] = robot.received
    assert received.errcode == 0  # the fake robot verified the signature, timestamp and keyword
    assert set(received.query) == {"access_token", "timestamp", "sign"}
    assert received.body["msgtype"] == "actionCard"
    card = received.body["actionCard"]
    assert card["title"].startswith(title)
    for expected in (
        heading,
        str(letter.task.public_id),
        "sales_summary",
        "PermanentError: region 'north' does not exist second line",
        field,
    ):
        assert expected in card["text"], expected
    assert [b["title"] for b in card["btns"]] == buttons
    # One language per message: no English line under the Chinese one, no Chinese in English but
    # the robot's keyword.
    if language == "en":
        assert not re.search(r"[\u4e00-\u9fff]", card["text"].replace("报表告警", ""))
    else:
        assert "New cause" not in card["text"] and "Attempts" not in card["text"]
    assert [b["actionURL"] for b in card["btns"]] == [
        f"{CONSOLE}/console/dead-letters/{letter.pk}/",
        f"{CONSOLE}/console/dead-letters/{letter.pk}/replay/",
        f"{CONSOLE}/console/bulk/preview/?action=replay&fingerprint={letter.fingerprint}",
    ]
    alert.refresh_from_db()
    message = alert.message
    assert alert.status == AlertStatus.SENT and message.status == AlertStatus.SENT
    assert received.body["msgUuid"] == str(message.msg_uuid)
    assert message.attempts == 1 and message.sent_at is not None and not message.is_digest
    assert list(alerts_for_dead_letter(letter)) == [alert]
    # Nothing left: a second pass sends nothing.
    assert send_pending_alerts().sent_messages == 0 and len(robot.received) == 1


def test_alert_row_lives_and_dies_with_the_dead_letter_transaction(fake_dingtalk):
    fake_dingtalk()
    with pytest.raises(RuntimeError), transaction.atomic():
        make_death()
        assert Alert.objects.count() == 1
        raise RuntimeError("the death's transaction rolls back")
    assert not DeadLetter.objects.exists() and not Alert.objects.exists()


def test_dead_letter_from_a_real_worker_reaches_dingtalk_within_seconds(fake_dingtalk, start_worker):
    robot = fake_dingtalk()
    start_worker(
        DINGTALK_WEBHOOK=robot.webhook,
        DINGTALK_SECRET=robot.secret,
        CONSOLE_BASE_URL=CONSOLE,
        DINGTALK_TIMEOUT=2,
    )
    started = time.monotonic()
    task = submit_task(kind="probe", params={"fail_permanently": True}).task

    # No alert sender runs here: only the kick on the death's commit can deliver it, so its
    # arrival at all is the claim; the time is printed, not bounded (it measures machine load).
    wait_until(lambda: robot.accepted, timeout=60, message="the alert to reach the fake robot")

    print(f"alert delivered {time.monotonic() - started:.2f} s after the submit")
    letter = DeadLetter.objects.get(task=task)
    [received] = robot.accepted
    assert f"/console/dead-letters/{letter.pk}/replay/" in json.dumps(received.body)
    wait_until(lambda: Alert.objects.filter(dead_letter=letter, status=AlertStatus.SENT).exists())
    assert ReportTask.objects.get(pk=task.pk).status == TaskStatus.DEAD


def test_without_a_webhook_alerts_are_recorded_as_skipped(settings, redis_conn):
    settings.DINGTALK_WEBHOOK = ""
    letter = make_death()

    [alert] = Alert.objects.filter(dead_letter=letter)
    assert alert.status == AlertStatus.SKIPPED
    assert not Queue("high", connection=redis_conn).job_ids and not redis_conn.exists(KICK_KEY)
    out = io.StringIO()
    call_command("send_alerts", stdout=out)
    assert "no alert channel configured" in out.getvalue()
    health = alert_health()
    assert not health.configured and health.skipped == 1 and not health.ok
    with pytest.raises(CommandError, match="DINGTALK_WEBHOOK is not set"):
        call_command("dingtalk_test", stdout=io.StringIO())


@pytest.mark.parametrize(
    "misconfiguration, expected_errmsg",
    [
        ("wrong secret", "sign not match"),
        ("missing keyword", "keywords not in content"),
        ("clock two hours off", "timestamp is invalid"),
    ],
)
def test_security_rejection_is_a_visible_configuration_error_that_is_not_hammered(
    fake_dingtalk, settings, misconfiguration, expected_errmsg
):
    robot = fake_dingtalk(keyword="运维值班")
    clock = time.time
    if misconfiguration == "wrong secret":
        settings.DINGTALK_SECRET = "SECnot-the-robots-secret"
    elif misconfiguration == "missing keyword":
        settings.DINGTALK_KEYWORD = ""
    else:
        clock = lambda: time.time() - 7200  # noqa: E731
    first = make_death(message="first")

    report = send_pending_alerts(clock=clock)

    message = Alert.objects.get(dead_letter=first).message
    assert message.status == AlertStatus.FAILED and message.last_errcode == 310000
    assert expected_errmsg in message.last_error
    assert Alert.objects.get(dead_letter=first).status == AlertStatus.FAILED
    assert "configuration" in report.paused
    health = alert_health(clock=clock)
    assert "310000" in health.config_error and health.failed == 1
    # Further deaths wait: the robot is not hammered while the configuration is wrong.
    second = make_death(message="second")
    for _ in range(3):
        assert send_pending_alerts(clock=clock).sent_messages == 0
    assert len(robot.received) == 1
    assert Alert.objects.get(dead_letter=second).status == AlertStatus.PENDING

    # The operator fixes the configuration and resends the failed alert.
    settings.DINGTALK_SECRET, settings.DINGTALK_KEYWORD = robot.secret, robot.keyword
    out = io.StringIO()
    call_command("send_alerts", "--retry-failed", stdout=out)

    assert "1 failed alert put back to pending" in out.getvalue()
    assert Alert.objects.filter(status=AlertStatus.SENT).count() == 2
    assert robot.uuid_counts()[str(message.msg_uuid)] == 2  # the resend kept its msgUuid
    assert alert_health().config_error == ""


def test_robot_down_for_a_while_then_back_delivers_every_alert(fake_dingtalk):
    clock = FakeClock()
    robot = fake_dingtalk(clock=clock)
    robot.set_mode("500")
    letters = [make_death(message=f"down {i}") for i in range(3)]

    report = send_pending_alerts(clock=clock)
    assert report.sent_messages == 0 and report.retries_scheduled == 1
    assert report.last_error == "HTTP 500: <html>502 Bad Gateway</html>"

    robot.set_mode("timeout")
    letters += [make_death(message=f"while down {i}") for i in range(5)]
    for _ in range(4):  # minutes of outage, the sender keeps trying with backoff
        clock.advance(61)
        report = send_pending_alerts(clock=clock)
        assert report.sent_messages == 0
    assert Alert.objects.filter(status=AlertStatus.PENDING).count() == 8
    errors = set(AlertMessage.objects.exclude(last_error="").values_list("last_error", flat=True))
    assert errors == {"timeout: no answer within 1s"}

    robot.set_mode("ok")
    for _ in range(10):
        clock.advance(61)
        send_pending_alerts(clock=clock)
        if not Alert.objects.filter(status=AlertStatus.PENDING).exists():
            break

    assert Alert.objects.filter(status=AlertStatus.SENT).count() == len(letters) == 8
    carried = sum(AlertMessage.objects.get(msg_uuid=r.msg_uuid).alerts.count() for r in robot.accepted)
    assert carried == 8
    assert not AlertMessage.objects.exclude(status=AlertStatus.SENT).exists()


def test_refused_sends_end_in_failed_after_the_budget_and_retry_failed_resends(fake_dingtalk, settings):
    settings.DINGTALK_MAX_SEND_ATTEMPTS = 2
    clock = FakeClock()
    robot = fake_dingtalk(clock=clock)
    settings.DINGTALK_WEBHOOK = robot.webhook.replace(robot.token, "revoked-token")  # errcode 300001
    letter = make_death()

    send_pending_alerts(clock=clock)
    clock.advance(settings.DINGTALK_RETRY_BACKOFF[0] + 1)
    report = send_pending_alerts(clock=clock)

    alert = Alert.objects.get(dead_letter=letter)
    assert report.failed_messages == 1
    assert alert.status == AlertStatus.FAILED and alert.message.status == AlertStatus.FAILED
    assert alert.message.attempts == 2 and alert.message.last_error == "errcode 300001: token is not exist"
    assert alert_health(clock=clock).failed == 1
    clock.advance(1800)
    assert send_pending_alerts(clock=clock).sent_messages == 0  # failed stays failed

    settings.DINGTALK_WEBHOOK = robot.webhook
    call_command("send_alerts", "--retry-failed", stdout=io.StringIO())

    alert.refresh_from_db()
    assert alert.status == AlertStatus.SENT
    assert robot.uuid_counts()[str(alert.message.msg_uuid)] == 3  # 2 refused, then the same uuid accepted


def test_errcode_130101_backs_the_whole_robot_off_for_ten_minutes(fake_dingtalk, settings):
    clock = FakeClock()
    # The robot is shared with another system, so DingTalk says "too fast" before our own budget.
    robot = fake_dingtalk(clock=clock, limit_per_minute=3)
    letters = [make_death(error_type=f"app.errors.Burst{c}", message="burst") for c in "ABCD"]

    report = send_pending_alerts(clock=clock)

    assert robot.answers() == [0, 0, 0, 130101]
    assert report.sent_messages == 3 and "130101" in report.paused
    throttled = Alert.objects.get(dead_letter=letters[3]).message
    assert throttled.status == AlertStatus.PENDING and throttled.last_errcode == 130101
    assert alert_health(clock=clock).throttled_until is not None
    for minute in range(9):  # nine minutes: nothing is sent, whatever arrives
        clock.advance(60)
        if minute in (2, 6):
            make_death(message="during the throttle")
        assert send_pending_alerts(clock=clock).sent_messages == 0
    assert len(robot.received) == 4

    clock.advance(61)
    send_pending_alerts(clock=clock)

    assert not Alert.objects.exclude(status=AlertStatus.SENT).exists()
    assert robot.uuid_counts()[str(throttled.msg_uuid)] == 2  # same msgUuid on the resend
    assert 130101 not in robot.answers()[4:]


def test_secret_and_token_never_reach_logs_or_database(fake_dingtalk, settings, caplog, capsys):
    caplog.set_level("DEBUG")
    robot = fake_dingtalk(keyword="告警")
    clock = FakeClock()
    make_death(message="delivered")
    send_pending_alerts(clock=clock)  # success
    robot.set_mode("500")
    make_death(message="server error")
    clock.advance(61)
    send_pending_alerts(clock=clock)
    robot.set_mode("ok")
    settings.DINGTALK_TIMEOUT = 0.3
    robot.set_mode("timeout")
    clock.advance(61)
    send_pending_alerts(clock=clock)
    robot.set_mode("ok")
    # Connection refused: requests puts the whole URL, token and signature, in its exception text.
    settings.DINGTALK_WEBHOOK = f"http://127.0.0.1:{free_port()}/robot/send?access_token={robot.token}"
    make_death(message="refused")
    clock.advance(61)
    send_pending_alerts(clock=clock)
    refused = AlertMessage.objects.filter(last_error__contains="ConnectionError").get()
    assert "<redacted>" in refused.last_error and robot.token not in refused.last_error
    settings.DINGTALK_WEBHOOK, settings.DINGTALK_SECRET = robot.webhook, "SECwrong-secret-for-the-test"
    make_death(message="bad signature")
    clock.advance(61)
    send_pending_alerts(clock=clock)
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("dingtalk_test", stdout=out)
    settings.DINGTALK_SECRET = robot.secret
    call_command("dingtalk_test", stdout=out)
    alert_health()

    secrets = [robot.token, robot.secret, "SECwrong-secret-for-the-test"]
    signatures = [r.query["sign"] for r in robot.received if "sign" in r.query]
    assert signatures and any("urllib3" in r.name for r in caplog.records)
    logged = caplog.text + "\n".join(r.getMessage() for r in caplog.records) + out.getvalue()
    logged += "".join(capsys.readouterr())
    stored = json.dumps(
        [
            list(AlertMessage.objects.values_list("title", "body", "last_error", "msg_uuid")),
            list(Alert.objects.values_list("fingerprint", "payload", "status")),
        ],
        ensure_ascii=False,
        default=str,
    )
    for value in secrets + signatures:
        assert value not in logged, f"{value[:6]}... leaked into the logs"
        assert value not in stored, f"{value[:6]}... leaked into the database"


def test_dingtalk_test_command_prints_dingtalks_answer(fake_dingtalk, settings):
    settings.ALERT_LANGUAGE = "zh-hans"
    robot = fake_dingtalk(keyword="告警")
    out = io.StringIO()

    call_command("dingtalk_test", "--text", "set up by ops", stdout=out)

    assert 'DingTalk answer: {"errcode": 0, "errmsg": "ok"}' in out.getvalue()
    assert (
        f"the card's links open {CONSOLE}" in out.getvalue()
        or "CONSOLE_BASE_URL is not set" in out.getvalue()
    )
    assert "OK: DingTalk accepted the message" in out.getvalue()
    [received] = robot.received
    assert "报表控制台测试消息" in received.card["title"] and "set up by ops" in received.card["text"]


def test_at_mobiles_and_desktop_wrapped_links(fake_dingtalk, settings):
    robot = fake_dingtalk()
    settings.DINGTALK_AT_MOBILES = ["13800000000"]
    settings.DINGTALK_WRAP_LINKS = True
    letter = make_death()

    send_pending_alerts()

    [received] = robot.accepted
    # DingTalk only notifies @-mentions for text and markdown messages.
    assert received.body["msgtype"] == "markdown"
    assert received.body["at"] == {"atMobiles": ["13800000000"], "isAtAll": False}
    text = received.body["markdown"]["text"]
    assert "@13800000000" in text
    wrapped = (
        "dingtalk://dingtalkclient/page/link?url="
        f"https%3A%2F%2Fconsole.example.invalid%2Fconsole%2Fdead-letters%2F{letter.pk}%2Freplay%2F&pc_slide=false"
    )
    assert wrapped in text


def test_batch_summary_alert_links_to_the_batch_filter(fake_dingtalk, settings):
    settings.ALERT_LANGUAGE = "zh-hans"
    robot = fake_dingtalk()
    batch = ReportBatch.objects.create(name="month-end", total=3)
    with transaction.atomic():
        enqueue_batch_summary_alert(batch=batch, total=3, done=2, dead=1, finished_at=batch.created_at)

    send_pending_alerts()

    [received] = robot.accepted
    card = received.card
    assert "批次完成：month-end（1 条死信）" in card["title"] and "month-end" in card["text"]
    assert card["singleURL"] == f"{CONSOLE}/console/dead-letters/?batch={batch.public_id}"


def test_nine_deaths_of_one_cause_in_eleven_seconds_make_two_pushes_counting_all_nine(
    fake_dingtalk, settings
):
    settings.ALERT_LANGUAGE = "zh-hans"
    clock = FakeClock()
    robot = fake_dingtalk(clock=clock)
    letters = []
    for i in range(9):  # each death kicks a pass, as its commit does
        letters.append(make_death(kind="sales_summary", message=f"upstream 502 after {i} ms"))
        send_pending_alerts(clock=clock)
        clock.advance(11 / 8)
    assert len(robot.accepted) == 1  # the cause's card; the others wait to be folded
    clock.advance(FOLD_SECONDS)
    send_pending_alerts(clock=clock)

    assert len(robot.received) == 2 and len(robot.accepted) == 2
    counted = sum(AlertMessage.objects.get(msg_uuid=r.msg_uuid).alerts.count() for r in robot.accepted)
    assert counted == 9 and not Alert.objects.exclude(status=AlertStatus.SENT).exists()
    follow_up = robot.accepted[1].card
    assert (
        follow_up["title"].startswith("又有 8 条：PermanentError: upstream")
        and "最近 6 分钟内又有 8 条" in follow_up["text"]
    )
    assert follow_up["btns"][-1]["title"] == "重放该原因（9）…"


def test_a_robot_down_five_minutes_drains_at_once_oldest_first(fake_dingtalk):
    clock = FakeClock()
    robot = fake_dingtalk(clock=clock)
    robot.set_mode("500")
    started = clock()
    for i in range(100):  # 100 deaths of 10 causes over five minutes, a pass after each
        make_death(error_type=f"app.errors.Cause{i % 10}", message="upstream refused")
        send_pending_alerts(clock=clock)
        clock.advance(3)
    assert (
        clock() - started >= 300 and not robot.accepted and len(robot.received) <= 15
    )  # probed, not hammered
    robot.set_mode("ok")
    recovered = clock()
    while Alert.objects.filter(status=AlertStatus.PENDING).exists() and clock() - recovered < 120:
        send_pending_alerts(clock=clock)
        clock.advance(1)

    assert Alert.objects.filter(status=AlertStatus.SENT).count() == 100
    assert max(r.at for r in robot.accepted) - recovered <= 60  # within one budget window
    firsts = [
        AlertMessage.objects.get(msg_uuid=r.msg_uuid).alerts.aggregate(m=Min("id"))["m"]
        for r in robot.accepted
    ]
    assert firsts == sorted(firsts) and firsts[0] == Alert.objects.aggregate(m=Min("id"))["m"]  # oldest first
    assert 130101 not in robot.answers() and len(robot.accepted) <= 20


def test_dingtalk_test_fails_at_once_without_redis_and_names_its_links(fake_dingtalk, settings):
    robot = fake_dingtalk()
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    started = time.monotonic()
    with pytest.raises(CommandError, match=r"manage.py up"):
        call_command("dingtalk_test", stdout=io.StringIO())
    assert time.monotonic() - started < 5 and not robot.received
