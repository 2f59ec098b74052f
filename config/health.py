"""Probes for a load balancer or an orchestrator: anonymous, no secrets, no versions.

/healthz: the process answers (no I/O): restart the process when it fails.
/readyz: the database and Redis answer, each within TIMEOUT seconds: take the
machine out of rotation while it is 503. The body names each check and whether it passed.
"""

import time

from django.conf import settings
from django.db import connection, transaction
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from config import redis_client
from config.unavailable import RETRY_AFTER_SECONDS

# /readyz gives each of its checks (database, Redis) at most this many seconds.
TIMEOUT = 2.0


@never_cache
@require_GET
def healthz(request):
    return JsonResponse({"status": "ok"})


def _select_one() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.fetchone() == (1,)


def _database_ok() -> bool:
    try:
        if connection.vendor != "postgresql":
            # No transaction: SQLite's IMMEDIATE mode would take the write lock for a probe.
            return _select_one()
        # The timeout is local to this transaction, so it cannot outlive the probe.
        with transaction.atomic():
            with connection.cursor() as cursor:
                milliseconds = int(TIMEOUT * 1000)
                cursor.execute("SELECT set_config('statement_timeout', %s, true)", [str(milliseconds)])
            return _select_one()
    except Exception:
        connection.close()  # a broken connection must not serve the next request
        return False


def _redis_ok() -> bool:
    # A client of its own without retries: the probe asks "now?", the pages' clients ride it out.
    timeout = TIMEOUT
    client = redis_client.make_redis_client(
        settings.REDIS_URL, connect_timeout=timeout, socket_timeout=timeout, retries=0
    )
    try:
        return bool(client.ping())
    except Exception:
        return False
    finally:
        client.close()


CHECKS = (("database", _database_ok), ("redis", _redis_ok))


def dependencies_down(only: tuple[str, ...] = ("database", "redis")) -> list[str]:
    """The checks that fail now ("database", "redis"): the same question for a process without
    pages (the housekeeper, `up`)."""
    return [name for name, check in CHECKS if name in only and not check()]


@never_cache
@require_GET
def readyz(request):
    checks = {}
    for name, check in CHECKS:
        started = time.monotonic()
        passed = check()
        checks[name] = {"ok": passed, "ms": round((time.monotonic() - started) * 1000)}
    ready = all(check["ok"] for check in checks.values())
    response = JsonResponse({"status": "ready" if ready else "unavailable", "checks": checks},
                            status=200 if ready else 503)
    if not ready:
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
