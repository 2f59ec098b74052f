"""JSON API for batches: POST /report/batch/submit, GET /report/batch/<id>/status.

Same authentication and error format as the task endpoints (api/tasks.py); a rejected batch answers 422 with
`errors`: one entry per bad item, `{"index": i, "field": f, "error": msg}`, and nothing is written.
"""

from django.conf import settings
from django.http import JsonResponse
from django.urls import reverse

from api.auth import SUBMIT_PERMISSION, api_endpoint, refuse_operator_only_kinds
from api.errors import ApiError
from api.request_body import idempotency_key, iso, read_json_object
from api.submit_budget import submit_budget
from deadletters.links import batch_url
from reports.models import ApiScope, Priority, ReportBatch
from reports.selectors import batch_by_api_id
from reports.services.batches import BatchConflict, BatchInvalid, batch_progress, submit_batch

SUBMIT_FIELDS = {"items", "idempotency_key", "name", "priority"}


def batch_status_body(batch: ReportBatch) -> dict:
    progress = batch_progress(batch=batch)
    return {
        "id": str(batch.public_id),
        "name": batch.name,
        "status": batch.status,
        **progress.as_dict(),
        "created_at": iso(batch.created_at),
        "finished_at": iso(batch.finished_at),
        "dead_letters_url": batch_url(batch.public_id),
    }


@api_endpoint(methods=("POST",), scope=ApiScope.SUBMIT, permission=SUBMIT_PERMISSION)
def batch_submit(request):
    data = read_json_object(request, allowed=SUBMIT_FIELDS, max_bytes=settings.REPORT_BATCH_MAX_BODY_BYTES)
    try:
        key = idempotency_key(request, data)
    except ApiError as exc:
        if exc.status != 422:
            raise
        # A batch's 422 always lists what is wrong in `errors`, as documented.
        return _invalid_items([{"index": None, "field": exc.field, "error": exc.error}])
    null_errors = _given_but_empty(data)
    if null_errors:
        return _invalid_items(null_errors)
    client = request.api_client
    items = data.get("items")
    items = items if isinstance(items, list) else []
    refuse_operator_only_kinds(client, [item.get("kind") for item in items if isinstance(item, dict)])
    try:
        with submit_budget(client.budget_holder, cost=max(len(items), 1)) as charge:
            batch, created = submit_batch(
                items=data.get("items"),
                idempotency_key=key,
                name=data.get("name", ""),
                priority=data.get("priority"),
                submitted_by=client.actor,
                owner=client.token,
            )
            if charge and not created:
                charge.refund()
    except BatchInvalid as exc:
        return _invalid_items(exc.errors)
    except BatchConflict as exc:
        raise ApiError(
            409,
            f"the idempotency key was already used for batch {exc.batch.public_id} with other items",
            "idempotency_key",
        ) from None
    response = JsonResponse(
        {"batch_id": str(batch.public_id), "total": batch.total}, status=201 if created else 200
    )
    response["Location"] = reverse("api:batch-status", args=[batch.public_id])
    return response


def _invalid_items(errors: list[dict]) -> JsonResponse:
    first = errors[0]
    where = f"item {first['index']}: " if first["index"] is not None else ""
    summary = f"{len(errors)} invalid item(s); first: {where}{first['field']}: {first['error']}"
    return JsonResponse({"error": summary, "field": first["field"], "errors": errors}, status=422)


def _given_but_empty(data: dict) -> list[dict]:
    """A priority or params that is given must be one (null or "" is not "left out"), as documented."""
    priorities = f"must be one of {', '.join(Priority.values)}"
    errors = []
    if "priority" in data and data["priority"] not in Priority.values:
        errors.append({"index": None, "field": "priority", "error": priorities})
    items = data.get("items")
    for index, item in enumerate(items if isinstance(items, list) else ()):
        if not isinstance(item, dict):
            continue
        if "priority" in item and item["priority"] not in Priority.values:
            errors.append({"index": index, "field": "priority", "error": priorities})
        if "params" in item and not isinstance(item["params"], dict):
            errors.append({"index": index, "field": "params", "error": "must be a JSON object"})
    return errors


@api_endpoint(methods=("GET",), scope=ApiScope.READ, permission="reports.view_reporttask")
def batch_status(request, batch_id):
    batch = batch_by_api_id(batch_id, owner=request.api_client.owner_filter)
    if batch is None:
        raise ApiError(404, "no such batch")
    return JsonResponse(batch_status_body(batch))
