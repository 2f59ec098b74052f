"""A pool horse's scratch directory (reports/worker/pool_horses.py): made on its first report and
used by every report after, made again if something removed it; where it cannot be made, each
report makes its own (and fails with the reason if that fails too)."""

import os
import tempfile

from reports.outputs import horse_scratch_dir
from reports.worker.pool_horses import scratch_for_next_report


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
