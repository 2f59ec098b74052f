"""A Redis outage or a failover in progress is a 503 with Retry-After, never a 500.

Redis is only transport (the database is the truth), so a page or an API call that needed it can
simply be tried again a few seconds later, once the client's bounded retries have given up.
Console and API share this middleware and may not import each other, hence it lives here.
"""

import logging

from django.http import JsonResponse
from django.template.response import TemplateResponse
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger("config.redis")

RETRY_AFTER_SECONDS = 5
API_PATH_PREFIX = "/report/"


class RedisUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
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
