"""API errors: always `{"error": "...", "field": "..." | null}` with a 4xx status."""

from django.http import JsonResponse


class ApiError(Exception):
    def __init__(self, status: int, error: str, field: str | None = None, *, headers: dict | None = None):
        super().__init__(error)
        self.status = status
        self.error = error
        self.field = field
        self.headers = headers or {}


def error_response(status: int, error: str, field: str | None = None, headers: dict | None = None):
    response = JsonResponse({"error": error, "field": field}, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def api_error_response(exc: ApiError) -> JsonResponse:
    return error_response(exc.status, exc.error, exc.field, exc.headers)
