"""Console views that change state: each validates, calls a service, and redirects or renders.

Destructive actions follow django-rq's shape: GET shows a confirmation page (the DingTalk button
opens the replay one), POST acts, then a message and a redirect. A GET never changes anything.
Nothing here writes to the database itself: deadletters.services.actions / .bulk do.
"""

import ipaddress
import json
import uuid

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from deadletters.models import BulkAction, BulkActionKind, DeadLetter
from deadletters.services import REPLAYABLE_STATUSES
from deadletters.services.actions import (
    DeadLetterConflict,
    DeadLetterNotFound,
    archive_dead_letter,
    discard_dead_letter,
    replay_conflict_details,
    replay_dead_letter,
    restore_dead_letter,
)
from deadletters.services.bulk import (
    FINISHED_STATUSES,
    SCOPE_SELECTED,
    BulkStateConflict,
    InvalidBulkRequest,
    build_selection,
    cancel_bulk_action,
    pause_bulk_action,
    preview_bulk_action,
    replay_outcome,
    resume_bulk_action,
    start_bulk_action,
    validate_rate,
    validate_threshold,
)
from deadletters.views.access import ARCHIVE_PERMISSION, REPLAY_PERMISSION, console_view
from reports.errors import InvalidParams
from reports.models import TaskStatus
from reports.services import TaskNotReplayable

BULK_VIEW_PERMISSION = "deadletters.view_bulkaction"
REASON_MAX = 2000


def permission_for(action: str) -> str:
    return REPLAY_PERMISSION if action == BulkActionKind.REPLAY else ARCHIVE_PERMISSION


def client_ip(request) -> str | None:
    """REMOTE_ADDR, or the address the N-th trusted proxy appended to X-Forwarded-For when
    CONSOLE_TRUSTED_PROXY_COUNT=N says there are proxies in front (the left end is client input)."""
    candidate = request.META.get("REMOTE_ADDR")
    proxies = settings.CONSOLE_TRUSTED_PROXY_COUNT
    if proxies:
        hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if h.strip()]
        if len(hops) >= proxies:
            candidate = hops[-proxies]
    try:
        return str(ipaddress.ip_address(candidate)) if candidate else None
    except ValueError:
        return None


def _actor(request) -> str:
    return request.user.get_username()


def _detail_url(letter_id: int) -> str:
    return reverse("console:deadletter-detail", args=[letter_id])


class ReasonForm(forms.Form):
    reason = forms.CharField(required=False, max_length=REASON_MAX, widget=forms.Textarea(attrs={"rows": 2}))


class ReplayEditForm(ReasonForm):
    params = forms.CharField(
        label="Params (JSON object)",
        max_length=1024 * 1024,
        widget=forms.Textarea(attrs={"rows": 14, "class": "mono", "spellcheck": "false"}),
    )

    def clean_params(self):
        raw = self.cleaned_data["params"]
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}") from None
        except RecursionError:
            raise forms.ValidationError("Not valid JSON: nested too deeply.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("Must be a JSON object ({...}).")
        return value


def _conflict(request, letter: DeadLetter, *, title: str, message: str, **context):
    return render(
        request,
        "deadletters/conflict.html",
        {"letter": letter, "title": title, "message": message, **context},
        status=409,
    )


def _bad_request(request, *, title: str, message: str, back_url: str):
    return render(
        request,
        "deadletters/conflict.html",
        {"title": title, "message": message, "back_url": back_url},
        status=400,
    )


def _replay_refused(request, letter: DeadLetter, exc: TaskNotReplayable):
    details = replay_conflict_details(exc)
    if exc.replayed_by and exc.replayed_by == _actor(request) and request.method == "POST":
        # The same operator's second submit (double click, browser retry): one replay happened.
        messages.info(request, f"Dead letter {letter.pk}: {details['message']}")
        return redirect(_detail_url(letter.pk))
    return _conflict(request, letter, title="Not replayed", message=details["message"], task=details["task"])


def _is_replayable(letter: DeadLetter) -> bool:
    return letter.status in REPLAYABLE_STATUSES and letter.task.status == TaskStatus.DEAD


def _not_replayable_exc(letter: DeadLetter) -> TaskNotReplayable:
    return TaskNotReplayable(letter.task, replayed_by=letter.replayed_by, replayed_at=letter.replayed_at)


def _params_json(params) -> str:
    return json.dumps(params, indent=2, sort_keys=True, ensure_ascii=False)


def _edit_context(letter: DeadLetter, form) -> dict:
    return {"letter": letter, "form": form, "params_json": _params_json(letter.params)}


# --- single letter ----------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@console_view(REPLAY_PERMISSION)
def replay(request, letter_id: int):
    """GET: what will be replayed and a confirm button. POST: replay, then back to the letter."""
    letter = get_object_or_404(DeadLetter.objects.select_related("task"), pk=letter_id)
    form = ReasonForm(request.POST if request.method == "POST" else None)
    if request.method == "GET" or not form.is_valid():
        if not _is_replayable(letter):
            return _replay_refused(request, letter, _not_replayable_exc(letter))
        return render(
            request,
            "deadletters/replay_confirm.html",
            {"letter": letter, "form": form, "params_json": _params_json(letter.params)},
            status=400 if form.is_bound else 200,
        )
    try:
        task = replay_dead_letter(
            dead_letter_id=letter.pk,
            actor=_actor(request),
            ip_address=client_ip(request),
            reason=form.cleaned_data["reason"],
        )
    except DeadLetterNotFound:
        raise Http404("No such dead letter") from None
    except TaskNotReplayable as exc:
        return _replay_refused(request, letter, exc)
    messages.success(request, f"Dead letter {letter.pk} replayed: task {task.public_id} is queued again.")
    return redirect(_detail_url(letter.pk))


@require_http_methods(["GET", "POST"])
@console_view(REPLAY_PERMISSION)
def replay_edit(request, letter_id: int):
    """Replay with edited params, validated by the report kind; the audit entry keeps the diff."""
    letter = get_object_or_404(DeadLetter.objects.select_related("task"), pk=letter_id)
    if not _is_replayable(letter):
        return _replay_refused(request, letter, _not_replayable_exc(letter))
    if request.method == "GET":
        initial = {"params": _params_json(letter.params)}
        return render(
            request,
            "deadletters/replay_edit.html",
            _edit_context(letter, ReplayEditForm(initial=initial)),
        )
    form = ReplayEditForm(request.POST)
    if form.is_valid():
        try:
            task = replay_dead_letter(
                dead_letter_id=letter.pk,
                actor=_actor(request),
                ip_address=client_ip(request),
                reason=form.cleaned_data["reason"],
                params=form.cleaned_data["params"],
            )
        except DeadLetterNotFound:
            raise Http404("No such dead letter") from None
        except TaskNotReplayable as exc:
            return _replay_refused(request, letter, exc)
        except InvalidParams as exc:
            form.add_error("params", f"{exc.field}: {exc.message}")
        else:
            messages.success(
                request,
                f"Dead letter {letter.pk} replayed with edited params: task {task.public_id} is queued again.",
            )
            return redirect(_detail_url(letter.pk))
    # Refused input: the form again with the field's error, as a 400 (nothing was changed).
    return render(request, "deadletters/replay_edit.html", _edit_context(letter, form), status=400)


def _state_change(request, letter_id: int, service, done: str):
    letter = get_object_or_404(DeadLetter, pk=letter_id)
    form = ReasonForm(request.POST)
    if not form.is_valid():
        return _bad_request(
            request,
            title=f"Not {done}",
            message=f"The reason is too long (at most {REASON_MAX} characters).",
            back_url=_detail_url(letter.pk),
        )
    try:
        service(
            dead_letter_id=letter.pk,
            actor=_actor(request),
            ip_address=client_ip(request),
            reason=form.cleaned_data["reason"],
        )
    except DeadLetterNotFound:
        raise Http404("No such dead letter") from None
    except DeadLetterConflict as exc:
        return _conflict(request, exc.letter, title=f"Not {done}", message=str(exc).capitalize() + ".")
    messages.success(request, f"Dead letter {letter.pk} {done}.")
    return redirect(_detail_url(letter.pk))


@require_POST
@console_view(ARCHIVE_PERMISSION)
def archive(request, letter_id: int):
    return _state_change(request, letter_id, archive_dead_letter, "archived")


@require_POST
@console_view(ARCHIVE_PERMISSION)
def discard(request, letter_id: int):
    return _state_change(request, letter_id, discard_dead_letter, "discarded")


@require_POST
@console_view(ARCHIVE_PERMISSION)
def restore(request, letter_id: int):
    return _state_change(request, letter_id, restore_dead_letter, "restored")


# --- bulk ----------------------------------------------------------------------------


def _list_url(filter_qs: str) -> str:
    url = reverse("console:deadletter-list")
    return f"{url}?{filter_qs}" if filter_qs else url


def _bulk_request(request):
    """Validate the posted action/scope/ids/filter and check the action's permission."""
    action = request.POST.get("action", "")
    if action in BulkActionKind.values and not request.user.has_perm(permission_for(action)):
        raise PermissionDenied(f"You may not {action} dead letters.")
    filter_qs = request.POST.get("filter_qs", "")
    selection = build_selection(
        action=action,
        scope=request.POST.get("scope", ""),
        ids=request.POST.getlist("ids"),
        filter_qs=filter_qs,
        max_id=request.POST.get("max_id"),
    )
    return selection, filter_qs


def _render_preview(request, selection, filter_qs, *, errors=None, status=200):
    preview = preview_bulk_action(selection=selection)
    return render(
        request,
        "deadletters/bulk_preview.html",
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
            "errors": errors or {},
            "is_selection": selection.scope == SCOPE_SELECTED,
        },
        status=status,
    )


def _bulk_refused(request, exc: InvalidBulkRequest):
    return _bad_request(
        request,
        title="Bulk action not started",
        message=f"{exc}.",
        back_url=_list_url(request.POST.get("filter_qs", "")),
    )


@require_POST
@console_view(BULK_VIEW_PERMISSION)
def bulk_preview(request):
    """Dry run from the list's bulk bar: count, a sample, reason and rate, and a confirm button."""
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
        errors["reason"] = f"at most {REASON_MAX} characters"
    try:
        rate = validate_rate(request.POST.get("rate_per_second"))
        threshold = validate_threshold(request.POST.get("pause_threshold"))
    except InvalidBulkRequest as exc:
        errors[exc.field] = str(exc).split(": ", 1)[1]
    if errors:
        return _render_preview(request, selection, filter_qs, errors=errors, status=400)
    bulk, created = start_bulk_action(
        selection=selection,
        actor=_actor(request),
        ip_address=client_ip(request),
        reason=form.cleaned_data["reason"],
        rate_per_second=rate,
        pause_threshold=threshold,
        request_token=request.POST.get("request_token"),
    )
    if created:
        messages.success(request, f"Bulk {bulk.action} of {bulk.total} dead letter(s) started.")
    else:
        messages.info(request, "This bulk action was already started (the form was sent twice).")
    return redirect("console:bulk-detail", public_id=bulk.public_id)


@require_http_methods(["GET"])
@console_view(BULK_VIEW_PERMISSION)
def bulk_list(request):
    page = Paginator(BulkAction.objects.all(), settings.CONSOLE_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "deadletters/bulk_list.html", {"page": page})


def _bulk_context(bulk: BulkAction) -> dict:
    finished = bulk.status in FINISHED_STATUSES
    return {
        "bulk": bulk,
        "finished": finished,
        "percent": 100 if bulk.status == "completed" else bulk.percent,
        "outcome": replay_outcome(bulk) if bulk.action == BulkActionKind.REPLAY else None,
    }


@require_http_methods(["GET"])
@console_view(BULK_VIEW_PERMISSION)
def bulk_detail(request, public_id):
    bulk = get_object_or_404(BulkAction, public_id=public_id)
    context = _bulk_context(bulk)
    context["can_act"] = request.user.has_perm(permission_for(bulk.action))
    if request.htmx and not request.htmx.boosted:
        response = render(request, "deadletters/_bulk_progress.html", context)
        if context["finished"]:
            # The final state is swapped in, and htmx stops polling.
            return HttpResponseStopPolling(response.content)
        return response
    return render(request, "deadletters/bulk_detail.html", context)


def _bulk_operator_action(request, public_id, service, done: str):
    bulk = get_object_or_404(BulkAction, public_id=public_id)
    if not request.user.has_perm(permission_for(bulk.action)):
        raise PermissionDenied(f"You may not {bulk.action} dead letters.")
    try:
        service(bulk_id=bulk.pk, actor=_actor(request), ip_address=client_ip(request))
    except BulkStateConflict as exc:
        messages.warning(request, f"Nothing done: {exc}.")
    else:
        messages.success(request, f"Bulk {bulk.action} {done}.")
    return redirect("console:bulk-detail", public_id=bulk.public_id)


@require_POST
@console_view(BULK_VIEW_PERMISSION)
def bulk_pause(request, public_id):
    return _bulk_operator_action(request, public_id, pause_bulk_action, "paused")


@require_POST
@console_view(BULK_VIEW_PERMISSION)
def bulk_resume(request, public_id):
    return _bulk_operator_action(request, public_id, resume_bulk_action, "resumed")


@require_POST
@console_view(BULK_VIEW_PERMISSION)
def bulk_cancel(request, public_id):
    return _bulk_operator_action(request, public_id, cancel_bulk_action, "cancelled")
