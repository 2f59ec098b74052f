"""Console pages for batches (progress counted from task rows, polled by htmx) and for pausing
and resuming report kinds."""

from django.conf import settings
from django.contrib import messages
from django.db.models import Count
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseStopPolling

from deadletters.views.access import REPLAY_PERMISSION, console_view
from reports.batches import batch_progress
from reports.errors import InvalidParams
from reports.kinds import KINDS
from reports.models import BatchStatus, ReportBatch, ReportTask, TaskStatus
from reports.pausing import KindNotPaused, pause_kind, paused_kinds, resume_kind

BATCH_VIEW_PERMISSION = "reports.view_reportbatch"
LIST_LIMIT = 50
DETAIL_TASKS = 200
REASON_MAX = 2000


def _batch_or_404(public_id) -> ReportBatch:
    batch = ReportBatch.objects.filter(public_id=public_id).first()
    if batch is None:
        raise Http404("no such batch")
    return batch


def _progress_context(batch: ReportBatch) -> dict:
    return {"batch": batch, "progress": batch_progress(batch=batch)}


def _actor(request) -> str:
    return request.user.get_username()


@console_view(BATCH_VIEW_PERMISSION)
def batch_list(request):
    status = request.GET.get("status", "")
    batches = ReportBatch.objects.order_by("-created_at", "-id")
    if status in BatchStatus.values:
        batches = batches.filter(status=status)
    rows = [_progress_context(batch) for batch in batches[:LIST_LIMIT]]
    return render(
        request,
        "deadletters/batch_list.html",
        {"rows": rows, "status": status, "statuses": BatchStatus.values, "limit": LIST_LIMIT},
    )


@console_view(BATCH_VIEW_PERMISSION)
def batch_detail(request, public_id):
    batch = _batch_or_404(public_id)
    tasks = batch.tasks.order_by("pk").only(
        "public_id", "kind", "status", "priority", "attempt", "max_attempts", "last_error", "finished_at"
    )[:DETAIL_TASKS]
    kinds = dict(batch.tasks.order_by().values_list("kind").annotate(n=Count("id")).values_list("kind", "n"))
    return render(
        request,
        "deadletters/batch_detail.html",
        {
            **_progress_context(batch),
            "tasks": tasks,
            "shown": DETAIL_TASKS,
            "kinds": kinds,
            "paused": [kind for kind in paused_kinds() if kind in kinds],
            "replay_filter_qs": f"status=open&batch={batch.public_id}",
            "can_replay": request.user.has_perm(REPLAY_PERMISSION),
        },
    )


@console_view(BATCH_VIEW_PERMISSION)
def batch_progress_partial(request, public_id):
    """The progress bar alone; htmx polls it every 2 s and stops (286) once the batch completed."""
    batch = _batch_or_404(public_id)
    response = render(request, "deadletters/_batch_progress.html", _progress_context(batch))
    if batch.status == BatchStatus.COMPLETED and request.htmx:
        stop = HttpResponseStopPolling(response.content)
        stop["Content-Type"] = response["Content-Type"]
        return stop
    return response


@console_view(BATCH_VIEW_PERMISSION)
def kind_list(request, *, error: str = "", status: int = 200):
    paused = paused_kinds()
    waiting = dict(
        ReportTask.objects.filter(status__in=(TaskStatus.PENDING, TaskStatus.RETRYING))
        .order_by()
        .values_list("kind")
        .annotate(n=Count("id"))
        .values_list("kind", "n")
    )
    rows = [
        {
            "name": name,
            "title": kind.title,
            "priority": settings.REPORT_KIND_PRIORITIES.get(name, kind.default_priority),
            "cap": settings.REPORT_KIND_CONCURRENCY.get(name),
            "waiting": waiting.get(name, 0),
            "paused": paused.get(name),
        }
        for name, kind in sorted(KINDS.items())
    ]
    return render(
        request,
        "deadletters/kinds.html",
        {"rows": rows, "can_act": request.user.has_perm(REPLAY_PERMISSION), "reason_max": REASON_MAX, "error": error},
        status=status,
    )


@require_POST
@console_view(REPLAY_PERMISSION)
def kind_pause(request, kind):
    reason = request.POST.get("reason", "").strip()
    if len(reason) > REASON_MAX:
        return kind_list(request, error=f"The reason may have at most {REASON_MAX} characters.", status=400)
    try:
        row, created = pause_kind(
            kind=kind, actor=_actor(request), reason=reason, ip_address=request.META.get("REMOTE_ADDR")
        )
    except InvalidParams:
        raise Http404("no such report kind") from None
    if created:
        messages.success(request, f"{kind} paused: its tasks wait (no attempts used) until you resume it.")
    else:
        messages.info(request, f"{kind} was already paused by {row.paused_by or 'someone'}.")
    return redirect("console:kind-list")


@require_POST
@console_view(REPLAY_PERMISSION)
def kind_resume(request, kind):
    try:
        waiting = resume_kind(kind=kind, actor=_actor(request), ip_address=request.META.get("REMOTE_ADDR"))
    except InvalidParams:
        raise Http404("no such report kind") from None
    except KindNotPaused:
        messages.info(request, f"{kind} is not paused (already resumed?).")
        return redirect("console:kind-list")
    messages.success(request, f"{kind} resumed; {waiting} waiting task(s) enqueued.")
    return redirect("console:kind-list")
