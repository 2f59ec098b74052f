"""Actions on one dead letter: replay (plain, or with edited params), archive, discard, restore.

Destructive actions follow django-rq's shape: GET shows a confirmation page (the DingTalk button
opens the replay one), POST acts, then a message and a redirect. A GET never changes anything,
and nothing here writes to the database itself: deadletters.services does.
"""

import json

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy
from django.views.decorators.http import require_http_methods, require_POST

from console.access import ARCHIVE_PERMISSION, REPLAY_EDIT_PERMISSION, REPLAY_PERMISSION, console_view
from console.forms import ReasonForm, ReplayEditForm
from console.kind_params import fits_fields, param_rows, params_from_fields, posted_values
from console.refusals import letter_conflict, replay_refusal
from console.views.common import actor, render_conflict, sees_params, shown_params
from deadletters.audit import REASON_MAX, ReasonRequired, client_ip
from deadletters.models import DeadLetter, DeadLetterStatus
from deadletters.selectors.letters import newer_dead_letters_of_task
from deadletters.services.letters import REPLAYABLE_STATUSES, DeadLetterNotFound
from deadletters.services.replay import replay_conflict_details, replay_dead_letter
from deadletters.services.transitions import (
    DeadLetterConflict,
    change_dead_letter,
)
from reports.errors import InvalidParams
from reports.kinds import get_kind
from reports.kinds.masking import params_for_display, unmask_params
from reports.models import ReportTask, TaskStatus
from reports.services import TaskNotReplayable


def _detail_url(letter_id: int) -> str:
    return reverse("console:deadletter-detail", args=[letter_id])


def _replay_refused(request, letter: DeadLetter, exc: TaskNotReplayable):
    details = replay_conflict_details(exc)
    message = replay_refusal(exc)
    if exc.replayed_by and exc.replayed_by == actor(request) and request.method == "POST":
        # The same operator's second submit (double click, browser retry): one replay happened.
        messages.info(request, _("Dead letter %(id)s: %(message)s") % {"id": letter.pk, "message": message})
        return redirect(_detail_url(letter.pk))
    # When the replay died again, the operator's next stop is the new dead letter, not this one.
    died_again = newer_dead_letters_of_task(letter.task_id, after_id=letter.pk)
    return render_conflict(
        request,
        title=_("Not replayed"),
        message=message,
        letter=letter,
        task=details["task"],
        died_again=died_again,
    )


def _is_replayable(letter: DeadLetter) -> bool:
    return letter.status in REPLAYABLE_STATUSES and letter.task.status == TaskStatus.DEAD


def _not_replayable_exc(letter: DeadLetter) -> TaskNotReplayable:
    return TaskNotReplayable(letter.task, replayed_by=letter.replayed_by, replayed_at=letter.replayed_at)


def _edit_context(request, letter: DeadLetter, form, *, fields_post=None) -> dict:
    """The kind's fields (filled from the letter's params as this operator may see them, or from
    what they posted) and the JSON. A masked value left as it is keeps the stored one."""
    kind = get_kind(letter.kind)
    use_fields = fits_fields(kind, letter.params)
    shown = params_for_display(letter.params, letter.kind, can_see=sees_params(request))
    values = posted_values(kind, fields_post) if use_fields and fields_post is not None else shown
    return {
        "letter": letter,
        "form": form,
        "params_json": shown_params(request, letter.params, letter.kind),
        "kind_params": param_rows(kind, values) if kind else (),
        "kind_title": _(kind.title) if kind else "",
        "use_fields": use_fields,
        "json_mode": form.is_bound and fields_post is None,
    }


def _replay(request, letter: DeadLetter, form, **changes) -> ReportTask | HttpResponse | None:
    """Replay the letter as the form asks. The refusals every replay view answers alike are
    answered here: the replayed task, a response to send instead, or None when the form now
    carries an error (show it again)."""
    try:
        return replay_dead_letter(
            dead_letter_id=letter.pk,
            actor=actor(request),
            ip_address=client_ip(request),
            reason=form.cleaned_data["reason"],
            **changes,
        )
    except DeadLetterNotFound:
        raise Http404("No such dead letter") from None
    except TaskNotReplayable as exc:
        return _replay_refused(request, letter, exc)
    except ReasonRequired:
        form.add_error("reason", _("Say why: a reason is required for every replay here."))
    except InvalidParams as exc:
        for field, message in getattr(exc, "errors", [(exc.field, exc.message)]):
            form.add_error("params", message if field == "params" else f"{field}: {message}")
    return None


@require_http_methods(["GET", "POST"])
@console_view(REPLAY_PERMISSION)
def replay(request, letter_id: int):
    """GET: what will be replayed and a confirm button. POST: replay, then back to the letter."""
    letter = get_object_or_404(DeadLetter.objects.select_related("task"), pk=letter_id)
    form = ReasonForm(request.POST if request.method == "POST" else None)
    if form.is_bound and form.is_valid():
        outcome = _replay(request, letter, form)
        if isinstance(outcome, HttpResponse):
            return outcome
        if outcome is not None:
            messages.success(
                request,
                _("Dead letter %(id)s replayed: task %(task)s is queued again.")
                % {"id": letter.pk, "task": outcome.public_id},
            )
            return redirect(_detail_url(letter.pk))
    elif not _is_replayable(letter):
        return _replay_refused(request, letter, _not_replayable_exc(letter))
    return render(
        request,
        "console/replay_confirm.html",
        {"letter": letter, "form": form, "params_json": shown_params(request, letter.params, letter.kind)},
        status=400 if form.is_bound else 200,
    )


@require_http_methods(["GET", "POST"])
@console_view((REPLAY_PERMISSION, REPLAY_EDIT_PERMISSION))
def replay_edit(request, letter_id: int):
    """Replay with edited params, validated by the report kind; the audit entry keeps the diff."""
    letter = get_object_or_404(DeadLetter.objects.select_related("task"), pk=letter_id)
    if not _is_replayable(letter):
        return _replay_refused(request, letter, _not_replayable_exc(letter))
    if request.method == "GET":
        initial = {"params": shown_params(request, letter.params, letter.kind)}
        form = ReplayEditForm(initial=initial)
        return render(request, "console/replay_edit.html", _edit_context(request, letter, form))
    fields_post = None
    data = request.POST
    kind = get_kind(letter.kind)
    if request.POST.get("mode") == "fields" and fits_fields(kind, letter.params):
        fields_post = request.POST
        data = request.POST.copy()
        data["params"] = json.dumps(params_from_fields(kind, request.POST))
    form = ReplayEditForm(data)
    if form.is_valid():
        params = unmask_params(form.cleaned_data["params"], letter.params)
        outcome = _replay(request, letter, form, params=params)
        if isinstance(outcome, HttpResponse):
            return outcome
        if outcome is not None:
            messages.success(
                request,
                _("Dead letter %(id)s replayed with edited params: task %(task)s is queued again.")
                % {"id": letter.pk, "task": outcome.public_id},
            )
            return redirect(_detail_url(letter.pk))
    # Refused input: the form again with every error, as a 400 (nothing was changed).
    return render(request, "console/replay_edit.html",
                  _edit_context(request, letter, form, fields_post=fields_post), status=400)


# Per action: the page title when nothing was done, and the message when it was.
_NOT_DONE = {
    "archived": pgettext_lazy("page title", "Not archived"),
    "discarded": pgettext_lazy("page title", "Not discarded"),
    "restored": pgettext_lazy("page title", "Not restored"),
}
_DONE = {
    "archived": gettext_lazy("Dead letter %(id)s archived."),
    "discarded": gettext_lazy("Dead letter %(id)s discarded."),
    "restored": gettext_lazy("Dead letter %(id)s restored."),
}


def _state_change(request, letter_id: int, action: str, done: str):
    letter = get_object_or_404(DeadLetter, pk=letter_id)
    form = ReasonForm(request.POST)
    if not form.is_valid():
        return render_conflict(
            request,
            title=_NOT_DONE[done],
            message=_("The reason is too long (at most %(max)d characters).") % {"max": REASON_MAX},
            back_url=_detail_url(letter.pk),
            status=400,
        )
    try:
        change_dead_letter(
            action=action,
            dead_letter_id=letter.pk,
            actor=actor(request),
            ip_address=client_ip(request),
            reason=form.cleaned_data["reason"],
        )
    except DeadLetterNotFound:
        raise Http404("No such dead letter") from None
    except ReasonRequired:
        return render_conflict(
            request,
            title=_NOT_DONE[done],
            message=_("A reason is required: type why in the field next to the button."),
            back_url=_detail_url(letter.pk),
            status=400,
        )
    except DeadLetterConflict as exc:
        return render_conflict(
            request, title=_NOT_DONE[done], message=letter_conflict(exc), letter=exc.letter
        )
    messages.success(request, _DONE[done] % {"id": letter.pk})
    return redirect(_detail_url(letter.pk))


@require_POST
@console_view(ARCHIVE_PERMISSION)
def archive(request, letter_id: int):
    return _state_change(request, letter_id, "archive", "archived")


@require_http_methods(["GET", "POST"])
@console_view(ARCHIVE_PERMISSION)
def discard(request, letter_id: int):
    """Never one click: GET, or a POST without `confirmed`, shows what discarding means and asks."""
    if request.method == "POST" and request.POST.get("confirmed") == "yes":
        return _state_change(request, letter_id, "discard", "discarded")
    letter = get_object_or_404(DeadLetter.objects.select_related("task"), pk=letter_id)
    form = ReasonForm(request.POST if request.method == "POST" else None)
    if form.is_bound and not form.is_valid():
        return _state_change(request, letter_id, "discard", "discarded")
    if letter.status != DeadLetterStatus.OPEN:
        conflict = DeadLetterConflict(letter, "discard")
        return render_conflict(request, title=_NOT_DONE["discarded"], message=letter_conflict(conflict),
                               letter=letter)
    return render(request, "console/discard_confirm.html", {"letter": letter, "form": form})


@require_POST
@console_view(ARCHIVE_PERMISSION)
def restore(request, letter_id: int):
    return _state_change(request, letter_id, "restore", "restored")
