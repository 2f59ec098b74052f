"""An outage of the database or Redis is a 503 with Retry-After, never a 500: JSON in the API's
error format everywhere but the pages people read (console, admin), which say what is down in the
reader's language. It is Django's handler500 (config/urls.py), which every unhandled exception
reaches, from a view, a template or a middleware (the session, the operator's language).

Inside a request the Redis clients retry at most WEB_RETRY_ATTEMPTS times (about a second),
so a web worker answers 503 instead of waiting out a whole failover. Console and API share this
and may not import each other, hence it lives here.
"""

import logging
import sys

from django.contrib.auth.context_processors import PermWrapper
from django.contrib.auth.models import AnonymousUser
from django.db import InterfaceError, OperationalError
from django.http import JsonResponse
from django.template.response import TemplateResponse
from django.views import defaults
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from config import redis_client

logger = logging.getLogger("config.unavailable")

# Inside an HTTP request (0.1-0.2, 0.2-0.4, 0.4-0.8 s): then the page is a 503 with Retry-After.
WEB_RETRY_ATTEMPTS = 3

RETRY_AFTER_SECONDS = 5
PAGE_PATH_PREFIXES = ("/console/", "/admin/")
OUTAGES = (
    ((OperationalError, InterfaceError), "database"),
    ((RedisConnectionError, RedisTimeoutError), "redis"),
)
API_ERRORS = {
    "database": "the database is unavailable (restart or failover in progress?); try again shortly",
    "redis": "the queue broker is unavailable (failover in progress?); try again shortly",
}


class RedisRetriesMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with redis_client.retries_at_most(WEB_RETRY_ATTEMPTS):
            return self.get_response(request)


def outage_of(exception: BaseException | None) -> str | None:
    """ "database" or "redis" when the exception, or one it was raised from or while handling, says
    that one could not be reached; None for any other error."""
    seen = set()
    while exception is not None and id(exception) not in seen:
        for types, name in OUTAGES:
            if isinstance(exception, types):
                return name
        seen.add(id(exception))
        exception = exception.__cause__ or exception.__context__
    return None


def server_error(request):
    """handler500: Django calls it while handling the exception, so sys.exc_info() names it."""
    exception = sys.exc_info()[1]
    down = outage_of(exception)
    is_page = request.path.startswith(PAGE_PATH_PREFIXES)
    if down is None:
        if is_page:
            return defaults.server_error(request)
        return JsonResponse({"error": "internal server error", "field": None}, status=500)
    # The error's first line too: an OperationalError is also what SQLite says of a missing table.
    first_line = (str(exception).strip().splitlines() or [""])[0][:200]
    logger.warning(
        "%s %s answered 503: %s unavailable (%s: %s)",
        request.method, request.path, down, type(exception).__name__, first_line,
    )
    if is_page:
        # Nothing on the page may need the database: no signed-in user, permissions or messages.
        nobody = AnonymousUser()
        context = {"down": down, "user": nobody, "perms": PermWrapper(nobody), "messages": ()}
        response = TemplateResponse(request, "503.html", context, status=503).render()
    else:
        response = JsonResponse({"error": API_ERRORS[down], "field": None}, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    # Logged above as the warning it is, once, without the traceback Django would log per request.
    response._has_been_logged = True
    return response
