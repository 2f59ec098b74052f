"""The housekeeper's loop in process: every duty from one list, a failing duty logged once per
streak while the others go on, an outage ridden out (said once, every duty on hold, carried on when
the dependency answers), and the probes' beat. tests/system/test_housekeeper.py stops real servers."""

import io
import json
import logging
import threading
import time

import pytest
from django.core.management import call_command

from config import probe
from config.embedded_redis import free_port
from reports.housekeeper.duties import Duty, every_duty
from reports.housekeeper.loop import STUCK_AFTER_SECONDS, Housekeeper
from reports.housekeeper.reaper import LOCK_KEY

pytestmark = pytest.mark.django_db(transaction=True)


def run_for(housekeeper: Housekeeper, seconds: float, *, meanwhile=None) -> None:
    """The loop in this (the main) thread, stopped after `seconds` as SIGTERM would."""
    timers = [threading.Timer(seconds, housekeeper.stopping.set)]
    timers += [threading.Timer(at, action) for at, action in (meanwhile or [])]
    for timer in timers:
        timer.start()
    try:
        housekeeper.run()
    finally:
        for timer in timers:
            timer.cancel()


def test_every_periodic_duty_of_the_house_is_on_one_list_with_its_interval():
    duties = {duty.name: duty for duty in every_duty()}
    assert len(duties) == len(every_duty())
    # The pipeline's own, and those deadletters registered at start-up (no import of it here).
    assert {"due retries", "lapsed leases", "lost jobs", "capped tasks", "batches"} <= set(duties)
    assert {"scheduled runs", "canary verdicts", "stalled bulk actions", "alerts"} <= set(duties)
    assert duties["due retries"].interval <= 1 and duties["scheduled runs"].interval <= 1
    assert all(duty.interval > 0 for duty in duties.values())


def test_a_failing_duty_is_logged_once_per_streak_and_backs_off_while_the_others_go_on(caplog):
    runs = {"broken": 0, "failed": 0, "healthy": 0}
    fixed = threading.Event()

    def broken():
        runs["broken"] += 1
        if not fixed.is_set():
            runs["failed"] += 1
            raise ValueError("a bug in a duty")

    def healthy():
        runs["healthy"] += 1

    housekeeper = Housekeeper([Duty("broken", 0.05, broken), Duty("healthy", 0.05, healthy)])
    with caplog.at_level(logging.INFO, logger="reports.housekeeper"):
        run_for(housekeeper, 4, meanwhile=[(2.5, fixed.set)])

    failures = [r for r in caplog.records if "duty 'broken' failed" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info[0] is ValueError
    # Tried again 1 s, then 2 s later (config.backoff), not every 0.05 s: at 0 and 1 s, fixed by 3 s.
    assert runs["failed"] == 2, runs
    assert runs["healthy"] > 30 and runs["broken"] > 10, runs
    assert any("duty 'broken' works again after 2 failed runs" in r.getMessage() for r in caplog.records)


def test_a_slow_duty_holds_up_no_other():
    """The alert sender waiting on a slow robot must not make a scheduled run late."""
    runs = {"slow": 0, "quick": 0}
    release = threading.Event()

    def slow():
        runs["slow"] += 1
        release.wait(10)

    def quick():
        runs["quick"] += 1

    housekeeper = Housekeeper([Duty("slow", 0.05, slow), Duty("quick", 0.05, quick)])
    run_for(housekeeper, 2, meanwhile=[(1.9, release.set)])
    assert runs["quick"] > 20, runs  # every 0.05 s while the slow one waited 1.9 s in its first run


def test_an_outage_is_said_once_holds_every_duty_and_the_loop_carries_on_when_it_answers(settings, caplog):
    real_redis = settings.REDIS_URL
    runs = {"needs redis": 0, "other": 0}

    def needs_redis():
        runs["needs redis"] += 1
        if settings.REDIS_URL != real_redis:
            raise ConnectionError("redis went away")

    def other():
        runs["other"] += 1

    def redis_goes():
        settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there

    def redis_comes_back():
        held["other"] = runs["other"]
        settings.REDIS_URL = real_redis

    held = {}
    housekeeper = Housekeeper([Duty("needs redis", 0.05, needs_redis), Duty("other", 0.05, other)])
    with caplog.at_level(logging.INFO, logger="reports.housekeeper"):
        # Asked again 0.5, 1, 2 s after it went (config.backoff): back by the third ask.
        note_held = (1, lambda: held.setdefault("at", runs["other"]))
        run_for(housekeeper, 6, meanwhile=[(0.5, redis_goes), note_held, (2.5, redis_comes_back)])

    said = [r.getMessage() for r in caplog.records]
    assert len([m for m in said if "unreachable" in m]) == 1, said
    assert "redis unreachable (ConnectionError: redis went away in duty 'needs redis')" in said[1]
    assert any(m.startswith("redis reachable again after") for m in said), said
    assert held["other"] == held["at"], "every duty is on hold while Redis is down"
    assert runs["other"] > held["other"] + 10


def test_the_beat_says_live_and_ready_and_stops_while_a_duty_is_stuck(tmp_path, monkeypatch):
    probe_file = tmp_path / "probe.json"
    monkeypatch.setenv("PROBE_FILE", str(probe_file))
    monkeypatch.setitem(probe._last, "at", 0.0)
    housekeeper = Housekeeper([])
    housekeeper.beat()
    assert json.loads(probe_file.read_text())["ready"] is True
    housekeeper.answering.clear()  # an outage is being ridden out: not ready, still alive
    housekeeper.beat()
    assert json.loads(probe_file.read_text())["ready"] is False
    probe_file.unlink()
    housekeeper.running["lost jobs"] = time.monotonic() - STUCK_AFTER_SECONDS - 1
    housekeeper.answering.set()
    housekeeper.beat()
    assert not probe_file.exists()  # no beat: its liveness fails and the orchestrator restarts it


def test_once_runs_every_duty_a_single_time_for_cron_and_says_what_each_did(redis_conn):
    out = io.StringIO()
    call_command("housekeeper", "--once", stdout=out)
    lines = out.getvalue().splitlines()
    assert [line.split(":")[0] for line in lines] == [duty.name for duty in every_duty()]
    assert "due retries: 0" in lines and "lost jobs: 0" in lines

    redis_conn.set(LOCK_KEY, "another housekeeper")
    out = io.StringIO()
    call_command("housekeeper", "--once", stdout=out)
    assert "lost jobs: left to another housekeeper (it holds the lock)" in out.getvalue()
