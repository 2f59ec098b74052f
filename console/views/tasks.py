"""Report tasks: the filtered list, one task's attempts, letters and audit, its output download,
and its live state (polled by the dead-letter and task pages while a replay runs)."""

import uuid

from django.conf import settings
from django.db.models.functions import Substr
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.translation import gettext as _
from django_htmx.http import HttpResponseStopPolling

from config.keyset import keyset_page
from console.access import TASK_VIEW_PERMISSION, VIEW_PERMISSION, console_view
from console.views.audit import decorate_audit
from console.views.common import pager_context, param, parse_cursor, sees_params, shown_params, wants_partial
from deadletters.selectors.audit import audit_for_task
from deadletters.selectors.letters import newer_dead_letters_of_task
from reports.models import ReportTask, TaskStatus
from reports.outputs import open_output, output_content_type, output_filename
from reports.selectors import (
    TASK_ID_PREFIX_RE,
    task_attempts,
    task_by_public_id,
    task_kinds_seen,
    tasks_matching,
)

ACTIVE_TASK_STATUSES = (TaskStatus.PENDING, TaskStatus.RETRYING, TaskStatus.RUNNING)


def task_state_context(task: ReportTask, *, after_letter_id: int | None) -> dict:
    newer = newer_dead_letters_of_task(task.pk, after_id=after_letter_id) if after_letter_id else []
    return {
        "task": task,
        "newer_letters": newer,
        "after_letter_id": after_letter_id,
        "polling": task.status in ACTIVE_TASK_STATUSES,
        "task_url": reverse("console:task-detail", args=[task.public_id]),
    }


@console_view(VIEW_PERMISSION)
def task_state(request, public_id: uuid.UUID):
    """The task's current state, polled every 2 s while it is pending/retrying/running."""
    task = task_by_public_id(public_id)
    if task is None:
        raise Http404("No task with this id.")
    after = request.GET.get("after", "")
    after_id = int(after) if after.isdigit() and len(after) < 19 else None
    context = task_state_context(task, after_letter_id=after_id)
    # The attempts panel rides along (out of band): the state and the attempt list read the same.
    body = render_to_string("console/_task_state.html", context, request=request) + render_to_string(
        "console/_attempts.html", {"attempts": task_attempts(task), "oob": True}, request=request
    )
    if request.htmx and not context["polling"]:
        # Terminal: htmx swaps this last state in and stops the `every 2s` trigger (status 286).
        return HttpResponseStopPolling(body)
    return HttpResponse(body)


@console_view(TASK_VIEW_PERMISSION)
def task_list(request):
    notices: list[str] = []
    status = param(request, "status", 40)
    if status and status not in TaskStatus.values:
        notices.append(_("Unknown status %(status)r: filter ignored.") % {"status": status[:40]})
        status = ""
    kind = param(request, "kind", 64)
    batch_raw = param(request, "batch", 100)
    batch = None
    if batch_raw:
        try:
            batch = uuid.UUID(batch_raw)
        except ValueError:
            notices.append(_("%(value)r is not a batch id: filter ignored.") % {"value": batch_raw[:50]})
    task_id = param(request, "id", 36)
    if task_id and not TASK_ID_PREFIX_RE.match(task_id.replace("-", "").lower()):
        notices.append(_("%(value)r is not the start of a task id (4+ hex digits): filter ignored.")
                       % {"value": task_id[:36]})
        task_id = ""
    client, params_text = param(request, "client", 150), param(request, "params", 200)
    if params_text and not sees_params(request):  # a search would tell what the params hold
        notices.append(_("Searching the params needs the permission to see them: filter ignored."))
        params_text = ""
    cursor = parse_cursor(request, notices)
    # The list shows the head of each dead or retrying task's last error (the full text is on its page).
    qs = tasks_matching(
        status=status, kind=kind, batch_public_id=batch, id_prefix=task_id, client=client,
        params_text=params_text,
    ).annotate(error_head=Substr("last_error", 1, 300))
    page = keyset_page(qs, cursor=cursor, size=settings.CONSOLE_PAGE_SIZE)
    params = {
        "status": status,
        "kind": kind,
        "batch": str(batch) if batch else "",
        "id": task_id,
        "client": client,
        "params": params_text,
    }
    context = {
        "page": page,
        "status": status,
        "kind": kind,
        "batch": batch,
        "statuses": TaskStatus.values,
        "kinds": task_kinds_seen(),
        "notices": notices,
        **pager_context(page, params),
        "task_id": task_id,
        "client": client,
        "params_text": params_text,
        "is_filtered": bool(status or kind or batch or task_id or client or params_text),
    }
    if wants_partial(request):
        return render(request, "console/_task_rows.html", context)
    return render(request, "console/task_list.html", context)


@console_view(TASK_VIEW_PERMISSION)
def task_detail(request, public_id: uuid.UUID):
    task = task_by_public_id(public_id)
    if task is None:
        raise Http404("No task with this id.")
    letters = list(task.dead_letters.defer("traceback", "params").order_by("-created_at", "-id")[:50])
    context = {
        "task": task,
        "params_json": shown_params(request, task.params, task.kind),
        "attempts": task_attempts(task),
        "letters": letters,
        "audit": decorate_audit(audit_for_task(task), can_see=sees_params(request)),
        **task_state_context(task, after_letter_id=None),
    }
    return render(request, "console/task_detail.html", context)


@console_view(TASK_VIEW_PERMISSION)
def task_output(request, public_id: uuid.UUID):
    task = task_by_public_id(public_id)
    if task is None or task.status != TaskStatus.DONE:
        raise Http404("This task has no output.")
    stored = open_output(task.output_file)
    if stored is None:
        raise Http404("The output file is missing.")
    return FileResponse(
        stored,
        as_attachment=True,
        filename=output_filename(task.output_file),
        content_type=output_content_type(task.output_file),
    )
