"""config.redis_client: the one factory, its URL forms, bounded retries and what it logs."""

import logging
import signal
import threading
import time

import pytest
import redis
from redis.sentinel import MasterNotFoundError

from config import redis_client
from config.embedded_redis import free_port
from config.masking import MASK

RETRIES = dict(connect_timeout=1.0, socket_timeout=2.0, backoff_cap=0.05)


def test_sentinel_url_names_sentinels_service_db_and_passwords():
    target = redis_client.parse_sentinel_url(
        "redis+sentinel://:s3cret@10.0.0.1:26379,10.0.0.2,[::1]:26380/mymaster/2?sentinel_password=p%40ss"
    )
    assert target == redis_client.SentinelTarget(
        sentinels=(("10.0.0.1", 26379), ("10.0.0.2", 26379), ("::1", 26380)),
        service_name="mymaster",
        db=2,
        password="s3cret",
        sentinel_password="p@ss",
    )
    assert redis_client.parse_sentinel_url("rediss+sentinel://h/cache").ssl is True
    assert redis_client.parse_sentinel_url("rediss+sentinel://h/cache").db == 0
    assert redis_client.parse_sentinel_url("redis://h:6379/0") is None
    assert redis_client.parse_sentinel_url("unix:///tmp/redis.sock?db=0") is None


@pytest.mark.parametrize("url", ["redis+sentinel://h1,h2", "redis+sentinel://h1/a/1/extra"])
def test_a_sentinel_url_without_its_service_name_is_refused(url):
    with pytest.raises(ValueError, match="service_name"):
        redis_client.parse_sentinel_url(url)


def test_passwords_are_masked():
    assert (
        redis_client.mask_url("redis+sentinel://u:s3cret@h1:26379,h2/mymaster/0?sentinel_password=abc&x=1")
        == f"redis+sentinel://u:{MASK}@h1:26379,h2/mymaster/0?sentinel_password={MASK}&x=1"
    )
    assert redis_client.mask_url("redis://:s3cret@h:6379/0") == f"redis://:{MASK}@h:6379/0"
    assert redis_client.mask_url("unix:///var/redis.sock?db=0") == "unix:///var/redis.sock?db=0"


def test_django_rq_gets_the_sentinel_form_it_documents():
    queue = redis_client.rq_queue_connection("redis+sentinel://:pw@h1:1,h2:2/mymaster/3", socket_timeout=7)
    assert queue["SENTINELS"] == [("h1", 1), ("h2", 2)]
    assert (queue["MASTER_NAME"], queue["DB"], queue["PASSWORD"], queue["SOCKET_TIMEOUT"]) == (
        "mymaster", 3, "pw", 7)
    assert redis_client.rq_queue_connection("redis://h:6379/0", socket_timeout=7) == {"URL": "redis://h:6379/0"}


def test_retries_are_bounded_and_logged_without_the_password(caplog):
    url = f"redis://:s3cret-pw@127.0.0.1:{free_port()}/0"
    client = redis_client.make_redis_client(url, retries=2, **RETRIES)
    with caplog.at_level(logging.WARNING, logger="config.redis"), pytest.raises(redis.ConnectionError):
        client.ping()
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2, lines
    assert "unreachable" in lines[0] and "up to 2 retries" in lines[0]
    assert "gave up after 2 retries" in lines[1]
    assert "s3cret-pw" not in caplog.text and f":{MASK}@" in caplog.text


def test_a_request_scope_lowers_the_retry_budget(caplog):
    client = redis_client.make_redis_client(f"redis://127.0.0.1:{free_port()}/0", retries=10, **RETRIES)
    with caplog.at_level(logging.WARNING, logger="config.redis"), redis_client.retries_at_most(1):
        with pytest.raises(redis.ConnectionError):
            client.ping()
    assert "gave up after 1 retries" in caplog.text
    assert redis_client.retry_limit.get() is None


def test_a_client_rides_out_a_restart_of_its_server(redis_server, caplog):
    client = redis_client.make_redis_client(redis_server.url, retries=10, connect_timeout=1.0,
                                            socket_timeout=2.0, backoff_cap=0.5)
    assert client.ping()
    redis_server.stop()
    restart = threading.Timer(0.5, redis_server.start)
    restart.start()
    try:
        with caplog.at_level(logging.WARNING, logger="config.redis"):
            assert client.set("after-restart", "1")
    finally:
        restart.join()
    assert "unreachable" in caplog.text and "reachable again after" in caplog.text
    assert client.get("after-restart") == b"1"


def test_a_sentinel_client_keeps_to_its_retry_budget_and_says_so_in_one_line(caplog, monkeypatch):
    ports = (free_port(), free_port())
    url = f"redis+sentinel://:s3cret-pw@127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}/mymaster/0"
    client = redis_client.make_redis_client(url, retries=2, **RETRIES)
    # Every TCP connection attempt, counted where redis-py opens the socket (under its own retry
    # loop), so the count says what a wall-clock bound only suggested, at any machine load.
    attempts: list[int] = []
    real_connect = redis.connection.Connection._connect

    def counted_connect(connection):
        attempts.append(connection.port)
        return real_connect(connection)

    monkeypatch.setattr(redis.connection.Connection, "_connect", counted_connect)
    with caplog.at_level(logging.WARNING, logger="config.redis"), pytest.raises(MasterNotFoundError):
        client.ping()
    # Three tries of two refused sentinels: each asked once per try, nobody retries underneath.
    assert sorted(attempts) == sorted(ports * 3)
    assert [len(record.getMessage()) < 300 for record in caplog.records] == [True, True]
    assert "No master found for 'mymaster'" in caplog.text and "s3cret-pw" not in caplog.text


class StopRequested(Exception):
    """What RQ's SIGTERM handler raises in an idle worker: in the middle of its blocking pop."""


def test_a_sentinel_connection_interrupted_mid_read_is_not_reused(tmp_path):
    """An idle worker's warm shutdown (systemctl stop) interrupts its BLPOP from a signal handler;
    the connection, still owed the BLPOP's reply, must not serve the worker's next command (its
    goodbye to Redis), or that command waits for the pop to time out and the worker never exits."""
    from tests.system.sentinel_cluster import SentinelCluster

    cluster = SentinelCluster(tmp_path).start()
    client = redis_client.make_redis_client(cluster.url, retries=2, connect_timeout=2, socket_timeout=30,
                                            backoff_cap=0.5)

    def stop(signum, frame):
        raise StopRequested()

    previous = signal.signal(signal.SIGALRM, stop)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(StopRequested):
            client.blpop(["rq:queue:nothing-ever"], timeout=20)
        started = time.monotonic()
        assert client.ping() is True
        assert time.monotonic() - started < 10  # the pop it would wait out takes 20 s
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        client.close()
        cluster.stop()
