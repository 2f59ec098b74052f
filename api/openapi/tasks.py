"""The task and dead-letter endpoints of the OpenAPI document."""

from api.openapi.common import (
    CURSOR_PATTERN,
    DEAD_LETTER_PAGE_MAX,
    DEAD_LETTER_PAGE_SIZE,
    FORBIDDEN,
    IDEMPOTENCY_KEY,
    MALFORMED,
    NOT_ALLOWED,
    NOT_FOUND,
    NOT_JSON,
    REPLAY_TOO_MANY,
    SUBMIT_FORBIDDEN,
    TASK_ID_PARAM,
    TOO_LARGE,
    TOO_MANY,
    UNAUTHORIZED,
    error,
    json_response,
    needs_scope,
)
from api.openapi.groups import letter_filter_parameters


def _links(parameter: str, pointer: str, operations: dict[str, str]) -> dict:
    """Follow-up calls a client (and Schemathesis' stateful phase) can make with an answer's id."""
    return {
        name: {"operationId": operation, "parameters": {parameter: f"$response.body#/{pointer}"}}
        for name, operation in operations.items()
    }


_TASK_OPERATIONS = {
    "output": "taskOutput", "replay": "replayTask", "cancel": "cancelTask", "retry-now": "retryTaskNow",
    "stop": "stopTask",
}
SUBMIT_LINKS = _links("task_id", "task_id", {"status": "taskStatus", **_TASK_OPERATIONS})
STATUS_LINKS = _links("task_id", "id", _TASK_OPERATIONS)
# The page's first letter: its actions, and its task.
_LETTER_ACTIONS = ("replay", "archive", "discard", "restore")
FIRST_LETTER_LINKS = {
    **_links("letter_id", "results/0/id", {f"{a}First": f"{a}DeadLetter" for a in _LETTER_ACTIONS}),
    **_links("task_id", "results/0/task_id", {"firstTaskStatus": "taskStatus"}),
}


def _with_links(response: dict, links: dict) -> dict:
    return {**response, "links": links}


def task_paths() -> dict:
    return {
        "/report/task/submit": {
            "post": {
                "operationId": "submitTask",
                "tags": ["tasks"],
                "summary": "Submit a report task",
                "description": "Token scope `submit` (the probe kind also needs `operator`); sessions: "
                "`reports.add_reporttask` (the probe also `reports.submit_operator_kinds`). "
                "The task belongs to the token: only it (and operator tokens) can read and replay it. "
                "Idempotency keys are the token's own: another client's equal key is another key.",
                **needs_scope("submit"),
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
                        "(named in `field`), or a NUL character anywhere."
                    ),
                    "401": UNAUTHORIZED,
                    "403": SUBMIT_FORBIDDEN,
                    "405": NOT_ALLOWED,
                    "409": error(
                        "The idempotency key was used (by this client) for another kind or other params, "
                        "or the `Idempotency-Key` header and the `idempotency_key` field differ."
                    ),
                    "413": TOO_LARGE,
                    "415": NOT_JSON,
                    "429": TOO_MANY,
                    "422": error(
                        "Invalid kind, params, priority or idempotency key (named in `field`; for "
                        "params, the kind's own parameter), or params over 64 KiB. A `url` the pattern "
                        "allows is refused only when its host name resolves to an address that is not "
                        "public and the allowlist does not name that address."
                    ),
                },
            }
        },
        "/report/task/{task_id}/status": {
            "get": {
                "operationId": "taskStatus",
                "tags": ["tasks"],
                "summary": "A task's state, attempts, last error and output",
                "description": "Token scope `read` (own tasks; every task with `operator`); sessions: "
                "`reports.view_reporttask`.",
                **needs_scope("read"),
                "parameters": [TASK_ID_PARAM],
                "responses": {
                    "200": _with_links(json_response("The task.", "#/components/schemas/TaskStatus"),
                                       STATUS_LINKS),
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
                "tags": ["tasks"],
                "summary": "Replay a dead task with a fresh attempt budget (runs once however often called)",
                "description": "Token scope `replay` (own tasks; every task with `operator`); sessions: "
                "`deadletters.replay_deadletter`. Each replay spends one of the client's replay budget "
                "(API_REPLAY_RATE); a replay refused (404, 409, 422) is not counted.",
                **needs_scope("replay"),
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
                    "429": REPLAY_TOO_MANY,
                },
            }
        },
        "/report/task/{task_id}/output": {
            "get": {
                "operationId": "taskOutput",
                "tags": ["tasks"],
                "summary": "Download the report file of a done task",
                "description": "Token scope `read` (own tasks; every task with `operator`); sessions: "
                "`reports.view_reporttask`.",
                **needs_scope("read"),
                "parameters": [TASK_ID_PARAM],
                "responses": {
                    "200": {
                        "description": "The file as an attachment; Content-Type by its extension "
                        "(CSV, XLSX, JSON).",
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
                "tags": ["dead letters"],
                "summary": "Open, not yet expired dead letters (or the superseded ones), newest first",
                "description": "Token scope `read`: the letters of the token's own tasks; with `operator`, "
                "everyone's. Sessions: `deadletters.view_deadletter` (everyone's).",
                **needs_scope("read"),
                "parameters": [
                    *letter_filter_parameters(),
                    {
                        "name": "status",
                        "in": "query",
                        "required": False,
                        "description": "`superseded`: the letters a later task of the same report (kind, "
                        "params, client) made moot, instead of the open ones.",
                        "schema": {"type": "string", "enum": ["open", "superseded"], "default": "open"},
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
                            "maximum": DEAD_LETTER_PAGE_MAX,
                            "default": DEAD_LETTER_PAGE_SIZE,
                        },
                    },
                ],
                "responses": {
                    "200": _with_links(
                        json_response("One page.", "#/components/schemas/DeadLetterPage"), FIRST_LETTER_LINKS
                    ),
                    "400": error(
                        "Unknown query parameter, a parameter given twice, an unknown kind, a bad "
                        "status, limit, fingerprint, q or cursor (named in `field`)."
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
                "tags": ["documentation"],
                "summary": "This document",
                "description": "The OpenAPI 3.1 document of this API, public (no credentials). Its "
                "`servers` entry is the address the request reached.",
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
