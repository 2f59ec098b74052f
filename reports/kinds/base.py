import csv
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, ClassVar

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop
from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.utils.exceptions import IllegalCharacterError

from reports.errors import InvalidParams, PermanentError, escape_controls


@dataclass(frozen=True)
class RunContext:
    """What a kind's `generate` knows about the attempt it runs in."""

    task_id: int
    public_id: str
    attempt: int
    output_dir: Path  # unique to this attempt: a late finisher cannot clobber a newer attempt's file


class InvalidParamsList(InvalidParams):
    """Several params are wrong at once. Reads as its first error where one field is expected
    (the API's 422 names it); `errors` holds every (field, message) for pages that show them all."""

    def __init__(self, errors: Sequence[tuple[str, str]]):
        super().__init__(*errors[0])
        self.errors = list(errors)


_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
# Marked for translation; the console shows them in the page's language.
TYPE_LABELS = {
    "string": gettext_noop("text"),
    "integer": gettext_noop("integer"),
    "number": gettext_noop("number"),
    "boolean": gettext_noop("true/false"),
    "date": gettext_noop("date"),
}


@dataclass(frozen=True)
class Param:
    """One parameter a kind accepts. The kind's validation, the console's edit-and-replay page and
    the API's OpenAPI document all read this declaration, so they cannot disagree.

    `default` is used when the param is left out; None means "optional, left out of the cleaned
    params"; a callable is read at use (a setting). `type` is string, integer, number, boolean or
    date (a YYYY-MM-DD string)."""

    name: str
    type: str
    default: Any = None
    description: str = ""
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    max_length: int | None = None
    # Further JSON Schema keywords for what only the document states (the kind checks it itself).
    schema_extra: Callable[[], dict] | None = None
    # Masked for everyone but the worker: pages, API, exports, cards, the stored error and traceback.
    sensitive: bool = False

    def default_value(self) -> Any:
        return self.default() if callable(self.default) else self.default

    def clean(self, params: dict[str, Any]) -> Any:
        """The value to use, the default when left out (None: leave it out), or InvalidParams."""
        if self.name not in params:
            return self.default_value()
        value = params[self.name]
        if self.choices:
            if value not in self.choices:
                raise InvalidParams(self.name,
                                    _("must be one of %(choices)s") % {"choices": ", ".join(self.choices)})
            return value
        return getattr(self, f"_clean_{self.type}")(value)

    def _clean_string(self, value):
        if not isinstance(value, str):
            raise InvalidParams(self.name, _("must be a string"))
        if self.max_length is not None and len(value) > self.max_length:
            raise InvalidParams(self.name, _("must be at most %(n)d characters") % {"n": self.max_length})
        return value

    def _clean_date(self, value):
        if not isinstance(value, str) or not _ISO_DATE.fullmatch(value):
            raise InvalidParams(self.name, _("must be a date YYYY-MM-DD"))
        try:
            return date.fromisoformat(value).isoformat()
        except ValueError:
            raise InvalidParams(self.name, _("must be a date YYYY-MM-DD")) from None

    def _clean_boolean(self, value):
        if not isinstance(value, bool):
            raise InvalidParams(self.name, _("must be true or false"))
        return value

    def _clean_integer(self, value):
        # JSON Schema counts 2.0 as an integer; so do we.
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidParams(self.name, _("must be an integer"))
        return self._in_range(value)

    def _clean_number(self, value):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise InvalidParams(self.name, _("must be a number"))
        return self._in_range(value)

    def _in_range(self, value):
        low = -math.inf if self.minimum is None else self.minimum
        high = math.inf if self.maximum is None else self.maximum
        if not low <= value <= high:
            raise InvalidParams(
                self.name,
                _("must be between %(minimum)s and %(maximum)s")
                % {"minimum": _num(self.minimum), "maximum": _num(self.maximum)},
            )
        return value

    def json_schema(self) -> dict:
        schema: dict[str, Any] = {"type": "string" if self.type == "date" else self.type}
        if self.type == "date":
            schema.update(format="date", pattern=f"^{_ISO_DATE.pattern}$")
        if self.choices:
            schema["enum"] = list(self.choices)
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        if self.max_length is not None:
            schema["maxLength"] = self.max_length
        if self.type == "string" and not self.choices:
            schema["pattern"] = "^[^\\u0000]*$"  # no stored text may hold NUL
        default = self.default_value()
        if default is not None:
            schema["default"] = default
        if self.description:
            schema["description"] = self.description
        if self.sensitive:
            schema["writeOnly"] = True  # sent, never shown back
        if self.schema_extra is not None:
            schema.update(self.schema_extra())
        return schema

    @property
    def type_label(self) -> str:
        return TYPE_LABELS.get(self.type, self.type)


def _num(value) -> str:
    if value is None:
        return "any"
    return str(int(value)) if float(value).is_integer() else str(value)


class ReportKind:
    name: ClassVar[str]
    title: ClassVar[str]
    default_priority: ClassVar[str] = "default"
    # Only operators submit it (console, shell, API tokens with the operator scope).
    operator_only: ClassVar[bool] = False
    # What the kind accepts; validate() checks params against it unless a kind overrides validate().
    params: ClassVar[tuple[Param, ...]] = ()
    # Its circuit breaker (reports/services/breakers.py), for a kind with an upstream (a source it
    # fetches, a service it calls): it raises UpstreamError when the upstream fails it, and names in
    # health_check its method probe(timeout) that raises while the upstream is down. Bounds:
    # breakers.BOUNDS (the thresholds are the breaker row's defaults; operators may change them).
    health_check: ClassVar[str] = ""
    breaker_failures: ClassVar[int] = 5  # upstream failures within breaker_window seconds open it
    breaker_window: ClassVar[int] = 60
    breaker_probes: ClassVar[int] = 3  # passing probes in a row, then a canary of its tasks runs
    breaker_probe_every: ClassVar[float] = 10.0  # seconds between two probes
    breaker_probe_timeout: ClassVar[float] = 5.0  # a probe that has not answered by then failed
    breaker_canary: ClassVar[int] = 2  # tasks at once until as many succeeded; then its own cap

    def has_upstream(self) -> bool:
        return bool(self.health_check)

    def validate(self, params: dict[str, Any]) -> dict[str, Any]:
        """Return cleaned params or raise InvalidParams (InvalidParamsList: every bad field at once)."""
        errors: list[tuple[str, str]] = [
            (name, _("unknown parameter")) for name in sorted(set(params) - {p.name for p in self.params})
        ]
        cleaned: dict[str, Any] = {}
        for param in self.params:
            try:
                value = param.clean(params)
            except InvalidParams as exc:
                errors.append((exc.field, exc.message))
                continue
            if value is not None:
                cleaned[param.name] = value
        if not errors:
            errors = self.check(cleaned)
        if errors:
            raise InvalidParamsList(errors)
        return cleaned

    @property
    def sensitive_keys(self) -> frozenset[str]:
        return frozenset(param.name for param in self.params if param.sensitive)

    def check(self, cleaned: dict[str, Any]) -> list[tuple[str, str]]:
        """Rules across params that one declaration cannot state; (field, message) for each broken one."""
        return []

    def generate(self, params: dict[str, Any], ctx: RunContext) -> Path:
        """Write the report under ctx.output_dir and return its path."""
        raise NotImplementedError

    def writes_file(self, params: dict[str, Any]) -> bool:
        """Whether generate() returns a file for these params: a pool worker then creates the file's
        directory in the store while the report runs."""
        return True

    def params_schema(self, *, public: bool = False) -> dict:
        """The JSON Schema of this kind's params (the OpenAPI document's per-kind `params`);
        `public`: for anonymous readers, naming nothing of the site's configuration."""
        return {
            "type": "object",
            "additionalProperties": False,
            "properties": {param.name: param.json_schema() for param in self.params},
        }


def reject_unknown(params: dict[str, Any], allowed: Iterable[str]) -> None:
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise InvalidParams(unknown[0], _("unknown parameter"))


def choice(params: dict[str, Any], field: str, options: Sequence[str], default: str) -> str:
    value = params.get(field, default)
    if value not in options:
        raise InvalidParams(field, _("must be one of %(choices)s") % {"choices": ", ".join(options)})
    return value


# A spreadsheet reads a cell starting with one of these as a formula (OWASP "CSV Injection"); a
# leading tab or carriage return hides one from the eye but not from every importer.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def neutralise_cell(value: Any) -> Any:
    """A cell a spreadsheet shows but never evaluates: text that would start a formula gets a
    leading apostrophe. Numbers are left alone (a negative number stays a number), and so is text
    that is only a number ("-5"), which no spreadsheet runs."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


# Excel shows UTF-8 without a byte order mark as its legacy code page (mojibake for Chinese text);
# with the mark it reads UTF-8, and so do LibreOffice, pandas and Python's "utf-8-sig".
CSV_ENCODING = "utf-8-sig"
MONEY_FORMAT = "#,##0.00"
# A spreadsheet number is a binary double: integers beyond 2**53 lose their last digits there.
LARGEST_EXACT_INTEGER = 2**53


def write_table(
    path_stem: Path,
    fmt: str,
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    money_columns: Iterable[str] = (),
) -> Path:
    """Write rows as CSV or XLSX atomically: readers see the whole file or none.

    CSV (UTF-8 with a byte order mark) has no cell types, so every cell, the header too, goes
    through neutralise_cell: the values come from clients and remote sources. XLSX cells are
    typed: text is a string cell, which no spreadsheet evaluates, so it is written as given;
    numbers stay numbers, those in `money_columns` shown with two decimals, and integers a
    spreadsheet cannot hold exactly become text."""
    path = path_stem.with_suffix(f".{fmt}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=f".{fmt}")
    try:
        if fmt == "csv":
            with os.fdopen(fd, "w", newline="", encoding=CSV_ENCODING) as handle:
                writer = csv.writer(handle)
                writer.writerow([neutralise_cell(name) for name in header])
                writer.writerows([neutralise_cell(value) for value in row] for row in rows)
        else:
            os.close(fd)
            _write_xlsx(tmp_name, header, rows, money=[name in set(money_columns) for name in header])
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return path


def _write_xlsx(path: str, header: Sequence[str], rows: Iterable[Sequence[Any]], *,
                money: list[bool]) -> None:
    workbook = Workbook(write_only=True)
    sheet = workbook.create_sheet("report")
    try:
        sheet.append([xlsx_cell(sheet, name) for name in header])
        for row in rows:
            sheet.append([xlsx_cell(sheet, value, money=i < len(money) and money[i])
                          for i, value in enumerate(row)])
    except IllegalCharacterError as exc:
        # XLSX cannot hold most control characters; no retry changes the data.
        raise PermanentError(f"XLSX cannot store a cell: {escape_controls(str(exc))[:300]}") from None
    workbook.save(path)


def xlsx_cell(sheet, value: Any, *, money: bool = False) -> WriteOnlyCell:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > LARGEST_EXACT_INTEGER:
        value = str(value)
    cell = WriteOnlyCell(sheet, value=value)
    if isinstance(value, str):
        # openpyxl types text starting with "=" as a formula (and "#N/A" as an error): a string
        # cell holds it as the characters it is.
        cell.data_type = "s"
    elif money and cell.data_type == "n" and value is not None:
        cell.number_format = MONEY_FORMAT
    return cell
