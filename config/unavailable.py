"""A Redis outage or a failover in progress is a 503 with Retry-After, never a 500.

Redis is only transport (the database is the truth), so a page or an API call that needed it can
simply be tried again a few seconds later. Inside a request the Redis clients retry at most
WEB_RETRY_ATTEMPTS times (about a second), so a web worker answers 503 instead of waiting
out a whole failover; background processes keep the longer REDIS_RETRY_ATTEMPTS.
Console and API share this middleware and may not import each other, hence it lives here.
"""

import logging

from django.http import JsonResponse
from django.template.response import TemplateResponse
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from config import redis_client

# Inside an HTTP request (0.1-0.2, 0.2-0.4, 0.4-0.8 s): then the page is a 503 with Retry-After.
WEB_RETRY_ATTEMPTS = 3

logger = logging.getLogger("config.redis")

RETRY_AFTER_SECONDS = 5
API_PATH_PREFIX = "/report/"


class RedisUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with redis_client.retries_at_most(WEB_RETRY_ATTEMPTS):
            return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, (RedisConnectionError, RedisTimeoutError)):
            return None
        logger.warning(
            "%s %s answered 503: Redis unavailable (%s)", request.method, request.path, type(exception).__name__
        )
        if request.path.startswith(API_PATH_PREFIX):
            response = JsonResponse(
                {"error": "the queue broker is unavailable (failover in progress?); try again shortly", "field": None},
                status=503,
            )
        else:
            response = TemplateResponse(request, "503.html", status=503).render()
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
