"""The task endpoints: submit, status, replay, output. Validate -> call a service or selector ->
render JSON. See api/openapi for the contract."""

from django.http import FileResponse, JsonResponse
from django.urls import reverse

from api.auth import api_endpoint, refuse_operator_only_kinds
from api.errors import ApiError
from api.request_body import check_present, idempotency_key, iso, read_json_object
from api.submit_budget import submit_budget
from deadletters.audit import REASON_MAX, ReasonRequired, client_ip
from deadletters.services.replay import replay_task
from reports.errors import InvalidParams
from reports.models import ApiScope, Priority, ReportTask, TaskStatus
from reports.outputs import open_output, output_filename
from reports.selectors import task_by_api_id
from reports.services import IdempotencyConflict, TaskNotReplayable, submit_task

SUBMIT_FIELDS = {"kind", "params", "priority", "idempotency_key"}
REPLAY_FIELDS = {"reason"}


def _task_or_404(request, task_id: str) -> ReportTask:
    """The task, if this client may see it: another client's is as unknown as a made-up id."""
    task = task_by_api_id(task_id, owner=request.api_client.owner_filter)
    if task is None:
        raise ApiError(404, "no such task")
    return task


@api_endpoint(methods=("POST",), scope=ApiScope.SUBMIT)
def submit(request):
    data = read_json_object(request, allowed=SUBMIT_FIELDS)
    check_present(data, "params", lambda v: isinstance(v, dict), "must be a JSON object")
    check_present(data, "priority", lambda v: v in Priority.values, f"must be one of {', '.join(Priority.values)}")
    key = idempotency_key(request, data)
    client = request.api_client
    refuse_operator_only_kinds(client, [data.get("kind")])
    try:
        with submit_budget(client.token, cost=1) as charge:
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
        raise ApiError(422, exc.message, exc.field) from None
    except IdempotencyConflict as exc:
        raise ApiError(
            409,
            f"the idempotency key was already used for task {exc.task.public_id} with a different kind or params",
            "idempotency_key",
        ) from None
    task = result.task
    response = JsonResponse({"task_id": str(task.public_id)}, status=201 if result.created else 200)
    response["Location"] = reverse("api:task-status", args=[task.public_id])
    return response


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
            "last_error": task.last_error or None,
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
    return FileResponse(stored, as_attachment=True, filename=output_filename(task.output_file))
