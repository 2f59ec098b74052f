"""`manage.py run_scheduled_replays --loop` (the replay planner) as real child processes, for the
tests of scheduled runs and canary verdicts. The conftest.py of the test packages that use it
import the fixture (`start_planner`)."""

import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import BASE_DIR, wait_until


class PlannerProcess:
    def __init__(self, env: dict, log_path):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, str(BASE_DIR / "manage.py"), "run_scheduled_replays", "--loop", "--verbosity", "2"],
            cwd=BASE_DIR,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, timeout: float = 60.0) -> "PlannerProcess":
        """Until its first pass is done (it prints one line a pass at verbosity 2)."""
        wait_until(
            lambda: "verdict" in self.output() or self.process.poll() is not None,
            timeout=timeout,
            message="the planner's first pass",
        )
        if self.process.poll() is not None:
            raise AssertionError(f"the planner exited early:\n{self.output()}")
        return self

    def passes(self) -> int:
        return self.output().count("verdict(s) given")

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
def start_planner(subprocess_env, tmp_path, request):
    """Factory: start_planner(**env) starts a planner process and waits for its first pass."""
    started: list[PlannerProcess] = []

    def start(**env_overrides) -> PlannerProcess:
        env = dict(subprocess_env(), **{k: str(v) for k, v in env_overrides.items()})
        planner = PlannerProcess(env, tmp_path / f"planner-{len(started) + 1}.log")
        started.append(planner)
        return planner.wait_ready()

    yield start
    for planner in started:
        planner.stop()
        if getattr(request.node, "rep_call_failed", False):
            print(f"--- log of planner {planner.pid} ---\n{planner.output()[-4000:]}")
