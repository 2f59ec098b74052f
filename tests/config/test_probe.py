"""The probes of processes without a port (config/probe.py, deploy/container/probe): a worker that
turns its loop is live and ready; frozen by SIGSTOP it stops beating and its liveness fails within
the probe's window; a worker whose database is gone stays live and is not ready."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from config import probe
from tests.conftest import BASE_DIR, wait_until

PROBE = BASE_DIR / "deploy" / "container" / "probe"


def report_probe(check: str, probe_file) -> tuple[bool, str]:
    done = subprocess.run([sys.executable, str(PROBE), check], env={"PROBE_FILE": str(probe_file)},
                          capture_output=True, text=True, timeout=30)
    return done.returncode == 0, done.stdout


def test_a_beat_is_written_atomically_and_says_ready(tmp_path, monkeypatch):
    probe_file = tmp_path / "probe.json"
    monkeypatch.setenv("PROBE_FILE", str(probe_file))
    monkeypatch.setitem(probe._last, "at", 0.0)
    probe.beat(ready=True)
    assert json.loads(probe_file.read_text())["ready"] is True
    assert report_probe("live", probe_file)[0] and report_probe("ready", probe_file)[0]
    monkeypatch.setitem(probe._last, "at", 0.0)
    probe.beat(ready=False)
    assert report_probe("live", probe_file)[0] and not report_probe("ready", probe_file)[0]
    assert list(tmp_path.iterdir()) == [probe_file]  # no partial file left behind


def test_a_stale_or_missing_beat_is_not_live(tmp_path):
    probe_file = tmp_path / "probe.json"
    alive, said = report_probe("live", probe_file)
    assert not alive and "No such file" in said
    probe_file.write_text(json.dumps({"at": time.time() - 60, "ready": True, "stale_after": 15}))
    alive, said = report_probe("live", probe_file)
    assert not alive and "last turn 60" in said


@pytest.mark.django_db(transaction=True)
def test_a_worker_frozen_by_sigstop_fails_its_liveness(start_worker, tmp_path):
    probe_file = tmp_path / "worker-probe.json"
    worker = start_worker(PROBE_FILE=str(probe_file))
    wait_until(lambda: report_probe("ready", probe_file)[0], timeout=15, message="the worker's first beat")
    os.kill(worker.pid, signal.SIGSTOP)
    try:
        frozen = time.monotonic()
        wait_until(lambda: not report_probe("live", probe_file)[0], timeout=probe.STALE_SECONDS + 5,
                   message="the frozen worker's liveness to fail")
        assert time.monotonic() - frozen <= probe.STALE_SECONDS + 5
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    wait_until(lambda: report_probe("live", probe_file)[0], timeout=15,
               message="the thawed worker to beat again")
