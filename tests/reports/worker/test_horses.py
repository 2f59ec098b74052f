"""The horses' plumbing (reports/worker/horses.py) with real child processes: frames cross the
result pipe whole or not at all, a horse's death is seen at once (pidfd, or the pipe's EOF on an
older kernel) and described, an overrun is told from a kill; and a horse's scratch directory is
made on its first report and used by every report after, made again if something removed it."""

import os
import signal
import tempfile

import pytest

from reports.errors import FailureInfo
from reports.outputs import horse_scratch_dir
from reports.worker import horses, report_job
from reports.worker.horses import scratch_for_next_report


def child(body) -> horses.Horse:
    """A child that writes to a result pipe as a horse does, watched as its worker watches one."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            body(write_fd)
        finally:
            os._exit(3)
    os.close(write_fd)
    os.set_blocking(read_fd, False)
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    return horses.Horse(pid=pid, requests_fd=-1, results_fd=read_fd, pidfd=pidfd)


def frames_until_exit(horse: horses.Horse) -> list[bytes]:
    frames = []
    for _ in range(2000):
        ready = horses.wait_readable([fd for fd in (horse.results_fd, horse.pidfd) if fd is not None], 0.05)
        frames += horse.drain()
        if (horse.pidfd is not None and horse.pidfd in ready) or horse.eof:
            horse.reap(block=True)
            return frames + horse.drain()
    raise AssertionError("the child never exited")


@pytest.fixture(params=["pidfd", "pipe-eof"])
def exit_signal(request, monkeypatch):
    if request.param == "pipe-eof":
        monkeypatch.delattr(os, "pidfd_open")  # what an older kernel gives us
    return request.param


def test_a_large_result_is_drained_while_the_child_writes_it(exit_signal):
    payload = b"x" * 300_000  # far beyond a pipe's buffer: the parent must read while waiting

    horse = child(lambda fd: horses.write_frame(fd, payload))

    assert frames_until_exit(horse) == [payload]
    assert os.WIFEXITED(horse.status) and os.WEXITSTATUS(horse.status) == 3
    horse.close()


def test_a_killed_horse_is_described_and_its_torn_result_ignored(exit_signal):
    def torn(fd):
        os.write(fd, b"\x00\x00\x01\x00" + b'{"status": "done", "outp')
        os.kill(os.getpid(), signal.SIGKILL)

    horse = child(torn)

    assert frames_until_exit(horse) == []
    result = horses.death_result(horse.status, overrun=False, timeout=None)
    horse.close()
    assert result.status == report_job.ABANDONED
    assert result.failure.error_type == "reports.errors.WorkHorseKilled"
    assert result.failure.message.startswith("the work-horse was killed by SIGKILL (out of memory?")
    assert result.failure.retriable


def test_the_worker_tells_an_overrun_from_a_kill():
    result = horses.death_result(signal.SIGKILL, overrun=True, timeout=300)

    assert result.status == report_job.TIMEOUT
    assert result.failure.error_type == "rq.timeouts.JobTimeoutException"
    assert result.failure.message == "the work-horse overran its timeout of 300s and was killed by its worker"


def test_run_results_cross_the_pipe_whole_or_not_at_all():
    failure = FailureInfo("reports.errors.TransientError", "upstream down", "Traceback ...", True)
    for result in (report_job.RunResult(report_job.DONE, output_file="reports/a/attempt-1/probe.csv"),
                   report_job.RunResult(report_job.FAILED, failure=failure),
                   report_job.RunResult(report_job.TIMEOUT, failure=failure)):
        assert report_job.RunResult.from_bytes(result.to_bytes()) == result
        assert report_job.RunResult.from_bytes(result.to_bytes()[:-3]) is None
    assert report_job.RunResult.from_bytes(b'{"status": "abandoned", "output_file": "", '
                                           b'"failure": null}') is None
    assert report_job.RunResult.from_bytes(b'{"status": "done", "output_file": "", "failure": '
                                           b'{"error_type": "x", "message": "m", "traceback": "", '
                                           b'"retriable": true}}') is None


def test_the_scratch_directory_is_made_once_and_again_if_it_was_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    scratch = scratch_for_next_report(None)
    assert scratch == horse_scratch_dir(os.getpid()) == tmp_path / f"report-horse-{os.getpid()}"
    assert scratch.is_dir() and oct(scratch.stat().st_mode & 0o777) == "0o700"
    (scratch / "left.csv").write_text("x")
    assert scratch_for_next_report(scratch) == scratch and (scratch / "left.csv").exists()

    (scratch / "left.csv").unlink()
    scratch.rmdir()  # a cleaner of old files in the temporary directory took it

    assert scratch_for_next_report(scratch) == scratch and scratch.is_dir()


def test_without_a_writable_temporary_directory_each_report_makes_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))

    assert scratch_for_next_report(None) is None


def test_a_path_planted_where_the_scratch_directory_goes_is_never_used(tmp_path, monkeypatch):
    """The name is predictable, so someone may have put a symlink there first: the horse makes the
    directory itself or uses none (its reports then make their own with mkdtemp)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious").write_text("keep")
    horse_scratch_dir(os.getpid()).symlink_to(elsewhere)

    assert scratch_for_next_report(None) is None
    assert (elsewhere / "precious").read_text() == "keep"
