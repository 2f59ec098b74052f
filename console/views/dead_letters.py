"""Dead letters: the filtered list (keyset pages, "new since you looked"), the groups by cause,
and one letter's whole story (error, traceback, attempts, alerts, audit, the task's live state)."""

from types import SimpleNamespace

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django_htmx.http import HttpResponseStopPolling, push_url

from config.keyset import Cursor, InvalidCursor
from console.access import VIEW_PARAMS_PERMISSION, VIEW_PERMISSION, console_view
from console.refusals import filter_refusal
from console.traceback import parse_traceback
from console.views.audit import decorate_audit
from console.views.common import filter_values, parse_cursor, sees_params, shown_params, wants_partial
from console.views.tasks import task_state_context
from deadletters.alerts.causes import new_causes
from deadletters.bulk.schedule import scheduled_replays_of
from deadletters.filters import FILTER_PARAMS, InvalidFilter, parse_dead_letter_filters
from deadletters.models import DeadLetterStatus
from deadletters.selectors import letters as letter_selectors
from deadletters.selectors.audit import audit_for_dead_letter
from deadletters.selectors.cause_notes import cause_note, cause_notes
from deadletters.selectors.causes import cause_lifecycles
from reports.selectors import task_attempts


def _list_base_context(request) -> dict:
    if wants_partial(request):  # the filter form is not re-rendered, so its choices are not needed
        return {"partial": True}
    return {"choices": letter_selectors.filter_choices(), "statuses": DeadLetterStatus.values}


def _filter_error_status(request) -> int:
    # 400 for a page load; an htmx swap gets 200 because htmx does not swap 4xx answers and the
    # operator would see stale rows instead of the explanation.
    return 200 if wants_partial(request) else 400


def _raw_filters(querydict) -> SimpleNamespace:
    """What the operator typed, to show back in the form next to the error (never used to query)."""
    raw = {name: querydict.get(name, "").replace("\x00", "")[:200] for name in FILTER_PARAMS}
    raw["status"] = raw["status"] or "open"
    return SimpleNamespace(**raw, querystring="", is_narrowed=True)


def _active_filters(filters, **extra) -> list[dict]:
    """Removable chips for the narrowing filters, each with the querystring that drops it."""
    return [
        {"label": label, "value": value, "without": filters.querystring(**{name: None}, **extra)}
        for name, label, value in filter_values(filters)
    ]


@console_view(VIEW_PERMISSION)
def deadletter_list(request):
    if request.GET.get("view") == "groups":
        return deadletter_groups(request)
    context = _list_base_context(request)
    notices: list[str] = []
    try:
        filters = parse_dead_letter_filters(request.GET)
    except InvalidFilter as exc:
        context.update(filter_error=filter_refusal(exc), filters=_raw_filters(request.GET), page=None)
        template = "console/_list_rows.html" if wants_partial(request) else "console/list.html"
        return render(request, template, context, status=_filter_error_status(request))
    if request.htmx and request.GET.get("newer_than"):
        return _new_letters_banner(request, filters)
    cursor = parse_cursor(request, notices)
    page = letter_selectors.dead_letter_page(filters, cursor=cursor)
    count, capped = letter_selectors.dead_letter_count(filters) if (page.items or cursor) else (0, False)
    filter_qs = filters.querystring()
    context.update(
        filters=filters,
        page=page,
        match_count=count,
        match_capped=capped,
        superseded_apart=letter_selectors.superseded_apart(filters),
        notices=notices,
        filter_querystring=filter_qs,
        next_querystring=filters.querystring(cursor=page.next_cursor) if page.next_cursor else "",
        prev_querystring=filters.querystring(cursor=page.prev_cursor) if page.has_prev else "",
        active_filters=_active_filters(filters),
        # "same cause" keeps the other filters and replaces any cause filter already there.
        same_cause_querystring=filters.querystring(fingerprint=None),
        newer_querystring=(
            filters.querystring(
                newer_than=Cursor(page.items[0].created_at, page.items[0].id).encode()
            )
            if page.is_first and page.items and filters.sort == "newest"
            else ""
        ),
        now=timezone.now(),
    )
    if wants_partial(request):
        # The address bar gets the canonical, shareable form (no empty params from the form).
        canonical = filters.querystring(cursor=page.cursor)
        response = render(request, "console/_list_rows.html", context)
        return push_url(response, request.path + (f"?{canonical}" if canonical else ""))
    return render(request, "console/list.html", context)


def _new_letters_banner(request, filters):
    """Polled from the first page: "N new dead letters since this page loaded"."""
    try:
        cursor = Cursor.decode(request.GET["newer_than"])
    except InvalidCursor:
        return HttpResponseStopPolling("")
    count, capped = letter_selectors.newer_dead_letter_count(filters, cursor=cursor)
    context = {"new_count": count, "new_capped": capped, "filter_querystring": filters.querystring()}
    return render(request, "console/_new_letters.html", context)


@console_view(VIEW_PERMISSION)
def deadletter_groups(request):
    context = _list_base_context(request)
    try:
        filters = parse_dead_letter_filters(request.GET)
    except InvalidFilter as exc:
        context.update(filter_error=filter_refusal(exc), filters=_raw_filters(request.GET), groups=[],
                       groups_view=True)
        template = "console/_groups_table.html" if wants_partial(request) else "console/groups.html"
        return render(request, template, context, status=_filter_error_status(request))
    groups = letter_selectors.fingerprint_groups_with_trends(filters)
    new = new_causes(group.fingerprint for group in groups)
    notes = cause_notes(group.fingerprint for group in groups)
    lifecycles = cause_lifecycles(group.fingerprint for group in groups)
    for group in groups:
        group.list_querystring = filters.querystring(fingerprint=group.fingerprint)
        group.new_cause, group.new_release = group.fingerprint in new, new.get(group.fingerprint, "")
        group.note = notes.get(group.fingerprint)
        group.lifecycle = lifecycles[group.fingerprint]
    context.update(
        filters=filters,
        groups=groups,
        groups_limited=len(groups) >= letter_selectors.GROUPS_LIMIT,
        superseded_apart=letter_selectors.superseded_apart(filters),
        active_filters=_active_filters(filters),
        groups_view=True,
        filter_querystring=filters.querystring(),
    )
    if wants_partial(request):
        canonical = filters.querystring()
        response = render(request, "console/_groups_table.html", context)
        return push_url(response, request.path + (f"?{canonical}" if canonical else ""))
    return render(request, "console/groups.html", context)


@console_view(VIEW_PERMISSION)
def deadletter_detail(request, letter_id: int):
    letter = letter_selectors.dead_letter_for_detail(letter_id)
    if letter is None:
        raise Http404("No dead letter with this id.")
    task = letter.task
    related, related_count, related_capped = letter_selectors.related_dead_letters(letter)
    new = new_causes([letter.fingerprint])
    cause_open_count, cause_open_capped = letter_selectors.open_count_of_cause(letter.fingerprint)
    context = {
        "new_cause": letter.fingerprint in new,
        "new_release": new.get(letter.fingerprint, ""),
        "letter": letter,
        "task": task,
        "params_json": shown_params(request, letter.params, letter.kind),
        "task_params_changed": task.params != letter.params,
        "task_params_json": shown_params(request, task.params, task.kind),
        "traceback_truncated": (letter.traceback_length or 0) > len(letter.traceback_head or ""),
        "parsed_traceback": parse_traceback(letter.traceback_head or ""),
        "attempts": task_attempts(task),
        "alerts": letter_selectors.alerts_for_dead_letter(letter),
        "audit": decorate_audit(audit_for_dead_letter(letter), can_see=sees_params(request)),
        "related": related,
        "related_count": related_count,
        "related_capped": related_capped,
        "cause_open_count": cause_open_count,
        "cause_open_capped": cause_open_capped,
        "open_cause_querystring": parse_dead_letter_filters({}).querystring(fingerprint=letter.fingerprint),
        "fingerprint_querystring": parse_dead_letter_filters({"status": "all"}).querystring(
            fingerprint=letter.fingerprint
        ),
        "scheduled_replays": scheduled_replays_of(letter),
        "cause_note": cause_note(letter.fingerprint),
        "lifecycle": cause_lifecycles([letter.fingerprint])[letter.fingerprint],
        **task_state_context(task, after_letter_id=letter.pk),
    }
    return render(request, "console/detail.html", context)


@console_view((VIEW_PERMISSION, VIEW_PARAMS_PERMISSION))
def deadletter_traceback(request, letter_id: int):
    letter = letter_selectors.dead_letter_by_id(letter_id)
    if letter is None:
        raise Http404("No dead letter with this id.")
    response = HttpResponse(
        letter.traceback or "(no traceback recorded)", content_type="text/plain; charset=utf-8"
    )
    disposition = "attachment" if request.GET.get("download") else "inline"
    response["Content-Disposition"] = f'{disposition}; filename="dead-letter-{letter.pk}-traceback.txt"'
    return response
