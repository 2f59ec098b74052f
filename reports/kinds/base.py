import csv
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from openpyxl import Workbook

from reports.errors import InvalidParams


@dataclass(frozen=True)
class RunContext:
    """What a kind's `generate` knows about the attempt it runs in."""

    task_id: int
    public_id: str
    attempt: int
    output_dir: Path  # unique to this attempt: a late finisher cannot clobber a newer attempt's file


class ReportKind:
    name: ClassVar[str]
    title: ClassVar[str]
    default_priority: ClassVar[str] = "default"

    def validate(self, params: dict[str, Any]) -> dict[str, Any]:
        """Return cleaned params or raise InvalidParams naming the field."""
        raise NotImplementedError

    def generate(self, params: dict[str, Any], ctx: RunContext) -> Path:
        """Write the report under ctx.output_dir and return its path."""
        raise NotImplementedError


def reject_unknown(params: dict[str, Any], allowed: Iterable[str]) -> None:
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise InvalidParams(unknown[0], "unknown parameter")


def choice(params: dict[str, Any], field: str, options: Sequence[str], default: str) -> str:
    value = params.get(field, default)
    if value not in options:
        raise InvalidParams(field, f"must be one of {', '.join(options)}")
    return value


def number(params, field, default, *, minimum, maximum, integer=False):
    value = params.get(field, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (integer and not isinstance(value, int))
    ):
        raise InvalidParams(field, "must be an integer" if integer else "must be a number")
    if not minimum <= value <= maximum:
        raise InvalidParams(field, f"must be between {minimum} and {maximum}")
    return value


def boolean(params, field, default):
    value = params.get(field, default)
    if not isinstance(value, bool):
        raise InvalidParams(field, "must be true or false")
    return value


def write_table(path_stem: Path, fmt: str, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    """Write rows as CSV or XLSX atomically: readers see the whole file or none."""
    path = path_stem.with_suffix(f".{fmt}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=f".{fmt}")
    try:
        if fmt == "csv":
            with os.fdopen(fd, "w", newline="", encoding="utf-8") as handle:
                writer = csv.writer(handle)
                writer.writerow(header)
                writer.writerows(rows)
        else:
            os.close(fd)
            workbook = Workbook(write_only=True)
            sheet = workbook.create_sheet("report")
            sheet.append(list(header))
            for row in rows:
                sheet.append(list(row))
            workbook.save(tmp_name)
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return path
