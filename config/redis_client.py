"""The one factory for every Redis client of the project: a plain URL or Redis Sentinel.

REDIS_URL takes what redis-py's `from_url` takes (`redis://`, `rediss://`, `unix://`) and the
Sentinel form

    redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service_name[/db][?sentinel_password=...]

(`rediss+sentinel://` for TLS to the master; a sentinel's port defaults to 26379). A Sentinel
client asks the sentinels for the master's address on every new connection, so after a failover
it reconnects to the promoted replica without a restart. Every client retries connection errors
and timeouts a bounded number of times (REDIS_RETRY_ATTEMPTS), waiting by the project's one backoff
rule (config.backoff), and logs one line when it loses its server, one when it is back and one
when it gives up; the Sentinel client also logs each master address it learns. Passwords never
reach a log line: targets are logged with mask_url().
"""

import logging
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from redis import Redis
from redis.backoff import AbstractBackoff, NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelManagedConnection, SentinelManagedSSLConnection

from config.backoff import backoff_delay, doubling
from config.masking import mask_url_secrets

logger = logging.getLogger("config.redis")

SENTINEL_SCHEMES = {"redis+sentinel": False, "rediss+sentinel": True}
SENTINEL_DEFAULT_PORT = 26379
# Between reconnects: 0.1-0.2 s, 0.2-0.4 s, ... doubling up to 1.5-3 s (10 retries: 10-21 s, which
# rides through a Sentinel failover: the sentinels' down-after-milliseconds plus a few seconds).
RETRY_BACKOFF_CAP = 3.0


@dataclass(frozen=True)
class SentinelTarget:
    sentinels: tuple[tuple[str, int], ...]
    service_name: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None
    ssl: bool = False


def parse_sentinel_url(url: str) -> SentinelTarget | None:
    """The Sentinel target a `redis+sentinel://` URL names; None for any other URL."""
    scheme, _, rest = url.partition("://")
    if scheme.lower() not in SENTINEL_SCHEMES:
        return None
    parts = urlsplit(f"sentinel://{rest}")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":") if userinfo else ("", "", "")
    sentinels = []
    for entry in (part.strip() for part in hostlist.split(",")):
        host, sep, port = entry.rpartition(":")
        if not sep or entry.endswith("]"):  # no port, or a bare [IPv6] address
            host, port = entry, str(SENTINEL_DEFAULT_PORT)
        if not host.strip("[]"):
            raise ValueError(f"REDIS_URL names an empty sentinel host: {mask_url(url)}")
        sentinels.append((host.strip("[]"), int(port)))
    path = [segment for segment in parts.path.split("/") if segment]
    if not path or len(path) > 2:
        raise ValueError(f"REDIS_URL must end in /service_name or /service_name/db: {mask_url(url)}")
    query = parse_qs(parts.query)
    return SentinelTarget(
        sentinels=tuple(sentinels),
        service_name=unquote(path[0]),
        db=int(path[1]) if len(path) == 2 else 0,
        username=unquote(username) or None,
        password=unquote(password) or None,
        sentinel_password=(query.get("sentinel_password") or [None])[0],
        ssl=SENTINEL_SCHEMES[scheme.lower()],
    )


def mask_url(url: str) -> str:
    """The URL with its password (and a sentinel_password) hidden, for logs and pages."""
    return mask_url_secrets(url)


def rq_queue_connection(url: str, *, socket_timeout: float) -> dict:
    """The connection part of a django-rq RQ_QUEUES entry for this URL (django-rq's SENTINELS /
    MASTER_NAME form for Sentinel), so django-rq's own commands reach the same server."""
    target = parse_sentinel_url(url)
    if target is None:
        return {"URL": url}
    return {
        "SENTINELS": list(target.sentinels),
        "MASTER_NAME": target.service_name,
        "DB": target.db,
        "USERNAME": target.username,
        "PASSWORD": target.password,
        "SOCKET_TIMEOUT": socket_timeout,
        "SENTINEL_KWARGS": {"password": target.sentinel_password, "socket_timeout": socket_timeout},
        "CONNECTION_KWARGS": {"ssl": target.ssl} if target.ssl else {},
    }


# While set (an HTTP request, see config.unavailable), calls retry at most this many times: a page
# answers 503 within about a second instead of holding a web worker through a whole failover.
retry_limit: ContextVar[int | None] = ContextVar("redis_retry_limit", default=None)


@contextmanager
def retries_at_most(limit: int):
    token = retry_limit.set(limit)
    try:
        yield
    finally:
        retry_limit.reset(token)


def describe(error: Exception) -> str:
    """One short line: redis-py's MasterNotFoundError carries the repr of every sentinel client."""
    text = str(error).split(" : <", 1)[0]
    return f"{type(error).__name__}: {text[:200]}"


class Backoff(AbstractBackoff):
    """config.backoff in redis-py's shape: half of a doubling step up to `cap`, plus up to as much
    again of jitter (redis-py's EqualJitterBackoff, as one rule of the project)."""

    def __init__(self, cap: float):
        self.steps = doubling(min(0.1, cap / 2), cap / 2)

    def reset(self) -> None:
        pass

    def compute(self, failures: int) -> float:
        return backoff_delay(failures, self.steps, jitter=1.0)


class LoggedRetry(Retry):
    """redis-py's Retry loop, saying when a client loses its server, gets it back, or gives up."""

    def __init__(self, *, target: str, retries: int, backoff_cap: float = RETRY_BACKOFF_CAP):
        super().__init__(Backoff(backoff_cap), retries)
        self.target = target

    def call_with_retry(self, do, fail, is_retryable=None, with_failure_count=False):
        limit = self._retries
        if (ceiling := retry_limit.get()) is not None:
            limit = ceiling if limit < 0 else min(limit, ceiling)
        self._backoff.reset()
        failures = 0
        started = time.monotonic()
        while True:
            try:
                result = do()
            except self._supported_errors as error:
                if is_retryable and not is_retryable(error):
                    raise
                failures += 1
                if with_failure_count:
                    fail(error, failures)
                else:
                    fail(error)
                if 0 <= limit < failures:
                    if limit:  # a caller that asks once (a probe, the housekeeper) says it itself
                        logger.error(
                            "redis %s unreachable, gave up after %d retries in %.1fs (%s)",
                            self.target, limit, time.monotonic() - started, describe(error),
                        )
                    raise error
                if failures == 1:
                    logger.warning(
                        "redis %s unreachable (%s); reconnecting, up to %d retries",
                        self.target, describe(error), limit,
                    )
                time.sleep(self._backoff.compute(failures))
            else:
                if failures:
                    logger.warning(
                        "redis %s reachable again after %d retries in %.1fs",
                        self.target, failures, time.monotonic() - started,
                    )
                return result


class LoggedSentinel(Sentinel):
    """A Sentinel client that logs every master address its process learns: the first, and each
    failover (once per process, however many clients it holds)."""

    known_masters: dict[str, tuple[str, int]] = {}

    def discover_master(self, service_name):
        address = super().discover_master(service_name)
        previous = self.known_masters.get(service_name)
        if previous != address:
            LoggedSentinel.known_masters[service_name] = address
            if previous is None:
                logger.info("redis sentinel: master %r is at %s:%s", service_name, *address)
            else:
                logger.warning(
                    "redis sentinel: failover seen, master %r moved from %s:%s to %s:%s",
                    service_name, *previous, *address,
                )
        return address


class _DisconnectOnError:
    """A connection whose read is cut short (an exception from a signal handler, as RQ's warm
    shutdown raises in the middle of an idle worker's BLPOP) is closed, as redis-py's plain
    connections do: its Sentinel connections keep it by default, and the next command on it then
    waits for the reply still owed to the interrupted one (a stopped worker hung until SIGKILL)."""

    def read_response(self, *args, disconnect_on_error=True, **kwargs):
        return super().read_response(*args, disconnect_on_error=disconnect_on_error, **kwargs)


class SentinelConnection(_DisconnectOnError, SentinelManagedConnection):
    pass


class SentinelSSLConnection(_DisconnectOnError, SentinelManagedSSLConnection):
    pass


def make_redis_client(
    url: str,
    *,
    connect_timeout: float,
    socket_timeout: float | None,
    retries: int,
    backoff_cap: float = RETRY_BACKOFF_CAP,
    health_check_interval: int = 30,
) -> Redis:
    """A new client (and connection pool) for `url`; see the module's docstring."""
    options = dict(
        socket_connect_timeout=connect_timeout,
        socket_timeout=socket_timeout,
        health_check_interval=health_check_interval,
        retry=LoggedRetry(target=mask_url(url), retries=retries, backoff_cap=backoff_cap),
    )
    target = parse_sentinel_url(url)
    if target is None:
        return Redis.from_url(url, **options)
    sentinel = LoggedSentinel(
        list(target.sentinels),
        # One question per sentinel per try: the master connection's retry is the only loop, so
        # the budget above holds (redis-py's default would retry each sentinel 3 more times).
        sentinel_kwargs={
            "retry": Retry(NoBackoff(), 0),
            "password": target.sentinel_password,
            "socket_connect_timeout": connect_timeout,
            "socket_timeout": connect_timeout,
        },
    )
    return sentinel.master_for(
        target.service_name,
        db=target.db,
        username=target.username,
        password=target.password,
        connection_class=SentinelSSLConnection if target.ssl else SentinelConnection,
        **options,
    )
