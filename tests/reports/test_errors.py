"""Whose failure an attempt's error is (reports/errors.py:failure_origin): our own infrastructure's
(the report storage, the database, Redis), the kind's upstream's, or the kind's own."""

import errno
import socket
import sqlite3
from contextlib import closing

import psycopg
import pytest
import redis
import requests
from boto3.exceptions import S3UploadFailedError
from botocore.exceptions import ClientError, EndpointConnectionError
from django.db import InterfaceError, OperationalError
from redis.backoff import NoBackoff
from redis.retry import Retry

from reports.errors import DATABASE, REDIS, STORAGE, UPSTREAM, FailureInfo, PermanentError, failure_origin
from reports.kinds.outbound import SourceUnreachable


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def raised(call) -> BaseException:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 (the test wants whatever it raised)
        return exc
    raise AssertionError("nothing raised")


def as_django(driver_error: BaseException) -> OperationalError:
    """As Django's wrapper raises a driver's error: its own class, the driver's as the cause."""
    def reraise():
        raise OperationalError(str(driver_error)) from driver_error
    return raised(reraise)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO])
def test_a_full_or_failing_disk_is_the_storage(code):
    assert failure_origin(OSError(code, "disk trouble", "MEDIA_ROOT/reports/x")) == STORAGE


def test_an_s3_storage_error_is_the_storage():
    refused = ClientError({"Error": {"Code": "InternalError", "Message": "full"}}, "PutObject")
    assert failure_origin(refused) == STORAGE
    assert failure_origin(EndpointConnectionError(endpoint_url="http://127.0.0.1:1/reports")) == STORAGE
    assert failure_origin(S3UploadFailedError("upload failed")) == STORAGE


def test_the_database_down_is_ours_but_a_kinds_sql_is_its_own(tmp_path):
    path = tmp_path / "locked.sqlite3"
    with closing(sqlite3.connect(path, isolation_level=None)) as holder, \
            closing(sqlite3.connect(path, timeout=0)) as other, closing(sqlite3.connect(":memory:")) as empty:
        holder.execute("CREATE TABLE t (x)")
        holder.execute("BEGIN EXCLUSIVE")
        locked = raised(lambda: other.execute("INSERT INTO t VALUES (1)"))
        no_table = raised(lambda: empty.execute("SELECT * FROM missing"))
    assert failure_origin(as_django(locked)) == DATABASE
    assert failure_origin(as_django(no_table)) == ""
    unreachable = raised(lambda: psycopg.connect(f"postgresql://x@127.0.0.1:{closed_port()}/x",
                                                 connect_timeout=2))
    assert failure_origin(as_django(unreachable)) == DATABASE
    assert failure_origin(as_django(psycopg.errors.AdminShutdown())) == DATABASE
    assert failure_origin(as_django(psycopg.errors.QueryCanceled())) == ""  # its own slow query
    assert failure_origin(InterfaceError("connection already closed")) == DATABASE


def test_redis_down_is_ours():
    client = redis.Redis(port=closed_port(), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    try:
        assert failure_origin(raised(client.ping)) == REDIS
    finally:
        client.close()


def test_the_kinds_source_is_its_upstream_and_the_rest_its_own():
    assert failure_origin(SourceUnreachable()) == UPSTREAM
    assert failure_origin(requests.ConnectionError("refused")) == UPSTREAM
    # A refused connection is an OSError too, but no disk's.
    assert failure_origin(ConnectionRefusedError(errno.ECONNREFUSED, "refused")) == ""
    assert failure_origin(FileNotFoundError(errno.ENOENT, "missing")) == ""
    assert failure_origin(PermanentError("bad params")) == ""
    assert failure_origin(RuntimeError("bug")) == ""


def test_the_origin_travels_with_the_failure_from_the_horse_to_the_worker():
    failure = FailureInfo.from_exception(OSError(errno.ENOSPC, "No space left on device"))
    assert failure.origin == STORAGE and failure.retriable
    assert FailureInfo(**failure.__dict__) == failure
