"""The live-task controls of the OpenAPI document: cancel, retry now, stop."""

from api.openapi.common import (
    FORBIDDEN,
    MALFORMED,
    NO_NUL,
    NOT_ALLOWED,
    NOT_FOUND,
    NOT_JSON,
    TASK_ID_PARAM,
    TOO_LARGE,
    UNAUTHORIZED,
    error,
    json_response,
    needs_scope,
)

TAGS = ["Task controls"]
_REASON = {
    "type": "string",
    "maxLength": 2000,
    "pattern": NO_NUL,
    "description": "Why; kept in the audit log with who did it.",
}


def _control(*, operation_id, summary, description, scope, request_ref, ok, conflict) -> dict:
    return {
        "post": {
            "operationId": operation_id,
            "tags": TAGS,
            "summary": summary,
            "description": description,
            **needs_scope(scope),
            "parameters": [TASK_ID_PARAM],
            "requestBody": {
                "required": False,
                "content": {"application/json": {"schema": {"$ref": request_ref}}},
            },
            "responses": {
                "200": json_response(ok, "#/components/schemas/ControlResult"),
                "400": MALFORMED,
                "401": UNAUTHORIZED,
                "403": FORBIDDEN,
                "404": NOT_FOUND,
                "405": NOT_ALLOWED,
                "409": error(conflict),
                "413": TOO_LARGE,
                "415": NOT_JSON,
                "422": error("Invalid `reason` (or `then`, `attempt` for stop); `field` names it."),
            },
        }
    }


def control_paths() -> dict:
    return {
        "/report/task/{task_id}/cancel": _control(
            operation_id="cancelTask",
            summary="Cancel a pending or retrying task: it never runs and is not a dead letter",
            description="Token scope `submit` (own tasks; every task with `operator`); sessions: "
            "`deadletters.replay_deadletter`. The task ends `cancelled`; its queued job finds nothing "
            "to run.",
            scope="submit",
            request_ref="#/components/schemas/ControlRequest",
            ok="Cancelled: `status` is `cancelled`.",
            conflict="The task already ran or is running (done, dead, running, cancelled): nothing changed.",
        ),
        "/report/task/{task_id}/retry-now": _control(
            operation_id="retryTaskNow",
            summary="Run a retrying task's next attempt now instead of after its backoff",
            description="Token scope `operator`; sessions: `deadletters.replay_deadletter`.",
            scope="operator",
            request_ref="#/components/schemas/ControlRequest",
            ok="The next attempt is enqueued now; `status` stays `retrying` until a worker claims it.",
            conflict="The task is not retrying (it was claimed, finished or cancelled meanwhile).",
        ),
        "/report/task/{task_id}/stop": _control(
            operation_id="stopTask",
            summary="Stop a running attempt; the task is then cancelled or retried",
            description="Token scope `operator`; sessions: `deadletters.replay_deadletter`. The attempt "
            "is recorded as `stopped`; its worker kills the work-horse at its next lease heartbeat "
            "(within REPORT_HEARTBEAT_SECONDS).",
            scope="operator",
            request_ref="#/components/schemas/StopRequest",
            ok="Stopped: `status` is `cancelled`, or `retrying` with the next attempt enqueued.",
            conflict="That attempt is not running (it finished, failed or was stopped meanwhile).",
        ),
    }


def control_components() -> dict:
    return {
        "ControlRequest": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"reason": _REASON},
        },
        "StopRequest": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "reason": _REASON,
                "then": {
                    "type": "string",
                    "enum": ["cancel", "retry"],
                    "default": "cancel",
                    "description": "What becomes of the task: `cancel`, or `retry` (a new attempt, due now, "
                    "even when the attempt budget is spent).",
                },
                "attempt": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 1000000,
                    "description": "The running attempt's number (from status); stops nothing if another "
                    "attempt runs by then (409). Default: the attempt running when the request is read.",
                },
            },
        },
        "ControlResult": {
            "type": "object",
            "additionalProperties": False,
            "required": ["ok", "task_id", "status", "attempt"],
            "properties": {
                "ok": {"type": "boolean", "const": True},
                "task_id": {"type": "string", "format": "uuid"},
                "status": {"type": "string", "enum": ["cancelled", "retrying"]},
                "attempt": {"type": "integer", "minimum": 0},
            },
        },
    }
