"""The OpenAPI 3.1 document of the JSON API, built as a dict and served at /report/openapi.json.

tests/api/test_api_contract.py checks every documented response against real responses, and that
every route of the API is documented: change both together."""

from django.conf import settings

from api.openapi.alerts import alert_paths
from api.openapi.batches import batch_paths
from api.openapi.bulk import bulk_components, bulk_paths
from api.openapi.causes import cause_components, cause_paths
from api.openapi.controls import control_components, control_paths
from api.openapi.groups import group_components, group_paths, note_paths
from api.openapi.operator import operator_paths
from api.openapi.schemas import components
from api.openapi.tasks import task_paths

TAGS = [
    {"name": "tasks", "description": "Submit a report task, follow it, download its file, replay it."},
    {"name": "dead letters",
     "description": "Tasks that died: open letters, newest first, grouped by cause, and each cause's "
     "runbook note."},
    {"name": "batches", "description": "Many tasks submitted at once, and their progress."},
    {"name": "Task controls", "description": "Cancel, retry now or stop one task."},
    {"name": "Operator actions", "description": "What an operator does to one dead letter or kind: archive, "
     "discard, restore, edited replay, pause, resume."},
    {"name": "Bulk actions",
     "description": "One action over every dead letter a filter matches, at a rate, with a status to poll."},
    {"name": "alerts", "description": "Snoozes: mute the alerts of a cause or a kind for a time, or a cause "
     "until a threshold."},
    {"name": "documentation", "description": "This document."},
]


def openapi_document(server_url: str | None = None, *, public: bool = False) -> dict:
    """The document; `server_url` (the origin a request reached) is its server, else CONSOLE_BASE_URL.
    `public`: for an anonymous reader, who learns nothing of this site's configuration."""
    return {
        "openapi": "3.1.0",
        "servers": [
            {"url": (server_url or settings.CONSOLE_BASE_URL).rstrip("/"),
             "description": "This report console."}
        ],
        "tags": TAGS,
        "info": {
            "title": "Report tasks API",
            "version": "1.0.0",
            "license": {"name": "Proprietary", "identifier": "LicenseRef-Proprietary"},
            "contact": {
                "name": "The operators of this report console",
                "url": f"{(server_url or settings.CONSOLE_BASE_URL).rstrip('/')}/console/",
            },
            "description": (
                "Submit report tasks, follow them, fetch their output, list and replay dead letters. "
                "Authenticate with `Authorization: Bearer <token>` (`manage.py create_api_token NAME "
                "--scope ...`; a token sees only its own tasks unless it has the `operator` scope, and "
                "other clients' params (masked `•••`) only with the `params` scope too; submits "
                "are limited per token: 429 with Retry-After) or a console session (staff; POSTs need the "
                "CSRF token). Every error is "
                '`{"error": "...", "field": "..." | null}`.'
            ),
        },
        "security": [{"bearerAuth": []}, {"consoleSession": []}],
        "paths": {**task_paths(), **group_paths(), **note_paths(), **control_paths(), **operator_paths(),
                  **bulk_paths(), **batch_paths(), **alert_paths(), **cause_paths()},
        "components": _with(
            components(public=public),
            {**control_components(), **group_components(), **bulk_components(), **cause_components()},
        ),
    }


def _with(components: dict, schemas: dict) -> dict:
    return {**components, "schemas": {**components["schemas"], **schemas}}
