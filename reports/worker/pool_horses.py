"""The long-lived work-horses of PoolReportWorker (reports/worker/pool.py), forked once and reused.

Each horse is a child of its worker in a process group of its own, with two pipes: requests
(the attempt to run, as JSON) and results (the RunResult). A frame is a 4-byte length and its
bytes. The horse runs only the report kind (report_job.run_kind) under the attempt's timeout
alarm; it never claims, records or talks to RQ, and opens a database connection only when the
report reads data (the worker's inherited ones are set aside untouched, as for a forked horse).

The worker learns of a horse's death at once from its pidfd (or the EOF of its result pipe)."""

import json
import logging
import os
import select
import shutil
import signal
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connections
from rq.timeouts import JobTimeoutException, UnixSignalDeathPenalty

from reports.outputs import empty_dir, horse_scratch_dir, make_horse_scratch
from reports.services import FailureInfo
from reports.worker import horse as fork_side
from reports.worker import report_job

logger = logging.getLogger("reports.worker")

_LENGTH = struct.Struct(">I")
CONNECTION_IDLE_SECONDS = 60.0
_connections_used_at = 0.0


def write_frame(fd: int, payload: bytes) -> None:
    view = memoryview(_LENGTH.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> bytes | None:
    """Blocking read of one frame; None at EOF (the worker closed the pipe or is gone)."""
    head = _read_exactly(fd, _LENGTH.size)
    if head is None:
        return None
    return _read_exactly(fd, _LENGTH.unpack(head)[0])


def request_bytes(handed: "report_job.HandedOver", timeout: int | None) -> bytes:
    return json.dumps(
        [handed.task_id, handed.attempt, handed.kind, handed.params, handed.public_id, timeout],
        separators=(",", ":"),
    ).encode()


def serve(requests_fd: int, results_fd: int) -> None:
    """The horse's whole life: run one attempt per request until the worker closes the pipe. Its
    scratch directory serves all its reports; its worker removes it when the horse is gone."""
    scratch = None
    while True:
        data = read_frame(requests_fd)
        if data is None:
            return
        scratch = scratch_for_next_report(scratch)
        if time.monotonic() - _connections_used_at > CONNECTION_IDLE_SECONDS:
            connections.close_all()  # idle too long: the next query connects anew
        task_id, attempt, kind, params, public_id, timeout = json.loads(data)
        handed = report_job.HandedOver(task_id, attempt, kind, params, public_id)
        os.environ["RQ_JOB_ID"] = f"report-{task_id}-{attempt}"  # as RQ's own horse has it
        try:
            if timeout and timeout > 0:
                with UnixSignalDeathPenalty(timeout, JobTimeoutException, job_id=f"report-{task_id}-{attempt}"):
                    result = report_job.run_kind(handed, scratch=scratch)
            else:
                result = report_job.run_kind(handed, scratch=scratch)
        except JobTimeoutException as exc:  # the alarm rang between the kind's end and its cancel
            result = report_job.RunResult(report_job.TIMEOUT, failure=FailureInfo.from_exception(exc))
        write_frame(results_fd, result.to_bytes())
        os.sched_yield()  # the worker first: what is left here waits on nobody
        if scratch is not None:
            empty_dir(scratch)  # usually empty already: the report's file went to the store
        _keep_usable_connections()


def scratch_for_next_report(current: Path | None) -> Path | None:
    """The horse's scratch directory, made on its first report and again if something removed it
    (a cleaner of old files in /tmp, after days without a report). None if it cannot be made: the
    report then makes one of its own, and fails with the reason if that fails too."""
    if current is not None and os.path.isdir(current):
        return current
    try:
        return make_horse_scratch(os.getpid())
    except OSError as exc:
        logger.warning("work-horse %s has no scratch directory of its own: %s", os.getpid(), exc)
        return None


def _keep_usable_connections() -> None:
    """A horse keeps the connection a report opened for the next report (a connection costs
    milliseconds, the point of a long-lived horse), unless an error touched it or it sat idle
    long enough for a server or a proxy to have dropped it."""
    global _connections_used_at
    now = time.monotonic()
    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        if conn.errors_occurred or conn.in_atomic_block or now - _connections_used_at > CONNECTION_IDLE_SECONDS:
            conn.close()
    _connections_used_at = now


@dataclass
class Horse:
    pid: int
    requests_fd: int
    results_fd: int
    pidfd: int | None
    tasks: int = 0
    buffer: bytearray = field(default_factory=bytearray)
    eof: bool = False
    status: int | None = None
    rusage: object = None

    def fds(self) -> list[int]:
        return [fd for fd in (self.requests_fd, self.results_fd, self.pidfd) if fd is not None and fd >= 0]

    def send(self, payload: bytes) -> None:
        write_frame(self.requests_fd, payload)

    def drain(self) -> list[bytes]:
        """Read what the pipe holds; return the whole frames received."""
        while not self.eof:
            try:
                chunk = os.read(self.results_fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                self.eof = True
                break
            self.buffer += chunk
        frames = []
        while len(self.buffer) >= _LENGTH.size:
            size = _LENGTH.unpack_from(self.buffer)[0]
            if len(self.buffer) < _LENGTH.size + size:
                break
            frames.append(bytes(self.buffer[_LENGTH.size : _LENGTH.size + size]))
            del self.buffer[: _LENGTH.size + size]
        return frames

    def reap(self, *, block: bool) -> bool:
        """True once the horse has exited and is reaped."""
        if self.status is not None:
            return True
        try:
            pid, status, rusage = os.wait4(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            pid, status, rusage = self.pid, -1, None
        if pid == self.pid:
            self.status, self.rusage = status, rusage
        return self.status is not None

    def rss_mb(self) -> float:
        try:
            with open(f"/proc/{self.pid}/statm", "rb") as statm:
                resident_pages = int(statm.read().split()[1])
        except (OSError, IndexError, ValueError):
            return 0.0
        return resident_pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)

    def close(self) -> None:
        """Once the horse is reaped: its pipes, and its scratch directory with whatever a report it
        died in left there."""
        if self.status is not None:
            shutil.rmtree(horse_scratch_dir(self.pid), ignore_errors=True)
        for fd in self.fds():
            try:
                os.close(fd)
            except OSError:
                pass
        self.requests_fd = self.results_fd = -1
        self.pidfd = None


def fork_horse(siblings: list[Horse]) -> Horse:
    """Fork one horse from the worker process (which must not be mid-transaction)."""
    requests_read, requests_write = os.pipe()
    results_read, results_write = os.pipe()
    parent_pid = os.getpid()
    fork_side.before_fork()
    try:
        pid = os.fork()
    except OSError:
        fork_side.after_fork_in_parent()
        for fd in (requests_read, requests_write, results_read, results_write):
            os.close(fd)
        raise
    if pid == 0:
        try:
            fork_side.become_work_horse(parent_pid)
            os.setpgrp()  # a terminal's Ctrl+C reaches the worker, which decides
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            for fd in (requests_write, results_read, *(fd for sibling in siblings for fd in sibling.fds())):
                os.close(fd)
            serve(requests_read, results_write)
            os._exit(0)
        finally:
            os._exit(1)
    fork_side.after_fork_in_parent()
    os.close(requests_read)
    os.close(results_write)
    os.set_blocking(results_read, False)
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux 5.3+: the result pipe's EOF tells instead
        pidfd = None
    return Horse(pid=pid, requests_fd=requests_write, results_fd=results_read, pidfd=pidfd)


def retire(horse: Horse) -> None:
    """Let an idle horse go: it exits on its request pipe's EOF; SIGTERM in case a process forked
    meanwhile (a one-off horse, RQ's scheduler) holds that pipe open too."""
    try:
        os.close(horse.requests_fd)
    except OSError:
        pass
    horse.requests_fd = -1
    try:
        os.kill(horse.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


def kill(horse: Horse) -> None:
    try:
        os.kill(horse.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def wait_readable(fds: list[int], timeout: float) -> list[int]:
    if not fds:
        if timeout > 0:
            select.select([], [], [], timeout)
        return []
    return select.select(fds, [], [], max(timeout, 0))[0]
