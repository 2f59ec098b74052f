"""Live tasks: the Running view (elapsed time, worker, attempt, stop) and the Retrying view (next
retry, last error, retry now, cancel), each polled by htmx every 2 s, and the three controls they
post to. Nothing here writes to the database itself: deadletters.services.task_controls does,
each control a conditional change that answers a clear 409 when the task moved on meanwhile."""

import uuid

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy
from django.views.decorators.http import require_POST

from console.access import REPLAY_PERMISSION, TASK_VIEW_PERMISSION, console_view
from console.labels import label
from console.views.common import actor, render_conflict, wants_partial
from deadletters.audit import REASON_MAX, client_ip
from deadletters.services.task_controls import task_cancel, task_retry_now, task_stop
from reports.models import AttemptOutcome, ReportTask, TaskAttempt, TaskStatus
from reports.selectors import task_by_public_id
from reports.services.controls import STOP_CHOICES, STOP_THEN_RETRY, TaskNotControllable

CONTROL_PERMISSION = REPLAY_PERMISSION
LIVE_ROWS = 200


def _running_rows() -> list[dict]:
    running = ReportTask.objects.filter(status=TaskStatus.RUNNING).order_by("started_at", "pk")
    tasks = list(running[:LIVE_ROWS])
    workers = dict(
        TaskAttempt.objects.filter(task_id__in=[t.pk for t in tasks], outcome=AttemptOutcome.RUNNING)
        .values_list("task_id", "worker")
    )
    now = timezone.now()
    return [
        {
            "task": task,
            "worker": workers.get(task.pk, ""),
            "elapsed": int((now - task.started_at).total_seconds()) if task.started_at else None,
        }
        for task in tasks
    ]


@console_view(TASK_VIEW_PERMISSION)
def running_list(request):
    context = {"rows": _running_rows(), "limit": LIVE_ROWS}
    if wants_partial(request):
        return render(request, "console/_running_rows.html", context)
    return render(request, "console/running.html", context)


@console_view(TASK_VIEW_PERMISSION)
def retrying_list(request):
    tasks = ReportTask.objects.filter(status=TaskStatus.RETRYING).order_by("next_retry_at", "pk")[:LIVE_ROWS]
    context = {"tasks": list(tasks), "limit": LIVE_ROWS, "now": timezone.now()}
    if wants_partial(request):
        return render(request, "console/_retrying_rows.html", context)
    return render(request, "console/retrying.html", context)


def _back(request, task: ReportTask):
    """Back where the operator pressed the button (a same-site path only), else the task's page."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return redirect(target)
    return redirect(reverse("console:task-detail", args=[task.public_id]))


# Per control: the page title when nothing was done, and the message when it was.
_NOT_DONE = {
    "cancelled": pgettext_lazy("page title", "Not cancelled"),
    "retried now": pgettext_lazy("page title", "Not retried"),
    "stopped": pgettext_lazy("page title", "Not stopped"),
}
_DONE = {
    "cancelled": gettext_lazy("Task %(id)s: cancelled; it is now %(status)s."),
    "retried now": gettext_lazy("Task %(id)s: retried now; it is now %(status)s."),
    "stopped": gettext_lazy("Task %(id)s: stopped; it is now %(status)s."),
}


def _control(request, public_id: uuid.UUID, verb: str, act):
    task = task_by_public_id(public_id)
    if task is None:
        raise Http404(_("No task with this id."))
    reason = request.POST.get("reason", "").replace("\x00", "").strip()[:REASON_MAX]
    try:
        done = act(task, reason=reason, actor=actor(request), source="console", ip_address=client_ip(request))
    except TaskNotControllable as exc:
        return render_conflict(request, title=_NOT_DONE[verb], message=str(exc), task=exc.task)
    messages.success(request,
                     _DONE[verb] % {"id": str(task.public_id)[:8], "status": label(done.task.status)})
    return _back(request, task)


@require_POST
@console_view(CONTROL_PERMISSION)
def cancel(request, public_id: uuid.UUID):
    return _control(request, public_id, "cancelled", lambda task, **who: task_cancel(task_id=task.pk, **who))


@require_POST
@console_view(CONTROL_PERMISSION)
def retry_now(request, public_id: uuid.UUID):
    return _control(request, public_id, "retried now",
                    lambda task, **who: task_retry_now(task_id=task.pk, **who))


@require_POST
@console_view(CONTROL_PERMISSION)
def stop(request, public_id: uuid.UUID):
    """Asks first (the row's button posts without `confirmed`): what then, retrying by default."""
    then = request.POST.get("then", STOP_THEN_RETRY)
    raw_attempt = request.POST.get("attempt", "")
    if then not in STOP_CHOICES or not raw_attempt.isdigit() or len(raw_attempt) > 7:
        return render_conflict(
            request, title=_NOT_DONE["stopped"], message=_("The stop form was not valid."), status=400
        )
    if request.POST.get("confirmed") != "yes":
        task = task_by_public_id(public_id)
        if task is None:
            raise Http404(_("No task with this id."))
        back = request.POST.get("next", "")
        if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
            back = reverse("console:task-detail", args=[task.public_id])
        context = {"task": task, "attempt": int(raw_attempt), "then": then, "next": back}
        return render(request, "console/stop_confirm.html", context)
    return _control(
        request,
        public_id,
        "stopped",
        lambda task, **who: task_stop(task_id=task.pk, attempt=int(raw_attempt), then=then, **who),
    )
