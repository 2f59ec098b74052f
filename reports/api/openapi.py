"""The OpenAPI 3.1 document of the JSON API, built as a dict and served at /report/openapi.json.

tests/test_api_contract.py checks every documented response against real responses,
and that every route of the API is documented: change both together.
"""

from django.conf import settings

from reports.kinds import KINDS
from reports.models import Priority, TaskStatus

_ERROR_REF = {"$ref": "#/components/schemas/Error"}


def _nullable(schema: dict) -> dict:
    return {**schema, "type": [schema["type"], "null"]}


def _error(description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": _ERROR_REF}}}


def _json(description: str, ref: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": ref}}}}


UNAUTHORIZED = _error("No credentials, a malformed Authorization header, or an unknown or revoked token.")
FORBIDDEN = _error("Session user not staff or lacking the permission, or CSRF check failed (session POSTs).")
NOT_ALLOWED = _error("Another HTTP method than the one documented for this path; see the Allow header.")
NOT_FOUND = _error("Unknown or malformed task id.")
TOO_LARGE = _error("The body is over API_MAX_BODY_BYTES (256 KiB by default).")
NOT_JSON = _error("Content-Type is not application/json (UTF-8).")
MALFORMED = _error(
    "Malformed request: invalid UTF-8 or JSON, not an object, an unknown field (named in `field`)."
)
TASK_ID_PARAM = {
    "name": "task_id",
    "in": "path",
    "required": True,
    "description": "The task's id (a UUID, as `task_id` returned by submit).",
    "schema": {"type": "string", "format": "uuid"},
}


def openapi_document() -> dict:
    document = _task_api_document()
    # Other API modules contribute their own paths (reports/api/batches.py: the batch endpoints).
    from reports.api import batches

    document["paths"].update(batches.openapi_paths())
    return document


def _task_api_document() -> dict:
    kinds = sorted(KINDS)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Report tasks API",
            "version": "1.0.0",
            "description": (
                "Submit report tasks, follow them, fetch their output, list and replay dead letters. "
                "Authenticate with `Authorization: Bearer <token>` (`manage.py create_api_token NAME`) "
                "or a console session (staff; POSTs need the CSRF token). Every error is "
                '`{"error": "...", "field": "..." | null}`.'
            ),
        },
        "security": [{"bearerAuth": []}, {"consoleSession": []}],
        "paths": {
            "/report/task/submit": {
                "post": {
                    "operationId": "submitTask",
                    "summary": "Submit a report task",
                    "parameters": [
                        {
                            "name": "Idempotency-Key",
                            "in": "header",
                            "required": False,
                            "description": "Same key, same kind and params: the same task (200). "
                            "Alternative to the `idempotency_key` field; both given must be equal.",
                            "schema": {"type": "string", "maxLength": 200},
                        }
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/SubmitRequest"}}
                        },
                    },
                    "responses": {
                        "201": _json("Task created.", "#/components/schemas/SubmitResponse"),
                        "200": _json(
                            "Idempotent repeat: the task submitted earlier with this key.",
                            "#/components/schemas/SubmitResponse",
                        ),
                        "400": MALFORMED,
                        "401": UNAUTHORIZED,
                        "403": FORBIDDEN,
                        "405": NOT_ALLOWED,
                        "409": _error("The idempotency key was used for another kind or other params."),
                        "413": TOO_LARGE,
                        "415": NOT_JSON,
                        "422": _error(
                            "Invalid kind, params, priority or idempotency key (named in `field`)."
                        ),
                    },
                }
            },
            "/report/task/{task_id}/status": {
                "get": {
                    "operationId": "taskStatus",
                    "summary": "A task's state, attempts, last error and output",
                    "parameters": [TASK_ID_PARAM],
                    "responses": {
                        "200": _json("The task.", "#/components/schemas/TaskStatus"),
                        "401": UNAUTHORIZED,
                        "403": FORBIDDEN,
                        "404": NOT_FOUND,
                        "405": NOT_ALLOWED,
                    },
                }
            },
            "/report/task/{task_id}/replay": {
                "post": {
                    "operationId": "replayTask",
                    "summary": "Replay a dead task with a fresh attempt budget (runs once however often called)",
                    "parameters": [TASK_ID_PARAM],
                    "requestBody": {
                        "required": False,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/ReplayRequest"}}
                        },
                    },
                    "responses": {
                        "200": _json("Replayed.", "#/components/schemas/Ok"),
                        "400": MALFORMED,
                        "401": UNAUTHORIZED,
                        "403": FORBIDDEN,
                        "404": NOT_FOUND,
                        "405": NOT_ALLOWED,
                        "409": _error("The task is not dead (already replayed, pending, running or done)."),
                        "413": TOO_LARGE,
                        "415": NOT_JSON,
                        "422": _error("Invalid `reason`."),
                    },
                }
            },
            "/report/task/{task_id}/output": {
                "get": {
                    "operationId": "taskOutput",
                    "summary": "Download the report file of a done task",
                    "parameters": [TASK_ID_PARAM],
                    "responses": {
                        "200": {
                            "description": "The file as an attachment; Content-Type by its extension (CSV, XLSX, JSON).",
                            "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
                        },
                        "401": UNAUTHORIZED,
                        "403": FORBIDDEN,
                        "404": _error("Unknown task, or its output file is missing."),
                        "405": NOT_ALLOWED,
                        "409": _error("The task is not done yet."),
                    },
                }
            },
            "/report/task/dead-letters": {
                "get": {
                    "operationId": "listDeadLetters",
                    "summary": "Open, not yet expired dead letters, newest first",
                    "parameters": [
                        {
                            "name": "kind",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "string", "enum": kinds},
                        },
                        {
                            "name": "fingerprint",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "string", "pattern": "^[0-9a-f]{40}$"},
                        },
                        {
                            "name": "cursor",
                            "in": "query",
                            "required": False,
                            "description": "`next_cursor` of the previous page.",
                            "schema": {"type": "string"},
                        },
                        {
                            "name": "limit",
                            "in": "query",
                            "required": False,
                            "schema": {
                                "type": "integer",
                                "minimum": 1,
                                "maximum": settings.API_DEADLETTER_PAGE_MAX,
                                "default": settings.API_DEADLETTER_PAGE_SIZE,
                            },
                        },
                    ],
                    "responses": {
                        "200": _json("One page.", "#/components/schemas/DeadLetterPage"),
                        "400": _error(
                            "Unknown query parameter, bad limit, fingerprint or cursor (named in `field`)."
                        ),
                        "401": UNAUTHORIZED,
                        "403": FORBIDDEN,
                        "405": NOT_ALLOWED,
                    },
                }
            },
            "/report/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "summary": "This document",
                    "security": [],
                    "responses": {
                        "200": {
                            "description": "OpenAPI 3.1",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                        "405": NOT_ALLOWED,
                    },
                }
            },
        },
        "components": {
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "rpt_... from create_api_token",
                },
                "consoleSession": {"type": "apiKey", "in": "cookie", "name": settings.SESSION_COOKIE_NAME},
            },
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error", "field"],
                    "additionalProperties": False,
                    "properties": {"error": {"type": "string"}, "field": {"type": ["string", "null"]}},
                },
                "SubmitRequest": {
                    "type": "object",
                    "required": ["kind"],
                    "additionalProperties": False,
                    "properties": {
                        "kind": {"type": "string", "enum": kinds},
                        "params": {
                            "type": "object",
                            "description": "The kind's parameters (at most 64 KiB).",
                        },
                        "priority": {"type": "string", "enum": list(Priority.values)},
                        "idempotency_key": {"type": "string", "maxLength": 200},
                    },
                },
                "SubmitResponse": {
                    "type": "object",
                    "required": ["task_id"],
                    "additionalProperties": False,
                    "properties": {"task_id": {"type": "string", "format": "uuid"}},
                },
                "TaskStatus": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": [
                        "id",
                        "kind",
                        "status",
                        "priority",
                        "attempt",
                        "max_attempts",
                        "last_error",
                        "output_path",
                        "download_url",
                        "created_at",
                        "started_at",
                        "finished_at",
                    ],
                    "properties": {
                        "id": {"type": "string", "format": "uuid"},
                        "kind": {"type": "string"},
                        "status": {"type": "string", "enum": list(TaskStatus.values)},
                        "priority": {"type": "string", "enum": list(Priority.values)},
                        "attempt": {"type": "integer", "minimum": 0},
                        "max_attempts": {"type": "integer", "minimum": 1},
                        "last_error": _nullable({"type": "string"}),
                        "output_path": _nullable(
                            {"type": "string", "description": "Relative to MEDIA_ROOT; when done."}
                        ),
                        "download_url": _nullable({"type": "string", "format": "uri"}),
                        "created_at": {"type": "string", "format": "date-time"},
                        "started_at": _nullable({"type": "string", "format": "date-time"}),
                        "finished_at": _nullable({"type": "string", "format": "date-time"}),
                    },
                },
                "ReplayRequest": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"reason": {"type": "string", "maxLength": 2000}},
                },
                "Ok": {
                    "type": "object",
                    "required": ["ok"],
                    "additionalProperties": False,
                    "properties": {"ok": {"type": "boolean", "const": True}},
                },
                "DeadLetter": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": [
                        "id",
                        "task_id",
                        "kind",
                        "error_type",
                        "error_message",
                        "attempts",
                        "fingerprint",
                        "created_at",
                        "expire_at",
                        "console_url",
                    ],
                    "properties": {
                        "id": {"type": "integer"},
                        "task_id": {"type": "string", "format": "uuid"},
                        "kind": {"type": "string"},
                        "error_type": {"type": "string"},
                        "error_message": {
                            "type": "string",
                            "description": "First line, at most 300 characters.",
                        },
                        "attempts": {"type": "integer", "minimum": 0},
                        "fingerprint": {"type": "string"},
                        "created_at": {"type": "string", "format": "date-time"},
                        "expire_at": {"type": "string", "format": "date-time"},
                        "console_url": {"type": "string", "format": "uri"},
                    },
                },
                "DeadLetterPage": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["results", "next_cursor"],
                    "properties": {
                        "results": {"type": "array", "items": {"$ref": "#/components/schemas/DeadLetter"}},
                        "next_cursor": {"type": ["string", "null"]},
                    },
                },
            },
        },
    }
