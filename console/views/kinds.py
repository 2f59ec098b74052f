"""Report kinds: their priority, concurrency cap and waiting tasks, pausing or resuming one while a
downstream system is down, and its circuit breaker (each audited)."""

from django.conf import settings
from django.contrib import messages
from django.db.models import Count
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from console.access import BATCH_VIEW_PERMISSION, REPLAY_PERMISSION, console_view
from console.views.charts import charts_context
from console.views.common import actor, wants_partial
from deadletters.audit import REASON_MAX, client_ip
from deadletters.services.kind_pauses import pause_kind, resume_kind, set_breaker
from reports.errors import InvalidParams
from reports.kinds import KINDS
from reports.models import KindBreaker, ReportTask, TaskStatus
from reports.services import concurrency
from reports.services.breakers import BOUNDS
from reports.services.pausing import KindNotPaused, paused_kinds


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
            "title": _(kind.title),
            "priority": settings.REPORT_KIND_PRIORITIES.get(name, kind.default_priority),
            "cap": concurrency.limit_for(name),
            "waiting": waiting.get(name, 0),
            "paused": paused.get(name),
        }
        for name, kind in sorted(KINDS.items())
    ]
    return render(
        request,
        "console/kinds.html",
        {"rows": rows, "can_act": request.user.has_perm(REPLAY_PERMISSION), "reason_max": REASON_MAX,
         "error": error},
        status=status,
    )


@console_view(BATCH_VIEW_PERMISSION)
def kind_detail(request, kind, *, error: str = "", status: int = 200):
    """One kind: its settings, what waits and runs now, its breaker, and its last 24 hours as charts."""
    report_kind = KINDS.get(kind)
    if report_kind is None:
        raise Http404("no such report kind")
    context = charts_context(kind, poll_url=reverse("console:kind-detail", args=[kind]), selector=False)
    if wants_partial(request):
        return render(request, "console/_kind_charts.html", context)
    live = dict(
        ReportTask.objects.filter(kind=kind,
                                  status__in=(TaskStatus.PENDING, TaskStatus.RETRYING, TaskStatus.RUNNING))
        .order_by()
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    context["kind"] = {
        "name": kind,
        "title": _(report_kind.title),
        "priority": settings.REPORT_KIND_PRIORITIES.get(kind, report_kind.default_priority),
        "cap": concurrency.limit_for(kind),
        "waiting": live.get(TaskStatus.PENDING, 0) + live.get(TaskStatus.RETRYING, 0),
        "running": live.get(TaskStatus.RUNNING, 0),
        "paused": paused_kinds().get(kind),
    }
    context.update(breaker=KindBreaker.objects.filter(kind=kind).first(), declared=report_kind, bounds=BOUNDS,
                   breaker_error=error, can_act=request.user.has_perm(REPLAY_PERMISSION))
    return render(request, "console/kind_detail.html", context, status=status)


@require_POST
@console_view(REPLAY_PERMISSION)
def kind_breaker(request, kind):
    """Open, hold or close the kind's breaker, or change its thresholds (the fields given)."""
    if kind not in KINDS:
        raise Http404("no such report kind")
    action = request.POST.get("action") or None
    thresholds = {name: request.POST[name].strip() for name in BOUNDS if request.POST.get(name, "").strip()}
    try:
        _row, changed = set_breaker(kind=kind, action=action, actor=actor(request), thresholds=thresholds,
                                    reason=request.POST.get("reason", ""), ip_address=client_ip(request))
    except InvalidParams as exc:
        return kind_detail(request, kind, error=f"{exc.field}: {exc.message}", status=400)
    if action and not changed:
        messages.info(request, _("The breaker of %(kind)s was already so.") % {"kind": kind})
    elif action or thresholds:
        messages.success(request, _("The breaker of %(kind)s is changed.") % {"kind": kind})
    return redirect("console:kind-detail", kind)


@require_POST
@console_view(REPLAY_PERMISSION)
def kind_pause(request, kind):
    reason = request.POST.get("reason", "").strip()
    if len(reason) > REASON_MAX:
        error = _("The reason may have at most %(max)d characters.") % {"max": REASON_MAX}
        return kind_list(request, error=error, status=400)
    try:
        row, created = pause_kind(
            kind=kind, actor=actor(request), reason=reason, ip_address=client_ip(request)
        )
    except InvalidParams:
        raise Http404("no such report kind") from None
    if created:
        message = _("%(kind)s paused: its tasks wait (no attempts used) until you resume it.")
        messages.success(request, message % {"kind": kind})
    else:
        messages.info(
            request,
            _("%(kind)s was already paused by %(who)s.")
            % {"kind": kind, "who": row.paused_by or _("someone")},
        )
    return redirect("console:kind-list")


@require_POST
@console_view(REPLAY_PERMISSION)
def kind_resume(request, kind):
    try:
        waiting = resume_kind(kind=kind, actor=actor(request), ip_address=client_ip(request))
    except InvalidParams:
        raise Http404("no such report kind") from None
    except KindNotPaused:
        messages.info(request, _("%(kind)s is not paused (already resumed?).") % {"kind": kind})
        return redirect("console:kind-list")
    messages.success(
        request,
        ngettext(
            "%(kind)s resumed; %(n)d waiting task enqueued.",
            "%(kind)s resumed; %(n)d waiting tasks enqueued.", waiting
        )
        % {"kind": kind, "n": waiting},
    )
    return redirect("console:kind-list")
