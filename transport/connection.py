"""Redis clients for the transport: one shared client per process, and clients of their own for
workers and schedulers. All of them come from config.redis_client (plain and Sentinel URLs)."""

from functools import cache

from django.conf import settings
from redis import Redis

from config import redis_client


def new_redis_connection(url: str | None = None, *, socket_timeout: float | None = None) -> Redis:
    """A client of its own (own pool) on REDIS_URL, for a worker or a scheduler: RQ stretches a
    worker's socket timeout past its BLPOP, which must not leak into the shared client."""
    return redis_client.make_redis_client(
        url or settings.REDIS_URL,
        connect_timeout=settings.REDIS_CONNECT_TIMEOUT,
        socket_timeout=socket_timeout or settings.REDIS_SOCKET_TIMEOUT,
        retries=settings.REDIS_RETRY_ATTEMPTS,
    )


@cache
def _redis(url: str) -> Redis:
    # One client (and pool) per process and URL; redis-py resets the pool after fork.
    # Timeouts: a Redis that silently drops packets must fail a page or a pass, not hang it.
    return new_redis_connection(url)


def redis_connection() -> Redis:
    """The process's shared client: semaphores, locks, the alert rate limit, queues, the console."""
    return _redis(settings.REDIS_URL)
