"""The dead-letter groups resource of the OpenAPI document, the filter parameters it shares with
the dead-letter list, and a cause's runbook note."""

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
from deadletters.selectors.letters import GROUPS_LIMIT
from deadletters.selectors.trends import SPARKLINE_HOURS, TRENDS
from deadletters.services.cause_notes import LINK_MAX, LINK_PATTERN, LINKS_MAX, NOTE_LANGUAGES, TEXT_MAX
from reports.kinds import KINDS


def letter_filter_parameters() -> list[dict]:
    """`kind`, `fingerprint` and `q`: the filters of GET /report/task/dead-letters and of the groups."""
    return [
        {
            "name": "kind",
            "in": "query",
            "required": False,
            "description": "Only this report kind; another value is a 400.",
            "schema": {"type": "string", "enum": sorted(KINDS)},
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
    ]


TREND_RULE = (
    "`rising` when the last 6 hours had at least 3 deaths and at least twice as many as the 6 hours "
    "before them; `falling` when those 6 hours before had at least 3 and at least twice as many as the "
    "last 6; `steady` otherwise (also when there are too few deaths to tell)."
)


def group_paths() -> dict:
    return {
        "/report/dead-letters/groups": {
            "get": {
                "operationId": "listDeadLetterGroups",
                "tags": ["dead letters"],
                "summary": "Open dead letters grouped by cause, biggest first, with their trend",
                "description": "The letters `GET /report/task/dead-letters` lists (open, not yet expired, "
                "the same filters), grouped by cause (fingerprint): at most "
                f"{GROUPS_LIMIT}, the biggest first (`limited` says when there are more). Each cause's "
                f"`deaths_24h` counts its deaths per hour over {SPARKLINE_HOURS} hours, whatever became "
                "of the letters since (replayed, archived), and `trend` compares the last hours: "
                f"{TREND_RULE} Token scope `read`: the causes, counts and deaths of the token's own "
                "tasks' letters only; with `operator`, everyone's. Sessions: "
                "`deadletters.view_deadletter` (everyone's).",
                **needs_scope("read"),
                "parameters": letter_filter_parameters(),
                "responses": {
                    "200": json_response("The causes.", "#/components/schemas/DeadLetterGroups"),
                    "400": error(
                        "Unknown query parameter, a parameter given twice, an unknown kind, a bad "
                        "fingerprint or q (named in `field`)."
                    ),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "405": NOT_ALLOWED,
                },
            }
        }
    }


_NOTE_WHO = ("Token scope `operator`; sessions: `deadletters.view_deadletter` to read, "
             "`deadletters.replay_deadletter` (as for muting alerts) to write.")
_NOTE = json_response("The cause's note (empty `text` and `links` when it has none).",
                      "#/components/schemas/CauseNote")
_NO_CAUSE = error("Not a fingerprint, or no dead letter ever had this one.")


def note_paths() -> dict:
    operation = {"tags": ["dead letters"], **needs_scope("operator"), "parameters": [{
        "name": "fingerprint", "in": "path", "required": True, "description": "The cause.",
        "schema": {"type": "string", "pattern": "^[0-9a-f]{40}$"}}]}
    text = {"type": "string", "maxLength": TEXT_MAX, "pattern": NO_NUL,
            "description": "Control and invisible characters are dropped; the first line goes into alerts."}
    body = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "text": {"type": "object", "additionalProperties": False,
                     "properties": {code: text for code in NOTE_LANGUAGES},
                     "description": "The note by language; alerts use ALERT_LANGUAGE's, else the other."},
            "links": {"type": "array", "maxItems": LINKS_MAX, "description": "The first goes into alerts.",
                      "items": {"type": "string", "maxLength": LINK_MAX, "pattern": LINK_PATTERN}},
        },
    }
    return {"/report/cause/{fingerprint}/note": {
        "get": {**operation, "operationId": "getCauseNote", "summary": "A cause's runbook note",
                "description": _NOTE_WHO,
                "responses": {"200": _NOTE, "401": UNAUTHORIZED, "403": FORBIDDEN, "404": _NO_CAUSE,
                              "405": NOT_ALLOWED}},
        "put": {**operation, "operationId": "putCauseNote", "summary": "Write a cause's runbook note",
                "description": f"{_NOTE_WHO} Replaces the note (an empty one clears it); audited. Every "
                "card of the cause on every channel opens with its first line and carries its first link.",
                "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
                "responses": {"200": _NOTE, "400": MALFORMED, "401": UNAUTHORIZED, "403": FORBIDDEN,
                              "404": _NO_CAUSE, "413": TOO_LARGE, "415": NOT_JSON,
                              "422": error("A text too long or not text, an unknown language, more than "
                                           f"{LINKS_MAX} links, or a link that is not an http(s) URL "
                                           "(named in `field`: `text`, `text.en`, `links`...).")}},
        "delete": {**operation, "operationId": "deleteCauseNote", "summary": "Clear a cause's runbook note",
                   "description": f"{_NOTE_WHO} Audited.",
                   "responses": {"200": _NOTE, "401": UNAUTHORIZED, "403": FORBIDDEN, "404": _NO_CAUSE}},
    }}


def group_components() -> dict:
    date_time = {"type": "string", "format": "date-time"}
    return {
        "CauseNote": {
            "type": "object",
            "additionalProperties": False,
            "required": ["fingerprint", "text", "links", "updated_by", "updated_at"],
            "properties": {
                "fingerprint": {"type": "string"},
                "text": {"type": "object", "additionalProperties": False,
                         "properties": {code: {"type": "string"} for code in NOTE_LANGUAGES}},
                "links": {"type": "array", "items": {"type": "string", "format": "uri"}},
                "updated_by": {"type": ["string", "null"]},
                "updated_at": {**date_time, "type": ["string", "null"]},
            },
        },
        "DeadLetterGroup": {
            "type": "object",
            "additionalProperties": False,
            "required": [
                "fingerprint",
                "error_type",
                "sample_message",
                "count",
                "kinds",
                "first_seen",
                "last_seen",
                "new",
                "new_release",
                "deaths_24h",
                "trend",
                "console_url",
                "releases",
                "fixed",
            ],
            "properties": {
                "fingerprint": {"type": "string",
                                "description": "The cause: error type and normalised message."},
                "error_type": {"type": "string"},
                "sample_message": {
                    "type": "string",
                    "description": "The newest letter's message: first line, at most 300 characters.",
                },
                "count": {"type": "integer", "minimum": 1, "description": "Letters of this cause listed."},
                "kinds": {"type": "array", "items": {"type": "string"}},
                "first_seen": {**date_time, "description": "The oldest listed letter's death."},
                "last_seen": {**date_time, "description": "The newest listed letter's death."},
                "new": {
                    "type": "boolean",
                    "description": "The cause first died on this site under the current release (when "
                    "the site names its releases), else within the last day.",
                },
                "new_release": {
                    "type": ["string", "null"],
                    "description": "The release a new cause first died under; null when not new or the "
                    "site names no release.",
                },
                "deaths_24h": {
                    "type": "array",
                    "minItems": SPARKLINE_HOURS,
                    "maxItems": SPARKLINE_HOURS,
                    "items": {"type": "integer", "minimum": 0},
                    "description": "Deaths per clock hour (UTC), oldest first, starting at "
                    "`deaths_24h_start`; the last is the current hour so far.",
                },
                "trend": {"type": "string", "enum": list(TRENDS), "description": TREND_RULE},
                "console_url": {
                    "type": "string",
                    "format": "uri",
                    "description": "The console's list of this cause's open letters.",
                },
                "releases": {"oneOf": [{"type": "null"}, {"$ref": "#/components/schemas/CauseReleases"}],
                             "description": "Null for a token without `operator`."},
                "fixed": {"$ref": "#/components/schemas/CauseFixed"},
            },
        },
        "DeadLetterGroups": {
            "type": "object",
            "additionalProperties": False,
            "required": ["results", "limited", "deaths_24h_start"],
            "properties": {
                "results": {"type": "array", "items": {"$ref": "#/components/schemas/DeadLetterGroup"}},
                "limited": {
                    "type": "boolean",
                    "description": f"True when only the {GROUPS_LIMIT} biggest causes are given: narrow "
                    "the filters to see the others.",
                },
                "deaths_24h_start": {
                    **date_time,
                    "description": "The start of the first hour of every `deaths_24h` (UTC).",
                },
            },
        },
    }
