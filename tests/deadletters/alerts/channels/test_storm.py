"""A storm of 10,000 deaths across the DingTalk robot and three channels with budgets of their
own (Feishu 100/min and 5/s, WeCom 20/min, Slack one a second): every channel stays within its
documented limit, and every death is counted on every channel."""

import time

import pytest

from deadletters.alerts.channels.outbox import fan_out
from deadletters.alerts.channels.sender import send_channel_alerts
from deadletters.alerts.sender import send_pending_alerts
from deadletters.models import Alert, AlertDelivery, AlertStatus, ChannelMessage
from tests.deadletters.alerts.test_storm import assert_every_alert_sent_once, bulk_deaths
from tests.dingtalk_fake import FakeClock

pytestmark = pytest.mark.django_db(transaction=True)
LIMITS = {"feishu": [(60, 100), (1, 5)], "wecom": [(60, 20)], "slack": [(1, 1), (60, 60)]}


def deaths_with_deliveries(count: int, start: int) -> None:
    bulk_deaths(count, start=start)
    fan_out(list(Alert.objects.filter(deliveries__isnull=True)))


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
        deaths_with_deliveries(200, wave * 200)
        send_pending_alerts(clock=clock)
        send_channel_alerts(clock=clock)
        clock.advance(1.0)
    for _ in range(240):
        if not (
            Alert.objects.filter(status=AlertStatus.PENDING).exists()
            or AlertDelivery.objects.filter(status=AlertStatus.PENDING).exists()
        ):
            break
        send_pending_alerts(clock=clock)
        send_channel_alerts(clock=clock)
        clock.advance(1.0)
    wall = time.monotonic() - wall

    assert_every_alert_sent_once(robot, 10_000)
    assert not AlertDelivery.objects.exclude(status=AlertStatus.SENT).exists()
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
            m.deliveries.count() for m in ChannelMessage.objects.filter(channel=name, status=AlertStatus.SENT)
        )
        assert counted == 10_000 and len(times) == ChannelMessage.objects.filter(channel=name).count()
        first_minute = sum(1 for t in times if t - t0 < 60)
        lines.append(f"{name} {len(times)} messages ({first_minute} in the first minute)")
    with capsys.disabled():
        print(f"\nchannel storm: 10000 deaths, DingTalk {len(robot.accepted)} messages, " + ", ".join(lines))
        print(f"every death counted on every channel by t+{clock() - t0:.0f}s (simulated); wall {wall:.1f}s")
