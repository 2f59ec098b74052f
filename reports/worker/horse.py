"""Both sides of the fork of ReportWorker (reports/worker/process.py).

The work-horse inherits its worker's memory, database connection included. It must never use or
close that connection (the two processes would interleave on one socket, and a close would end
the worker's session), so it sets the inherited connections aside untouched and opens its own
only if the report reads data. It dies with its worker (an orphan's result could never be
recorded), and it reports its result through a pipe that its worker drains while it waits.
"""

import ctypes
import gc
import logging
import os
import select
import signal
from collections.abc import Callable

from django.db import connections

logger = logging.getLogger("reports.worker")

_PR_SET_PDEATHSIG = 1
_libc = None
# Inherited connection objects, kept referenced so that no finaliser ever closes them here.
_parents_connections: list = []


def before_fork() -> None:
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            _libc = False
    # Objects that exist now are never collected in the horse: its collections would touch (and
    # so copy) the parent's pages. The parent unfreezes them right after the fork.
    gc.freeze()


def after_fork_in_parent() -> None:
    gc.unfreeze()


def become_work_horse(parent_pid: int) -> None:
    """First thing in the child: die with the parent, forget the parent's database connections."""
    if _libc and hasattr(_libc, "prctl"):
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)
    for wrapper in connections.all(initialized_only=True):
        if wrapper.connection is not None:
            _parents_connections.append(wrapper.connection)
            # What close() leaves behind, without closing: the next query connects anew.
            wrapper.connection = None
            wrapper.run_on_commit = []
            wrapper.in_atomic_block = False
            wrapper.savepoint_ids = []
            wrapper.atomic_blocks = []
            wrapper.needs_rollback = False
            wrapper.closed_in_transaction = False


def send_result(fd: int, parent_pid: int, payload: bytes, on_orphan: Callable[[], None]) -> None:
    """In the horse: hand the result to the worker. A horse whose worker is gone (no death
    signal on this platform) cannot have its result recorded, so it removes its own output."""
    try:
        if os.getppid() != parent_pid:
            raise BrokenPipeError("the worker is gone")
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        logger.warning("work-horse result not delivered (%s); removing its output", exc)
        on_orphan()
    finally:
        os.close(fd)


class HorseWatch:
    """In the worker: wait for the horse to exit, draining its result pipe meanwhile (so a large
    traceback never blocks the horse), with a timeout so the worker can heartbeat."""

    def __init__(self, pid: int, read_fd: int):
        self.pid = pid
        self.read_fd = read_fd
        self.chunks: list[bytes] = []
        self.eof = False
        self.status: int | None = None
        self.rusage = None
        os.set_blocking(read_fd, False)
        try:
            self.pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):  # not Linux 5.3+: the pipe's EOF tells instead
            self.pidfd = None

    def wait(self, timeout: float) -> bool:
        """True once the horse has exited (and is reaped)."""
        if self.status is not None:
            return True
        watched = ([] if self.eof else [self.read_fd]) + ([self.pidfd] if self.pidfd is not None else [])
        ready = select.select(watched, [], [], max(timeout, 0))[0] if watched else []
        if self.read_fd in ready:
            self._drain()
        if self.pidfd is not None:
            if self.pidfd in ready:
                self._reap(block=True)
        elif self.eof:
            self._reap(block=True)
        elif not ready:
            self._reap(block=False)  # something else holds the pipe open: ask the kernel
        return self.status is not None

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.read_fd, 1 << 16)
            except BlockingIOError:
                return
            if not chunk:
                self.eof = True
                return
            self.chunks.append(chunk)

    def _reap(self, *, block: bool) -> None:
        try:
            pid, status, rusage = os.wait4(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # reaped already (a cold shutdown waits for the horse itself)
            pid, status, rusage = self.pid, -1, None
        if pid == self.pid:
            self.status, self.rusage = status, rusage
            self._drain()

    def result_bytes(self) -> bytes:
        return b"".join(self.chunks)

    def close(self) -> None:
        os.close(self.read_fd)
        if self.pidfd is not None:
            os.close(self.pidfd)


def describe_exit(status: int | None) -> str:
    if status is None or status < 0:
        return "the work-horse ended (its exit status is unknown)"
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        return f"the work-horse was killed by {name}"
    return f"the work-horse exited with status {os.WEXITSTATUS(status)} without reporting a result"
