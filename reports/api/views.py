"""JSON API views: validate -> call a service or selector -> render. See openapi.py for the contract."""

import json
import re
from pathlib import Path

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import FileResponse, JsonResponse
from django.http.request import RawPostDataException
from django.urls import reverse

from deadletters.selectors_api import BadCursor, open_dead_letters_page, preview
from reports.api.auth import api_endpoint
from reports.api.errors import ApiError
from reports.api.openapi import openapi_document
from reports.errors import InvalidParams
from reports.models import ReportTask, TaskStatus
from reports.selectors import task_by_api_id
from reports.services import IdempotencyConflict, TaskNotReplayable, replay_task, submit_task

SUBMIT_FIELDS = {"kind", "params", "priority", "idempotency_key"}
REPLAY_FIELDS = {"reason"}
DEAD_LETTER_QUERY = {"kind", "fingerprint", "cursor", "limit"}
FINGERPRINT_RE = re.compile(r"^[0-9a-f]{40}$")
REASON_MAX = 2000


def _iso(value):
    return value.isoformat() if value else None


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def read_json_object(
    request, *, allowed: set[str], required: bool = True, max_bytes: int | None = None
) -> dict:
    """The request body as a JSON object, or ApiError: 413 too big, 415 not JSON, 400 malformed."""
    limit = max_bytes or settings.API_MAX_BODY_BYTES
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ApiError(400, "Content-Length is not a number") from None
    if length > limit:
        raise ApiError(413, f"the body is {length} bytes; the limit is {limit}")
    try:
        body = request.body
    except RequestDataTooBig:
        raise ApiError(413, f"the body is over the limit of {limit} bytes") from None
    except RawPostDataException:
        # A form body the CSRF check of a session POST already parsed: not JSON anyway.
        raise ApiError(415, f"Content-Type must be application/json, not {request.content_type!r}") from None
    if len(body) > limit:
        raise ApiError(413, f"the body is over the limit of {limit} bytes")
    if not body.strip():
        if required:
            raise ApiError(400, "the body must be a JSON object")
        return {}
    content_type = request.content_type or ""
    if content_type != "application/json":
        raise ApiError(415, f"Content-Type must be application/json, not {content_type or 'missing'!r}")
    charset = (request.content_params or {}).get("charset", "utf-8").lower()
    if charset not in ("utf-8", "utf8"):
        raise ApiError(415, "the body must be UTF-8 encoded JSON")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "the body is not valid UTF-8") from None
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, f"the body is not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    for name in data:
        if name not in allowed:
            raise ApiError(
                400, f"unknown field {name[:64]!r}; allowed: {', '.join(sorted(allowed))}", name[:64]
            )
    return data


def _task_or_404(task_id: str) -> ReportTask:
    task = task_by_api_id(task_id)
    if task is None:
        raise ApiError(404, "no such task")
    return task


def _client_ip(request) -> str | None:
    return request.META.get("REMOTE_ADDR") or None


@api_endpoint(methods=("POST",))
def submit(request):
    data = read_json_object(request, allowed=SUBMIT_FIELDS)
    header_key = request.headers.get("Idempotency-Key")
    body_key = data.get("idempotency_key")
    if header_key is not None and body_key is not None and header_key != body_key:
        raise ApiError(
            400, "the Idempotency-Key header and the idempotency_key field differ", "idempotency_key"
        )
    key = header_key if header_key is not None else body_key
    try:
        result = submit_task(
            kind=data.get("kind"),
            params=data.get("params"),
            priority=data.get("priority"),
            idempotency_key=key,
            submitted_by=request.api_client.actor,
        )
    except InvalidParams as exc:
        raise ApiError(422, exc.message, exc.field) from None
    except IdempotencyConflict as exc:
        raise ApiError(
            409,
            f"the idempotency key was already used for task {exc.task.public_id} with a different kind or params",
            "idempotency_key",
        ) from None
    task = result.task
    response = JsonResponse({"task_id": str(task.public_id)}, status=201 if result.created else 200)
    response["Location"] = reverse("reports:api-task-status", args=[task.public_id])
    return response


@api_endpoint(methods=("GET",), permission="reports.view_reporttask")
def task_status(request, task_id):
    task = _task_or_404(task_id)
    done = task.status == TaskStatus.DONE and bool(task.output_file)
    download = request.build_absolute_uri(reverse("reports:api-task-output", args=[task.public_id]))
    return JsonResponse(
        {
            "id": str(task.public_id),
            "kind": task.kind,
            "status": task.status,
            "priority": task.priority,
            "attempt": task.attempt,
            "max_attempts": task.max_attempts,
            "last_error": task.last_error or None,
            "output_path": task.output_file if done else None,
            "download_url": download if done else None,
            "created_at": _iso(task.created_at),
            "started_at": _iso(task.started_at),
            "finished_at": _iso(task.finished_at),
        }
    )


@api_endpoint(methods=("POST",), permission="deadletters.replay_deadletter")
def task_replay(request, task_id):
    task = _task_or_404(task_id)
    data = read_json_object(request, allowed=REPLAY_FIELDS, required=False)
    reason = data.get("reason", "")
    if not isinstance(reason, str) or len(reason) > REASON_MAX:
        raise ApiError(422, f"must be text of at most {REASON_MAX} characters", "reason")
    try:
        replay_task(
            task_id=task.pk,
            actor=request.api_client.actor,
            source="api",
            reason=reason,
            ip_address=_client_ip(request),
        )
    except TaskNotReplayable as exc:
        raise ApiError(409, str(exc)) from None
    return JsonResponse({"ok": True})


@api_endpoint(methods=("GET",), permission="reports.view_reporttask")
def task_output(request, task_id):
    task = _task_or_404(task_id)
    if task.status != TaskStatus.DONE:
        raise ApiError(409, f"task {task.public_id} is {task.status}; its output exists once it is done")
    root = Path(settings.MEDIA_ROOT).resolve()
    path = (root / task.output_file).resolve() if task.output_file else None
    if path is None or not path.is_relative_to(root) or not path.is_file():
        raise ApiError(404, "the task's output file is missing")
    return FileResponse(path.open("rb"), as_attachment=True, filename=path.name)


def _query_param(request, name: str) -> str | None:
    values = request.GET.getlist(name)
    if len(values) > 1:
        raise ApiError(400, f"give {name} at most once", name)
    return values[0] if values else None


@api_endpoint(methods=("GET",), permission="deadletters.view_deadletter")
def dead_letters(request):
    for name in request.GET:
        if name not in DEAD_LETTER_QUERY:
            raise ApiError(400, f"unknown query parameter {name[:64]!r}", name[:64])
    kind = _query_param(request, "kind")
    if kind is not None and (not kind or len(kind) > 64):
        raise ApiError(400, "must be a report kind name", "kind")
    fingerprint = _query_param(request, "fingerprint")
    if fingerprint is not None and not FINGERPRINT_RE.match(fingerprint):
        raise ApiError(400, "must be 40 lowercase hex characters", "fingerprint")
    raw_limit = _query_param(request, "limit")
    limit = settings.API_DEADLETTER_PAGE_SIZE
    if raw_limit is not None:
        if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= settings.API_DEADLETTER_PAGE_MAX:
            raise ApiError(400, f"must be an integer from 1 to {settings.API_DEADLETTER_PAGE_MAX}", "limit")
        limit = int(raw_limit)
    try:
        page = open_dead_letters_page(
            kind=kind, fingerprint=fingerprint, cursor=_query_param(request, "cursor"), limit=limit
        )
    except BadCursor as exc:
        raise ApiError(400, str(exc), "cursor") from None
    console = settings.CONSOLE_BASE_URL
    results = [
        {
            "id": row["id"],
            "task_id": str(row["task__public_id"]),
            "kind": row["kind"],
            "error_type": row["error_type"],
            "error_message": preview(row["error_message"]),
            "attempts": row["attempts"],
            "fingerprint": row["fingerprint"],
            "created_at": _iso(row["created_at"]),
            "expire_at": _iso(row["expire_at"]),
            "console_url": f"{console}/console/dead-letters/{row['id']}/",
        }
        for row in page.rows
    ]
    return JsonResponse({"results": results, "next_cursor": page.next_cursor})


@api_endpoint(methods=("GET",), public=True)
def openapi(request):
    return JsonResponse(openapi_document(), json_dumps_params={"indent": 2})
