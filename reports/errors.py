"""Exceptions report code raises, and the rules that decide retry versus dead and whose failure it was."""

import errno
import traceback as traceback_module
from dataclasses import dataclass

import requests
from boto3.exceptions import Boto3Error
from botocore.exceptions import BotoCoreError, ClientError
from django.db import DatabaseError, InterfaceError, OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq.timeouts import JobTimeoutException


class ReportError(Exception):
    """Base for errors a report kind raises on purpose."""


class PermanentError(ReportError):
    """No retry can fix this: the task goes straight to dead."""


class TransientError(ReportError):
    """Worth another attempt after a backoff."""


class InvalidParams(PermanentError):
    """Params that fail a kind's validation; `field` names the offending key."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class UpstreamError(TransientError):
    """The kind's source failed it (refused, timed out, answered 5xx): the kind's upstream, not us."""


class LeaseExpired(TransientError):
    """The worker running an attempt stopped heartbeating (killed, OOM, deploy)."""


class WorkHorseKilled(TransientError):
    """The work-horse running an attempt died of a signal (the OOM killer, an operator's SIGKILL)
    while its worker lived on: the worker records it at once."""


# Programming and data errors do not heal by waiting.
_PERMANENT = (PermanentError, ValueError, TypeError, LookupError, NotImplementedError, ArithmeticError)
# Network, timeouts, database hiccups and RuntimeError-style failures often do.
_TRANSIENT = (
    TransientError,
    JobTimeoutException,
    requests.ConnectionError,
    requests.Timeout,
    ConnectionError,
    TimeoutError,
    DatabaseError,
    RuntimeError,
    OSError,
)


def is_retriable(exc: BaseException) -> bool:
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        status = exc.response.status_code
        return status == 429 or status >= 500
    if isinstance(exc, _TRANSIENT):
        return True
    if isinstance(exc, _PERMANENT):
        return False
    # Unknown errors get the benefit of the doubt; the attempt budget bounds the cost.
    return True


# Whose failure an attempt's error is (FailureInfo.origin), decided here alone: a kind can neither
# opt out nor claim it. Our own infrastructure's (STORAGE, DATABASE, REDIS) is not charged to the
# task, which waits for it (reports/services/infra_waits.py). UPSTREAM (the kind's source) is charged
# as the kind's own ("") is until the kind's circuit breaker opens (reports/services/breakers.py).
STORAGE, DATABASE, REDIS, UPSTREAM = "storage", "database", "redis", "upstream"
INFRASTRUCTURE = (STORAGE, DATABASE, REDIS)
# A disk full, over quota, read-only or failing: the report storage, or the worker's scratch disk.
_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO}
# The database is down or short of something, not a kind's SQL wrong: PostgreSQL's SQLSTATE classes
# (connection exception, insufficient resources, operator intervention), SQLite's error names.
_PG_OUTAGE_STATES = ("08", "53", "57P")
_SQLITE_OUTAGES = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_IOERR", "SQLITE_FULL", "SQLITE_CANTOPEN",
                   "SQLITE_READONLY")


def failure_origin(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno in _DISK_ERRNOS:
        return STORAGE
    if isinstance(exc, BotoCoreError | ClientError | Boto3Error):  # only the S3 storage speaks boto
        return STORAGE
    if isinstance(exc, InterfaceError) or (isinstance(exc, OperationalError) and _database_down(exc)):
        return DATABASE
    if isinstance(exc, RedisConnectionError | RedisTimeoutError):
        return REDIS
    if isinstance(exc, UpstreamError | requests.RequestException):
        return UPSTREAM
    return ""


def _database_down(exc: OperationalError) -> bool:
    cause = exc.__cause__ or exc  # Django's error wraps the driver's
    sqlite_name = getattr(cause, "sqlite_errorname", None)
    if sqlite_name is not None:
        return sqlite_name.startswith(_SQLITE_OUTAGES)
    state = getattr(cause, "sqlstate", None)  # psycopg's; None: no answer from the server at all
    return state is None or state.startswith(_PG_OUTAGE_STATES)


def escape_controls(text: str) -> str:
    """Text as one printable line: newlines, control, bidi and other non-printable characters as
    their escapes (\\n, \\x01, \\u202e). For every message and log line built from what a
    source or a client sent, so it cannot forge a line of its own or reorder what an operator reads."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode("ascii")
                   for char in text)


def error_type_name(exc: BaseException) -> str:
    cls = type(exc)
    module = cls.__module__
    return cls.__qualname__ if module in ("builtins", "__main__") else f"{module}.{cls.__qualname__}"


ERROR_MESSAGE_MAX = 10_000
TRACEBACK_MAX = 10 * 1024 * 1024


@dataclass(frozen=True)
class FailureInfo:
    """An attempt's error as it is recorded (the attempt row, the task's last error, a dead letter)."""

    error_type: str
    message: str
    traceback: str
    retriable: bool
    origin: str = ""  # failure_origin: "storage", "database", "redis", "upstream", or "" (the kind's own)

    @classmethod
    def from_exception(cls, exc: BaseException) -> "FailureInfo":
        return cls(
            error_type=error_type_name(exc),
            # One line, whatever the exception quotes (a source's cell, a client's param).
            message=escape_controls(str(exc) or type(exc).__name__)[:ERROR_MESSAGE_MAX],
            traceback="".join(traceback_module.format_exception(exc))[:TRACEBACK_MAX],
            retriable=is_retriable(exc),
            origin=failure_origin(exc),
        )
