"""The bulk throttle on its own, with a virtual clock."""

import pytest

from deadletters.bulk.throttle import Throttle, batch_size_for


class VirtualTime:
    def __init__(self):
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_throttle_schedule_keeps_to_the_rate():
    vt = VirtualTime()
    throttle = Throttle(10, clock=vt.clock, sleep=vt.sleep)

    for _ in range(5):
        throttle.wait(10)

    assert vt.sleeps == [1.0] * 5
    vt.now += 3.0  # slow work: the next items need no sleep, but the catch-up burst is capped at 1 s
    assert throttle.delay_for(10) == pytest.approx(0.0)
    assert throttle.delay_for(40) == pytest.approx(3.0)


def test_a_rate_of_zero_never_waits():
    vt = VirtualTime()

    assert Throttle(0, clock=vt.clock, sleep=vt.sleep).wait(1_000_000) == 0.0
    assert vt.sleeps == []


def test_batches_hold_about_one_second_of_work_within_the_configured_size(settings):
    settings.BULK_ACTION_BATCH_SIZE = 50

    assert [batch_size_for(rate) for rate in (0.1, 1, 7.9, 20, 50, 1000)] == [1, 1, 7, 20, 50, 50]
