"""One cause's resources in the OpenAPI document: its lifecycle, "fixed in the next release", and
its mute until a threshold."""

from api.openapi.alerts import snooze_schema
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
    nullable,
)

_FINGERPRINT = {
    "name": "fingerprint", "in": "path", "required": True, "description": "The cause: 40 hexadecimal digits.",
    "schema": {"type": "string", "pattern": "^[0-9a-f]{40}$"},
}
_THRESHOLD = {"type": "integer", "minimum": 1, "maximum": 1_000_000}


def cause_components() -> dict:
    release_list = {
        "type": "array",
        "maxItems": 5,
        "description": "The releases (RELEASE_NAME) the cause died under, the latest death first, with "
        "its deaths under each; at most 5.",
        "items": {
            "type": "object", "additionalProperties": False, "required": ["release", "deaths"],
            "properties": {"release": {"type": "string"}, "deaths": {"type": "integer", "minimum": 1}},
        },
    }
    text = {"type": ["string", "null"]}
    fixed = {
        "type": ["object", "null"],
        "additionalProperties": False,
        "required": ["state", "marked_by", "marked_under", "fixed_in", "released_at", "regressed_under"],
        "description": "`marked`: fixed in the next release, which has not run yet; `released`: that "
        "release (`fixed_in`) ran and the cause's open letters were replayed with a canary; "
        "`regressed`: it died again under `regressed_under`. Null when never marked.",
        "properties": {
            "state": {"type": "string", "enum": ["marked", "released", "regressed"]},
            "marked_by": {"type": "string"},
            "marked_under": {"type": "string", "description": "The release it was marked under."},
            "fixed_in": text,
            "released_at": nullable({"type": "string", "format": "date-time"}),
            "regressed_under": text,
        },
    }
    return {"CauseReleases": release_list, "CauseFixed": fixed}


def _lifecycle(extra: dict) -> dict:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["fingerprint", "releases", "fixed", "mute", *extra],
        "properties": {
            "fingerprint": {"type": "string"},
            "releases": {"$ref": "#/components/schemas/CauseReleases"},
            "fixed": {"$ref": "#/components/schemas/CauseFixed"},
            "mute": {"oneOf": [{"type": "null"}, snooze_schema()]},
            **extra,
        },
    }


def _json(description: str, schema: dict) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _body(schema: dict, required: bool) -> dict:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def cause_paths() -> dict:
    who = "Token scope `operator`; sessions: staff with the permission to replay dead letters."
    writes = {"400": MALFORMED, "401": UNAUTHORIZED, "403": FORBIDDEN, "405": NOT_ALLOWED, "413": TOO_LARGE,
              "415": NOT_JSON}
    malformed = error("A malformed fingerprint.")
    return {
        "/report/cause/{fingerprint}": {"get": {
            "operationId": "showCause", "tags": ["dead letters"],
            "summary": "A cause's lifecycle: its releases, whether it is marked fixed, its threshold mute",
            "description": "Token scope `operator`; sessions: `deadletters.view_deadletter`.",
            **needs_scope("operator"), "parameters": [_FINGERPRINT],
            "responses": {"200": _json("The cause.", _lifecycle({})), "401": UNAUTHORIZED, "403": FORBIDDEN,
                          "404": malformed, "405": NOT_ALLOWED},
        }},
        "/report/cause/{fingerprint}/fixed": {"post": {
            "operationId": "markCauseFixed", "tags": ["dead letters"],
            "summary": "Mark a cause fixed in the next release (or unmark it)",
            "description": f"{who} When work first runs under another RELEASE_NAME than the one it was "
            "marked under, the housekeeper replays the cause's open letters once, as a bulk replay with "
            "a canary of 10, audited as the system acting for whoever marked it. A death under another "
            "release after that raises a regression alert naming both releases. Audited.",
            **needs_scope("operator"), "parameters": [_FINGERPRINT],
            "requestBody": _body({"type": "object", "additionalProperties": False, "properties": {
                "undo": {"type": "boolean", "description": "true: unmark it."}}}, False),
            "responses": {
                "200": _json("Marked (or unmarked); `changed` is false when it was already.",
                             _lifecycle({"changed": {"type": "boolean"}})),
                **writes,
                "404": error("A malformed fingerprint, or one no letter has died of."),
                "409": error("This site names no release (RELEASE_NAME is unset): `field` is `release`."),
                "422": error("`undo` is not a boolean."),
            },
        }},
        "/report/cause/{fingerprint}/mute": {"post": {
            "operationId": "muteCauseUntilThreshold", "tags": ["alerts"],
            "summary": "Mute a cause's alerts until it dies more than N times a minute or N times in all",
            "description": f"{who} Its deaths are counted, not sent; the death that goes over either "
            "threshold ends the mute and is sent, saying so. A threshold never crossed ends after 30 "
            "days with the snooze summary. Lift it early as any snooze. Audited.",
            **needs_scope("operator"), "parameters": [_FINGERPRINT],
            "requestBody": _body({
                "type": "object", "additionalProperties": False, "anyOf": [
                    {"required": ["per_minute"]}, {"required": ["total"]}],
                "properties": {
                    "per_minute": _THRESHOLD, "total": _THRESHOLD,
                    "reason": {"type": "string", "maxLength": 2000, "pattern": NO_NUL},
                },
            }, True),
            "responses": {
                "201": _json("The mute runs.", snooze_schema()),
                **writes,
                "404": malformed,
                "422": error("Neither threshold, one outside 1-1000000, or a bad reason (named in `field`)."),
            },
        }},
    }
