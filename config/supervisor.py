"""Keeps `manage.py up`'s children running: a child that exits is started again after a backoff
(config.backoff, growing while it keeps dying), so one killed worker never takes the web server
(or the other workers) down with it.

Only a crash loop ends the whole: a child that exits more than `restart_limit` times within
`restart_window` seconds is not going to get better by itself (a bad setting, a broken install),
and a supervisor that restarts it forever hides that. Then every child is stopped and the reason
is printed. An exit while the database or Redis does not answer (`dependencies_down`) is not
counted: the outage is not the child's fault, and it is restarted with backoff until they are
back. Ctrl-C or SIGTERM stops everything as before.
"""

import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from config.backoff import backoff_delay, doubling

# Short for a first death, doubling while it keeps dying: 0.5, 1, 2, 4, 8, 8, ... s.
RESTART_STEPS = doubling(0.5, 8.0)
STOP_GRACE = 15.0
POLL_INTERVAL = 0.2


@dataclass
class Child:
    """One supervised process. argv_for(start_number) builds its command line: the first start is
    number 0, each restart one more (an RQ worker needs a new name, as its old one stays
    registered in Redis until its heartbeat key expires)."""

    name: str
    argv_for: Callable[[int], list[str]]
    # A service the others use (the embedded redis-server): stopped after them, so that a worker
    # finishing its job on Ctrl-C can still record it; its own exits always count.
    stop_last: bool = False
    starts: int = 0
    process: subprocess.Popen | None = None
    exits: deque = field(default_factory=deque)  # (time, during an outage) of the recent exits
    restart_at: float | None = None


def exit_status(returncode: int) -> str:
    """'-9 (SIGKILL)' for a signal, the plain code otherwise: the log line an operator greps."""
    if returncode < 0:
        try:
            return f"{returncode} ({signal.Signals(-returncode).name})"
        except ValueError:
            pass
    return str(returncode)


class Supervisor:
    def __init__(
        self,
        children: list[Child],
        env: dict[str, str],
        *,
        restart_limit: int,
        restart_window: float,
        dependencies_down: Callable[[], list[str]] = list,
        out=sys.stdout,
        err=sys.stderr,
    ):
        self.children = children
        self.env = env
        self.restart_limit = restart_limit
        self.restart_window = restart_window
        self.dependencies_down = dependencies_down
        self.out = out
        self.err = err
        self.width = max(len(child.name) for child in children)
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def run(self) -> int:
        """Start every child and keep them running; 0 after Ctrl-C/SIGTERM, 1 after a crash loop."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop.set())
        for child in self.children:
            if child.process is None:  # else started before the supervisor (and adopted by it)
                self._start(child)
        exit_code = 0
        while not self.stop.is_set():
            now = time.monotonic()
            for child in self.children:
                if child.process is not None and child.process.poll() is not None:
                    if not self._schedule_restart(child, now):
                        exit_code = 1
                        self.stop.set()
                        break
                if child.restart_at is not None and now >= child.restart_at and not self.stop.is_set():
                    self._start(child)
            self.stop.wait(POLL_INTERVAL)
        self._stop_all()
        return exit_code

    def _schedule_restart(self, child: Child, now: float) -> bool:
        """Record the exit; False when it completes a crash loop."""
        status = exit_status(child.process.returncode)
        _kill_group(child.process.pid)  # what it leaves behind (a work-horse, its scheduler) died with it
        child.process = None
        down = [] if child.stop_last else self.dependencies_down()
        child.exits.append((now, bool(down)))
        while child.exits and now - child.exits[0][0] > self.restart_window:
            child.exits.popleft()
        counted = sum(1 for _, outage in child.exits if not outage)
        if counted > self.restart_limit:
            self._say(
                self.err,
                f"{child.name} exited with {status}: {counted} exits within "
                f"{self.restart_window:g} s (UP_RESTART_LIMIT={self.restart_limit}, "
                f"UP_RESTART_WINDOW={self.restart_window:g}): a crash loop; stopping everything",
            )
            return False
        delay = backoff_delay(len(child.exits), RESTART_STEPS)
        child.restart_at = now + delay
        during = f" while {' and '.join(down)} did not answer (not counted as a crash)" if down else ""
        self._say(self.err, f"{child.name} exited with {status}{during}; restarting it in {delay:g} s")
        return True

    def _start(self, child: Child) -> None:
        child.restart_at = None
        argv = child.argv_for(child.starts)
        child.process = subprocess.Popen(
            argv,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        if child.starts:
            self._say(self.err, f"{child.name} restarted (pid {child.process.pid})")
        child.starts += 1
        threading.Thread(target=self._pump, args=(child.name, child.process.stdout), daemon=True).start()

    def _pump(self, name: str, stream) -> None:
        for line in iter(stream.readline, ""):
            self._say(self.out, line.rstrip("\n"), name=name)

    def _say(self, stream, line: str, *, name: str = "up") -> None:
        with self.lock:
            stream.write(f"{name:<{self.width}} | {line}\n")
            stream.flush()

    def _stop_all(self) -> None:
        for last in (False, True):
            self._stop([child.process for child in self.children
                        if child.process is not None and child.stop_last is last])

    @staticmethod
    def _stop(running: list[subprocess.Popen]) -> None:
        for process in running:
            if process.poll() is None:
                _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for process in running:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _kill_group(process.pid)


def _kill_group(pgid: int) -> None:
    _signal_group(pgid, signal.SIGKILL)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
