"""Where report files live: in the default storage (STORAGES["default"]: MEDIA_ROOT, or a bucket
every host shares) under reports/<task>/attempt-<n>/, one prefix per attempt so a late finisher
cannot clobber a newer attempt's file, and the one lookup every download goes through.

A kind writes its file into a scratch directory on the local disk (`scratch_dir`), and the
attempt uploads it (`store_output`) before it reports the result: the task row names the stored
file only once the whole file is in the store."""

import logging
import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path

from botocore.exceptions import ClientError
from django.core.exceptions import SuspiciousOperation
from django.core.files import File
from django.core.files.storage import FileSystemStorage, storages
from django.utils._os import safe_makedirs
from storages.backends.s3 import S3Storage
from storages.utils import clean_name, safe_join

logger = logging.getLogger(__name__)

REPORTS_PREFIX = "reports"


def output_storage():
    return storages["default"]


def attempt_prefix(public_id: str, attempt: int) -> str:
    return f"{REPORTS_PREFIX}/{public_id}/attempt-{attempt}"


@contextmanager
def scratch_dir(public_id: str, attempt: int):
    """A local directory for the kind to build its file in (TMPDIR decides where), gone after."""
    path = tempfile.mkdtemp(prefix=f"report-{public_id}-{attempt}-")
    try:
        yield Path(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def horse_scratch_dir(pid: int) -> Path:
    """The scratch directory of a pool worker's long-lived horse, made once and used by each of
    its reports in turn: a directory made per report cost 0.3-0.6 ms of the report's path (a
    journalled mkdir, contending with the worker's own writes)."""
    return Path(tempfile.gettempdir()) / f"report-horse-{pid}"


def make_horse_scratch(pid: int) -> Path:
    path = horse_scratch_dir(pid)
    shutil.rmtree(path, ignore_errors=True)  # a dead horse's, whose pid this one reuses
    path.mkdir(mode=0o700)
    return path


def empty_dir(path: Path) -> None:
    """Remove whatever a report left in a horse's scratch directory (its file went to the store)."""
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                try:
                    os.unlink(entry.path)
                except OSError:
                    pass


def remove_scratch(public_id: str, attempt: int) -> None:
    """A horse killed mid-report leaves its scratch directory behind; its worker removes it."""
    for path in Path(tempfile.gettempdir()).glob(f"report-{public_id}-{attempt}-*"):
        shutil.rmtree(path, ignore_errors=True)


def prepare_attempt_dir(public_id: str, attempt: int) -> None:
    """On the filesystem storage, create the attempt's directory ahead of its file: a pool worker
    does it while the horse runs the report, so the horse's upload is a rename. Best effort: the
    upload creates whatever is missing."""
    storage = output_storage()
    if not isinstance(storage, FileSystemStorage):
        return
    try:
        directory = storage.path(attempt_prefix(public_id, attempt))
        if storage.directory_permissions_mode is not None:
            safe_makedirs(directory, storage.directory_permissions_mode, exist_ok=True)
        else:
            os.makedirs(directory, exist_ok=True)
    except (OSError, SuspiciousOperation) as exc:
        logger.warning("could not create the directory of report %s attempt %s: %s", public_id, attempt, exc)


class _ScratchFile(File):
    """The kind's finished file, which the filesystem storage moves into place (a rename when the
    scratch directory and the storage share a filesystem, else a copy) instead of streaming it."""

    def __init__(self, path: Path):
        super().__init__(None, name=str(path))
        self._path = str(path)

    def temporary_file_path(self) -> str:
        return self._path


def store_output(local_path, public_id: str, attempt: int) -> str:
    """Upload the kind's file under the attempt's prefix, streamed in chunks (S3: a multipart
    upload; the filesystem storage moves it), and return the stored name the task row keeps.
    The local file is gone afterwards on the filesystem storage."""
    local_path = Path(local_path)
    storage = output_storage()
    name = f"{attempt_prefix(public_id, attempt)}/{local_path.name}"
    if isinstance(storage, FileSystemStorage):
        try:
            return storage.save(name, _ScratchFile(local_path))
        except OSError as exc:  # its message becomes the attempt's error: dead letters, alerts, the API
            # The errno stays (a full disk is waited out: reports/errors.py), the location goes.
            args = (exc.errno, exc.strerror, exc.filename, None, exc.filename2) if exc.errno else (str(exc),)
            raise type(exc)(*(arg.replace(storage.location, "MEDIA_ROOT") if isinstance(arg, str) else arg
                              for arg in args)) from None
    with local_path.open("rb") as handle:
        return storage.save(name, File(handle))


def open_output(name: str):
    """The stored output file opened for a streamed read, or None (none recorded, missing, or a
    name that would leave the storage's root)."""
    if not name or "\x00" in name:
        return None
    storage = output_storage()
    try:
        if isinstance(storage, S3Storage):
            return _s3_body(storage, name)
        if not storage.exists(name):
            return None
        if isinstance(storage, FileSystemStorage) and not Path(storage.path(name)).is_file():
            return None
        return storage.open(name, "rb")
    except (SuspiciousOperation, OSError, ValueError):
        return None
    except Exception:  # the store unreachable: logged, and the download says the file is missing
        logger.exception("could not open report file %s", name)
        return None


def _s3_body(storage: S3Storage, name: str):
    """The object's body as it arrives, read in chunks: S3Storage.open() would first download the
    whole object (into memory, by default) before the response could send a byte."""
    key = safe_join(storage.location, clean_name(name))  # ValueError for a name leaving the location
    try:
        return storage.connection.meta.client.get_object(Bucket=storage.bucket_name, Key=key)["Body"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise


def remove_output(name: str) -> None:
    if not name:
        return
    try:
        output_storage().delete(name)
    except Exception:  # best effort: the orphan sweep of a later attempt or the reaper retries
        logger.exception("could not remove report file %s", name)


def remove_attempt_output(public_id: str, attempt: int) -> None:
    """Everything one attempt stored. Best effort."""
    _remove_tree(attempt_prefix(public_id, attempt))


def remove_tasks_output(public_ids: list[str]) -> None:
    """Every file and directory these tasks' attempts stored (retention). Best effort. On the
    file system the tasks' folder is found once, not per task (a path check cost 40 us a task)."""
    storage = output_storage()
    if not isinstance(storage, FileSystemStorage):
        for public_id in public_ids:
            _remove_tree(f"{REPORTS_PREFIX}/{public_id}")
        return
    root = Path(storage.path(REPORTS_PREFIX))
    for public_id in public_ids:
        shutil.rmtree(root / str(uuid.UUID(public_id)), ignore_errors=True)  # a UUID: no path tricks


def remove_other_attempts_output(public_id: str, *, keep: int) -> None:
    """Attempts killed between writing and recording (SIGKILL, OOM) leave files behind; the
    attempt that completed is the task's only output, so the others go. Best effort."""
    try:
        attempt_dirs, _ = output_storage().listdir(f"{REPORTS_PREFIX}/{public_id}")
    except FileNotFoundError:
        return
    except Exception:
        logger.exception("could not list the attempts of report task %s", public_id)
        return
    for attempt_dir in attempt_dirs:
        if attempt_dir.startswith("attempt-") and attempt_dir != f"attempt-{keep}":
            _remove_tree(f"{REPORTS_PREFIX}/{public_id}/{attempt_dir}")


def _remove_tree(prefix: str) -> None:
    storage = output_storage()
    try:
        if isinstance(storage, FileSystemStorage):
            shutil.rmtree(storage.path(prefix), ignore_errors=True)
            try:  # the task's directory too when no other attempt's is left in it
                os.rmdir(os.path.dirname(storage.path(prefix)))
            except OSError:
                pass
            return
        dirs, files = storage.listdir(prefix)
        for name in files:
            storage.delete(f"{prefix}/{name}")
        for name in dirs:
            _remove_tree(f"{prefix}/{name}")
    except FileNotFoundError:
        return
    except Exception:
        logger.exception("could not remove report files under %s", prefix)


def output_filename(name: str) -> str:
    """The name a download is offered under: the stored file's own name."""
    return name.rsplit("/", 1)[-1]


CONTENT_TYPES = {
    # The charset tells a browser or an HTTP client what the bytes are; the file's byte order mark
    # tells a spreadsheet that opens the saved file.
    "csv": "text/csv; charset=utf-8",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}


def output_content_type(name: str) -> str | None:
    """The Content-Type a report file is served with (None: let the response guess)."""
    return CONTENT_TYPES.get(name.rsplit(".", 1)[-1].lower())
