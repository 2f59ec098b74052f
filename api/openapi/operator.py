"""The operator actions of the OpenAPI document: one dead letter's archive, discard, restore and
replay (optionally with edited params), pausing or resuming a report kind, and its breaker."""

from api.openapi.bulk import start_at_schema
from api.openapi.common import (
    FORBIDDEN,
    MALFORMED,
    NO_NUL,
    NOT_ALLOWED,
    NOT_JSON,
    TOO_LARGE,
    UNAUTHORIZED,
    error,
    needs_scope,
)
from api.openapi.kinds import _params_ref
from reports.kinds import KINDS
from reports.models import BreakerState
from reports.services.breakers import ACTIONS, BOUNDS

TAGS = ["Operator actions"]
LETTER_ID = {
    "name": "letter_id",
    "in": "path",
    "required": True,
    "description": "The dead letter's id (`id` in the dead-letter list).",
    "schema": {"type": "integer", "minimum": 1, "maximum": 999999999999},
}
KIND = {
    "name": "kind",
    "in": "path",
    "required": True,
    "description": "A report kind.",
    "schema": {"type": "string", "enum": sorted(KINDS)},
}
_REASON = {
    "type": "string",
    "maxLength": 2000,
    "pattern": NO_NUL,
    "description": "Why; kept in the audit log.",
}


def _ok(description: str, properties: dict) -> dict:
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["ok", *properties],
        "properties": {"ok": {"type": "boolean", "const": True}, **properties},
    }
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _operation(
    *, operation_id, summary, description, parameter, body, ok, not_found, conflict, invalid
) -> dict:
    return {
        "post": {
            "operationId": operation_id,
            "tags": TAGS,
            "summary": summary,
            "description": description,
            **needs_scope("operator"),
            "parameters": [parameter],
            "requestBody": {"required": False, "content": {"application/json": {"schema": body}}},
            "responses": {
                "200": ok,
                "400": MALFORMED,
                "401": UNAUTHORIZED,
                "403": FORBIDDEN,
                "404": error(not_found),
                "405": NOT_ALLOWED,
                **({"409": error(conflict)} if conflict else {}),
                "413": TOO_LARGE,
                "415": NOT_JSON,
                "422": error(invalid),
            },
        }
    }


def operator_paths() -> dict:
    reason_body = {"type": "object", "additionalProperties": False, "properties": {"reason": _REASON}}
    letter_ok = _ok("Done.", {"id": {"type": "integer"}, "status": {"type": "string"}})
    paths = {}
    for action, summary, what in (
        ("archive", "Archive a dead letter", "open"),
        ("discard", "Discard a dead letter (never replay it)", "open or archived"),
        ("restore", "Restore an archived or discarded dead letter to open", "archived or discarded"),
    ):
        paths[f"/report/dead-letter/{{letter_id}}/{action}"] = _operation(
            operation_id=f"{action}DeadLetter",
            summary=summary,
            description="Token scope `operator`; sessions: `deadletters.archive_deadletter`. Audited.",
            parameter=LETTER_ID,
            body=reason_body,
            ok=letter_ok,
            not_found="No dead letter with this id.",
            conflict=f"The letter is not {what} (someone else got there first); nothing changed.",
            invalid="Invalid `reason`, or none while DEADLETTER_REQUIRE_REASON is set.",
        )
    replay = _operation(
        operation_id="replayDeadLetter",
        summary="Replay a dead letter's task now (optionally with edited params), or at a time",
        description="Token scope `operator`; sessions: `deadletters.replay_deadletter`, and "
        "`deadletters.replay_edited_deadletter` to change the params. Runs once however often called. "
        "With `start_at` it is scheduled instead (202): a bulk replay of this one letter, `scheduled` "
        "until its time, cancellable with `POST /report/bulk/{bulk_id}/cancel` until then.",
        parameter=LETTER_ID,
        body={
            "anyOf": [
                {
                    "type": "object",
                    "title": "Now",
                    "additionalProperties": False,
                    "properties": {
                        "reason": _REASON,
                        "params": {
                            "anyOf": [_params_ref(name) for name in sorted(KINDS)],
                            "description": "The params to run with instead: those of the letter's kind "
                            "(another kind's: 409; no kind's: 422).",
                        },
                    },
                },
                {
                    "type": "object",
                    "title": "At a time",
                    "additionalProperties": False,
                    "required": ["start_at"],
                    "properties": {"reason": _REASON, "start_at": start_at_schema()},
                },
            ]
        },
        ok=_ok(
            "Replayed.",
            {
                "id": {"type": "integer"},
                "task_id": {"type": "string", "format": "uuid"},
                "status": {"type": "string"},
            },
        ),
        not_found="No dead letter with this id.",
        conflict="The letter's task is not dead (already replayed, or running); `params` are another kind's "
        "(`field` is `params`); or `start_at` has passed or is more than BULK_SCHEDULE_MAX_DAYS ahead "
        "(`field` is `start_at`).",
        invalid="Invalid `reason`, `params` or `start_at` (`field` names it); `params` with `start_at`.",
    )
    replay["post"]["responses"]["202"] = {
        "description":
            "Scheduled: `scheduled` is the bulk run that replays it at `start_at` (poll `Location`).",
        "headers": {
            "Location": {"description": "The scheduled run's status resource.", "schema": {"type": "string"}}
        },
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["ok", "id", "task_id", "scheduled"],
                    "properties": {
                        "ok": {"type": "boolean", "const": True},
                        "id": {"type": "integer"},
                        "task_id": {"type": "string", "format": "uuid"},
                        "scheduled": {"$ref": "#/components/schemas/BulkStatus"},
                    },
                }
            }
        },
    }
    paths["/report/dead-letter/{letter_id}/replay"] = replay
    for action, summary, conflict in (
        ("pause", "Pause a report kind: its tasks wait without using attempts", None),
        ("resume", "Resume a paused report kind; its waiting tasks are enqueued", "The kind is not paused."),
    ):
        paths[f"/report/kind/{{kind}}/{action}"] = _operation(
            operation_id=f"{action}Kind",
            summary=summary,
            description="Token scope `operator`; sessions: `deadletters.replay_deadletter`. Audited.",
            parameter=KIND,
            body=reason_body,
            ok=_ok(
                "Paused (`changed` false: it already was)." if action == "pause" else "Resumed.",
                {"kind": {"type": "string"}, "paused": {"type": "boolean"}}
                | (
                    {"changed": {"type": "boolean"}}
                    if action == "pause"
                    else {"waiting": {"type": "integer"}}
                ),
            ),
            not_found="Not a report kind.",
            conflict=conflict,
            invalid="Invalid `reason`.",
        )
    paths["/report/kind/{kind}/breaker"] = _breaker_operation()
    return paths


def _breaker_operation() -> dict:
    whole = {"type": "integer"}
    thresholds = {name: {**whole, "minimum": low, "maximum": high} for name, (low, high) in BOUNDS.items()}
    body = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS), "description": "open: pause the kind and "
                       "probe its upstream; hold: pause it, no probes; close: resume it now."},
            **thresholds,
            "reason": _REASON,
        },
        "anyOf": [{"required": [name]} for name in ("action", *BOUNDS)],  # something to do
    }
    operation = _operation(
        operation_id="setKindBreaker",
        summary="Open, hold or close a report kind's circuit breaker, or change its thresholds",
        description="Token scope `operator`; sessions: `deadletters.replay_deadletter` (as pausing a kind). "
        "Give `action`, thresholds, or both. Audited.",
        parameter=KIND,
        body=body,
        ok=_ok("The breaker as it is now (`changed`: the action changed its state).",
               {"kind": {"type": "string"}, "state": {"type": "string", "enum": list(BreakerState.values)},
                "changed": {"type": "boolean"}, **{name: whole for name in BOUNDS}}),
        not_found="Not a report kind.",
        conflict="The kind declares no upstream on this site (`field` is `kind`): it has no breaker to open, "
        "hold or set (closing it changes nothing).",
        invalid="Invalid `action`, a threshold out of bounds, or nothing to do (`field` names it).",
    )
    operation["post"]["requestBody"]["required"] = True
    return operation
