"""API_SUBMIT_RATE's reader: a count per period, `off`, blank as unset, a bad value named at start-up."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from config import env


@pytest.mark.parametrize(
    ("raw", "rate"),
    [("600/minute", (600, 60)), ("10/s", (10, 1)), ("5000 / hour", (5000, 3600)), ("2/days", (2, 86400)),
     ("off", None)],
)
def test_a_rate_is_a_count_per_period(monkeypatch, raw, rate):
    monkeypatch.setenv("API_SUBMIT_RATE", raw)
    assert env.env_rate("API_SUBMIT_RATE", "600/minute") == rate


@pytest.mark.parametrize("raw", ["600", "0/minute", "-1/minute", "10/ms", "ten/minute", "10/fortnight"])
def test_a_bad_rate_fails_at_start_up_with_its_name(monkeypatch, raw):
    monkeypatch.setenv("API_SUBMIT_RATE", raw)
    with pytest.raises(ImproperlyConfigured, match="API_SUBMIT_RATE"):
        env.env_rate("API_SUBMIT_RATE", "600/minute")


def test_a_blank_rate_is_the_default(monkeypatch):
    monkeypatch.setenv("API_SUBMIT_RATE", " ")
    assert env.env_rate("API_SUBMIT_RATE", "600/minute") == (600, 60)


def test_the_replay_budget_is_read_from_its_own_variable(tmp_path):
    from tests.config.test_env import _settings_with

    assert _settings_with({}, tmp_path)["API_REPLAY_RATE"] == "(60, 3600)"
    assert _settings_with({"API_REPLAY_RATE": "10/minute"}, tmp_path)["API_REPLAY_RATE"] == "(10, 60)"
    assert _settings_with({"API_REPLAY_RATE": "off"}, tmp_path)["API_REPLAY_RATE"] == "None"
