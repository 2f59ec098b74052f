"""Where report files live: one directory per attempt under MEDIA_ROOT/reports/<task>/, so a late
finisher cannot clobber a newer attempt's file, and the one lookup every download goes through."""

import shutil
from pathlib import Path

from django.conf import settings


def attempt_output_dir(public_id: str, attempt: int) -> Path:
    return Path(settings.MEDIA_ROOT) / "reports" / public_id / f"attempt-{attempt}"


def relative_output_path(path) -> str:
    """What a task row stores: the file's path relative to MEDIA_ROOT ("" for no file)."""
    return str(Path(path).relative_to(settings.MEDIA_ROOT)) if path else ""


def output_path(task) -> Path | None:
    """The task's output file inside MEDIA_ROOT, or None (none recorded, missing, or a stored
    path that would leave MEDIA_ROOT)."""
    if not task.output_file or "\x00" in task.output_file:
        return None
    root = Path(settings.MEDIA_ROOT).resolve()
    try:
        path = (root / task.output_file).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    if not path.is_relative_to(root) or path == root or not path.is_file():
        return None
    return path


def remove_output(path) -> None:
    if path:
        Path(path).unlink(missing_ok=True)


def remove_other_attempts_output(public_id: str, *, keep: int) -> None:
    """Attempts killed between writing and recording (SIGKILL, OOM) leave files behind; the
    attempt that completed is the task's only output, so the others go. Best effort."""
    task_dir = Path(settings.MEDIA_ROOT) / "reports" / public_id
    for attempt_dir in task_dir.glob("attempt-*"):
        if attempt_dir.name != f"attempt-{keep}":
            shutil.rmtree(attempt_dir, ignore_errors=True)
