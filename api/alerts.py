"""The alert endpoints: mute a cause or a kind, list the snoozes that run, lift one
(deadletters.alerts.snooze); how each channel delivers (deadletters.alerts.health). Validate ->
call -> render JSON. See api/openapi/alerts.py."""

import re

from django.http import JsonResponse

from api.auth import api_endpoint
from api.errors import ApiError
from api.request_body import iso, read_json_object
from deadletters.alerts.health import alert_health
from deadletters.alerts.snooze import MAX_MINUTES, SnoozeError, active_snoozes, lift_snooze, snooze_alerts
from deadletters.audit import client_ip
from reports.models import ApiScope

SNOOZE_FIELDS = {"fingerprint", "kind", "minutes", "reason"}
FINGERPRINT_RE = re.compile(r"[0-9a-f]{40}\Z")
TEXT_RE = re.compile(r"[^\x00]*\S[^\x00]*\Z", re.DOTALL)
PERMISSION = "deadletters.replay_deadletter"  # who may act on dead letters may mute their alerts
VIEW_PERMISSION = "deadletters.view_deadletter"  # who sees the dashboard sees how alerts are delivered


def snooze_json(snooze) -> dict:
    return {
        "id": snooze.pk,
        "fingerprint": snooze.fingerprint or None,
        "kind": snooze.kind or None,
        "until": iso(snooze.until),
        "reason": snooze.reason,
        "created_by": snooze.created_by,
        "created_at": iso(snooze.created_at),
        "per_minute": snooze.per_minute,
        "total": snooze.total,
        "deaths": snooze.deaths if snooze.per_minute or snooze.total else None,
    }


@api_endpoint(methods=("POST",), scope=ApiScope.OPERATOR, permission=PERMISSION)
def snooze(request):
    data = read_json_object(request, allowed=SNOOZE_FIELDS)
    # Exactly what api/openapi/alerts.py states, so whatever it calls valid is served.
    if ("fingerprint" in data) == ("kind" in data):
        raise ApiError(422, "name either a cause (fingerprint) or a kind, not both", "fingerprint")
    if "fingerprint" in data and not (
        isinstance(data["fingerprint"], str) and FINGERPRINT_RE.match(data["fingerprint"])
    ):
        raise ApiError(422, "must be 40 lowercase hexadecimal characters", "fingerprint")
    if "kind" in data and not (
        isinstance(data["kind"], str) and len(data["kind"]) <= 64 and TEXT_RE.match(data["kind"])
    ):
        raise ApiError(422, "must be a kind's name (at most 64 characters)", "kind")
    minutes = data.get("minutes")
    if isinstance(minutes, float) and minutes.is_integer():  # JSON Schema's integer: 30.0 is 30
        minutes = int(minutes)
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= MAX_MINUTES:
        raise ApiError(422, f"must be an integer from 1 to {MAX_MINUTES}", "minutes")
    if not (isinstance(data.get("reason"), str) and TEXT_RE.match(data["reason"])):
        raise ApiError(422, "say why the alerts are muted", "reason")
    try:
        made = snooze_alerts(
            fingerprint=data.get("fingerprint", ""),
            kind=data.get("kind", ""),
            minutes=minutes,
            reason=data.get("reason", ""),
            actor=request.api_client.actor,
            source="api",
            ip_address=client_ip(request),
        )
    except SnoozeError as exc:
        raise ApiError(422, str(exc), exc.field) from None
    return JsonResponse(snooze_json(made), status=201)


@api_endpoint(methods=("GET",), scope=ApiScope.OPERATOR, permission=PERMISSION)
def snoozes(request):
    return JsonResponse({"results": [snooze_json(s) for s in active_snoozes()[:500]]})


@api_endpoint(methods=("POST",), scope=ApiScope.OPERATOR, permission=PERMISSION)
def snooze_lift(request, snooze_id):
    if not str(snooze_id).isdigit() or not 0 < int(snooze_id) < 2**63:
        raise ApiError(404, "no such snooze")
    lifted = lift_snooze(
        snooze_id=int(snooze_id), actor=request.api_client.actor, source="api", ip_address=client_ip(request)
    )
    if lifted is None:
        raise ApiError(404, "no running snooze with this id (it ended, or never was)")
    return JsonResponse({"ok": True, "snooze": snooze_json(lifted)})


@api_endpoint(methods=("GET",), scope=ApiScope.OPERATOR, permission=VIEW_PERMISSION)
def channels(request):
    """Each channel by name (never its URL): failing or not, its last delivery, heartbeat, digest."""
    return JsonResponse({"results": [
        {
            "name": c.name, "type": c.type, "failing": c.failing, "failing_since": iso(c.failing_since),
            "last_errcode": c.failing_errcode, "last_error": c.failing_error or None,
            "last_sent_at": iso(c.last_sent_at), "paused": c.paused or None, "pending": c.pending,
            "failed": c.failed, "heartbeat_minutes": c.heartbeat_minutes, "pinged_at": iso(c.pinged_at),
            "daily_digest_at": c.daily_digest_at or None, "digest_day": iso(c.digest_day),
        }
        for c in alert_health().channels
    ]})
