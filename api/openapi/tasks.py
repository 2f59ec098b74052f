"""The task and dead-letter endpoints of the OpenAPI document."""

from django.conf import settings

from api.openapi.common import (
    CURSOR_PATTERN,
    FORBIDDEN,
    IDEMPOTENCY_KEY,
    MALFORMED,
    NOT_ALLOWED,
    NOT_FOUND,
    NOT_JSON,
    SUBMIT_FORBIDDEN,
    TASK_ID_PARAM,
    TOO_LARGE,
    TOO_MANY,
    UNAUTHORIZED,
    error,
    json_response,
    needs_scope,
)
from reports.kinds import KINDS

# Follow-up calls a client (and Schemathesis' stateful phase) can make with an answer's id.
SUBMIT_LINKS = {
    "status": {
        "operationId": "taskStatus",
        "parameters": {"task_id": "$response.body#/task_id"},
        "description": "Follow the task just submitted.",
    }
}
STATUS_LINKS = {
    "output": {"operationId": "taskOutput", "parameters": {"task_id": "$response.body#/id"}},
    "replay": {"operationId": "replayTask", "parameters": {"task_id": "$response.body#/id"}},
}


def _with_links(response: dict, links: dict) -> dict:
    return {**response, "links": links}


def task_paths() -> dict:
    kinds = sorted(KINDS)
    return {
        "/report/task/submit": {
            "post": {
                "operationId": "submitTask",
                "summary": "Submit a report task",
                "description": "Token scope `submit` (the probe kind also needs `operator`); sessions: staff. "
                "The task belongs to the token: only it (and operator tokens) can read and replay it. "
                "Idempotency keys are the token's own: another client's equal key is another key.",
                "security": needs_scope("submit"),
                "parameters": [
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": False,
                        "description": IDEMPOTENCY_KEY["description"],
                        "schema": {k: v for k, v in IDEMPOTENCY_KEY.items() if k != "description"},
                    }
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/SubmitRequest"}}
                    },
                },
                "responses": {
                    "201": _with_links(
                        json_response("Task created.", "#/components/schemas/SubmitResponse"), SUBMIT_LINKS
                    ),
                    "200": _with_links(
                        json_response(
                            "Idempotent repeat: the task submitted earlier with this key.",
                            "#/components/schemas/SubmitResponse",
                        ),
                        SUBMIT_LINKS,
                    ),
                    "400": error(
                        "Malformed request: invalid UTF-8 or JSON, not an object, an unknown field "
                        "(named in `field`), a NUL character anywhere, or the `Idempotency-Key` header "
                        "and the `idempotency_key` field both given with different values."
                    ),
                    "401": UNAUTHORIZED,
                    "403": SUBMIT_FORBIDDEN,
                    "405": NOT_ALLOWED,
                    "409": error("The idempotency key was used (by this client) for another kind or other params."),
                    "413": TOO_LARGE,
                    "415": NOT_JSON,
                    "429": TOO_MANY,
                    "422": error(
                        "Invalid kind, params, priority or idempotency key (named in `field`; for "
                        "params, the kind's own parameter). Also what the schema cannot state: a "
                        "`url` outside the outbound policy (its host:port not in HTTP_EXPORT_ALLOWED_HOSTS, "
                        "a non-public address not named there, userinfo, a backslash), a `date_to` before "
                        "`date_from`, params over 64 KiB."
                    ),
                },
            }
        },
        "/report/task/{task_id}/status": {
            "get": {
                "operationId": "taskStatus",
                "summary": "A task's state, attempts, last error and output",
                "description": "Token scope `read` (own tasks; every task with `operator`); sessions: "
                "`reports.view_reporttask`.",
                "security": needs_scope("read"),
                "parameters": [TASK_ID_PARAM],
                "responses": {
                    "200": _with_links(json_response("The task.", "#/components/schemas/TaskStatus"), STATUS_LINKS),
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
                "description": "Token scope `replay` (own tasks; every task with `operator`); sessions: "
                "`deadletters.replay_deadletter`.",
                "security": needs_scope("replay"),
                "parameters": [TASK_ID_PARAM],
                "requestBody": {
                    "required": False,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/ReplayRequest"}}
                    },
                },
                "responses": {
                    "200": json_response("Replayed.", "#/components/schemas/Ok"),
                    "400": MALFORMED,
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": NOT_FOUND,
                    "405": NOT_ALLOWED,
                    "409": error("The task is not dead (already replayed, pending, running or done)."),
                    "413": TOO_LARGE,
                    "415": NOT_JSON,
                    "422": error("Invalid `reason`, or none given while DEADLETTER_REQUIRE_REASON is set."),
                },
            }
        },
        "/report/task/{task_id}/output": {
            "get": {
                "operationId": "taskOutput",
                "summary": "Download the report file of a done task",
                "description": "Token scope `read` (own tasks; every task with `operator`); sessions: "
                "`reports.view_reporttask`.",
                "security": needs_scope("read"),
                "parameters": [TASK_ID_PARAM],
                "responses": {
                    "200": {
                        "description": "The file as an attachment; Content-Type by its extension (CSV, XLSX, JSON).",
                        "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
                    },
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": error("Unknown task, another client's task, or its output file is missing."),
                    "405": NOT_ALLOWED,
                    "409": error("The task is not done yet."),
                },
            }
        },
        "/report/task/dead-letters": {
            "get": {
                "operationId": "listDeadLetters",
                "summary": "Open, not yet expired dead letters, newest first",
                "description": "Token scope `read`: the letters of the token's own tasks; with `operator`, "
                "everyone's. Sessions: `deadletters.view_deadletter` (everyone's).",
                "security": needs_scope("read"),
                "parameters": [
                    {
                        "name": "kind",
                        "in": "query",
                        "required": False,
                        "description": "Only this report kind; another value is a 400.",
                        "schema": {"type": "string", "enum": kinds},
                    },
                    {
                        "name": "fingerprint",
                        "in": "query",
                        "required": False,
                        "description": "A fingerprint, or its first 8+ characters: every letter whose "
                        "fingerprint starts with them.",
                        "schema": {"type": "string", "pattern": "^[0-9a-f]{8,40}$"},
                    },
                    {
                        "name": "q",
                        "in": "query",
                        "required": False,
                        "description": "Search, as the console's box: `#13` (a letter id), a task id "
                        "(whole, or its first 8+ hex digits), a number (a letter id or message text), or "
                        "3+ characters of the error message (case-insensitive).",
                        "schema": {"type": "string", "maxLength": 200},
                    },
                    {
                        "name": "cursor",
                        "in": "query",
                        "required": False,
                        "description": "`next_cursor` of the previous page: `<microseconds since the "
                        "epoch>-<id>` of the last row seen. A cursor past the end gives an empty page.",
                        "schema": {"type": "string", "pattern": CURSOR_PATTERN},
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
                    "200": json_response("One page.", "#/components/schemas/DeadLetterPage"),
                    "400": error(
                        "Unknown query parameter, a parameter given twice, an unknown kind, a bad "
                        "limit, fingerprint, q or cursor (named in `field`)."
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
    }
