"""One cause (fingerprint): its lifecycle, marking it fixed in the next release, muting it until a
threshold. Validate -> call the service -> render JSON. See api/openapi/causes.py; a mute is
lifted as any snooze (POST /report/alerts/snooze/{id}/lift)."""

from django.http import JsonResponse

from api.alerts import FINGERPRINT_RE, snooze_json
from api.alerts import PERMISSION as MUTE_PERMISSION
from api.auth import api_endpoint
from api.errors import ApiError
from api.request_body import read_json_object
from deadletters.alerts.snooze import SnoozeError, snooze_alerts
from deadletters.audit import REASON_MAX, client_ip
from deadletters.models import permission_for
from deadletters.selectors.causes import cause_lifecycles
from deadletters.services.cause_lifecycle import CauseError, CauseNotFound, cause_mark_fixed
from reports.models import ApiScope


def _fingerprint(raw: str) -> str:
    if not FINGERPRINT_RE.match(raw):
        raise ApiError(404, "no such cause")
    return raw


def lifecycle_json(found: dict) -> dict:
    return {**found, "mute": snooze_json(found["mute"]) if found["mute"] else None}


@api_endpoint(methods=("GET",), scope=ApiScope.OPERATOR, permission="deadletters.view_deadletter")
def cause_show(request, fingerprint):
    fingerprint = _fingerprint(fingerprint)
    found = cause_lifecycles([fingerprint])[fingerprint]
    return JsonResponse({"fingerprint": fingerprint, **lifecycle_json(found)})


@api_endpoint(methods=("POST",), scope=ApiScope.OPERATOR, permission=permission_for("replay"))
def cause_fixed(request, fingerprint):
    """Marking a cause fixed replays its letters under the next release: the replay permission."""
    fingerprint = _fingerprint(fingerprint)
    undo = read_json_object(request, allowed={"undo"}, required=False).get("undo", False)
    if not isinstance(undo, bool):
        raise ApiError(422, "must be true or false", "undo")
    try:
        cause, changed = cause_mark_fixed(
            fingerprint=fingerprint, actor=request.api_client.actor, undo=undo, source="api",
            ip_address=client_ip(request),
        )
    except CauseNotFound:
        raise ApiError(404, "no such cause: no letter has died of it") from None
    except CauseError as exc:
        raise ApiError(409, str(exc), exc.field) from None
    found = cause_lifecycles([fingerprint])[fingerprint]
    return JsonResponse({"fingerprint": cause.fingerprint, "changed": changed, **lifecycle_json(found)})


@api_endpoint(methods=("POST",), scope=ApiScope.OPERATOR, permission=MUTE_PERMISSION)
def cause_mute(request, fingerprint):
    fingerprint = _fingerprint(fingerprint)
    data = read_json_object(request, allowed={"per_minute", "total", "reason"})
    if "per_minute" not in data and "total" not in data:
        raise ApiError(422, "give per_minute, total or both", "per_minute")
    reason = data.get("reason", "")
    if not isinstance(reason, str) or len(reason) > REASON_MAX:
        raise ApiError(422, f"must be text of at most {REASON_MAX} characters", "reason")
    for name in ("per_minute", "total"):
        if name in data and (isinstance(data[name], bool) or not isinstance(data[name], (int, float))):
            raise ApiError(422, "must be a whole number from 1 to 1000000", name)
    try:
        made = snooze_alerts(
            fingerprint=fingerprint, per_minute=data.get("per_minute"), total=data.get("total"),
            reason=reason, actor=request.api_client.actor, source="api", ip_address=client_ip(request),
        )
    except SnoozeError as exc:
        raise ApiError(422, str(exc), exc.field) from None
    return JsonResponse(snooze_json(made), status=201)
