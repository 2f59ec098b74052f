"""API errors: always `{"error": "...", "field": "..." | null}` with a 4xx status; a 422 (invalid
input) also lists every bad field in `errors` (`[{"field": ..., "error": ...}]`, the first one being
`field` and `error`), as the console shows every one at once."""

from django.http import JsonResponse


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        error: str,
        field: str | None = None,
        *,
        headers: dict | None = None,
        errors: list[tuple[str | None, str]] | None = None,
    ):
        super().__init__(error)
        self.status = status
        self.error = error
        self.field = field
        self.headers = headers or {}
        self.errors = errors if errors is not None else ([(field, error)] if status == 422 else None)

    @classmethod
    def invalid(cls, errors: list[tuple[str | None, str]]) -> "ApiError":
        """422 naming every bad (field, message); `field` and `error` are the first, as before."""
        field, error = errors[0]
        return cls(422, error, field, errors=errors)


def api_error_response(exc: ApiError) -> JsonResponse:
    body = {"error": exc.error, "field": exc.field}
    if exc.errors is not None:
        body["errors"] = [{"field": name, "error": message} for name, message in exc.errors]
    response = JsonResponse(body, status=exc.status)
    for name, value in exc.headers.items():
        response[name] = value
    return response
