"""The batch endpoints of the OpenAPI document."""

from django.conf import settings

from api.openapi.common import FORBIDDEN, IDEMPOTENCY_KEY, NO_NUL, SUBMIT_FORBIDDEN, TOO_MANY, needs_scope

SUBMIT_LINKS = {
    "status": {
        "operationId": "batchStatus",
        "parameters": {"batch_id": "$response.body#/batch_id"},
        "description": "Follow the batch just submitted.",
    }
}


def batch_paths() -> dict:
    error = {
        "description": "Error",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    item = {"$ref": "#/components/schemas/BatchItem"}
    progress = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "name": {"type": "string"},
            "status": {"type": "string", "enum": ["open", "completed"]},
            **{
                name: {"type": "integer"}
                for name in ("total", "done", "dead", "running", "pending", "retrying", "cancelled")
            },
            "percent": {"type": "number"},
            "created_at": {"type": "string", "format": "date-time"},
            "finished_at": {"type": ["string", "null"], "format": "date-time"},
            "dead_letters_url": {"type": "string"},
        },
    }
    accepted = {
        "links": SUBMIT_LINKS,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "batch_id": {"type": "string", "format": "uuid"},
                        "total": {"type": "integer"},
                    },
                }
            }
        }
    }
    return {
        "/report/batch/submit": {
            "post": {
                "operationId": "submitBatch",
                "tags": ["batches"],
                "summary": "Submit many report tasks at once (all or nothing)",
                "description": "Token scope `submit` (an item of the probe kind also needs `operator`); "
                "sessions: `reports.add_reporttask` (probe items also `reports.submit_operator_kinds`). "
                "The batch and its tasks belong to the token; a batch of N counts N "
                "against its submit budget. Idempotency keys are the token's own.",
                **needs_scope("submit"),
                "parameters": [
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": False,
                        "description": IDEMPOTENCY_KEY["description"].replace("task", "batch"),
                        "schema": {k: v for k, v in IDEMPOTENCY_KEY.items() if k != "description"},
                    }
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["items"],
                                "properties": {
                                    "items": {
                                        "type": "array",
                                        "items": item,
                                        "minItems": 1,
                                        "maxItems": settings.REPORT_BATCH_MAX_ITEMS,
                                    },
                                    "name": {"type": "string", "maxLength": 200, "pattern": NO_NUL},
                                    "priority": {"type": "string", "enum": list(settings.REPORT_QUEUES)},
                                    "idempotency_key": IDEMPOTENCY_KEY,
                                },
                                "additionalProperties": False,
                            }
                        }
                    },
                },
                "responses": {
                    "201": {"description": "Batch created", **accepted},
                    "200": {"description": "Same idempotency key and items: the existing batch", **accepted},
                    "400": {
                        "description": "Malformed request: invalid JSON, an unknown field, a NUL character",
                        "content": error["content"],
                    },
                    "401": error,
                    "403": SUBMIT_FORBIDDEN,
                    "409": error,
                    "413": error,
                    "415": error,
                    "429": TOO_MANY,
                    "422": {
                        "description": "Invalid items (all or nothing); `errors` lists each bad item by "
                        "index. A `url` the pattern allows is refused only as for a single submit (a host "
                        "name that resolves to an address that is not public).",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/BatchInvalid"}}
                        },
                    },
                },
            }
        },
        "/report/batch/{batch_id}/status": {
            "get": {
                "operationId": "batchStatus",
                "tags": ["batches"],
                "summary": "Progress of a batch, counted from its tasks",
                "description": "Token scope `read` (own batches; every batch with `operator`; another "
                "client's is a 404); sessions: `reports.view_reporttask`.",
                **needs_scope("read"),
                "parameters": [
                    {
                        "name": "batch_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "format": "uuid"},
                    }
                ],
                "responses": {
                    "200": {"description": "Progress", "content": {"application/json": {"schema": progress}}},
                    "401": error,
                    "403": FORBIDDEN,
                    "404": error,
                },
            }
        },
    }
