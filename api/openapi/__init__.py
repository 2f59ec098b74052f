"""The OpenAPI 3.1 document of the JSON API, built as a dict and served at /report/openapi.json.

tests/api/test_api_contract.py checks every documented response against real responses, and that
every route of the API is documented: change both together."""

from api.openapi.batches import batch_paths
from api.openapi.bulk import bulk_components, bulk_paths
from api.openapi.controls import control_components, control_paths
from api.openapi.operator import operator_paths
from api.openapi.schemas import components
from api.openapi.tasks import task_paths


def openapi_document() -> dict:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Report tasks API",
            "version": "1.0.0",
            "description": (
                "Submit report tasks, follow them, fetch their output, list and replay dead letters. "
                "Authenticate with `Authorization: Bearer <token>` (`manage.py create_api_token NAME "
                "--scope ...`; a token sees only its own tasks unless it has the `operator` scope; submits "
                "are limited per token: 429 with Retry-After) or a console session (staff; POSTs need the "
                "CSRF token). Every error is "
                '`{"error": "...", "field": "..." | null}`.'
            ),
        },
        "security": [{"bearerAuth": []}, {"consoleSession": []}],
        "paths": {**task_paths(), **control_paths(), **operator_paths(), **bulk_paths(), **batch_paths()},
        "components": _with(components(), {**control_components(), **bulk_components()}),
    }


def _with(components: dict, schemas: dict) -> dict:
    return {**components, "schemas": {**components["schemas"], **schemas}}
