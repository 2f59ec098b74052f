"""Pieces every part of the OpenAPI document uses: the error schema and the common responses."""

_ERROR_REF = {"$ref": "#/components/schemas/Error"}


def nullable(schema: dict) -> dict:
    return {**schema, "type": [schema["type"], "null"]}


def error(description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": _ERROR_REF}}}


def json_response(description: str, ref: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": ref}}}}


UNAUTHORIZED = error("No credentials, a malformed Authorization header, or an unknown or revoked token.")
FORBIDDEN = error(
    "The token lacks this operation's scope; or the session user is not staff or lacks the permission, "
    "or the CSRF check failed (session POSTs)."
)
SUBMIT_FORBIDDEN = error(
    "The token lacks the `submit` scope, or submits an operator-only kind (`probe`, also inside a batch; "
    "`field` is `kind`) without the `operator` scope; or the session user is not staff, lacks "
    "`reports.add_reporttask` (or `reports.submit_operator_kinds` for an operator-only kind), or the CSRF "
    "check failed (session POSTs)."
)
TOO_MANY = {
    "description": "The client's submit budget (API_SUBMIT_RATE, 600 tasks a minute by default, per token "
    "or per console user; a batch of N counts N) is spent. Nothing was written; retry after `Retry-After` "
    "seconds.",
    "headers": {
        "Retry-After": {
            "description": "Seconds until the budget admits a submit again.", "schema": {"type": "integer"}
        }
    },
    "content": {"application/json": {"schema": _ERROR_REF}},
}
REPLAY_TOO_MANY = {
    "description": "The client's replay budget (API_REPLAY_RATE, 60 replays an hour by default, per token or "
    "per console user) is spent. Nothing was replayed; retry after `Retry-After` seconds.",
    "headers": {
        "Retry-After": {
            "description": "Seconds until the budget admits a replay again.", "schema": {"type": "integer"}
        }
    },
    "content": {"application/json": {"schema": _ERROR_REF}},
}
NOT_ALLOWED = error("Another HTTP method than the one documented for this path; see the Allow header.")
NOT_FOUND = error("Unknown or malformed task id, or another client's task (a token without `operator`).")
TOO_LARGE = error("The body is over API_MAX_BODY_BYTES (256 KiB by default).")
NOT_JSON = error("Content-Type is not application/json (UTF-8).")
MALFORMED = error(
    "Malformed request: invalid UTF-8 or JSON, not an object, an unknown field (named in `field`)."
)
TASK_ID_PARAM = {
    "name": "task_id",
    "in": "path",
    "required": True,
    "description": "The task's id (a UUID, as `task_id` returned by submit).",
    "schema": {"type": "string", "format": "uuid"},
}

# `<microseconds since the epoch>-<id>`: every value of this shape is a cursor (past the end: empty page).
CURSOR_PATTERN = "^[0-9]{1,17}-[0-9]{1,18}$"
# Dead letters per page of GET /report/dead-letters, unless its `limit` (at most the max) says otherwise.
DEAD_LETTER_PAGE_SIZE = 50
DEAD_LETTER_PAGE_MAX = 200
# No text the API stores may hold NUL (a 400 otherwise): free text says so in its pattern.
NO_NUL = "^[^\\u0000]*$"
IDEMPOTENCY_KEY = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "pattern": "^[!-~](?:[ -~]{0,198}[!-~])?$",
    "description": "1-200 printable ASCII characters, not starting or ending with a space. The "
    "`Idempotency-Key` header and this field are the same thing: give either; giving both with "
    "different values is a 409. The same key with the same kind and params returns the first "
    "task (200); with others, 409.",
}


def needs_scope(scope: str) -> dict:
    """The operation's security requirement: a bearer token with `scope`, or a console session (the
    permission in the operation's description). The scope goes in `x-token-scope`, not as an OpenAPI
    3.1 role name in the requirement: linters read a non-empty list as OAuth scopes."""
    return {"security": [{"bearerAuth": []}, {"consoleSession": []}], "x-token-scope": scope}
