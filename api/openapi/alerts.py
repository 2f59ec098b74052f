"""The alert endpoints of the OpenAPI document: snoozes, and how each channel delivers."""

from api.openapi.common import FORBIDDEN, MALFORMED, NOT_ALLOWED, NOT_JSON, UNAUTHORIZED, error, needs_scope

_TEXT = "^[^\\u0000]*\\S[^\\u0000]*$"  # some text that is not blank, and no NUL
_WHO = "Token scope `operator`; sessions: staff with the permission to replay dead letters."


def snooze_schema() -> dict:
    return {
        "type": "object",
        "required": ["id", "fingerprint", "kind", "until", "reason", "created_by", "created_at", "per_minute",
                     "total", "deaths"],
        "additionalProperties": False,
        "properties": {
            "id": {"type": "integer"},
            "fingerprint": {"type": ["string", "null"]},
            "kind": {"type": ["string", "null"]},
            "until": {"type": "string", "format": "date-time"},
            "reason": {"type": "string"},
            "created_by": {"type": "string"},
            "created_at": {"type": "string", "format": "date-time"},
            "per_minute": {"type": ["integer", "null"],
                           "description": "A cause muted until more deaths than this in a minute."},
            "total": {"type": ["integer", "null"],
                      "description": "A cause muted until more deaths than this since the mute began."},
            "deaths": {"type": ["integer", "null"], "description": "Deaths under a threshold mute so far."},
        },
    }


def _channel_schema() -> dict:
    def maybe(kind: str, **more) -> dict:
        return {"type": [kind, "null"], **more}

    fields = {
        "name": {"type": "string"},
        "type": {"type": "string"},
        "failing": {"type": "boolean"},
        "failing_since": maybe("string", format="date-time"),
        "last_errcode": maybe("integer"),
        "last_error": maybe("string"),
        "last_sent_at": maybe("string", format="date-time"),
        "paused": maybe("string", enum=["throttled", "config", "down", None]),
        "pending": {"type": "integer"},
        "failed": {"type": "integer"},
        "heartbeat_minutes": maybe("integer"),
        "pinged_at": maybe("string", format="date-time"),
        "daily_digest_at": maybe("string", pattern="^[0-2][0-9]:[0-5][0-9]$"),
        "digest_day": maybe("string", format="date"),
    }
    return {"type": "object", "required": list(fields), "additionalProperties": False, "properties": fields}


def _json(description: str, schema: dict) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def alert_paths() -> dict:
    snooze = snooze_schema()
    return {
        "/report/alerts/snooze": {
            "post": {
                "operationId": "snoozeAlerts",
                "summary": "Mute the alerts of a cause or a kind for a time",
                "description": f"{_WHO} Deaths it covers are counted, not sent; one summary goes out "
                "when it ends. Audited with the reason.",
                "tags": ["alerts"],
                **needs_scope("operator"),
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["minutes", "reason"],
                                "oneOf": [
                                    {
                                        "required": ["fingerprint"],
                                        "properties": {"fingerprint": {"type": "string"}},
                                        "not": {"required": ["kind"], "properties": {"kind": {}}},
                                    },
                                    {
                                        "required": ["kind"],
                                        "properties": {"kind": {"type": "string"}},
                                        "not": {"required": ["fingerprint"],
                                                "properties": {"fingerprint": {}}},
                                    },
                                ],
                                "properties": {
                                    "fingerprint": {"type": "string", "pattern": "^[0-9a-f]{40}$"},
                                    "kind": {"type": "string", "maxLength": 64, "pattern": _TEXT},
                                    "minutes": {"type": "integer", "minimum": 1, "maximum": 10080},
                                    "reason": {"type": "string", "pattern": _TEXT},
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "201": _json("The snooze runs.", snooze),
                    "400": MALFORMED,
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "405": NOT_ALLOWED,
                    "415": NOT_JSON,
                    "422": error(
                        "Neither or both of `fingerprint` and `kind`, a malformed fingerprint, minutes "
                        "outside 1-10080, or no reason (named in `field`)."
                    ),
                },
            }
        },
        "/report/alerts/snoozes": {
            "get": {
                "operationId": "listSnoozes",
                "summary": "The snoozes that run now, the soonest to end first",
                "description": _WHO,
                "tags": ["alerts"],
                **needs_scope("operator"),
                "responses": {
                    "200": _json(
                        "Running snoozes.",
                        {
                            "type": "object",
                            "required": ["results"],
                            "additionalProperties": False,
                            "properties": {"results": {"type": "array", "items": snooze}},
                        },
                    ),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "405": NOT_ALLOWED,
                },
            }
        },
        "/report/alerts/channels": {
            "get": {
                "operationId": "listAlertChannels",
                "summary": "How each alert channel delivers: failing or not, its heartbeat and daily digest",
                "description": "Token scope `operator`; sessions: the permission to view dead letters (the "
                "dashboard's). A channel is `failing` from a failed send until one is delivered; a failing "
                "channel's heartbeat is not pinged. Channels are named, never their URLs.",
                "tags": ["alerts"],
                **needs_scope("operator"),
                "responses": {
                    "200": _json(
                        "Every configured channel, the DingTalk robot first.",
                        {
                            "type": "object",
                            "required": ["results"],
                            "additionalProperties": False,
                            "properties": {"results": {"type": "array", "items": _channel_schema()}},
                        },
                    ),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "405": NOT_ALLOWED,
                },
            }
        },
        "/report/alerts/snooze/{snooze_id}/lift": {
            "post": {
                "operationId": "liftSnooze",
                "summary": "End a snooze now; its summary goes out with the next send pass",
                "description": _WHO,
                "tags": ["alerts"],
                **needs_scope("operator"),
                "parameters": [
                    {"name": "snooze_id", "in": "path", "required": True, "schema": {"type": "integer"}}
                ],
                "responses": {
                    "200": _json(
                        "Lifted.",
                        {
                            "type": "object",
                            "required": ["ok", "snooze"],
                            "additionalProperties": False,
                            "properties": {"ok": {"const": True}, "snooze": snooze},
                        },
                    ),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": error("No running snooze with this id: it ended, was lifted, or never was."),
                    "405": NOT_ALLOWED,
                },
            }
        },
    }
