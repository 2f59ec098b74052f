"""Files and directories under var/ that only this account may read: created private from the first
byte, never created loose and tightened afterwards (another local user could open the file in
between and keep the descriptor)."""

import os
import secrets
import stat
import tempfile
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def _tighten(path: Path, mode: int) -> None:
    """Earlier releases left var/ 0755 and db.sqlite3 0644: take group and other bits away from what
    this account owns. Someone else's path (a mounted volume) is left as its owner set it."""
    info = path.stat()
    if info.st_mode & stat.S_ISVTX:
        return  # a shared directory such as /tmp given as VAR_DIR: never close it to others
    if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) & 0o077:
        path.chmod(mode)


def private_dir(path: Path) -> Path:
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    _tighten(path, PRIVATE_DIR_MODE)
    return path


def private_file(path: Path) -> Path:
    """Create `path` empty with mode 0600 if it does not exist (SQLite takes an empty file as a new
    database, and gives its -wal and -shm files the database file's mode); tighten it if it does."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE))
    except FileExistsError:
        _tighten(path, PRIVATE_FILE_MODE)
    return path


def write_private_once(path: Path, text: str) -> bool:
    """Write `text` to `path` unless it exists: written 0600 under a temporary name, then linked into
    place, so a reader never sees a partial file and of two racing writers exactly one wins.
    True if this call wrote it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mkstemp creates 0600
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def read_or_create_secret(path: Path) -> str:
    """The random secret kept in `path`, made on first use (every racing process reads the same)."""
    if not path.exists():
        write_private_once(path, secrets.token_urlsafe(50))
    _tighten(path, PRIVATE_FILE_MODE)
    return path.read_text().strip()
