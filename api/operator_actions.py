"""The console's operator actions in the API: archive, discard, restore and replay (plainly or with
edited params) of one dead letter, pausing or resuming a report kind, and its circuit breaker. Token
scope `operator`; a console session needs the console's permission for the same action. Each is the
service the console calls, audited with source "api"."""

import re

from django.http import JsonResponse
from django.urls import reverse

from api.auth import REPLAY_EDIT_PERMISSION, api_endpoint
from api.bulk import bulk_status_body
from api.errors import ApiError
from api.request_body import read_json_object
from deadletters.audit import REASON_MAX, ReasonRequired, client_ip
from deadletters.bulk.plans import parse_start_at
from deadletters.bulk.schedule import schedule_letter_replay
from deadletters.bulk.selection import BulkRequestConflict, InvalidBulkRequest
from deadletters.models import permission_for
from deadletters.services.kind_pauses import pause_kind, resume_kind, set_breaker
from deadletters.services.letters import DeadLetterNotFound
from deadletters.services.replay import replay_dead_letter
from deadletters.services.transitions import DeadLetterConflict, change_dead_letter
from reports.errors import InvalidParams
from reports.kinds import KINDS
from reports.models import ApiScope
from reports.services import TaskNotReplayable
from reports.services.breakers import ACTIONS, BOUNDS
from reports.services.pausing import KindNotPaused

KIND_PERMISSION = "deadletters.replay_deadletter"
LETTER_ID_RE = re.compile(r"[0-9]{1,12}\Z")


def _reason(request, allowed=frozenset({"reason"})) -> tuple[str, dict]:
    data = read_json_object(request, allowed=set(allowed), required=False)
    reason = data.get("reason", "")
    if not isinstance(reason, str) or len(reason) > REASON_MAX:
        raise ApiError(422, f"must be text of at most {REASON_MAX} characters", "reason")
    return reason, data


def _letter_id(raw: str) -> int:
    """The path's letter id; anything else is as unknown as a made-up id (a JSON 404)."""
    if not LETTER_ID_RE.match(raw):
        raise ApiError(404, "no such dead letter")
    return int(raw)


def _who(request) -> dict:
    return {"actor": request.api_client.actor, "source": "api", "ip_address": client_ip(request)}


def _letter_action(action: str):
    @api_endpoint(methods=("POST",), scope=ApiScope.OPERATOR, permission=permission_for(action))
    def view(request, letter_id: str):
        letter_id = _letter_id(letter_id)
        reason, _ = _reason(request)
        try:
            letter = change_dead_letter(
                action=action, dead_letter_id=letter_id, reason=reason, **_who(request)
            )
        except DeadLetterNotFound:
            raise ApiError(404, "no such dead letter") from None
        except DeadLetterConflict as exc:
            raise ApiError(409, str(exc)) from None
        except ReasonRequired as exc:
            raise ApiError(422, str(exc), "reason") from None
        return JsonResponse({"ok": True, "id": letter.pk, "status": letter.status})

    view.__name__ = f"dead_letter_{action}"
    return view


dead_letter_archive = _letter_action("archive")
dead_letter_discard = _letter_action("discard")
dead_letter_restore = _letter_action("restore")


@api_endpoint(methods=("POST",), scope=ApiScope.OPERATOR, permission=permission_for("replay"))
def dead_letter_replay(request, letter_id: str):
    letter_id = _letter_id(letter_id)
    reason, data = _reason(request, allowed={"reason", "params", "start_at"})
    params = data.get("params")
    if "start_at" in data:
        return _scheduled_replay(request, letter_id, reason, data)
    if "params" in data:  # null is not "left out"
        if not isinstance(params, dict):
            raise ApiError(422, "must be a JSON object", "params")
        user = request.api_client.user
        if user is not None and not user.has_perm(REPLAY_EDIT_PERMISSION):
            raise ApiError(403, f"the console user lacks the permission {REPLAY_EDIT_PERMISSION}")
    try:
        task = replay_dead_letter(dead_letter_id=letter_id, reason=reason, params=params, **_who(request))
    except DeadLetterNotFound:
        raise ApiError(404, "no such dead letter") from None
    except TaskNotReplayable as exc:
        raise ApiError(409, str(exc)) from None
    except ReasonRequired as exc:
        raise ApiError(422, str(exc), "reason") from None
    except InvalidParams as exc:
        other = _kind_accepting(params)
        if other is not None:
            # Params the document allows (they are a kind's) that do not fit this letter's task.
            raise ApiError(409, f"the letter's task is not a {other} task: {exc.message}", "params") from None
        raise ApiError(422, exc.message, exc.field or "params") from None
    return JsonResponse({"ok": True, "id": letter_id, "task_id": str(task.public_id), "status": task.status})


def _kind_accepting(params: dict | None) -> str | None:
    for name, kind in KINDS.items():
        try:
            kind.validate(params)
        except InvalidParams:
            continue
        return name
    return None


def _scheduled_replay(request, letter_id: int, reason: str, data: dict):
    """A replay at `start_at`: a bulk run of this one letter, scheduled (202, Location: its status)."""
    if "params" in data:
        raise ApiError(422, "a scheduled replay runs the letter's own params; leave params out", "params")
    if not (isinstance(data["start_at"], str) and data["start_at"].strip()):
        raise ApiError(
            422, "must be a date and time with its UTC offset, such as 2026-11-25T02:00:00+08:00", "start_at"
        )
    try:
        bulk, letter = schedule_letter_replay(
            dead_letter_id=letter_id, start_at=parse_start_at(data["start_at"]), reason=reason,
            **_who(request),
        )
    except DeadLetterNotFound:
        raise ApiError(404, "no such dead letter") from None
    except TaskNotReplayable as exc:
        raise ApiError(409, str(exc)) from None
    except BulkRequestConflict as exc:
        raise ApiError(409, str(exc), exc.field) from None
    except InvalidBulkRequest as exc:
        raise ApiError(422, str(exc), exc.field) from None
    except ReasonRequired as exc:
        raise ApiError(422, str(exc), "reason") from None
    body = {"ok": True, "id": letter_id, "task_id": str(letter.task.public_id),
            "scheduled": bulk_status_body(bulk, can_see=request.api_client.can_see_params)}
    response = JsonResponse(body, status=202)
    response["Location"] = reverse("api:bulk-status", args=[bulk.public_id])
    return response


@api_endpoint(methods=("POST",), scope=ApiScope.OPERATOR, permission=KIND_PERMISSION)
def kind_pause(request, kind: str):
    reason, _ = _reason(request)
    try:
        row, created = pause_kind(kind=kind, reason=reason, **_who(request))
    except InvalidParams as exc:
        raise ApiError(404, exc.message) from None
    return JsonResponse({"ok": True, "kind": row.kind, "paused": True, "changed": created})


@api_endpoint(methods=("POST",), scope=ApiScope.OPERATOR, permission=KIND_PERMISSION)
def kind_resume(request, kind: str):
    _reason(request)
    try:
        waiting = resume_kind(kind=kind, **_who(request))
    except InvalidParams as exc:
        raise ApiError(404, exc.message) from None
    except KindNotPaused:
        raise ApiError(409, f"{kind} is not paused") from None
    return JsonResponse({"ok": True, "kind": kind, "paused": False, "waiting": waiting})


@api_endpoint(methods=("POST",), scope=ApiScope.OPERATOR, permission=KIND_PERMISSION)
def kind_breaker(request, kind: str):
    """Open, hold or close the kind's circuit breaker and/or change its thresholds."""
    reason, data = _reason(request, allowed={"reason", "action", *BOUNDS})
    if kind not in KINDS:
        raise ApiError(404, "no such report kind")
    thresholds = {name: data[name] for name in BOUNDS if name in data}
    for name, value in thresholds.items():
        if isinstance(value, float) and value.is_integer():
            thresholds[name] = value = int(value)  # JSON Schema's integer: 60.0 is 60
        if isinstance(value, bool) or not isinstance(value, int):
            raise ApiError(422, "must be a whole number", name)
    if ("action" in data or not thresholds) and data.get("action") not in ACTIONS:
        raise ApiError(422, f"must be one of {', '.join(ACTIONS)} (or leave it out and give a threshold)",
                       "action")
    try:
        row, changed = set_breaker(kind=kind, action=data.get("action"), thresholds=thresholds, reason=reason,
                                   **_who(request))
    except InvalidParams as exc:  # `kind`: no upstream on this site, so no breaker to act on
        raise ApiError(409 if exc.field == "kind" else 422, exc.message, exc.field) from None
    return JsonResponse({"ok": True, "kind": kind, "state": row.state, "changed": changed,
                         **{name: getattr(row, name) for name in BOUNDS}})
