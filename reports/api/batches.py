"""JSON API for batches: POST /report/batch/submit, GET /report/batch/<id>/status.

Same authentication and error format as reports/api/views.py; a rejected batch answers 422 with
`errors`: one entry per bad item, `{"index": i, "field": f, "error": msg}`, and nothing is written.
"""

import uuid

from django.conf import settings
from django.http import JsonResponse
from django.urls import reverse

from reports.api.auth import api_endpoint
from reports.api.errors import ApiError
from reports.api.views import _iso, read_json_object
from reports.batches import BatchConflict, BatchInvalid, batch_progress, submit_batch
from reports.models import ReportBatch

SUBMIT_FIELDS = {"items", "idempotency_key", "name", "priority"}


def batch_status_body(batch: ReportBatch) -> dict:
    progress = batch_progress(batch=batch)
    return {
        "id": str(batch.public_id),
        "name": batch.name,
        "status": batch.status,
        **progress.as_dict(),
        "created_at": _iso(batch.created_at),
        "finished_at": _iso(batch.finished_at),
        "dead_letters_url": f"{settings.CONSOLE_BASE_URL}/console/dead-letters/?batch={batch.public_id}",
    }


@api_endpoint(methods=("POST",))
def batch_submit(request):
    data = read_json_object(request, allowed=SUBMIT_FIELDS, max_bytes=settings.REPORT_BATCH_MAX_BODY_BYTES)
    header_key = request.headers.get("Idempotency-Key")
    body_key = data.get("idempotency_key")
    if header_key is not None and body_key is not None and header_key != body_key:
        raise ApiError(
            400, "the Idempotency-Key header and the idempotency_key field differ", "idempotency_key"
        )
    try:
        batch, created = submit_batch(
            items=data.get("items"),
            idempotency_key=header_key if header_key is not None else body_key,
            name=data.get("name", ""),
            priority=data.get("priority"),
            submitted_by=request.api_client.actor,
        )
    except BatchInvalid as exc:
        first = exc.errors[0]
        where = f"item {first['index']}: " if first["index"] is not None else ""
        summary = f"{len(exc.errors)} invalid item(s); first: {where}{first['field']}: {first['error']}"
        return JsonResponse({"error": summary, "field": first["field"], "errors": exc.errors}, status=422)
    except BatchConflict as exc:
        raise ApiError(
            409,
            f"the idempotency key was already used for batch {exc.batch.public_id} with other items",
            "idempotency_key",
        ) from None
    response = JsonResponse(
        {"batch_id": str(batch.public_id), "total": batch.total}, status=201 if created else 200
    )
    response["Location"] = reverse("reports:api-batch-status", args=[batch.public_id])
    return response


@api_endpoint(methods=("GET",), permission="reports.view_reporttask")
def batch_status(request, batch_id):
    try:
        public_id = uuid.UUID(batch_id)
    except ValueError:
        raise ApiError(404, "no such batch") from None
    batch = ReportBatch.objects.filter(public_id=public_id).first()
    if batch is None:
        raise ApiError(404, "no such batch")
    return JsonResponse(batch_status_body(batch))


def openapi_paths() -> dict:
    """The batch endpoints for the OpenAPI document (merge into its "paths")."""
    error = {
        "description": "Error",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    item = {
        "type": "object",
        "required": ["kind"],
        "properties": {
            "kind": {"type": "string"},
            "params": {"type": "object"},
            "priority": {"type": "string", "enum": list(settings.REPORT_QUEUES)},
        },
        "additionalProperties": False,
    }
    progress = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "name": {"type": "string"},
            "status": {"type": "string", "enum": ["open", "completed"]},
            **{
                name: {"type": "integer"}
                for name in ("total", "done", "dead", "running", "pending", "retrying")
            },
            "percent": {"type": "number"},
            "created_at": {"type": "string", "format": "date-time"},
            "finished_at": {"type": ["string", "null"], "format": "date-time"},
            "dead_letters_url": {"type": "string"},
        },
    }
    accepted = {
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
                "summary": "Submit many report tasks at once (all or nothing)",
                "parameters": [
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": False,
                        "schema": {"type": "string"},
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
                                    "items": {"type": "array", "items": item, "minItems": 1},
                                    "name": {"type": "string", "maxLength": 200},
                                    "priority": {"type": "string", "enum": list(settings.REPORT_QUEUES)},
                                    "idempotency_key": {"type": "string", "maxLength": 200},
                                },
                                "additionalProperties": False,
                            }
                        }
                    },
                },
                "responses": {
                    "201": {"description": "Batch created", **accepted},
                    "200": {"description": "Same idempotency key and items: the existing batch", **accepted},
                    "400": error,
                    "401": error,
                    "409": error,
                    "413": error,
                    "415": error,
                    "422": {
                        "description": "Invalid items; `errors` lists each bad item by index",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                },
            }
        },
        "/report/batch/{batch_id}/status": {
            "get": {
                "operationId": "batchStatus",
                "summary": "Progress of a batch, counted from its tasks",
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
                    "403": error,
                    "404": error,
                },
            }
        },
    }
