"""Live-task controls: POST /report/task/<id>/cancel, /retry-now, /stop. Each is a conditional
change of the task row (deadletters/services/task_controls.py): a task that moved on meanwhile
answers 409 and nothing changes. A client's token cancels its own tasks (scope `submit`); retry
now and stop are operator actions (scope `operator`); a console session needs the permission to
replay dead letters."""

from django.http import JsonResponse

from api.auth import api_endpoint
from api.errors import ApiError
from api.request_body import read_json_object
from deadletters.audit import REASON_MAX, client_ip
from deadletters.services.task_controls import task_cancel, task_retry_now, task_stop
from reports.models import ApiScope, ReportTask
from reports.selectors import task_by_api_id
from reports.services.controls import STOP_CHOICES, STOP_THEN_CANCEL, TaskNotControllable

CONTROL_PERMISSION = "deadletters.replay_deadletter"
REASON_FIELDS = {"reason"}
STOP_FIELDS = {"reason", "then", "attempt"}


def _task_or_404(request, task_id: str) -> ReportTask:
    task = task_by_api_id(task_id, owner=request.api_client.owner_filter)
    if task is None:
        raise ApiError(404, "no such task")
    return task


def _reason(data: dict) -> str:
    reason = data.get("reason", "")
    if not isinstance(reason, str) or len(reason) > REASON_MAX:
        raise ApiError(422, f"must be text of at most {REASON_MAX} characters", "reason")
    return reason


def _answer(done) -> JsonResponse:
    task = done.task
    return JsonResponse(
        {"ok": True, "task_id": str(task.public_id), "status": task.status, "attempt": task.attempt}
    )


def _who(request) -> dict:
    return {"actor": request.api_client.actor, "source": "api", "ip_address": client_ip(request)}


@api_endpoint(methods=("POST",), scope=ApiScope.SUBMIT, permission=CONTROL_PERMISSION)
def task_cancel_view(request, task_id):
    task = _task_or_404(request, task_id)
    data = read_json_object(request, allowed=REASON_FIELDS, required=False)
    try:
        return _answer(task_cancel(task_id=task.pk, reason=_reason(data), **_who(request)))
    except TaskNotControllable as exc:
        raise ApiError(409, str(exc)) from None


@api_endpoint(methods=("POST",), scope=ApiScope.OPERATOR, permission=CONTROL_PERMISSION)
def task_retry_now_view(request, task_id):
    task = _task_or_404(request, task_id)
    data = read_json_object(request, allowed=REASON_FIELDS, required=False)
    try:
        return _answer(task_retry_now(task_id=task.pk, reason=_reason(data), **_who(request)))
    except TaskNotControllable as exc:
        raise ApiError(409, str(exc)) from None


@api_endpoint(methods=("POST",), scope=ApiScope.OPERATOR, permission=CONTROL_PERMISSION)
def task_stop_view(request, task_id):
    task = _task_or_404(request, task_id)
    data = read_json_object(request, allowed=STOP_FIELDS, required=False)
    then = data.get("then", STOP_THEN_CANCEL)
    if then not in STOP_CHOICES:
        raise ApiError(422, f"must be one of {', '.join(STOP_CHOICES)}", "then")
    # Without a number: the attempt the task has now (1 for one that never ran, so a 409 says why).
    attempt = data.get("attempt", max(task.attempt, 1))
    if isinstance(attempt, float) and attempt.is_integer():
        attempt = int(attempt)  # JSON Schema's integer: 3.0 is one
    if isinstance(attempt, bool) or not isinstance(attempt, int) or not 1 <= attempt <= 1_000_000:
        raise ApiError(422, "must be the number of the running attempt (an integer from 1)", "attempt")
    try:
        done = task_stop(task_id=task.pk, attempt=attempt, then=then, reason=_reason(data), **_who(request))
    except TaskNotControllable as exc:
        raise ApiError(409, str(exc)) from None
    return _answer(done)
