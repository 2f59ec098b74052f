"""config.backoff on its own: steps, the repeating last step, jitter bounds, doubling ladders."""

import pytest

from config.backoff import backoff_delay, doubling


def test_each_try_waits_its_step_and_the_last_step_repeats():
    assert [backoff_delay(n, (10.0, 30.0, 60.0)) for n in (1, 2, 3, 4, 9)] == [10.0, 30.0, 60.0, 60.0, 60.0]


def test_jitter_only_lengthens_the_wait_and_stays_within_its_fraction():
    delays = [backoff_delay(1, (10.0,), jitter=0.2) for _ in range(500)]

    assert min(delays) >= 10.0 and max(delays) <= 12.0
    assert max(delays) - min(delays) > 1.0  # it does spread a burst of failures out


@pytest.mark.parametrize("attempt", [0, -3])
def test_an_attempt_number_below_one_gets_the_first_step(attempt):
    assert backoff_delay(attempt, (10.0, 30.0)) == 10.0


def test_doubling_ends_at_its_cap():
    assert doubling(0.5, 8.0) == (0.5, 1.0, 2.0, 4.0, 8.0)
    assert doubling(0.1, 1.5) == (0.1, 0.2, 0.4, 0.8, 1.5)
    assert doubling(1.0, 1.0) == (1.0,)
