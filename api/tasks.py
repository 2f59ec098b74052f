"""The task endpoints: submit, status, replay, output. Validate -> call a service or selector ->
render JSON. See api/openapi for the contract."""

from django.http import FileResponse, JsonResponse
from django.urls import reverse

from api.auth import SUBMIT_PERMISSION, api_endpoint, refuse_operator_only_kinds
from api.errors import ApiError
from api.request_body import idempotency_key, iso, read_json_object
from api.submit_budget import replay_budget, submit_budget
from config.observability import span
from deadletters.audit import REASON_MAX, ReasonRequired, client_ip
from deadletters.services.replay import replay_task
from reports.errors import InvalidParams
from reports.models import ApiScope, Priority, ReportTask, TaskStatus
from reports.outputs import open_output, output_content_type, output_filename
from reports.selectors import task_by_api_id
from reports.services import IdempotencyConflict, TaskNotReplayable, submit_task, validate_submission
from reports.services.controls import without_note

SUBMIT_FIELDS = {"kind", "params", "priority", "idempotency_key"}
REPLAY_FIELDS = {"reason"}


def _task_or_404(request, task_id: str) -> ReportTask:
    """The task, if this client may see it: another client's is as unknown as a made-up id."""
    task = task_by_api_id(task_id, owner=request.api_client.owner_filter)
    if task is None:
        raise ApiError(404, "no such task")
    return task


@api_endpoint(methods=("POST",), scope=ApiScope.SUBMIT, permission=SUBMIT_PERMISSION)
@span("report.submit")  # the trace the attempt continues (its context rides in the job)
def submit(request):
    data = read_json_object(request, allowed=SUBMIT_FIELDS)
    bad = _given_but_invalid(data)
    if bad:
        raise ApiError.invalid(bad)
    key = idempotency_key(request, data)
    client = request.api_client
    refuse_operator_only_kinds(client, [data.get("kind")])
    try:
        with submit_budget(client.budget_holder, cost=1) as charge:
            result = submit_task(
                kind=data.get("kind"),
                params=data.get("params"),
                priority=data.get("priority"),
                idempotency_key=key,
                submitted_by=client.actor,
                owner=client.token,
            )
            if charge and not result.created:
                charge.refund()
    except InvalidParams as exc:
        raise ApiError.invalid(_every_error(exc)) from None
    except IdempotencyConflict as exc:
        raise ApiError(
            409,
            f"the idempotency key was already used for task {exc.task.public_id} "
            "with a different kind or params",
            "idempotency_key",
        ) from None
    task = result.task
    response = JsonResponse({"task_id": str(task.public_id)}, status=201 if result.created else 200)
    response["Location"] = reverse("api:task-status", args=[task.public_id])
    return response


def _every_error(exc: InvalidParams) -> list[tuple[str, str]]:
    return list(getattr(exc, "errors", None) or [(exc.field, exc.message)])


def _given_but_invalid(data: dict) -> list[tuple[str, str]]:
    """Priority or params given but not one (null or "" is not "left out"); when there is such an
    error, the kind's own checks of the params are added, so one answer names every bad field."""
    bad = []
    if "params" in data and not isinstance(data["params"], dict):
        bad.append(("params", "must be a JSON object"))
    if "priority" in data and data["priority"] not in Priority.values:
        bad.append(("priority", f"must be one of {', '.join(Priority.values)}"))
    if bad and not any(field == "params" for field, _ in bad):
        try:
            validate_submission(kind=data.get("kind"), params=data.get("params"))
        except InvalidParams as exc:
            bad = _every_error(exc) + bad
    return bad


@api_endpoint(methods=("GET",), scope=ApiScope.READ, permission="reports.view_reporttask")
def task_status(request, task_id):
    task = _task_or_404(request, task_id)
    done = task.status == TaskStatus.DONE and bool(task.output_file)
    download = request.build_absolute_uri(reverse("api:task-output", args=[task.public_id]))
    return JsonResponse(
        {
            "id": str(task.public_id),
            "kind": task.kind,
            "status": task.status,
            "priority": task.priority,
            "attempt": task.attempt,
            "max_attempts": task.max_attempts,
            "last_error": without_note(task.last_error) or None,
            "output_path": task.output_file if done else None,
            "download_url": download if done else None,
            "created_at": iso(task.created_at),
            "started_at": iso(task.started_at),
            "finished_at": iso(task.finished_at),
        }
    )


@api_endpoint(methods=("POST",), scope=ApiScope.REPLAY, permission="deadletters.replay_deadletter")
def task_replay(request, task_id):
    task = _task_or_404(request, task_id)
    data = read_json_object(request, allowed=REPLAY_FIELDS, required=False)
    reason = data.get("reason", "")
    if not isinstance(reason, str) or len(reason) > REASON_MAX:
        raise ApiError(422, f"must be text of at most {REASON_MAX} characters", "reason")
    try:
        with replay_budget(request.api_client.budget_holder):
            replay_task(
                task_id=task.pk,
                actor=request.api_client.actor,
                source="api",
                reason=reason,
                ip_address=client_ip(request),
            )
    except ReasonRequired as exc:
        raise ApiError(422, str(exc), "reason") from None
    except TaskNotReplayable as exc:
        raise ApiError(409, str(exc)) from None
    return JsonResponse({"ok": True})


@api_endpoint(methods=("GET",), scope=ApiScope.READ, permission="reports.view_reporttask")
def task_output(request, task_id):
    task = _task_or_404(request, task_id)
    if task.status != TaskStatus.DONE:
        raise ApiError(409, f"task {task.public_id} is {task.status}; its output exists once it is done")
    stored = open_output(task.output_file)
    if stored is None:
        raise ApiError(404, "the task's output file is missing")
    return FileResponse(
        stored,
        as_attachment=True,
        filename=output_filename(task.output_file),
        content_type=output_content_type(task.output_file),
    )
