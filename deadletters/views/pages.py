"""Console pages (read side): validate the query, call selectors, render a page or an htmx partial.

Nothing here writes state. Every view is wrapped in `console_view` (login, staff, permission,
never_cache). An htmx request that is not boosted gets the partial; anything else the full page.
"""

import json
import uuid
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlencode

from django.conf import settings
from django.core.cache import cache
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils import timezone
from django_htmx.http import HttpResponseStopPolling, push_url

from deadletters import selectors
from deadletters.filters import FILTER_PARAMS, InvalidFilter, parse_dead_letter_filters
from deadletters.models import AlertStatus, DeadLetterStatus
from deadletters.selectors_alerts import alert_health
from deadletters.views.access import (
    AUDIT_VIEW_PERMISSION,
    TASK_VIEW_PERMISSION,
    VIEW_PERMISSION,
    console_view,
)
from reports import selectors as report_selectors
from reports.models import ReportTask, TaskStatus

ACTIVE_TASK_STATUSES = (TaskStatus.PENDING, TaskStatus.RETRYING, TaskStatus.RUNNING)


def _wants_partial(request) -> bool:
    return bool(request.htmx) and not request.htmx.boosted


def _param(request, name: str, max_length: int) -> str:
    """A query parameter, trimmed, without NUL (PostgreSQL refuses it), at most max_length long."""
    return request.GET.get(name, "").replace("\x00", "").strip()[:max_length]


def _parse_cursor(request, notices: list[str]):
    raw = request.GET.get("cursor", "")
    if not raw:
        return None
    try:
        return selectors.Cursor.decode(raw)
    except selectors.InvalidCursor:
        notices.append("The page link was not valid (cursor ignored): showing the first page.")
        return None


def _querystring(params: dict, **overrides) -> str:
    merged = {k: v for k, v in params.items() if v not in (None, "")}
    for key, value in overrides.items():
        if value in (None, ""):
            merged.pop(key, None)
        else:
            merged[key] = value
    return urlencode(merged)


# --- dashboard ----------------------------------------------------------------


def _chart(buckets, *, width: int = 720, height: int = 120, label_every: int = 6) -> dict:
    """Geometry for an inline SVG bar chart, computed on the server (no JS chart library)."""
    peak = max((b.count for b in buckets), default=0)
    n = len(buckets) or 1
    slot = width / n
    bar_width = max(slot * 0.8, 1)
    bars = []
    for i, bucket in enumerate(buckets):
        h = 0 if not peak else max(round(bucket.count / peak * height, 1), 1.5 if bucket.count else 0)
        local = timezone.localtime(bucket.start)
        bars.append(
            {
                "x": round(i * slot, 2),
                "y": round(height - h, 2),
                "width": round(bar_width, 2),
                "height": h,
                "count": bucket.count,
                "start": local,
                "label": local.strftime("%H:%M") if n <= 48 else local.strftime("%a %H:%M"),
                "tick": i % label_every == 0,
            }
        )
    return {
        "bars": bars,
        "peak": peak,
        "total": sum(b.count for b in buckets),
        "width": width,
        "height": height,
        "first": bars[0]["start"] if bars else None,
        "last": bars[-1]["start"] if bars else None,
    }


def _dashboard_aggregates() -> dict:
    return {
        "task_counts": report_selectors.task_status_counts(),
        "letter_counts": selectors.dead_letter_status_counts(),
        "open_overview": selectors.open_letters_overview(),
        "chart_24h": _chart(selectors.deaths_per_hour(hours=24), label_every=3),
        "chart_7d": _chart(selectors.deaths_per_hour(hours=24 * 7), label_every=24),
        "top_groups": selectors.top_fingerprints(limit=8),
        "generated_at": timezone.now(),
    }


def _dashboard_context() -> dict:
    # The table-wide aggregates cost up to seconds at a million dead letters; every open
    # dashboard polls every few seconds, so they are shared for a short while. Alerts and
    # queues stay live.
    ttl = settings.CONSOLE_DASHBOARD_CACHE_SECONDS
    aggregates = (
        cache.get_or_set("console:dashboard", _dashboard_aggregates, ttl) if ttl else _dashboard_aggregates()
    )
    return {**aggregates, "alerts": _alert_health(), "rq": selectors.rq_overview()}


def _alert_health() -> dict:
    """The DingTalk outbox as the dashboard shows it (the selector copes with Redis being down)."""
    health = alert_health()
    return {
        "alerts": {s: health.alerts_by_status.get(s, 0) for s in AlertStatus.values},
        "messages": {s: health.messages_by_status.get(s, 0) for s in AlertStatus.values},
        "last_sent": {"sent_at": health.last_sent_at} if health.last_sent_at else None,
        "last_error": (
            {"last_error": health.last_error, "last_errcode": health.last_errcode, "at": health.last_error_at}
            if health.last_error
            else None
        ),
        "configured": health.configured,
        "config_error": health.config_error,
        "throttled_until": health.throttled_until,
        "sent_last_minute": health.sent_last_minute,
        "rate_per_minute": health.rate_per_minute,
        "oldest_pending_at": health.oldest_pending_at,
        "healthy": health.ok,
    }


@console_view(VIEW_PERMISSION)
def dashboard(request):
    context = _dashboard_context()
    if _wants_partial(request):
        return render(request, "deadletters/_dashboard_stats.html", context)
    return render(request, "deadletters/dashboard.html", context)


# --- dead-letter list and groups ----------------------------------------------


def _list_base_context(request) -> dict:
    if _wants_partial(request):  # the filter form is not re-rendered, so its choices are not needed
        return {"partial": True}
    return {"choices": selectors.filter_choices(), "statuses": DeadLetterStatus.values}


def _filter_error_status(request) -> int:
    # 400 for a page load; an htmx swap gets 200 because htmx does not swap 4xx answers and the
    # operator would see stale rows instead of the explanation.
    return 200 if _wants_partial(request) else 400


FILTER_LABELS = {
    "kind": "kind",
    "error_type": "error",
    "fingerprint": "cause",
    "created_from": "from",
    "created_to": "to",
    "batch": "batch",
    "q": "search",
}


def _raw_filters(querydict) -> SimpleNamespace:
    """What the operator typed, to show back in the form next to the error (never used to query)."""
    raw = {name: querydict.get(name, "").replace("\x00", "")[:200] for name in FILTER_PARAMS}
    raw["status"] = raw["status"] or "open"
    return SimpleNamespace(**raw, querystring="", is_narrowed=True)


def _active_filters(filters, **extra) -> list[dict]:
    """Removable chips for the narrowing filters, each with the querystring that drops it."""
    params = filters.as_params()
    return [
        {"label": label, "value": params[name], "without": filters.querystring(**{name: None}, **extra)}
        for name, label in FILTER_LABELS.items()
        if name in params
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
        context.update(filter_error=str(exc), filters=_raw_filters(request.GET), page=None)
        template = "deadletters/_list_rows.html" if _wants_partial(request) else "deadletters/list.html"
        return render(request, template, context, status=_filter_error_status(request))
    if request.htmx and request.GET.get("newer_than"):
        return _new_letters_banner(request, filters)
    cursor = _parse_cursor(request, notices)
    page = selectors.dead_letter_page(filters, cursor=cursor)
    count, capped = selectors.dead_letter_count(filters) if (page.items or cursor) else (0, False)
    filter_qs = filters.querystring()
    context.update(
        filters=filters,
        page=page,
        match_count=count,
        match_capped=capped,
        notices=notices,
        filter_querystring=filter_qs,
        next_querystring=filters.querystring(cursor=page.next_cursor) if page.next_cursor else "",
        prev_querystring=filters.querystring(cursor=page.prev_cursor) if page.has_prev else "",
        active_filters=_active_filters(filters),
        newer_querystring=(
            filters.querystring(
                newer_than=selectors.Cursor(page.items[0].created_at, page.items[0].id).encode()
            )
            if page.is_first and page.items and filters.sort == "newest"
            else ""
        ),
        now=timezone.now(),
    )
    if _wants_partial(request):
        # The address bar gets the canonical, shareable form (no empty params from the form).
        canonical = filters.querystring(cursor=page.cursor)
        response = render(request, "deadletters/_list_rows.html", context)
        return push_url(response, request.path + (f"?{canonical}" if canonical else ""))
    return render(request, "deadletters/list.html", context)


def _new_letters_banner(request, filters):
    """Polled from the first page: "N new dead letters since this page loaded"."""
    try:
        cursor = selectors.Cursor.decode(request.GET["newer_than"])
    except selectors.InvalidCursor:
        return HttpResponseStopPolling("")
    count, capped = selectors.newer_dead_letter_count(filters, cursor=cursor)
    context = {"new_count": count, "new_capped": capped, "filter_querystring": filters.querystring()}
    return render(request, "deadletters/_new_letters.html", context)


@console_view(VIEW_PERMISSION)
def deadletter_groups(request):
    context = _list_base_context(request)
    try:
        filters = parse_dead_letter_filters(request.GET)
    except InvalidFilter as exc:
        context.update(filter_error=str(exc), filters=_raw_filters(request.GET), groups=[], groups_view=True)
        template = "deadletters/_groups_table.html" if _wants_partial(request) else "deadletters/groups.html"
        return render(request, template, context, status=_filter_error_status(request))
    groups = selectors.fingerprint_groups(filters)
    for group in groups:
        group.list_querystring = filters.querystring(fingerprint=group.fingerprint)
    context.update(
        filters=filters,
        groups=groups,
        groups_limited=len(groups) >= 200,
        active_filters=_active_filters(filters),
        groups_view=True,
        filter_querystring=filters.querystring(),
    )
    if _wants_partial(request):
        canonical = filters.querystring()
        response = render(request, "deadletters/_groups_table.html", context)
        return push_url(response, request.path + (f"?{canonical}" if canonical else ""))
    return render(request, "deadletters/groups.html", context)


# --- dead-letter detail -------------------------------------------------------


def _pretty_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def _task_state_context(task: ReportTask, *, after_letter_id: int | None) -> dict:
    newer = selectors.newer_dead_letters_of_task(task.pk, after_id=after_letter_id) if after_letter_id else []
    return {
        "task": task,
        "newer_letters": newer,
        "after_letter_id": after_letter_id,
        "polling": task.status in ACTIVE_TASK_STATUSES,
    }


@console_view(VIEW_PERMISSION)
def deadletter_detail(request, letter_id: int):
    letter = selectors.dead_letter_for_detail(letter_id)
    if letter is None:
        raise Http404("No dead letter with this id.")
    task = letter.task
    related, related_count, related_capped = selectors.related_dead_letters(letter)
    context = {
        "letter": letter,
        "task": task,
        "params_json": _pretty_json(letter.params),
        "task_params_changed": task.params != letter.params,
        "task_params_json": _pretty_json(task.params),
        "traceback_truncated": (letter.traceback_length or 0) > len(letter.traceback_head or ""),
        "attempts": selectors.task_attempts(task),
        "alerts": selectors.alerts_for_dead_letter(letter),
        "audit": _decorate_audit(selectors.audit_for_dead_letter(letter)),
        "related": related,
        "related_count": related_count,
        "related_capped": related_capped,
        "fingerprint_querystring": parse_dead_letter_filters({"status": "all"}).querystring(
            fingerprint=letter.fingerprint
        ),
        **_task_state_context(task, after_letter_id=letter.pk),
    }
    return render(request, "deadletters/detail.html", context)


@console_view(VIEW_PERMISSION)
def deadletter_traceback(request, letter_id: int):
    letter = selectors.dead_letter_by_id(letter_id)
    if letter is None:
        raise Http404("No dead letter with this id.")
    response = HttpResponse(
        letter.traceback or "(no traceback recorded)", content_type="text/plain; charset=utf-8"
    )
    disposition = "attachment" if request.GET.get("download") else "inline"
    response["Content-Disposition"] = f'{disposition}; filename="dead-letter-{letter.pk}-traceback.txt"'
    return response


@console_view(VIEW_PERMISSION)
def task_state(request, public_id: uuid.UUID):
    """The task's current state, polled every 2 s while it is pending/retrying/running."""
    task = report_selectors.task_by_public_id(public_id)
    if task is None:
        raise Http404("No task with this id.")
    after = request.GET.get("after", "")
    after_id = int(after) if after.isdigit() and len(after) < 19 else None
    context = _task_state_context(task, after_letter_id=after_id)
    if request.htmx and not context["polling"]:
        # Terminal: htmx swaps this last state in and stops the `every 2s` trigger (status 286).
        return HttpResponseStopPolling(
            render_to_string("deadletters/_task_state.html", context, request=request)
        )
    return render(request, "deadletters/_task_state.html", context)


# --- audit log ----------------------------------------------------------------


def _decorate_audit(entries) -> list:
    """Pretty JSON for details and the params diff, rendered escaped by the templates."""
    for entry in entries:
        details = entry.details if isinstance(entry.details, dict) else {"value": entry.details}
        entry.details_json = _pretty_json(details) if details else ""
        diff = details.get("params_diff")
        entry.diff_before = entry.diff_after = None
        if isinstance(diff, dict):
            entry.diff_before = _pretty_json(diff.get("before"))
            entry.diff_after = _pretty_json(diff.get("after"))
    return entries


@console_view(AUDIT_VIEW_PERMISSION)
def audit(request):
    notices: list[str] = []
    choices = selectors.audit_choices()
    actor = _param(request, "actor", 150)
    action = _param(request, "action", 40)
    if action and action not in choices["actions"]:
        notices.append(f"No audit entries have the action {action!r}: filter ignored.")
        action = ""
    cursor = _parse_cursor(request, notices)
    page = selectors.audit_page(actor=actor, action=action, cursor=cursor)
    params = {"actor": actor, "action": action}
    context = {
        "page": page,
        "choices": choices,
        "actor": actor,
        "action": action,
        "notices": notices,
        "next_querystring": _querystring(params, cursor=page.next_cursor) if page.next_cursor else "",
        "first_querystring": _querystring(params),
        "prev_querystring": _querystring(params, cursor=page.prev_cursor) if page.has_prev else "",
        "is_filtered": bool(actor or action),
    }
    _decorate_audit(page.items)
    if _wants_partial(request):
        return render(request, "deadletters/_audit_rows.html", context)
    return render(request, "deadletters/audit.html", context)


# --- report tasks -------------------------------------------------------------


@console_view(TASK_VIEW_PERMISSION)
def task_list(request):
    notices: list[str] = []
    status = _param(request, "status", 40)
    if status and status not in TaskStatus.values:
        notices.append(f"Unknown status {status[:40]!r}: filter ignored.")
        status = ""
    kind = _param(request, "kind", 64)
    batch_raw = _param(request, "batch", 100)
    batch = None
    if batch_raw:
        try:
            batch = uuid.UUID(batch_raw)
        except ValueError:
            notices.append(f"{batch_raw[:50]!r} is not a batch id: filter ignored.")
    cursor = _parse_cursor(request, notices)
    qs = report_selectors.console_tasks(status=status, kind=kind, batch_public_id=batch)
    page = selectors.keyset_page(qs, cursor=cursor)
    params = {"status": status, "kind": kind, "batch": str(batch) if batch else ""}
    context = {
        "page": page,
        "status": status,
        "kind": kind,
        "batch": batch,
        "statuses": TaskStatus.values,
        "kinds": report_selectors.console_task_kinds(),
        "notices": notices,
        "next_querystring": _querystring(params, cursor=page.next_cursor) if page.next_cursor else "",
        "first_querystring": _querystring(params),
        "prev_querystring": _querystring(params, cursor=page.prev_cursor) if page.has_prev else "",
        "is_filtered": bool(status or kind or batch),
    }
    if _wants_partial(request):
        return render(request, "deadletters/_task_rows.html", context)
    return render(request, "deadletters/task_list.html", context)


@console_view(TASK_VIEW_PERMISSION)
def task_detail(request, public_id: uuid.UUID):
    task = report_selectors.task_by_public_id(public_id)
    if task is None:
        raise Http404("No task with this id.")
    letters = list(task.dead_letters.defer("traceback", "params").order_by("-created_at", "-id")[:50])
    context = {
        "task": task,
        "params_json": _pretty_json(task.params),
        "attempts": selectors.task_attempts(task),
        "letters": letters,
        "audit": _decorate_audit(selectors.audit_for_task(task)),
        **_task_state_context(task, after_letter_id=None),
    }
    return render(request, "deadletters/task_detail.html", context)


def _output_path(task: ReportTask) -> Path | None:
    """The task's output file inside MEDIA_ROOT, or None (missing, or a path that leaves MEDIA_ROOT)."""
    if not task.output_file or "\x00" in task.output_file:
        return None
    root = Path(settings.MEDIA_ROOT).resolve()
    try:
        path = (root / task.output_file).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    if not path.is_relative_to(root) or path == root or not path.is_file():
        return None
    return path


@console_view(TASK_VIEW_PERMISSION)
def task_output(request, public_id: uuid.UUID):
    task = report_selectors.task_by_public_id(public_id)
    if task is None or task.status != TaskStatus.DONE:
        raise Http404("This task has no output.")
    path = _output_path(task)
    if path is None:
        raise Http404("The output file is missing.")
    return FileResponse(path.open("rb"), as_attachment=True, filename=path.name)
