"""The work-horses of ReportWorker (reports/worker/worker.py): long-lived children forked once and
reused (as Celery's prefork pool), each in a process group of its own, with two pipes: requests
(what to run, as JSON) and results. A frame is a 4-byte length and its bytes.

A horse runs one thing per request, under the request's timeout alarm: a report attempt's kind
(report_job.run_kind, its RunResult back) or another job's function (an alert send, a bulk action,
a batch fan-out: its return value or its traceback back). It never claims, records or talks to
RQ. It inherits its worker's memory, database connections included: it must never use or close
those (the two processes would interleave on one socket, and a close would end the worker's
session), so it sets them aside untouched and opens its own only when a report reads data. It
dies with its worker (an orphan's result could never be recorded). The worker learns of a
horse's death at once from its pidfd (or the EOF of its result pipe)."""

import contextlib
import ctypes
import gc
import json
import logging
import os
import select
import shutil
import signal
import struct
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import connections
from rq.timeouts import JobTimeoutException, UnixSignalDeathPenalty

from reports.errors import FailureInfo, WorkHorseKilled, error_type_name
from reports.outputs import empty_dir, horse_scratch_dir, make_horse_scratch
from reports.worker import report_job
from transport.registry import allowed_function

logger = logging.getLogger("reports.worker")
_LENGTH = struct.Struct(">I")
CONNECTION_IDLE_SECONDS = 60.0
_PR_SET_PDEATHSIG = 1
_libc = None
_connections_used_at = 0.0
# Inherited connection objects, kept referenced so that no finaliser ever closes them here.
_parents_connections: list = []


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


def report_request(handed: "report_job.HandedOver", timeout: int | None) -> bytes:
    task = [handed.task_id, handed.attempt, handed.kind, handed.params, handed.public_id, handed.trace]
    return json.dumps(["report", timeout, *task], separators=(",", ":")).encode()


def job_request(job, timeout: int | None, worker_name: str) -> bytes:
    job_part = [job.id, worker_name, job.func_name, list(job.args), job.kwargs]
    return json.dumps(["job", timeout, *job_part], separators=(",", ":")).encode()


def serve(requests_fd: int, results_fd: int) -> None:
    """The horse's whole life: run one request at a time, REPORT_HORSE_MAX_TASKS of them (1: a horse
    per job, as RQ's own), or until the worker closes the pipe. Its scratch directory serves all its
    reports; its worker removes it when the horse is gone."""
    scratch = None
    for _ in range(settings.REPORT_HORSE_MAX_TASKS):
        data = read_frame(requests_fd)
        if data is None:
            return
        what, timeout, *rest = json.loads(data)
        if time.monotonic() - _connections_used_at > CONNECTION_IDLE_SECONDS:
            connections.close_all()  # idle too long: the next query connects anew
        if what == "report":
            scratch = scratch_for_next_report(scratch)
            handed = report_job.HandedOver(*rest)
            job_environment(f"report-{handed.task_id}-{handed.attempt}", "")
            result = _run_report(timeout, handed, scratch)
        else:
            job_id, worker_name, func_name, args, kwargs = rest
            job_environment(job_id, worker_name)
            result = _run_job(timeout, func_name, args, kwargs)
        write_frame(results_fd, result)
        os.sched_yield()  # the worker first: what is left here waits on nobody
        if scratch is not None:
            empty_dir(scratch)  # usually empty already: the report's file went to the store
        _keep_usable_connections()


def _alarm(timeout: int | None):
    """The request's timeout, as RQ's own horse keeps it: SIGALRM raises JobTimeoutException."""
    if timeout and timeout > 0:
        return UnixSignalDeathPenalty(timeout, JobTimeoutException, job_id=os.environ["RQ_JOB_ID"])
    return contextlib.nullcontext()


def _run_report(timeout: int | None, handed: "report_job.HandedOver", scratch: Path | None) -> bytes:
    try:
        with _alarm(timeout):
            result = report_job.run_kind(handed, scratch=scratch)
    except JobTimeoutException as exc:  # the alarm rang between the kind's end and its cancel
        result = report_job.RunResult(report_job.TIMEOUT, failure=FailureInfo.from_exception(exc))
    return result.to_bytes()


def _run_job(timeout: int | None, func_name: str, args: list, kwargs: dict) -> bytes:
    """Another job's function (on the allowlist, or refused unimported): its return value, or the
    traceback RQ records for a failed job."""
    try:
        with _alarm(timeout):
            value = allowed_function(func_name)(*args, **kwargs)
    except BaseException:  # noqa: B036 - a job's SystemExit is its failure, as under rq.Worker
        return json.dumps({"ok": False, "value": traceback.format_exc()}).encode()
    try:
        return json.dumps({"ok": True, "value": value}).encode()
    except TypeError:
        return json.dumps({"ok": True, "value": repr(value)}).encode()


def job_answer(frame: bytes) -> tuple[bool, object]:
    """What another job's run answered: (True, its return value) or (False, its traceback)."""
    try:
        answer = json.loads(frame)
        return bool(answer["ok"]), answer["value"]
    except (ValueError, TypeError, KeyError):
        return False, "the work-horse sent a torn result"


def job_environment(job_id: str, worker_name: str) -> None:
    """What RQ's own horse has in its environment."""
    os.environ["RQ_JOB_ID"] = job_id
    os.environ["RQ_WORKER_ID"] = worker_name


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
        idle = now - _connections_used_at > CONNECTION_IDLE_SECONDS
        if conn.errors_occurred or conn.in_atomic_block or idle:
            conn.close()
    _connections_used_at = now


def _become_work_horse(parent_pid: int) -> None:
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
            pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            pid, status = self.pid, -1
        if pid == self.pid:
            self.status = status
        return self.status is not None

    def gone(self) -> bool:
        """For a retiring horse: True once it has exited (then reaped and closed)."""
        if self.reap(block=False):
            self.close()
            return True
        return False

    def rss_mb(self) -> float:
        try:
            with open(f"/proc/{self.pid}/statm", "rb") as statm:
                resident_pages = int(statm.read().split()[1])
        except (OSError, IndexError, ValueError):
            return 0.0
        return resident_pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)

    def retire(self, *, wait: bool = False) -> None:
        """Let an idle horse go: it exits on its request pipe's EOF; SIGTERM in case a process forked
        meanwhile (RQ's scheduler) holds that pipe open too. `wait`: until it is gone."""
        _close(self.requests_fd)
        self.requests_fd = -1
        self.kill(signal.SIGTERM)
        if wait:
            self.reap(block=True)
            self.close()

    def kill(self, signum: int = signal.SIGKILL) -> None:
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        """Once the horse is reaped: its pipes, and its scratch directory with whatever a report it
        died in left there."""
        if self.status is not None:
            shutil.rmtree(horse_scratch_dir(self.pid), ignore_errors=True)
        for fd in self.fds():
            _close(fd)
        self.requests_fd = self.results_fd = -1
        self.pidfd = None


@dataclass
class Running:
    """A job a horse runs: a report attempt (`task`) or another job."""

    job: object
    queue: object
    horse: Horse
    task: object  # the ReportTask of a report attempt, or None
    overrun_at: float  # 0: never
    execution: object = None  # RQ's, once told of the start
    killed_for_overrun: bool = False
    taken_back: bool = False


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def fork_horse(siblings: list[Horse]) -> Horse:
    """Fork one horse from the worker process (which must not be mid-transaction)."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            _libc = False
    requests_read, requests_write = os.pipe()
    results_read, results_write = os.pipe()
    parent_pid = os.getpid()
    # Objects that exist now are never collected in the horse: its collections would touch (and so
    # copy) the parent's pages. The parent unfreezes them right after the fork.
    gc.freeze()
    try:
        pid = os.fork()
    except OSError:
        gc.unfreeze()
        for fd in (requests_read, requests_write, results_read, results_write):
            os.close(fd)
        raise
    if pid == 0:
        try:
            _become_work_horse(parent_pid)
            os.setpgrp()  # a terminal's Ctrl+C reaches the worker, which decides
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            for fd in (requests_write, results_read, *(fd for sibling in siblings for fd in sibling.fds())):
                os.close(fd)
            serve(requests_read, results_write)
            os._exit(0)
        finally:
            os._exit(1)
    gc.unfreeze()
    os.close(requests_read)
    os.close(results_write)
    os.set_blocking(results_read, False)
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux 5.3+: the result pipe's EOF tells instead
        pidfd = None
    return Horse(pid=pid, requests_fd=requests_write, results_fd=results_read, pidfd=pidfd)


def wait_readable(fds: list[int], timeout: float) -> list[int]:
    if not fds:
        if timeout > 0:
            select.select([], [], [], timeout)
        return []
    return select.select(fds, [], [], max(timeout, 0))[0]


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


def death_result(status: int | None, *, overrun: bool, timeout: int | None = None) -> "report_job.RunResult":
    """Why a horse ended without reporting a result: it overran its timeout and its worker killed it
    (a timeout), or it died (abandoned: the OOM killer, SIGKILL)."""
    if overrun:
        message = f"the work-horse overran its timeout of {timeout}s and was killed by its worker"
        failure = FailureInfo(error_type_name(JobTimeoutException()), message, "", retriable=True)
        return report_job.RunResult(report_job.TIMEOUT, failure=failure)
    message = describe_exit(status)
    if "SIGKILL" in message:
        message += " (out of memory? the kernel log says)"
    failure = FailureInfo(error_type_name(WorkHorseKilled()), message, "", retriable=True)
    return report_job.RunResult(report_job.ABANDONED, failure=failure)
