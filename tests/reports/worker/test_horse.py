"""The fork plumbing on its own: the result pipe and the exit of a real child process, with and
without pidfd (Linux 5.3+), and what the worker makes of a horse that reported nothing."""

import os
import signal

import pytest

from reports.services import FailureInfo
from reports.worker import horse, report_job
from reports.worker.records import ABANDONED, horse_exit_result


def child(body) -> horse.HorseWatch:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            body(write_fd)
        finally:
            os._exit(3)
    os.close(write_fd)
    return horse.HorseWatch(pid, read_fd)


def wait_out(watch: horse.HorseWatch) -> None:
    for _ in range(2000):
        if watch.wait(0.05):
            return
    raise AssertionError("the child never exited")


@pytest.fixture(params=["pidfd", "pipe-eof"])
def exit_signal(request, monkeypatch):
    if request.param == "pipe-eof":
        monkeypatch.delattr(os, "pidfd_open")  # what an older kernel or another OS gives us
    return request.param


def test_a_large_result_is_drained_while_the_child_writes_it(exit_signal):
    payload = b"x" * 300_000  # far beyond a pipe's buffer: the parent must read while waiting

    watch = child(lambda fd: horse.send_result(fd, os.getppid(), payload, on_orphan=lambda: None))
    wait_out(watch)

    assert watch.result_bytes() == payload
    assert os.WIFEXITED(watch.status) and os.WEXITSTATUS(watch.status) == 3
    watch.close()


def test_a_killed_child_is_described_and_its_torn_result_ignored(exit_signal):
    def torn(fd):
        os.write(fd, b'{"status": "done", "outp')
        os.kill(os.getpid(), signal.SIGKILL)

    watch = child(torn)
    wait_out(watch)
    result = horse_exit_result(watch.result_bytes(), watch.status, overrun=False)
    watch.close()

    assert result.status == ABANDONED
    assert result.failure.error_type == "reports.errors.WorkHorseKilled"
    assert result.failure.message.startswith("the work-horse was killed by SIGKILL (out of memory?")
    assert result.failure.retriable


def test_a_horse_whose_worker_is_gone_removes_its_own_output(tmp_path):
    output = tmp_path / "report.csv"
    output.write_text("late")
    read_fd, write_fd = os.pipe()

    horse.send_result(write_fd, os.getpid() + 1, b"{}", on_orphan=lambda: output.unlink())

    assert not output.exists()
    assert os.read(read_fd, 10) == b""  # nothing was delivered, and the pipe is closed
    os.close(read_fd)


def test_the_worker_tells_an_overrun_from_a_kill():
    result = horse_exit_result(b"", signal.SIGKILL, overrun=True, timeout=300)

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
    assert report_job.RunResult.from_bytes(b'{"status": "abandoned", "output_file": "", "failure": null}') is None
    assert report_job.RunResult.from_bytes(b'{"status": "done", "output_file": "", "failure": {"error_type": "x", '
                                     b'"message": "m", "traceback": "", "retriable": true}}') is None
