"""Bulk dead-letter actions through the API, as the console runs them (deadletters/bulk): start one
over everything a filter matches (a dry run only counts), follow it, pause, resume, cancel it or
change its rate. Token scope `operator`; sessions: the console's permissions, the bulk runs' view and
the action's own."""

import uuid
from dataclasses import asdict
from urllib.parse import urlencode

from django.http import JsonResponse
from django.urls import reverse

from api.auth import REPLAY_EDIT_PERMISSION, api_endpoint
from api.errors import ApiError
from api.request_body import iso, read_json_object
from deadletters.audit import REASON_MAX, ReasonRequired, client_ip
from deadletters.bulk.canary import canary_view
from deadletters.bulk.control import (
    BulkStateConflict,
    cancel_bulk_action,
    change_bulk_rate,
    pause_bulk_action,
    resume_bulk_action,
    start_bulk_action,
)
from deadletters.bulk.patch import parse_params_patch, preview_params_patch
from deadletters.bulk.plans import check_canary_fits, parse_start_at, validate_canary, validate_canary_success
from deadletters.bulk.schedule import start_after_breaker
from deadletters.bulk.selection import (
    SCOPE_FILTER,
    BulkRequestConflict,
    InvalidBulkRequest,
    build_selection,
    preview_bulk_action,
)
from deadletters.bulk.watch import replay_outcome, replay_outcome_by_cause
from deadletters.filters import FILTER_PARAMS
from deadletters.models import BulkAction, BulkActionKind, permission_for
from reports.kinds import KINDS
from reports.kinds.masking import patch_for_display
from reports.models import ApiScope

BULK_PERMISSION = "deadletters.view_bulkaction"  # and the action's own: _check_action
START_FIELDS = {
    "action", "filter", "rate_per_second", "reason", "dry_run", "canary", "canary_success", "start_at",
    "params_patch",
    "after_breaker_of",
    "include_superseded",
}
FILTER_FIELDS = set(FILTER_PARAMS) - {"sort"}


def bulk_status_body(bulk: BulkAction, *, can_see: bool) -> dict:
    body = {
        "id": str(bulk.public_id),
        "action": bulk.action,
        "status": bulk.status,
        "total": bulk.total,
        "processed": bulk.processed,
        "succeeded": bulk.succeeded,
        "skipped": bulk.skipped,
        "percent": bulk.percent,
        "rate_per_second": bulk.rate_per_second,
        "paused_reason": bulk.paused_reason or None,
        "error": bulk.error or None,
        "created_at": iso(bulk.created_at),
        "start_at": iso(bulk.start_at),
        "after_breaker_of": bulk.after_breaker_of or None,
        "started_at": iso(bulk.started_at),
        "finished_at": iso(bulk.finished_at),
        "outcome": None,
        "outcome_by_cause": None,
        "outcome_by_cause_limited": False,
        "canary": canary_body(bulk),
        "params_patch": patch_for_display(bulk.params_patch, can_see=can_see),
        "refused": bulk.refused,
        "refusals": bulk.refusals,
    }
    if bulk.action == BulkActionKind.REPLAY:
        outcome = replay_outcome(bulk)
        body["outcome"] = {
            "replayed": outcome.replayed,
            "finished": outcome.finished,
            "died_again": outcome.died_again,
        }
        causes, limited = replay_outcome_by_cause(bulk)
        body["outcome_by_cause"] = [
            {
                "fingerprint": cause.fingerprint,
                "error_type": cause.error_type,
                "replayed": cause.replayed,
                "done": cause.done,
                "died_again": cause.died_again,
            }
            for cause in causes
        ]
        body["outcome_by_cause_limited"] = limited
    return body


def canary_body(bulk: BulkAction) -> dict | None:
    view = canary_view(bulk)
    if view is None:
        return None
    return {
        **{name: view[name]
           for name in ("size", "success_share", "needed", "replayed", "done", "died_again")},
        "unfinished": view["unfinished"],
        "phase": view["phase"],
        "deadline": iso(view["deadline"]),
        "causes": [
            {"fingerprint": c["fingerprint"], "error_type": c["error_type"], "count": c["count"]}
            for c in view["causes"]
        ],
        "reason": view["reason"] or None,
    }


def _plan(data: dict, action: str) -> dict:
    """canary, canary_success and start_at as sent; JSON types first (the services accept the
    console's text too)."""
    for name in ("canary", "canary_success"):
        value = data.get(name)
        if name in data and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ApiError(422, "must be a number", name)
    if "start_at" in data and not (isinstance(data["start_at"], str) and data["start_at"].strip()):
        raise ApiError(422, "must be a date and time with its UTC offset, such as 2026-11-25T02:00:00+08:00",
                       "start_at")
    if "canary_success" in data and "canary" not in data:
        raise ApiError(422, "goes with canary (the share of the canary's replays that must succeed)",
                       "canary_success")
    return {
        "canary": validate_canary(data.get("canary"), action=action) or None,
        "canary_success": validate_canary_success(data.get("canary_success")),
        "start_at": parse_start_at(data.get("start_at")),
    }


def _check_action(request, action: str, *, edits_params: bool = False) -> None:
    """A session user needs the permission of the action itself, and to edit params for a patch
    (a token: its operator scope)."""
    user = request.api_client.user
    for needed in (permission_for(action), *([REPLAY_EDIT_PERMISSION] if edits_params else [])):
        if user is not None and not user.has_perm(needed):
            raise ApiError(403, f"the console user lacks the permission {needed}")


def _patch_preview(request, data: dict, selection) -> dict:
    """A dry run's patch: the tasks it would change, the refused (with the first reasons), a sample."""
    if "params_patch" not in data:
        return {}
    patch = parse_params_patch(data["params_patch"], action=selection.action)
    preview = preview_params_patch(selection, patch, can_see=request.api_client.can_see_params)
    return {"params_patch": asdict(preview)}


def _bulk_or_404(bulk_id: str) -> BulkAction:
    try:
        public_id = uuid.UUID(bulk_id)
    except ValueError:
        raise ApiError(404, "no such bulk action") from None
    bulk = BulkAction.objects.filter(public_id=public_id).first()
    if bulk is None:
        raise ApiError(404, "no such bulk action")
    return bulk


@api_endpoint(methods=("POST",), scope=ApiScope.OPERATOR, permission=BULK_PERMISSION)
def bulk_start(request):
    data = read_json_object(request, allowed=START_FIELDS)
    action = data.get("action")
    if action not in BulkActionKind.values:
        raise ApiError(422, f"must be one of {', '.join(BulkActionKind.values)}", "action")
    if "params_patch" in data and not isinstance(data["params_patch"], dict):  # null is not "left out"
        raise ApiError(422, 'must be a JSON object: {"set": {...}, "replace": {...}, "remove": [...]}',
                       "params_patch")
    _check_action(request, action, edits_params="params_patch" in data)
    given = data.get("filter", {})
    if (
        not isinstance(given, dict)
        or set(given) - FILTER_FIELDS
        or not all(isinstance(v, str) for v in given.values())
    ):
        raise ApiError(
            422, f"must be an object of text values named {', '.join(sorted(FILTER_FIELDS))}", "filter"
        )
    if given.get("kind") and given["kind"] not in KINDS:
        raise ApiError(422, f"kind must be a report kind: {', '.join(sorted(KINDS))}", "filter")
    reason = data.get("reason", "")
    if not isinstance(reason, str) or len(reason) > REASON_MAX:
        raise ApiError(422, f"must be text of at most {REASON_MAX} characters", "reason")
    rate = data.get("rate_per_second", 0.0)
    if "rate_per_second" in data and (isinstance(rate, bool) or not isinstance(rate, int | float)):
        raise ApiError(422, "must be a number (items per second)", "rate_per_second")
    for name in ("dry_run", "include_superseded"):
        if not isinstance(data.get(name, False), bool):
            raise ApiError(422, "must be true or false", name)
    try:
        plan = _plan(data, action)
        selection = build_selection(action=action, scope=SCOPE_FILTER, filter_qs=urlencode(given),
                                    include_superseded=data.get("include_superseded", False))
        if data.get("dry_run"):
            preview = preview_bulk_action(selection=selection)
            if plan["canary"]:
                check_canary_fits(plan["canary"], preview.count)
            return JsonResponse({"dry_run": True, "count": preview.count, "superseded": preview.superseded,
                                 **_patch_preview(request, data, selection)})
        waits = {"kind": data["after_breaker_of"]} if "after_breaker_of" in data else {}
        bulk, _ = (start_after_breaker if waits else start_bulk_action)(
            **waits,
            selection=selection,
            actor=request.api_client.actor,
            ip_address=client_ip(request),
            reason=reason,
            rate_per_second=data.get("rate_per_second"),
            source="api",
            params_patch=data.get("params_patch"),
            **plan,
        )
    except BulkRequestConflict as exc:
        raise ApiError(409, str(exc), exc.field) from None
    except InvalidBulkRequest as exc:
        raise ApiError(422, str(exc), "filter" if exc.field == "filter_qs" else exc.field) from None
    except ReasonRequired as exc:
        raise ApiError(422, str(exc), "reason") from None
    response = JsonResponse(bulk_status_body(bulk, can_see=request.api_client.can_see_params), status=202)
    response["Location"] = reverse("api:bulk-status", args=[bulk.public_id])
    return response


@api_endpoint(methods=("GET",), scope=ApiScope.OPERATOR, permission="deadletters.view_bulkaction")
def bulk_status(request, bulk_id):
    return JsonResponse(bulk_status_body(_bulk_or_404(bulk_id), can_see=request.api_client.can_see_params))


def _control(change):
    @api_endpoint(methods=("POST",), scope=ApiScope.OPERATOR, permission=BULK_PERMISSION)
    def view(request, bulk_id):
        bulk = _bulk_or_404(bulk_id)
        _check_action(request, bulk.action)
        data = read_json_object(
            request, allowed={"rate_per_second"} if change is change_bulk_rate else set(), required=False
        )
        who = {"actor": request.api_client.actor, "ip_address": client_ip(request)}
        try:
            if change is change_bulk_rate:
                bulk = change(bulk_id=bulk.pk, rate_per_second=data.get("rate_per_second"), **who)
            else:
                bulk = change(bulk_id=bulk.pk, **who)
        except BulkStateConflict as exc:
            raise ApiError(409, str(exc)) from None
        except InvalidBulkRequest as exc:
            raise ApiError(422, str(exc), "rate_per_second") from None
        return JsonResponse(bulk_status_body(bulk, can_see=request.api_client.can_see_params))

    view.__name__ = change.__name__
    return view


bulk_pause = _control(pause_bulk_action)
bulk_resume = _control(resume_bulk_action)
bulk_cancel = _control(cancel_bulk_action)
bulk_rate = _control(change_bulk_rate)
