"""Bulk actions: preview (a dry run from the list's bulk bar), start, the list of runs, one run's
live progress, pause / resume / cancel, and a running action's rate. The work is deadletters.bulk."""

import uuid

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from console import labels
from console.access import BULK_VIEW_PERMISSION, REPLAY_EDIT_PERMISSION, console_view
from console.forms import ReasonForm
from console.refusals import bulk_conflict, bulk_request_refusal
from console.views.bulk_plans import field_message, patch_context, plan_from_form, zone_context
from console.views.common import actor, filter_values, pretty_json, render_conflict, sees_params
from deadletters.audit import REASON_MAX, ReasonRequired, client_ip
from deadletters.bulk.canary import canary_view
from deadletters.bulk.control import (
    FINISHED_STATUSES,
    BulkStateConflict,
    cancel_bulk_action,
    change_bulk_rate,
    pause_bulk_action,
    resume_bulk_action,
    start_bulk_action,
    validate_rate,
    validate_threshold,
)
from deadletters.bulk.selection import (
    SCOPE_FILTER,
    SCOPE_SELECTED,
    InvalidBulkRequest,
    build_selection,
    preview_bulk_action,
    selection_of,
)
from deadletters.bulk.watch import died_again_causes, replay_outcome, replay_outcome_by_cause
from deadletters.filters import InvalidFilter
from deadletters.models import BulkAction, BulkActionKind, BulkActionStatus, permission_for
from reports.kinds.masking import patch_for_display


def _list_url(filter_qs: str) -> str:
    url = reverse("console:deadletter-list")
    return f"{url}?{filter_qs}" if filter_qs else url


def _bulk_request(request):
    """Validate the posted action/scope/ids/filter and check the action's permission. A GET (the
    link of a cause: ?action=replay&fingerprint=...) is everything matching the other parameters."""
    data = request.POST
    if request.method == "GET":
        filters = request.GET.copy()
        filters.pop("action", None)
        include = filters.pop("include_superseded", [""])[-1]
        data = {"action": request.GET.get("action", ""), "scope": SCOPE_FILTER,
                "include_superseded": include, "filter_qs": filters.urlencode()}
    action = data.get("action", "")
    if action in BulkActionKind.values:
        _require_permission(request, action)
    if request.POST.get("params_patch", "").strip() and not request.user.has_perm(REPLAY_EDIT_PERMISSION):
        raise PermissionDenied(_("You may not replay dead letters with edited params."))
    filter_qs = data.get("filter_qs", "")
    selection = build_selection(
        action=action,
        scope=data.get("scope", ""),
        ids=request.POST.getlist("ids"),
        filter_qs=filter_qs,
        max_id=data.get("max_id"),
        include_superseded=data.get("include_superseded") == "1",
    )
    return selection, filter_qs


def _require_permission(request, action: str) -> None:
    if not request.user.has_perm(permission_for(action)):
        raise PermissionDenied(_("You may not %(verb)s dead letters.") % {"verb": labels.verb(action)})


def _scope_wording(selection) -> dict:
    """What the preview says it will touch, in the same terms as what it will touch: the statuses
    this action applies to, narrowed by the filter's own status, and the filter's other conditions."""
    eligible = [labels.label(s) for s in selection.statuses]
    if selection.filters is None:
        return {"statuses": _or(eligible), "eligible": _or(eligible), "conditions": [], "listed_status": ""}
    listed = selection.filters.status
    statuses = eligible if listed == "all" else [labels.label(s) for s in selection.statuses if s == listed]
    conditions = [f"{label} {value}" for _name, label, value in filter_values(selection.filters)]
    return {
        "statuses": _or(statuses),
        "eligible": _or(eligible),
        "conditions": conditions,
        "listed_status": listed,
    }


def _or(words: list[str]) -> str:
    if len(words) < 2:
        return "".join(words)
    return _("%(some)s or %(last)s") % {"some": _(", ").join(words[:-1]), "last": words[-1]}


def _render_preview(request, selection, filter_qs, *, errors=None):
    preview = preview_bulk_action(selection=selection)
    errors = errors or {}
    patch = patch_context(request, selection, errors)
    return render(
        request,
        "console/bulk_preview.html",
        {
            "preview": preview,
            "selection": selection,
            "filter_qs": filter_qs,
            "list_url": _list_url(filter_qs),
            "request_token": request.POST.get("request_token") or str(uuid.uuid4()),
            "reason": request.POST.get("reason", "")[:REASON_MAX],
            "rate": request.POST.get("rate_per_second") or settings.BULK_ACTION_RATE_PER_SECOND,
            "threshold": request.POST.get("pause_threshold") or settings.BULK_REPLAY_PAUSE_THRESHOLD,
            "max_rate": settings.BULK_ACTION_MAX_RATE,
            "min_sample": settings.BULK_REPLAY_PAUSE_MIN_SAMPLE,
            "canary": request.POST.get("canary", "")[:12],
            "canary_success": request.POST.get("canary_success") or settings.BULK_CANARY_SUCCESS,
            "canary_wait_minutes": max(1, round(settings.BULK_CANARY_WAIT_SECONDS / 60)),
            "start_at": request.POST.get("start_at", "")[:32],
            **zone_context(),
            **patch,
            "errors": errors,
            "is_selection": selection.scope == SCOPE_SELECTED,
            "scope": _scope_wording(selection),
            "not_eligible": len(selection.ids) - preview.count if selection.scope == SCOPE_SELECTED else 0,
        },
        status=400 if errors else 200,
    )


def _bulk_refused(request, exc: InvalidBulkRequest):
    return render_conflict(
        request,
        title=_("Bulk action not started"),
        message=bulk_request_refusal(exc) + _("."),
        back_url=_list_url(request.POST.get("filter_qs", "")),
        status=400,
    )


@require_http_methods(["GET", "POST"])
@console_view(BULK_VIEW_PERMISSION)
def bulk_preview(request):
    """Dry run from the list's bulk bar, a cause's buttons or an alert's link (a GET that changes
    nothing): count, a sample, reason and rate, and a confirm button."""
    try:
        selection, filter_qs = _bulk_request(request)
    except InvalidBulkRequest as exc:
        return _bulk_refused(request, exc)
    return _render_preview(request, selection, filter_qs)


@require_POST
@console_view(BULK_VIEW_PERMISSION)
def bulk_start(request):
    try:
        selection, filter_qs = _bulk_request(request)
    except InvalidBulkRequest as exc:
        return _bulk_refused(request, exc)
    form = ReasonForm(request.POST)
    errors = {}
    if not form.is_valid():
        errors["reason"] = _("at most %(max)d characters") % {"max": REASON_MAX}
    try:
        rate = validate_rate(request.POST.get("rate_per_second"))
        threshold = validate_threshold(request.POST.get("pause_threshold"))
    except InvalidBulkRequest as exc:
        errors[exc.field] = field_message(exc)
    plan, plan_errors = plan_from_form(request.POST, selection.action)
    errors.update(plan_errors)
    if errors:
        return _render_preview(request, selection, filter_qs, errors=errors)
    try:
        bulk, created = start_bulk_action(
            selection=selection,
            actor=actor(request),
            ip_address=client_ip(request),
            reason=form.cleaned_data["reason"],
            rate_per_second=rate,
            pause_threshold=threshold,
            request_token=request.POST.get("request_token"),
            params_patch=request.POST.get("params_patch", "").strip(),
            **plan,
        )
    except ReasonRequired:
        errors = {"reason": _("a reason is required: say why")}
        return _render_preview(request, selection, filter_qs, errors=errors)
    except InvalidBulkRequest as exc:  # a canary larger than the selection, a time gone by, a bad patch
        return _render_preview(request, selection, filter_qs, errors={exc.field: field_message(exc)})
    if created and bulk.status == BulkActionStatus.SCHEDULED:
        messages.success(
            request,
            ngettext(
                "Bulk %(action)s of %(n)d dead letter scheduled for %(when)s.",
                "Bulk %(action)s of %(n)d dead letters scheduled for %(when)s.",
                bulk.total,
            )
            % {"action": labels.label(bulk.action), "n": bulk.total, "when": _local(bulk.start_at)},
        )
    elif created:
        messages.success(
            request,
            ngettext(
                "Bulk %(action)s of %(n)d dead letter started.",
                "Bulk %(action)s of %(n)d dead letters started.",
                bulk.total,
            )
            % {"action": labels.label(bulk.action), "n": bulk.total},
        )
    else:
        messages.info(request, _("This bulk action was already started (the form was sent twice)."))
    return redirect("console:bulk-detail", public_id=bulk.public_id)


def _local(moment) -> str:
    return f"{timezone.localtime(moment):%Y-%m-%d %H:%M:%S} ({zone_context()['zone_offset']})"


@require_http_methods(["GET"])
@console_view(BULK_VIEW_PERMISSION)
def bulk_list(request):
    """Every bulk run, newest first; `state=scheduled` lists those waiting for their time, soonest first."""
    state = request.GET.get("state", "")
    if state not in ("", *BulkActionStatus.values):
        return render_conflict(
            request,
            title=_("No such list"),
            message=_("state must be one of %(states)s.") % {"states": ", ".join(BulkActionStatus.values)},
            back_url=reverse("console:bulk-list"),
            status=400,
        )
    runs = BulkAction.objects.all()
    if state:
        runs = runs.filter(status=state)
    if state == BulkActionStatus.SCHEDULED:
        runs = runs.order_by("start_at", "pk")
    page = Paginator(runs, settings.CONSOLE_PAGE_SIZE).get_page(request.GET.get("page"))
    scheduled = BulkAction.objects.filter(status=BulkActionStatus.SCHEDULED).count()
    return render(
        request,
        "console/bulk_list.html",
        {"page": page, "state": state, "scheduled_count": scheduled,
         "zone_offset": zone_context()["zone_offset"]},
    )


def _bulk_context(bulk: BulkAction, *, can_see: bool) -> dict:
    """The run's progress and, for a replay, what its replays led to. The run itself completes in
    seconds; its tasks settle later, so the page keeps following them until each is done or dead."""
    finished = bulk.status in FINISHED_STATUSES
    outcome = replay_outcome(bulk) if bulk.action == BulkActionKind.REPLAY else None
    settled = outcome is None or outcome.finished >= outcome.replayed
    by_cause, by_cause_limited = (
        replay_outcome_by_cause(bulk) if outcome and outcome.replayed else ([], False)
    )
    return {
        "bulk": bulk,
        "finished": finished,
        "settled": settled,
        "polling": not (finished and settled),
        "percent": 100 if bulk.status == "completed" else bulk.percent,
        "outcome": outcome,
        "replays_done": outcome.finished - outcome.died_again if outcome else 0,
        "replays_unfinished": outcome.replayed - outcome.finished if outcome else 0,
        "died_again_causes": died_again_causes(bulk) if outcome and outcome.died_again else [],
        "outcome_by_cause": by_cause,
        "outcome_by_cause_limited": by_cause_limited,
        "canary": canary_view(bulk),
        "zone_offset": zone_context()["zone_offset"],
        "patch_json": pretty_json(patch_for_display(bulk.params_patch, can_see=can_see))
        if bulk.params_patch else "",
    }


@require_http_methods(["GET"])
@console_view(BULK_VIEW_PERMISSION)
def bulk_detail(request, public_id):
    bulk = get_object_or_404(BulkAction, public_id=public_id)
    context = _bulk_context(bulk, can_see=sees_params(request))
    context["can_act"] = request.user.has_perm(permission_for(bulk.action))
    context["max_rate"] = settings.BULK_ACTION_MAX_RATE
    if request.htmx and not request.htmx.boosted:
        response = render(request, "console/_bulk_progress.html", context)
        if not context["polling"]:
            # The final state is swapped in, and htmx stops polling.
            return HttpResponseStopPolling(response.content)
        return response
    if bulk.selected_ids is None:
        try:
            context["scope"] = _scope_wording(selection_of(bulk))
        except InvalidFilter:  # written by an older version: shown as stored
            stored = bulk.filters.get("filter") or {}
            context["scope"] = {"conditions": [f"{k}={v}" for k, v in stored.items()]}
    return render(request, "console/bulk_detail.html", context)


_DONE = {
    "paused": gettext_lazy("Bulk %(action)s paused."),
    "resumed": gettext_lazy("Bulk %(action)s resumed."),
    "cancelled": gettext_lazy("Bulk %(action)s cancelled."),
}


def _bulk_operator_action(request, public_id, service, done: str, verb: str):
    bulk = get_object_or_404(BulkAction, public_id=public_id)
    _require_permission(request, bulk.action)
    try:
        service(bulk_id=bulk.pk, actor=actor(request), ip_address=client_ip(request))
    except BulkStateConflict as exc:
        messages.warning(request, _("Nothing done: %(why)s.") % {"why": bulk_conflict(exc, verb)})
    else:
        messages.success(request, _DONE[done] % {"action": labels.label(bulk.action)})
    # Cancelled from the Scheduled list, or from the letter a scheduled replay was made for.
    back = request.POST.get("back")
    if back == "scheduled":
        return redirect(f"{reverse('console:bulk-list')}?state=scheduled")
    if back == "letter" and bulk.selected_ids and len(bulk.selected_ids) == 1:
        return redirect("console:deadletter-detail", letter_id=bulk.selected_ids[0])
    return redirect("console:bulk-detail", public_id=bulk.public_id)


@require_POST
@console_view(BULK_VIEW_PERMISSION)
def bulk_pause(request, public_id):
    return _bulk_operator_action(request, public_id, pause_bulk_action, "paused", "pause")


@require_POST
@console_view(BULK_VIEW_PERMISSION)
def bulk_resume(request, public_id):
    return _bulk_operator_action(request, public_id, resume_bulk_action, "resumed", "resume")


@require_POST
@console_view(BULK_VIEW_PERMISSION)
def bulk_cancel(request, public_id):
    return _bulk_operator_action(request, public_id, cancel_bulk_action, "cancelled", "cancel")


@require_POST
@console_view(BULK_VIEW_PERMISSION)
def bulk_rate(request, public_id):
    """Change a pending, running or paused bulk's rate (audited); the runner follows within a second."""
    bulk = get_object_or_404(BulkAction, public_id=public_id)
    _require_permission(request, bulk.action)
    detail_url = reverse("console:bulk-detail", args=[bulk.public_id])
    try:
        bulk = change_bulk_rate(
            bulk_id=bulk.pk,
            rate_per_second=request.POST.get("rate_per_second", ""),
            actor=actor(request),
            ip_address=client_ip(request),
        )
    except InvalidBulkRequest as exc:
        return render_conflict(
            request,
            title=_("Rate not changed"),
            message=bulk_request_refusal(exc) + _("."),
            back_url=detail_url,
            status=400,
        )
    except BulkStateConflict as exc:
        messages.warning(request, _("Nothing done: %(why)s.") % {"why": bulk_conflict(exc, "rate")})
    else:
        messages.success(
            request,
            _("Bulk %(action)s now runs at %(rate)s per second.")
            % {"action": labels.label(bulk.action), "rate": f"{bulk.rate_per_second:g}"},
        )
    return redirect(detail_url)
