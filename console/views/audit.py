"""The audit log, read-only: who did what, when, from where, and why."""

import uuid

from django.shortcuts import render
from django.utils.translation import gettext as _

from console.access import AUDIT_VIEW_PERMISSION, console_view
from console.views.common import pager_context, param, parse_cursor, pretty_json, sees_params, wants_partial
from deadletters.selectors import audit as audit_selectors
from reports.kinds.masking import params_for_display, patch_for_display


def decorate_audit(entries, *, can_see: bool) -> list:
    """Pretty JSON for details and the params diff (masked as `can_see` says), rendered escaped by
    the templates; the bulk run an entry belongs to (a bulk's own row, or one letter it acted on),
    for a link to its page."""
    for entry in entries:
        details = entry.details if isinstance(entry.details, dict) else {"value": entry.details}
        diff = details.get("params_diff")
        if isinstance(diff, dict):
            kind = entry.task.kind if entry.task_id else ""
            diff = {side: params_for_display(diff.get(side), kind, can_see=can_see)
                    for side in ("before", "after")}
            details = {**details, "params_diff": diff}
        if details.get("params_patch"):  # a bulk replay's patch (its start entry)
            details = {**details, "params_patch": patch_for_display(details["params_patch"], can_see=can_see)}
        entry.bulk_public_id = _uuid_or_none(details.get("bulk"))
        # A bulk replay of one letter at a time is what the letter's "Replay later…" made.
        later = (entry.action == "bulk_replay" and details.get("start_at")
                 and len(details.get("ids") or ()) == 1)
        entry.shown_action = "replay_later" if later else entry.action
        entry.details_json = pretty_json(details) if details else ""
        entry.diff_before = entry.diff_after = None
        if isinstance(diff, dict):
            entry.diff_before = pretty_json(diff.get("before"))
            entry.diff_after = pretty_json(diff.get("after"))
    return entries


def _uuid_or_none(value) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None


@console_view(AUDIT_VIEW_PERMISSION)
def audit(request):
    notices: list[str] = []
    choices = audit_selectors.audit_choices()
    actor = param(request, "actor", 150)
    action = param(request, "action", 40)
    if action and action not in choices["actions"]:
        notices.append(_("No audit entries have the action %(action)r: filter ignored.") % {"action": action})
        action = ""
    cursor = parse_cursor(request, notices)
    page = audit_selectors.audit_page(actor=actor, action=action, cursor=cursor)
    params = {"actor": actor, "action": action}
    context = {
        "page": page,
        "choices": choices,
        "actor": actor,
        "action": action,
        "notices": notices,
        **pager_context(page, params),
        "is_filtered": bool(actor or action),
    }
    decorate_audit(page.items, can_see=sees_params(request))
    if wants_partial(request):
        return render(request, "console/_audit_rows.html", context)
    return render(request, "console/audit.html", context)
