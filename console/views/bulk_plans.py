"""What the console's forms add to a replay: a start time (the bulk confirm form, and "Replay
later..." of one dead letter), a canary and a params patch (the bulk confirm form). The work is
deadletters.bulk.plans (checks), schedule (a run at a time), canary (the verdict) and patch.

A `datetime-local` field sends a wall-clock time without a zone: it is read in the zone the
console shows every time in (TIME_ZONE), which the form names next to the field."""

from datetime import datetime

from django.conf import settings
from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from console.access import REPLAY_EDIT_PERMISSION, REPLAY_PERMISSION, console_view
from console.forms import ReasonForm
from console.refusals import replay_refusal
from console.views.common import actor, render_conflict, sees_params, to_json
from deadletters.audit import ReasonRequired, client_ip
from deadletters.bulk.patch import TYPED_MAX, parse_params_patch, preview_params_patch
from deadletters.bulk.plans import check_start_at, validate_canary, validate_canary_success
from deadletters.bulk.schedule import schedule_letter_replay
from deadletters.bulk.selection import InvalidBulkRequest
from deadletters.models import DeadLetter
from deadletters.services.letters import REPLAYABLE_STATUSES, DeadLetterNotFound
from reports.models import TaskStatus
from reports.services import TaskNotReplayable

LOCAL_INPUT_FORMAT = "%Y-%m-%dT%H:%M"


def zone_context() -> dict:
    """The zone the times of a form are read in, as the form shows it: its name and offset now,
    and the earliest value the field accepts (a minute from now)."""
    now = timezone.localtime()
    offset = now.strftime("%z")
    return {
        "zone_name": timezone.get_current_timezone_name(),
        "zone_offset": f"UTC{offset[:3]}:{offset[3:]}" if offset else "UTC",
        "start_min": now.strftime(LOCAL_INPUT_FORMAT),
        "schedule_max_days": settings.BULK_SCHEDULE_MAX_DAYS,
    }


def local_start_at(raw: str) -> datetime | None:
    """A `datetime-local` value (2026-11-25T02:00, seconds optional) in the console's zone, checked
    as every start time is; blank: start now."""
    raw = (raw or "").strip()
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw) if len(raw) <= 26 else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is not None:
        raise InvalidBulkRequest("start_at", _("must be a date and a time, such as 2026-11-25 02:00"))
    return check_start_at(timezone.make_aware(moment, timezone.get_current_timezone()))


def plan_from_form(post, action: str) -> tuple[dict, dict]:
    """(canary, canary_success, start_at) from the confirm form, and the errors by field. An empty
    canary size means no canary (the share then is not read)."""
    plan: dict = {"canary": None, "canary_success": None, "start_at": None}
    errors: dict = {}
    checks = [("start_at", lambda: local_start_at(post.get("start_at", "")))]
    if (post.get("canary") or "").strip():
        checks += [
            ("canary", lambda: validate_canary(post.get("canary").strip(), action=action)),
            ("canary_success", lambda: validate_canary_success(post.get("canary_success", "").strip())),
        ]
    for name, check in checks:
        try:
            plan[name] = check()
        except InvalidBulkRequest as exc:
            errors[exc.field] = field_message(exc)
    return plan, errors


def patch_context(request, selection, errors: dict) -> dict:
    """The patch field of a replay's confirm form: what was typed and, once checked (or refused at
    start), its dry run: the letters it changes, a sample of before/after, the letters it would make
    invalid with their first reasons. A malformed patch is an error beside the field."""
    text = request.POST.get("params_patch", "").strip()
    context = {"params_patch": text[:TYPED_MAX], "patch_preview": None, "patch_rows": [],
               "can_edit_params": request.user.has_perm(REPLAY_EDIT_PERMISSION)}
    if not text or "params_patch" in errors:
        return context
    try:
        patch = parse_params_patch(text, action=selection.action)
    except InvalidBulkRequest as exc:
        errors["params_patch"] = field_message(exc)
        return context
    preview = context["patch_preview"] = preview_params_patch(selection, patch, can_see=sees_params(request))
    context["patch_rows"] = [
        (row["dead_letter"], key, *(to_json(row[side][key]) if key in row[side] else None
                                    for side in ("before", "after")))
        for row in preview.sample for key in sorted({*row["before"], *row["after"]})
    ]
    return context


def field_message(exc: InvalidBulkRequest) -> str:
    """The message without its field's name (the form shows it beside the field)."""
    return exc.message


@require_http_methods(["GET", "POST"])
@console_view(REPLAY_PERMISSION)
def replay_later(request, letter_id: int):
    """GET: when to replay this letter. POST: schedule it (a bulk replay of this one letter that
    starts at that time, cancellable until then), then back to the letter."""
    letter = get_object_or_404(DeadLetter.objects.select_related("task"), pk=letter_id)
    if letter.status not in REPLAYABLE_STATUSES or letter.task.status != TaskStatus.DEAD:
        exc = TaskNotReplayable(letter.task, replayed_by=letter.replayed_by, replayed_at=letter.replayed_at)
        return render_conflict(request, title=_("Not scheduled"), message=replay_refusal(exc), letter=letter)
    form = ReasonForm(request.POST if request.method == "POST" else None)
    errors = {}
    if form.is_bound and form.is_valid():
        try:
            start_at = local_start_at(request.POST.get("start_at", ""))
            if start_at is None:
                raise InvalidBulkRequest("start_at", _("say when: a date and a time"))
            bulk, _letter = schedule_letter_replay(
                dead_letter_id=letter.pk,
                start_at=start_at,
                actor=actor(request),
                ip_address=client_ip(request),
                reason=form.cleaned_data["reason"],
            )
        except InvalidBulkRequest as exc:
            errors[exc.field] = field_message(exc)
        except ReasonRequired:
            form.add_error("reason", _("Say why: a reason is required for every replay here."))
        except DeadLetterNotFound:
            raise Http404("No such dead letter") from None
        except TaskNotReplayable as exc:
            return render_conflict(request, title=_("Not scheduled"), message=replay_refusal(exc),
                                   letter=letter)
        else:
            when = timezone.localtime(bulk.start_at)
            messages.success(
                request,
                _("Dead letter %(id)s will be replayed at %(when)s (%(zone)s); you can cancel it until then.")
                % {"id": letter.pk, "when": when.strftime("%Y-%m-%d %H:%M"),
                   "zone": zone_context()["zone_offset"]},
            )
            return redirect(reverse("console:deadletter-detail", args=[letter.pk]))
    return render(
        request,
        "console/replay_later.html",
        {
            "letter": letter,
            "form": form,
            "errors": errors,
            "start_at": request.POST.get("start_at", "")[:32],
            **zone_context(),
        },
        status=400 if form.is_bound else 200,
    )
