"""The alert path proves itself: each channel's dead-man's switch is pinged after a delivery and
every N minutes of quiet, never while its sends fail; its daily digest goes once a day with the
day's figures, however many housekeepers run. Time moves by a fake clock, never by sleeping."""

import io
import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.utils import timezone

from deadletters.alerts import heartbeat
from deadletters.alerts.digest import daily_digests_send
from deadletters.alerts.health import alert_health
from deadletters.alerts.heartbeat import heartbeats_ping
from deadletters.alerts.outbox import notice
from deadletters.alerts.sender import send_due_alerts
from deadletters.models import Alert, AlertMessage, AlertStatus, DeadLetter, DeadLetterStatus
from tests.channel_fakes import FakeHeartbeat
from tests.conftest import make_death
from tests.dingtalk_fake import FakeClock

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def check():
    fake = FakeHeartbeat()
    yield fake
    fake.stop()


def webhook(channels, check, clock, **options):
    path = {"heartbeat_url": check.url, "heartbeat_minutes": 5, **options}
    return channels(webhook={"clock": clock, "channel": path})["webhook"]


def news(clock):
    with transaction.atomic():
        notice({"notice": "kind_resumed", "kind": "probe", "waiting": 0})
    return send_due_alerts(clock=clock)


def test_the_switch_is_pinged_after_a_delivery_and_after_n_minutes_of_quiet(channels, check):
    clock = FakeClock()
    fake = webhook(channels, check, clock)
    news(clock)
    assert len(fake.accepted) == 1

    assert heartbeats_ping(clock=clock) == ["webhook: heartbeat pinged"]
    assert heartbeats_ping(clock=clock) == [], "nothing new, not due"
    clock.advance(60)
    news(clock)
    assert heartbeats_ping(clock=clock) and len(check.accepted) == 2, "a delivery since the last ping"
    clock.advance(4 * 60)
    assert heartbeats_ping(clock=clock) == []
    clock.advance(61)
    assert heartbeats_ping(clock=clock) == ["webhook: heartbeat pinged"], "five minutes of quiet"
    assert [hit.path for hit in check.accepted] == [f"/ping/{check.uuid}"] * 3


def test_a_channel_whose_sends_fail_is_not_pinged_until_it_delivers_again(channels, check):
    clock = FakeClock()
    fake = webhook(channels, check, clock)
    fake.mode = "500"
    news(clock)
    for _ in range(3):
        clock.advance(6 * 60)
        send_due_alerts(clock=clock)
        said = heartbeats_ping(clock=clock)
        assert said and "not pinged, its sends fail since" in said[0]
    assert check.hits == []
    [status] = alert_health().channels
    assert status.failing and status.failing_errcode == 502 and status.last_sent_at is None

    fake.mode = "ok"
    clock.advance(60)
    send_due_alerts(clock=clock)
    assert heartbeats_ping(clock=clock) == ["webhook: heartbeat pinged"]
    assert not alert_health().channels[0].failing


def test_a_hanging_or_moved_check_holds_nothing_up_and_leaks_no_token(channels, check, monkeypatch, caplog):
    monkeypatch.setattr(heartbeat, "TIMEOUT_SECONDS", 0.3)
    clock = FakeClock()
    webhook(channels, check, clock)
    check.mode = "timeout"
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG):
        assert heartbeats_ping(clock=clock) == ["webhook: heartbeat ping failed (no answer within 0.3s)"]
    assert time.monotonic() - started < 2
    check.mode = "ok"
    check.fail_next.append((302, "moved", {"Location": f"{check.url}/elsewhere"}))
    with caplog.at_level(logging.DEBUG):
        assert heartbeats_ping(clock=clock, force=True) == ["webhook: heartbeat ping failed (HTTP 302)"]
    assert [hit.status for hit in check.hits][-1] == 302 and len(check.hits) == 2, "no redirect followed"
    assert check.uuid not in caplog.text and "webhook: heartbeat ping failed" in caplog.text


def test_the_daily_digest_goes_once_with_the_days_figures_when_two_housekeepers_race(channels, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    letters = [make_death(), make_death(message="other")]
    DeadLetter.objects.filter(pk=letters[0].pk).update(
        status=DeadLetterStatus.REPLAYED, replayed_at=timezone.now() - timedelta(hours=1)
    )
    DeadLetter.objects.filter(pk=letters[1].pk).update(created_at=timezone.now() - timedelta(hours=30))
    Alert.objects.create(channel="old-slack", status=AlertStatus.FAILED)
    clock = FakeClock()
    at = datetime.fromtimestamp(clock(), tz=UTC).astimezone(ZoneInfo("Asia/Shanghai"))
    fake = channels(webhook={"clock": clock, "channel": {"daily_digest_at": f"{at:%H:%M}"}})["webhook"]
    clock.advance(-60)
    assert daily_digests_send(clock=clock) == [], "not its time yet"
    clock.advance(60)
    said, barrier = [], threading.Barrier(2)

    def housekeeper():
        barrier.wait()
        try:
            said.extend(daily_digests_send(clock=clock))
        finally:
            connection.close()

    racers = [threading.Thread(target=housekeeper) for _ in range(2)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    send_due_alerts(clock=clock)
    assert daily_digests_send(clock=clock) == [] and send_due_alerts(clock=clock)

    assert said == ["webhook: daily digest written"]
    digests = [hit.body for hit in fake.accepted if hit.body["event"] == "daily"]
    assert len(digests) == 1, [hit.body["title"] for hit in fake.accepted]
    lines = digests[0]["lines"]
    assert digests[0]["title"] == "Daily digest: 1 death in 24 hours"
    assert lines[:3] == ["Deaths: 1", "Replayed: 1", "Open dead letters now: 1"]
    assert lines[3] == "Alerts not delivered: 1 · old-slack 1"
    assert lines[-1] == f"This digest comes every day at {at:%H:%M}: when it stops, the alert path is broken."
    clock.advance(24 * 3600)
    assert daily_digests_send(clock=clock) == ["webhook: daily digest written"], "the next day"


def test_send_alerts_sends_a_digest_and_pings_now(channels, check):
    fake = webhook(channels, check, time.time)
    out = io.StringIO()
    call_command("send_alerts", "--digest", "WEBHOOK", "--heartbeat", stdout=out)
    [digest] = [hit.body for hit in fake.accepted]
    assert digest["title"] == "All quiet: no death in 24 hours" and len(check.accepted) == 1
    assert "webhook: heartbeat pinged" in out.getvalue() and check.uuid not in out.getvalue()
    with pytest.raises(CommandError, match="no alert channel named 'nope'"):
        call_command("send_alerts", "--digest", "nope")



HEARTBEAT_TOKEN = "7c1d2e3f-heartbeat-token"


def failing_channel(settings) -> None:
    """Two webhook channels: "ops" delivered 90 s ago; "pager" delivered an hour ago, then a send
    was refused (HTTP 401) 60 s ago and nothing went out since. Only the database is needed."""
    settings.ALERT_CHANNELS = [
        {"name": name, "type": "webhook", "url": f"https://{name}.invalid/hook", "secret": "s",
         "heartbeat_url": f"https://hc.invalid/ping/{HEARTBEAT_TOKEN}"}
        for name in ("ops", "pager")
    ]
    now = timezone.now()
    for channel, ago in (("ops", 90), ("pager", 3600)):
        AlertMessage.objects.create(channel=channel, title="t", status=AlertStatus.SENT,
                                    sent_at=now - timedelta(seconds=ago))
    AlertMessage.objects.create(
        channel="pager", title="t", status=AlertStatus.FAILED, attempts=10, last_errcode=401,
        last_error="HTTP 401: bad signature", created_at=now - timedelta(seconds=120),
        next_attempt_at=now - timedelta(seconds=60),
    )
