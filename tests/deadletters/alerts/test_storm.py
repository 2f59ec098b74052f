"""Alert storms and crashes: rate limit and coalescing under 10,000 deaths (on the robot alone,
and on the robot with three channels of their own budgets: every channel within its documented
limit, every death counted on every channel), a sender SIGKILLed between send and mark, several
senders at once. Real Redis, real HTTP, real processes."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest
from django.db import transaction
from django.utils import timezone

from deadletters.alerts.channels import configured_channels
from deadletters.alerts.outbox import dead_letter_payload
from deadletters.alerts.sender import FOLD_SECONDS, send_due_alerts
from deadletters.fingerprints import fingerprint
from deadletters.models import Alert, AlertMessage, AlertStatus, DeadLetter
from reports.models import ReportTask, TaskStatus
from tests.conftest import BASE_DIR, make_death, wait_until
from tests.dingtalk_fake import FakeClock

# The channels' limits, not the database, are what a storm tests.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database_blind]
LIMITS = {"feishu": [(60, 100), (1, 5)], "wecom": [(60, 20)], "slack": [(1, 1), (60, 60)]}


@pytest.fixture(autouse=True)
def chinese_alerts(settings):
    settings.ALERT_LANGUAGE = "zh-hans"


def send_pending_alerts(**kwargs):
    """One pass over every channel; returns the robot's report."""
    return send_due_alerts(**kwargs)[0]


CAUSES = [f"app.errors.Failure{chr(ord('A') + i)}" for i in range(25)]  # 25 fingerprints
KINDS = ["sales_summary", "http_export", "probe"]


def bulk_deaths(count: int, *, start: int = 0) -> list[DeadLetter]:
    """`count` dead tasks with their dead letters and outbox rows, as fast as SQLite takes them."""
    with transaction.atomic():
        return _bulk_deaths(count, start)


def _bulk_deaths(count: int, start: int) -> list[DeadLetter]:
    now = timezone.now()
    tasks = ReportTask.objects.bulk_create(
        [
            ReportTask(
                kind=KINDS[(start + i) % len(KINDS)],
                params={},
                max_attempts=3,
                timeout_seconds=300,
                status=TaskStatus.DEAD,
                attempt=3,
                finished_at=now,
                last_error="database is down",
            )
            for i in range(count)
        ],
        batch_size=2000,
    )
    letters = DeadLetter.objects.bulk_create(
        [
            DeadLetter(
                task=task,
                kind=task.kind,
                error_type=CAUSES[(start + i) % len(CAUSES)],
                error_message=f"connection to db-{i % 7} refused after {i % 30} ms",
                attempts=3,
                fingerprint=fingerprint(CAUSES[(start + i) % len(CAUSES)], "connection to db refused"),
            )
            for i, task in enumerate(tasks)
        ],
        batch_size=2000,
    )
    Alert.objects.bulk_create(
        [
            Alert(
                channel=channel.name,
                dead_letter=dl,
                fingerprint=dl.fingerprint,
                payload=dead_letter_payload(dl),
            )
            for dl in letters
            for channel in configured_channels()
        ],
        batch_size=2000,
    )
    return letters


def carried(msg_uuid: str) -> int:
    return AlertMessage.objects.get(msg_uuid=msg_uuid).alerts.count()


def digest_total(received) -> int:
    """The total a digest prints for the operator (共 N 条), or 1 for a single alert."""
    match = re.search(r"共 (\d+) 条", received.card["text"])
    return int(match.group(1)) if match else 1


def assert_every_alert_sent_once(robot, expected: int) -> None:
    counts = robot.uuid_counts()
    accepted = {r.msg_uuid for r in robot.accepted}
    assert not Alert.objects.exclude(status=AlertStatus.SENT).exists()
    assert Alert.objects.filter(channel="dingtalk", message__status=AlertStatus.SENT).count() == expected
    assert sum(carried(u) for u in accepted) == expected
    # Every message that exists reached the robot (none stuck), and only those did.
    sent = AlertMessage.objects.filter(channel="dingtalk").values_list("msg_uuid", flat=True)
    assert {str(u) for u in sent} == set(counts)


def test_storm_of_10000_deaths_in_one_minute_stays_under_20_messages_and_counts_every_death(
    fake_dingtalk, capsys
):
    clock = FakeClock()
    robot = fake_dingtalk(clock=clock)
    t0 = clock()
    wall = time.monotonic()

    # 10,000 deaths arrive in 50 waves of 200 over the first 50 seconds; the sender passes after
    # each wave (as the loop and the commit kicks do), then keeps passing every second.
    for wave in range(50):
        bulk_deaths(200, start=wave * 200)
        send_pending_alerts(clock=clock)
        clock.advance(1.0)
    while clock() - t0 < 60:
        send_pending_alerts(clock=clock)
        clock.advance(1.0)
    first_minute = [r for r in robot.received if r.at - t0 < 60]
    counted_in_first_minute = sum(carried(r.msg_uuid) for r in first_minute if r.errcode == 0)
    for _ in range(120):
        if not Alert.objects.filter(status=AlertStatus.PENDING).exists():
            break
        send_pending_alerts(clock=clock)
        clock.advance(1.0)
    wall = time.monotonic() - wall

    assert len(first_minute) <= 20
    assert 130101 not in robot.answers() and all(r.errcode == 0 for r in robot.received)
    assert_every_alert_sent_once(robot, 10_000)
    assert sum(digest_total(r) for r in robot.accepted) == 10_000
    for received in robot.accepted:  # readable: a head line, at most 10 groups and one "more groups" line
        lines = [line for line in received.card["text"].splitlines() if line.startswith("- ")]
        assert len(lines) <= 12 and len(received.card["text"]) < 6000
    last_at = max(r.at for r in robot.accepted) - t0
    with capsys.disabled():
        print(
            f"\nstorm: 10000 deaths in 50 waves over 50 s; {len(first_minute)} messages in the first "
            f"minute carrying {counted_in_first_minute} dead letters; {len(robot.accepted)} messages "
            f"in all, every dead letter counted by t+{last_at:.0f}s (simulated); wall time {wall:.1f}s"
        )


def test_one_burst_of_10000_is_one_readable_digest(fake_dingtalk, capsys):
    clock = FakeClock()
    robot = fake_dingtalk(clock=clock)
    bulk_deaths(10_000)
    wall = time.monotonic()

    report = send_pending_alerts(clock=clock)

    wall = time.monotonic() - wall
    assert report.sent_messages == 1 and report.digests == 1 and report.sent_alerts == 10_000
    [received] = robot.accepted
    text = received.card["text"]
    assert "共 10000 条死信，25 类" in text and "dead letters" not in text
    assert "……及其他 15 类，共 6000 条告警" in text
    buttons = [b["actionURL"] for b in received.card["btns"]]
    assert buttons[-1] == "https://console.example.invalid/console/dead-letters/"
    top = text.split("\n- ")[2]
    fp = fingerprint(CAUSES[0], "connection to db refused")
    assert top.startswith("400 × http_export, probe, sales_summary · FailureA: connection to db")
    assert f"https://console.example.invalid/console/dead-letters/?fingerprint={fp}" in buttons
    assert_every_alert_sent_once(robot, 10_000)
    with capsys.disabled():
        print(f"\nburst: 10000 deaths -> 1 digest of 25 groups, pass took {wall:.2f}s")


def _sender(env, log_path, *args):
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [sys.executable, str(BASE_DIR / "manage.py"), "send_alerts", *args],
        cwd=BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return proc, log


def _sender_env(subprocess_env, robot, **extra):
    env = dict(subprocess_env())
    env.update(
        DINGTALK_WEBHOOK=robot.webhook,
        DINGTALK_SECRET=robot.secret,
        CONSOLE_BASE_URL="https://console.example.invalid",
        **{k: str(v) for k, v in extra.items()},
    )
    return env


def test_sender_sigkilled_between_send_and_mark_repeats_at_most_one_message(
    fake_dingtalk, subprocess_env, tmp_path
):
    robot = fake_dingtalk()
    letters = [make_death(error_type=f"app.errors.Kill{c}", message="kill") for c in "ABC"]
    robot.set_mode("hang")  # the robot takes the message, then holds its answer
    proc, log = _sender(_sender_env(subprocess_env, robot, DINGTALK_TIMEOUT=30), tmp_path / "sender.log")
    try:
        wait_until(lambda: robot.received, message="the sender to deliver its first message")
        os.kill(proc.pid, signal.SIGKILL)  # between the POST and the mark-sent
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()
    robot.set_mode("ok")
    [delivered] = robot.received
    message = AlertMessage.objects.get(msg_uuid=delivered.msg_uuid)
    assert message.status == AlertStatus.PENDING and message.alerts.get().status == AlertStatus.PENDING

    send_pending_alerts()  # the dead sender's lease still runs: its message is left alone
    assert robot.uuid_counts()[delivered.msg_uuid] == 1
    send_pending_alerts(clock=lambda: time.time() + 120)  # lease over: resent, same msgUuid

    counts = robot.uuid_counts()
    assert counts[delivered.msg_uuid] == 2 and max(counts.values()) <= 2
    assert sum(counts.values()) == 4 and len(counts) == 3
    assert all(dl.alerts.get().status == AlertStatus.SENT for dl in letters)
    assert_every_alert_sent_once(robot, 3)


def test_several_senders_at_once_never_send_an_alert_twice(fake_dingtalk, subprocess_env, tmp_path):
    robot = fake_dingtalk(limit_per_minute=100)
    for i in range(40):
        make_death(error_type=f"app.errors.Parallel{i}", message="parallel")
    env = _sender_env(subprocess_env, robot, DINGTALK_RATE_PER_MINUTE=100, DINGTALK_TIMEOUT=5)
    senders = [_sender(env, tmp_path / f"sender-{n}.log") for n in range(3)]
    for proc, log in senders:
        assert proc.wait(60) == 0, (tmp_path / "sender-0.log").read_text()
        log.close()

    counts = robot.uuid_counts()
    assert max(counts.values()) == 1 and len(counts) == 40  # 40 singles, each sent once
    assert_every_alert_sent_once(robot, 40)


def max_in_window(times: list[float], window: float) -> int:
    times, best, lo = sorted(times), 0, 0
    for hi, at in enumerate(times):
        while at - times[lo] >= window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def test_storm_of_10000_deaths_across_three_channels_stays_within_every_limit(
    fake_dingtalk, channels, capsys
):
    clock = FakeClock()
    robot = fake_dingtalk(clock=clock)
    fakes = channels(
        feishu={"secret": "feishu-secret-0123456789", "clock": clock},
        wecom={"clock": clock},
        slack={"clock": clock},
    )
    t0, wall = clock(), time.monotonic()
    for wave in range(50):  # 10,000 deaths in 50 waves over 50 seconds, a pass after each
        bulk_deaths(200, start=wave * 200)
        send_due_alerts(clock=clock)
        clock.advance(1.0)
    for _ in range(FOLD_SECONDS + 120):  # a cause announced on a channel folds its further deaths
        if not Alert.objects.filter(status=AlertStatus.PENDING).exists():
            break
        send_due_alerts(clock=clock)
        clock.advance(1.0)
    wall = time.monotonic() - wall

    assert_every_alert_sent_once(robot, 10_000)
    lines = []
    for name, fake in fakes.items():
        # Never an over-limit answer: the sender kept within the service's budget by itself.
        assert all(hit.accepted for hit in fake.hits), [
            (h.status, h.code) for h in fake.hits if not h.accepted
        ]
        times = [hit.at for hit in fake.accepted]
        for window, limit in LIMITS[name]:
            assert max_in_window(times, window) <= limit, (name, window)
        counted = sum(
            m.alerts.count() for m in AlertMessage.objects.filter(channel=name, status=AlertStatus.SENT)
        )
        assert counted == 10_000 and len(times) == AlertMessage.objects.filter(channel=name).count()
        first_minute = sum(1 for t in times if t - t0 < 60)
        lines.append(f"{name} {len(times)} messages ({first_minute} in the first minute)")
    with capsys.disabled():
        print(f"\nchannel storm: 10000 deaths, DingTalk {len(robot.accepted)} messages, " + ", ".join(lines))
        print(f"every death counted on every channel by t+{clock() - t0:.0f}s (simulated); wall {wall:.1f}s")
