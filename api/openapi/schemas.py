"""The schemas (components) of the OpenAPI document."""

from django.conf import settings

from api.openapi.common import NO_NUL, nullable
from api.openapi.kinds import kind_components
from reports.models import Priority, TaskStatus


def components(*, public: bool = False) -> dict:
    return {
        "securitySchemes": {
            "bearerAuth": {
                "type": "http",
                "scheme": "bearer",
                "description": (
                    "rpt_... from `manage.py create_api_token NAME --scope ...`. Scopes: `submit` (submit "
                    "tasks and batches), `read` (status, output, batch status, dead letters), `replay`; "
                    "each limited to the token's own tasks and batches unless the token also has "
                    "`operator`, which widens them to every client's and allows the probe kind. Default "
                    "for a new token: submit, read. Each operation names the scope it needs; without it, "
                    "403. Another client's task or batch is a 404, as an unknown one."
                ),
            },
            "consoleSession": {"type": "apiKey", "in": "cookie", "name": settings.SESSION_COOKIE_NAME},
        },
        "schemas": {
            "Error": {
                "type": "object",
                "required": ["error", "field"],
                "additionalProperties": False,
                "properties": {
                    "error": {"type": "string"},
                    "field": {"type": ["string", "null"]},
                    "errors": {
                        "description": "On a 422: every bad field, the first being `field` and `error`.",
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["field", "error"],
                            "additionalProperties": False,
                            "properties": {
                                "field": {"type": ["string", "null"]}, "error": {"type": "string"}
                            },
                        },
                    },
                },
            },
            **kind_components(public=public),
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
                    "last_error": nullable({"type": "string"}),
                    "output_path": nullable(
                        {"type": "string", "description": "The file's key in the report storage; when done."}
                    ),
                    "download_url": nullable({"type": "string", "format": "uri"}),
                    "created_at": {"type": "string", "format": "date-time"},
                    "started_at": nullable({"type": "string", "format": "date-time"}),
                    "finished_at": nullable({"type": "string", "format": "date-time"}),
                },
            },
            "ReplayRequest": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "reason": {
                        "type": "string",
                        "maxLength": 2000,
                        "pattern": NO_NUL,
                        "description": "Kept in the audit log; required (422 without) when the server "
                        "sets DEADLETTER_REQUIRE_REASON.",
                    }
                },
            },
            "BatchInvalid": {
                "type": "object",
                "required": ["error", "field", "errors"],
                "properties": {
                    "error": {"type": "string"},
                    "field": {"type": ["string", "null"]},
                    "errors": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["index", "field", "error"],
                            "properties": {
                                "index": {"type": ["integer", "null"]},
                                "field": {"type": "string"},
                                "error": {"type": "string"},
                            },
                        },
                    },
                },
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
                    "status",
                    "superseded_by",
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
                    "status": {"type": "string", "enum": ["open", "superseded"]},
                    "superseded_by": {
                        "type": ["string", "null"],
                        "format": "uuid",
                        "description": "The task that made a superseded letter moot: the same kind and "
                        "params, submitted later by the same client, ended done (null: not superseded, or "
                        "that task is gone).",
                    },
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
    }
