"""GET /report/dead-letters/groups: the dead-letter list's letters grouped by cause (fingerprint),
biggest first, each with its deaths per hour over 24 h and its trend (deadletters.selectors.trends).
GET/PUT/DELETE /report/cause/<fingerprint>/note: a cause's runbook note (see api/openapi/groups.py).

The filters and the scope are the list's (api/dead_letters.py): a token without `operator` sees
only causes of its own tasks' letters, and counts, samples and deaths only among those."""

from django.http import JsonResponse
from django.utils import timezone

from api.auth import api_endpoint
from api.dead_letters import letter_filters
from api.errors import ApiError
from api.request_body import iso, read_json_object
from deadletters.alerts.causes import new_causes
from deadletters.audit import client_ip
from deadletters.links import fingerprint_url
from deadletters.models import CauseState
from deadletters.selectors.cause_notes import cause_note
from deadletters.selectors.causes import cause_lifecycles
from deadletters.selectors.letters import GROUPS_LIMIT, client_fingerprint_groups, message_preview
from deadletters.selectors.trends import sparkline_start
from deadletters.services.cause_notes import FINGERPRINT, cause_note_save
from reports.errors import InvalidParams
from reports.models import ApiScope

GROUPS_QUERY = {"kind", "fingerprint", "q"}
# Reading a note is reading dead letters; writing one is what muting a cause's alerts needs.
NOTE_PERMISSIONS = {"GET": "deadletters.view_deadletter", "PUT": "deadletters.replay_deadletter",
                    "DELETE": "deadletters.replay_deadletter"}


@api_endpoint(methods=("GET",), scope=ApiScope.READ, permission="deadletters.view_deadletter")
def dead_letter_groups(request):
    filters = letter_filters(request, allowed=GROUPS_QUERY)
    now = timezone.now()
    # One more than shown, so `limited` is true only when there really are more.
    groups = client_fingerprint_groups(
        **filters, owner=request.api_client.owner_filter, limit=GROUPS_LIMIT + 1, now=now
    )
    limited, groups = len(groups) > GROUPS_LIMIT, groups[:GROUPS_LIMIT]
    new = new_causes(group.fingerprint for group in groups)
    # What the site did about each cause is an operator's business, not a client's.
    operator = request.api_client.owner_filter is None
    lifecycles = cause_lifecycles(group.fingerprint for group in groups) if operator else {}
    results = [
        {
            "fingerprint": group.fingerprint,
            "error_type": group.error_type,
            "sample_message": message_preview(group.sample_message),
            "count": group.count,
            "kinds": group.kinds,
            "first_seen": iso(group.first_seen),
            "last_seen": iso(group.last_seen),
            "new": group.fingerprint in new,
            "new_release": new.get(group.fingerprint) or None,
            "deaths_24h": list(group.trend.deaths_24h),
            "trend": group.trend.trend,
            "console_url": fingerprint_url(group.fingerprint),
            "releases": lifecycles[group.fingerprint]["releases"] if operator else None,
            "fixed": lifecycles[group.fingerprint]["fixed"] if operator else None,
        }
        for group in groups
    ]
    return JsonResponse(
        {
            "results": results,
            "limited": limited,
            "deaths_24h_start": iso(sparkline_start(now)),
        }
    )


@api_endpoint(methods=("GET", "PUT", "DELETE"), scope=ApiScope.OPERATOR, permission=NOTE_PERMISSIONS)
def cause_note_view(request, fingerprint):
    if not FINGERPRINT.match(fingerprint):
        raise ApiError(404, "no such cause: a fingerprint is 40 lowercase hexadecimal characters")
    if request.method != "GET":
        data = read_json_object(request, allowed={"text", "links"}) if request.method == "PUT" else {}
        try:
            cause_note_save(fingerprint=fingerprint, texts=data.get("text", {}), links=data.get("links", []),
                            actor=request.api_client.actor, source="api", ip_address=client_ip(request))
        except InvalidParams as exc:
            raise ApiError(422, exc.message, exc.field) from None
        except CauseState.DoesNotExist:
            pass  # answered below
    note = cause_note(fingerprint)
    if note is None:
        raise ApiError(404, "no dead letter ever had this fingerprint")
    return JsonResponse({"fingerprint": fingerprint, "text": note.texts, "links": note.links,
                         "updated_by": note.updated_by or None, "updated_at": iso(note.updated_at)})
