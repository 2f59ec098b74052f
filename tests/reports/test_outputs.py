"""reports.outputs on each storage backend: per-attempt keys, the download lookup (missing and
escaping names), streaming of large files, and the removal of attempts' files."""

import errno
import os

import pytest
from django.core.files.storage import storages

from reports.models import TaskStatus
from reports.outputs import (
    open_output,
    remove_attempt_output,
    remove_other_attempts_output,
    remove_output,
    store_output,
)
from tests.conftest import stored_names
from tests.factories import make_task

pytestmark = pytest.mark.django_db


def stored(tmp_path, public_id, attempt, name="probe.csv", data=b"a,b\n1,2\n") -> str:
    local = tmp_path / name
    local.write_bytes(data)
    return store_output(local, public_id, attempt)


def test_an_output_is_stored_under_its_attempt_and_read_back(report_storage, tmp_path):
    name = stored(tmp_path, "t1", 3)
    assert name == "reports/t1/attempt-3/probe.csv"
    with open_output(name) as handle:
        assert handle.read() == b"a,b\n1,2\n"


@pytest.mark.parametrize("name", ["", "missing.csv", "../outside.txt", "/etc/hostname", "reports/../../x",
                                  "a\x00b"])
def test_missing_or_escaping_names_open_nothing(report_storage, tmp_path, name):
    stored(tmp_path, "t1", 1)
    assert open_output(name) is None


def test_a_large_output_downloads_in_chunks_whole(report_storage, tmp_path, token_client):
    data = os.urandom(3 * 1024 * 1024 + 17)
    name = stored(tmp_path, "big", 1, name="big.csv", data=data)
    task = make_task(status=TaskStatus.DONE, output_file=name)

    response = token_client.get(f"/report/task/{task.public_id}/output")

    assert response.status_code == 200 and response.streaming
    chunks = list(response.streaming_content)
    assert len(chunks) > 1 and b"".join(chunks) == data


def test_removals_take_exactly_the_attempts_they_name(report_storage, tmp_path):
    for attempt in (1, 2, 3):
        stored(tmp_path, "t1", attempt)
    stored(tmp_path, "t2", 1)

    remove_attempt_output("t1", 1)
    assert stored_names(storages["default"], "reports/t1") == [
        "reports/t1/attempt-2/probe.csv",
        "reports/t1/attempt-3/probe.csv",
    ]
    remove_other_attempts_output("t1", keep=3)
    assert stored_names(storages["default"], "reports/t1") == ["reports/t1/attempt-3/probe.csv"]
    remove_output("reports/t1/attempt-3/probe.csv")
    assert stored_names(storages["default"], "reports/t1") == []
    assert stored_names(storages["default"], "reports/t2") == ["reports/t2/attempt-1/probe.csv"]
    remove_other_attempts_output("nothing-stored", keep=1)  # no error for a task without files


def test_the_filesystem_storage_moves_the_kinds_file_into_place(media_root, tmp_path):
    """A large report is not copied byte by byte: its scratch file is renamed into the store (on
    one filesystem), with the store's file mode, and an attempt's name is never overwritten."""
    data = os.urandom(1024 * 1024)
    local = tmp_path / "big.csv"
    local.write_bytes(data)
    inode = local.stat().st_ino

    name = store_output(local, "moved", 1)

    stored_path = storages["default"].path(name)
    assert name == "reports/moved/attempt-1/big.csv" and not local.exists()
    assert os.stat(stored_path).st_ino == inode and open(stored_path, "rb").read() == data
    assert os.stat(stored_path).st_mode & 0o777 == 0o644
    again = tmp_path / "big.csv"
    again.write_bytes(b"second")
    assert store_output(again, "moved", 1) != name and open(stored_path, "rb").read() == data


def test_an_attempt_directory_made_ahead_takes_the_file_and_nothing_else_changes(media_root, tmp_path):
    """What a pool worker does while its horse runs the report: the horse's upload is then a rename."""
    from reports.outputs import prepare_attempt_dir

    prepare_attempt_dir("ahead", 2)
    assert (media_root / "reports" / "ahead" / "attempt-2").is_dir()
    prepare_attempt_dir("ahead", 2)  # a second time changes nothing
    assert stored(tmp_path, "ahead", 2) == "reports/ahead/attempt-2/probe.csv"
    remove_attempt_output("ahead", 2)
    assert not (media_root / "reports" / "ahead" / "attempt-2").exists()


def test_a_storage_error_names_the_stored_file_not_the_servers_media_root(media_root, tmp_path):
    """The error becomes the attempt's: in dead letters, alert cards and the API. It names the file
    as the store knows it, never the server's absolute MEDIA_ROOT."""
    from reports.services import FailureInfo

    (media_root / "reports").mkdir(parents=True)
    (media_root / "reports" / "blocked").write_text("a file where the task's directory goes")
    with pytest.raises(OSError) as failed:
        stored(tmp_path, "blocked", 1)
    failure = FailureInfo.from_exception(failed.value)
    assert failed.value.errno == errno.ENOTDIR, "the errno stays: a full disk (ENOSPC) is waited out"
    assert "Not a directory: 'MEDIA_ROOT/reports/blocked/attempt-1'" in failure.message
    assert str(media_root) not in failure.message and str(media_root) not in failure.traceback
    assert failure.retriable


def test_removing_the_last_attempts_files_leaves_no_empty_directory(media_root, tmp_path):
    from reports.outputs import prepare_attempt_dir

    prepare_attempt_dir("dies", 1)
    remove_attempt_output("dies", 1)
    prepare_attempt_dir("retried", 1)
    stored(tmp_path, "retried", 2)
    remove_attempt_output("retried", 1)

    assert sorted(path.name for path in (media_root / "reports").iterdir()) == ["retried"]
    assert [path.name for path in (media_root / "reports" / "retried").iterdir()] == ["attempt-2"]
