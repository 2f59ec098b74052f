"""`manage.py housekeeper` as real child processes, for the tests of its duties (scheduled runs,
canary verdicts, recovery) and of its outages. The conftest.py of the test packages that use it
import the fixture (`start_housekeeper`)."""

import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import BASE_DIR, wait_until


class HousekeeperProcess:
    def __init__(self, env: dict, log_path, *args: str):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, str(BASE_DIR / "manage.py"), "housekeeper", *args],
            cwd=BASE_DIR,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, timeout: float = 60.0) -> "HousekeeperProcess":
        """Until its loop starts (it names its duties then, and runs each at once)."""
        wait_until(
            lambda: "housekeeper started" in self.output() or self.process.poll() is not None,
            timeout=timeout,
            message="the housekeeper's start",
        )
        if self.process.poll() is not None:
            raise AssertionError(f"the housekeeper exited early:\n{self.output()}")
        return self

    def kill(self, sig=signal.SIGKILL) -> None:
        if self.process.poll() is None:
            os.killpg(self.pid, sig)
            self.process.wait(10)

    def stop(self) -> None:
        self.kill()
        self.log.close()

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text()


@pytest.fixture
def start_housekeeper(subprocess_env, tmp_path, request):
    """Factory: start_housekeeper(*args, **env) starts a housekeeper and waits for its loop."""
    started: list[HousekeeperProcess] = []

    def start(*args: str, **env_overrides) -> HousekeeperProcess:
        env = dict(subprocess_env(), **{k: str(v) for k, v in env_overrides.items()})
        housekeeper = HousekeeperProcess(env, tmp_path / f"housekeeper-{len(started) + 1}.log", *args)
        started.append(housekeeper)
        return housekeeper.wait_ready()

    yield start
    for housekeeper in started:
        housekeeper.stop()
        if getattr(request.node, "rep_call_failed", False):
            print(f"--- log of housekeeper {housekeeper.pid} ---\n{housekeeper.output()[-4000:]}")
