"""Bulk dead-letter actions in the OpenAPI document: start (or dry-run) one over a filter, now or
at a time, a replay optionally with a canary and a params patch (bulk_patch.py); follow it, pause,
resume, cancel it, change its rate."""

from django.conf import settings

from api.openapi.bulk_patch import patch_components
from api.openapi.common import (
    FORBIDDEN,
    MALFORMED,
    NO_NUL,
    NOT_ALLOWED,
    NOT_JSON,
    TOO_LARGE,
    UNAUTHORIZED,
    error,
    json_response,
    needs_scope,
)
from deadletters.bulk.watch import OUTCOME_CAUSES_MAX
from deadletters.filters import FINGERPRINT_PREFIX_MIN, MAX_ERROR_TYPE_LENGTH, MAX_SEARCH_LENGTH
from deadletters.models import BulkActionKind, BulkActionStatus, CanaryPhase, DeadLetterStatus
from reports.kinds import KINDS

TAGS = ["Bulk actions"]
REPLAY = BulkActionKind.REPLAY.value
BULK_ID = {
    "name": "bulk_id",
    "in": "path",
    "required": True,
    "description": "The bulk action's id (`id` of the start answer).",
    "schema": {"type": "string", "format": "uuid"},
}
STATUS_REF = "#/components/schemas/BulkStatus"
NOT_FOUND = error("No bulk action with this id.")
_TEXT = {"type": ["string", "null"]}
# A date from 1970 to 8999 (the filter's range); created_from on or before created_to.
_DATE = {
    "type": "string",
    "format": "date",
    "pattern": "^(19[7-9][0-9]|[2-8][0-9]{3})-",
    "description": "YYYY-MM-DD (UTC)",
}


def _or_empty(schema: dict) -> dict:
    """An empty value leaves the field out, as in the console's query string."""
    return {"anyOf": [schema, {"type": "string", "maxLength": 0}]}


def _filter_schema() -> dict:
    return {
        "type": "object",
        "additionalProperties": False,
        "description": "The console list's filter (open letters by default).",
        "properties": {
            "status": _or_empty({"type": "string", "enum": [*DeadLetterStatus.values, "all"]}),
            "kind": _or_empty({"type": "string", "enum": sorted(KINDS)}),
            "error_type": {"type": "string", "maxLength": MAX_ERROR_TYPE_LENGTH, "pattern": NO_NUL},
            "fingerprint": _or_empty(
                {"type": "string", "pattern": f"^[0-9a-f]{{{FINGERPRINT_PREFIX_MIN},40}}$"}
            ),
            "created_from": _or_empty(_DATE),
            "created_to": _or_empty(_DATE),
            "batch": _or_empty({"type": "string", "format": "uuid"}),
            "q": {"type": "string", "maxLength": MAX_SEARCH_LENGTH, "pattern": NO_NUL},
        },
    }


def _rate() -> dict:
    return {"type": "number", "minimum": 0.1, "maximum": settings.BULK_ACTION_MAX_RATE}


# What the server reads as a moment: RFC 3339 with its offset, upper-case T and Z, a real clock time.
START_AT_PATTERN = (
    "^(19[7-9][0-9]|[2-8][0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\\.[0-9]{1,6})?)?"
    "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
)


def start_at_schema() -> dict:
    return {
        "type": "string",
        "format": "date-time",
        "pattern": START_AT_PATTERN,
        "description": "When to start: ISO 8601 with its UTC offset (`2026-11-25T02:00:00+08:00`), in the "
        f"future and at most BULK_SCHEDULE_MAX_DAYS ({settings.BULK_SCHEDULE_MAX_DAYS}) days ahead (409 "
        "otherwise). The run is `scheduled` until then and starts within a second of it; cancel it meanwhile "
        "with `POST /report/bulk/{bulk_id}/cancel`.",
    }


def _start_properties() -> dict:
    return {
        "filter": _filter_schema(),
        "rate_per_second": _rate(),
        "reason": {"type": "string", "maxLength": 2000, "pattern": NO_NUL},
        "dry_run": {"type": "boolean", "default": False},
        "start_at": start_at_schema(),
        "include_superseded": {"type": "boolean", "default": False, "description": "Replay superseded "
                               "letters too (a later task of the same report ended done)."},
    }


def _canary_properties() -> dict:
    return {
        "canary": {
            "type": "integer",
            "minimum": 1,
            "maximum": settings.BULK_CANARY_MAX,
            "description": "Replay this many letters first and wait for their outcome (each task done, dead "
            "again, or BULK_CANARY_WAIT_SECONDS passed); at most the letters the filter matches "
            "(409 otherwise).",
        },
        "canary_success": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "The share of the canary's replays that must end done for the run to carry on by "
            f"itself (default BULK_CANARY_SUCCESS, {settings.BULK_CANARY_SUCCESS:g}); otherwise it stops as "
            "`canary_failed`.",
        },
    }


def _post(operation_id, summary, description, *, body=None, responses, body_required=False) -> dict:
    operation = {
        "operationId": operation_id,
        "tags": TAGS,
        "summary": summary,
        "description": description,
        **needs_scope("operator"),
        "responses": responses,
    }
    if body is not None:
        operation["requestBody"] = {
            "required": body_required,
            "content": {"application/json": {"schema": body}},
        }
    return {"post": operation}


def bulk_paths() -> dict:
    control = {
        "200": json_response("Changed; the bulk action as it is now.", STATUS_REF),
        "400": MALFORMED,
        "401": UNAUTHORIZED,
        "403": FORBIDDEN,
        "404": NOT_FOUND,
        "405": NOT_ALLOWED,
        "409": error("The bulk action is not in a state this applies to (it finished, or already is so)."),
        "413": TOO_LARGE,
        "415": NOT_JSON,
    }
    paths = {
        "/report/bulk/start": _post(
            "startBulkAction",
            "Start a bulk action over every dead letter a filter matches, or count them (dry run)",
            "Token scope `operator`; sessions: `deadletters.view_bulkaction` and the action's permission "
            "(`deadletters.replay_deadletter`, else `deadletters.archive_deadletter`). The filter is the "
            "console list's; the workers run the action in batches at `rate_per_second`; letters that die "
            "after the request are not included. `start_at` schedules it; `canary` makes a replay try that "
            "many letters first and carry on only when `canary_success` of them end done.",
            body={"$ref": "#/components/schemas/BulkStartRequest"},
            body_required=True,
            responses={
                "202": json_response("Started; poll `Location` (the status resource).", STATUS_REF),
                "200": json_response(
                    "Dry run: how many letters the action would touch now.", "#/components/schemas/BulkDryRun"
                ),
                "400": MALFORMED,
                "401": UNAUTHORIZED,
                "403": FORBIDDEN,
                "405": NOT_ALLOWED,
                "413": TOO_LARGE,
                "415": NOT_JSON,
                "409": error(
                    "Well formed but refused for what is true now: `start_at` has passed or is more than "
                    "BULK_SCHEDULE_MAX_DAYS ahead, `canary` is more than the letters the filter matches, or "
                    "`after_breaker_of` names a kind without a breaker on this site (`field` names it)."
                ),
                "422": error(
                    "Invalid `action`, `filter`, `rate_per_second`, `reason`, `dry_run`, "
                    "`include_superseded`, `start_at` (not a date and time with its offset), `canary` (not a "
                    "whole number from 1, or not a replay), `canary_success` (not from 0 to 1, or without "
                    "`canary`), `params_patch` (not as ParamsPatch states) or `after_breaker_of` (not a "
                    "replay, or with `start_at`)."
                ),
            },
        ),
        "/report/bulk/{bulk_id}/status": {
            "get": {
                "operationId": "bulkActionStatus",
                "tags": TAGS,
                "summary": "A bulk action's progress, and for a replay what the replayed tasks did",
                "description": "Token scope `operator`; sessions: `deadletters.view_bulkaction`.",
                **needs_scope("operator"),
                "parameters": [BULK_ID],
                "responses": {
                    "200": json_response("The bulk action.", STATUS_REF),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": NOT_FOUND,
                    "405": NOT_ALLOWED,
                },
            }
        },
    }
    for action, summary in (
        ("pause", "Pause a running bulk action at its next batch"),
        ("resume", "Resume a paused (or failed) bulk action where it stopped"),
        ("cancel", "Cancel a bulk action (a scheduled one never starts); what was done stays done"),
    ):
        operation = _post(
            f"{action}BulkAction",
            summary,
            "Token scope `operator`; sessions: `deadletters.view_bulkaction` and the permission of the run's "
            "action. Audited.",
            responses=control,
        )
        operation["post"]["parameters"] = [BULK_ID]
        paths[f"/report/bulk/{{bulk_id}}/{action}"] = operation
    rate = _post(
        "changeBulkActionRate",
        "Change a bulk action's rate; the runner picks it up within a second",
        "Token scope `operator`; sessions: `deadletters.view_bulkaction` and the permission of the run's "
        "action. Audited with the old and new rate.",
        body={
            "type": "object",
            "additionalProperties": False,
            "required": ["rate_per_second"],
            "properties": {"rate_per_second": _rate()},
        },
        body_required=True,
        responses={**control, "422": error("`rate_per_second` missing or outside the allowed range.")},
    )
    rate["post"]["parameters"] = [BULK_ID]
    paths["/report/bulk/{bulk_id}/rate"] = rate
    return paths


def _replay_variants() -> tuple:
    """(title, required, properties) of each way to start a replay: now or at a time, with a
    canary, or once a kind's circuit breaker is closed."""
    start = _start_properties()
    after_breaker = {
        **{name: value for name, value in start.items() if name != "start_at"},
        "canary": _canary_properties()["canary"],
        "after_breaker_of": {
            "type": "string", "enum": sorted(KINDS),
            "description": "Wait, `scheduled`, until this kind's circuit breaker is closed "
            "(a kind without one here: 409).",
        },
    }
    canary = {**start, **_canary_properties()}
    return (("A replay", [], start), ("A replay with a canary", ["canary"], canary),
            ("A replay after a kind's circuit breaker", ["after_breaker_of"], after_breaker))


def bulk_components() -> dict:
    return {
        "BulkStartRequest": {
            "description": "A bulk action; a replay may start with a canary (`canary`, and optionally "
            "`canary_success`), or once a kind's circuit breaker is closed (`after_breaker_of`), and edit "
            "the params of what it replays (`params_patch`).",
            "oneOf": [
                {
                    "type": "object",
                    "title": "Archive, discard or restore",
                    "additionalProperties": False,
                    "required": ["action"],
                    "properties": {
                        "action": {"type": "string",
                                   "enum": [a for a in BulkActionKind.values if a != REPLAY]},
                        **_start_properties(),
                    },
                },
                *(
                    {
                        "type": "object", "title": title, "additionalProperties": False,
                        "required": ["action", *required],
                        "properties": {"action": {"type": "string", "const": REPLAY}, **properties,
                                       "params_patch": {"$ref": "#/components/schemas/ParamsPatch"}},
                    }
                    for title, required, properties in _replay_variants()
                ),
            ],
        },
        **patch_components(),
        "BulkStatus": {
            "type": "object",
            "additionalProperties": False,
            "required": ["id", "action", "status", "total", "processed", "percent"],
            "properties": {
                "id": {"type": "string", "format": "uuid"},
                "action": {"type": "string", "enum": list(BulkActionKind.values)},
                "status": {"type": "string", "enum": list(BulkActionStatus.values)},
                **{
                    name: {"type": "integer", "minimum": 0}
                    for name in ("total", "processed", "succeeded", "skipped", "percent")
                },
                "rate_per_second": {"type": "number"},
                "paused_reason": _TEXT,
                "error": _TEXT,
                "created_at": {"type": "string", "format": "date-time"},
                "start_at": {
                    "type": ["string", "null"],
                    "format": "date-time",
                    "description": "When a scheduled run starts (null: it started at once).",
                },
                "after_breaker_of": {
                    "type": ["string", "null"], "description": "The kind whose closed breaker it waits for.",
                },
                "started_at": {"type": ["string", "null"], "format": "date-time"},
                "finished_at": {"type": ["string", "null"], "format": "date-time"},
                "outcome": {
                    "type": ["object", "null"],
                    "description": "A replay's tasks: how many were replayed, finished, and died again.",
                    "properties": {
                        name: {"type": "integer"} for name in ("replayed", "finished", "died_again")
                    },
                },
                "outcome_by_cause": {
                    "type": ["array", "null"],
                    "description": "A replay's tasks by the cause (fingerprint) of the letters it replayed, "
                    f"most replayed first, at most {OUTCOME_CAUSES_MAX}: how many were replayed, how many "
                    "are done now and how many are dead again now (the rest are still on their way). Null "
                    "for other actions.",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["fingerprint", "error_type", "replayed", "done", "died_again"],
                        "properties": {
                            "fingerprint": {"type": "string"},
                            "error_type": {"type": "string"},
                            **{name: {"type": "integer", "minimum": 0}
                               for name in ("replayed", "done", "died_again")},
                        },
                    },
                },
                "outcome_by_cause_limited": {
                    "type": "boolean",
                    "description": f"True when the replay touched more than {OUTCOME_CAUSES_MAX} causes "
                    "(`outcome` still counts them all).",
                },
                "canary": {"anyOf": [{"$ref": "#/components/schemas/BulkCanary"}, {"type": "null"}]},
                "params_patch": {"anyOf": [{"$ref": "#/components/schemas/ParamsPatch"}, {"type": "null"}]},
                "refused": {"type": "integer", "minimum": 0,
                            "description": "Letters not replayed: the params patch made them invalid."},
                "refusals": {"$ref": "#/components/schemas/BulkPatchRefusals"},
            },
        },
        "BulkCanary": {
            "type": "object",
            "additionalProperties": False,
            "description": "A canary replay: its first `size` replays, then a verdict. `phase` pending (the "
            "run has not started), running (its replays are made, then awaited: the run's status is "
            "`canary`), passed (the run carries on by itself), failed (the run stopped as `canary_failed`; "
            "`reason` and `causes` say why). The counts are live until the verdict, then as they were at it.",
            "required": ["size", "success_share", "phase", "needed", "replayed", "done", "died_again"],
            "properties": {
                "size": {"type": "integer", "minimum": 1},
                "success_share": {"type": "number", "minimum": 0, "maximum": 1},
                "phase": {"type": "string", "enum": [p for p in CanaryPhase.values if p]},
                "needed": {"type": "integer", "minimum": 0, "description": "Replays that must end done."},
                **{
                    name: {"type": "integer", "minimum": 0}
                    for name in ("replayed", "done", "died_again", "unfinished")
                },
                "deadline": {
                    "type": ["string", "null"],
                    "format": "date-time",
                    "description": "Until when the outcome is awaited "
                    "(set when the canary's replays are made).",
                },
                "causes": {
                    "type": "array",
                    "description": "What the canary's replays died of again, the most frequent first.",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "fingerprint": {"type": "string"},
                            "error_type": {"type": "string"},
                            "count": {"type": "integer", "minimum": 1},
                        },
                    },
                },
                "reason": {"type": ["string", "null"], "description": "The verdict in a sentence."},
            },
        },
    }
