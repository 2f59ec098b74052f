"""Bulk dead-letter actions in the OpenAPI document: start (or dry-run) one over a filter, follow
it, pause, resume, cancel it, change its rate."""

from django.conf import settings

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
from deadletters.models import BulkActionKind, BulkActionStatus, DeadLetterStatus
from reports.kinds import KINDS

TAGS = ["Bulk actions"]
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
            "Token scope `operator`; sessions: `deadletters.replay_deadletter`. The filter is the console "
            "list's; the workers run the action in batches at `rate_per_second`; letters that die after the "
            "start are not included.",
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
                "422": error("Invalid `action`, `filter`, `rate_per_second`, `reason` or `dry_run`."),
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
        ("cancel", "Cancel a bulk action; what was done stays done"),
    ):
        operation = _post(
            f"{action}BulkAction",
            summary,
            "Token scope `operator`; sessions: `deadletters.replay_deadletter`. Audited.",
            responses=control,
        )
        operation["post"]["parameters"] = [BULK_ID]
        paths[f"/report/bulk/{{bulk_id}}/{action}"] = operation
    rate = _post(
        "changeBulkActionRate",
        "Change a bulk action's rate; the runner picks it up within a second",
        "Token scope `operator`; sessions: `deadletters.replay_deadletter`. Audited with the old and new rate.",
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


def bulk_components() -> dict:
    return {
        "BulkStartRequest": {
            "type": "object",
            "additionalProperties": False,
            "required": ["action"],
            "properties": {
                "action": {"type": "string", "enum": list(BulkActionKind.values)},
                "filter": _filter_schema(),
                "rate_per_second": _rate(),
                "reason": {"type": "string", "maxLength": 2000, "pattern": NO_NUL},
                "dry_run": {"type": "boolean", "default": False},
            },
        },
        "BulkDryRun": {
            "type": "object",
            "additionalProperties": False,
            "required": ["dry_run", "count"],
            "properties": {
                "dry_run": {"type": "boolean", "const": True},
                "count": {"type": "integer", "minimum": 0},
            },
        },
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
                    f"most replayed first, at most {OUTCOME_CAUSES_MAX}: how many were replayed, how many are "
                    "done now and how many are dead again now (the rest are still on their way). Null for "
                    "other actions.",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["fingerprint", "error_type", "replayed", "done", "died_again"],
                        "properties": {
                            "fingerprint": {"type": "string"},
                            "error_type": {"type": "string"},
                            **{name: {"type": "integer", "minimum": 0} for name in ("replayed", "done", "died_again")},
                        },
                    },
                },
                "outcome_by_cause_limited": {
                    "type": "boolean",
                    "description": f"True when the replay touched more than {OUTCOME_CAUSES_MAX} causes "
                    "(`outcome` still counts them all).",
                },
            },
        },
    }
