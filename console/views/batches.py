"""Batches: the list with live progress bars (polled by htmx), one batch's tasks, and the way to
replay every dead task of a batch (the bulk preview, filtered by the batch)."""

from django.db.models import Count
from django.http import Http404
from django.shortcuts import render
from django_htmx.http import HttpResponseStopPolling

from console.access import BATCH_VIEW_PERMISSION, REPLAY_PERMISSION, console_view
from reports.models import BatchStatus, ReportBatch
from reports.services.batches import batch_progress
from reports.services.pausing import paused_kinds

LIST_LIMIT = 50
DETAIL_TASKS = 200


def _batch_or_404(public_id) -> ReportBatch:
    batch = ReportBatch.objects.filter(public_id=public_id).first()
    if batch is None:
        raise Http404("no such batch")
    return batch


def _bar_segments(progress) -> dict:
    """Where the done, dead and running parts of the bar start and how wide they are (percent of
    the batch); what is left of the bar is pending."""
    total = progress.total or 1
    widths = {name: round(getattr(progress, name) * 100 / total, 2) for name in ("done", "dead", "running")}
    return {
        **widths,
        "dead_x": widths["done"],
        "running_x": round(widths["done"] + widths["dead"], 2),
    }


def _progress_context(batch: ReportBatch) -> dict:
    progress = batch_progress(batch=batch)
    return {"batch": batch, "progress": progress, "bar": _bar_segments(progress)}


@console_view(BATCH_VIEW_PERMISSION)
def batch_list(request):
    status = request.GET.get("status", "")
    batches = ReportBatch.objects.order_by("-created_at", "-id")
    if status in BatchStatus.values:
        batches = batches.filter(status=status)
    rows = [_progress_context(batch) for batch in batches[:LIST_LIMIT]]
    return render(
        request,
        "console/batch_list.html",
        {"rows": rows, "status": status, "statuses": BatchStatus.values, "limit": LIST_LIMIT},
    )


@console_view(BATCH_VIEW_PERMISSION)
def batch_detail(request, public_id):
    batch = _batch_or_404(public_id)
    tasks = batch.tasks.order_by("pk").only(
        "public_id",
        "kind",
        "status",
        "priority",
        "attempt",
        "max_attempts",
        "attempts_before_run",
        "last_error",
        "finished_at",
    )[:DETAIL_TASKS]
    kinds = dict(batch.tasks.order_by().values_list("kind").annotate(n=Count("id")).values_list("kind", "n"))
    return render(
        request,
        "console/batch_detail.html",
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
    response = render(request, "console/_batch_progress.html", _progress_context(batch))
    if batch.status == BatchStatus.COMPLETED and request.htmx:
        stop = HttpResponseStopPolling(response.content)
        stop["Content-Type"] = response["Content-Type"]
        return stop
    return response
