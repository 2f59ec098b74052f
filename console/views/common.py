"""Small pieces every console view uses: full page or htmx partial, query parameters, cursors."""

import json
from urllib.parse import urlencode

from django.shortcuts import render
from django.template.defaultfilters import truncatechars
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy

from config.keyset import Cursor, InvalidCursor
from console.access import VIEW_PARAMS_PERMISSION
from deadletters.selectors.letters import cause_sample
from reports.kinds.masking import params_for_display
from reports.models import ReportBatch


def wants_partial(request) -> bool:
    """An htmx request that is not boosted gets the partial; anything else the full page."""
    return bool(request.htmx) and not request.htmx.boosted


def param(request, name: str, max_length: int) -> str:
    """A query parameter, trimmed, without NUL (PostgreSQL refuses it), at most max_length long."""
    return request.GET.get(name, "").replace("\x00", "").strip()[:max_length]


def parse_cursor(request, notices: list[str]) -> Cursor | None:
    raw = request.GET.get("cursor", "")
    if not raw:
        return None
    try:
        return Cursor.decode(raw)
    except InvalidCursor:
        notices.append(_("The page link was not valid (cursor ignored): showing the first page."))
        return None


def querystring(params: dict, **overrides) -> str:
    merged = {k: v for k, v in params.items() if v not in (None, "")}
    for key, value in overrides.items():
        if value in (None, ""):
            merged.pop(key, None)
        else:
            merged[key] = value
    return urlencode(merged)


def pager_context(page, params: dict) -> dict:
    """Links of a keyset-paged list that keep the list's own filters."""
    return {
        "next_querystring": querystring(params, cursor=page.next_cursor) if page.next_cursor else "",
        "first_querystring": querystring(params),
        "prev_querystring": querystring(params, cursor=page.prev_cursor) if page.has_prev else "",
    }


def pretty_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def shown_params(request, params, kind: str) -> str:
    """Params as pretty JSON, as this operator may see them (reports/kinds/masking.py)."""
    return pretty_json(params_for_display(params, kind, can_see=sees_params(request)))


def sees_params(request) -> bool:
    return request.user.has_perm(VIEW_PARAMS_PERMISSION)


def to_json(value) -> str:
    """A value on one line, as JSON writes it (a string keeps its quotes)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def actor(request) -> str:
    return request.user.get_username()


def render_conflict(request, *, title: str, message: str, status: int = 409, **context):
    """The page that says why an action did nothing (409: someone got there first; 400: bad input)."""
    return render(request, "console/conflict.html", {"title": title, "message": message, **context},
                  status=status)


def batch_label(public_id) -> str:
    """A batch as people call it: its name, or its id when it has none."""
    batch = ReportBatch.objects.filter(public_id=public_id).only("public_id", "name").first()
    return batch.label if batch else str(public_id)


# The narrowing filters of a dead-letter list (its chips, a bulk action's scope), in the page's words.
FILTER_LABELS = {
    "kind": pgettext_lazy("filter chip", "kind"),
    "error_type": pgettext_lazy("filter chip", "error"),
    "fingerprint": pgettext_lazy("filter chip", "cause"),
    "created_from": pgettext_lazy("filter chip", "from"),
    "created_to": pgettext_lazy("filter chip", "to"),
    "batch": pgettext_lazy("filter chip", "batch"),
    "q": pgettext_lazy("filter chip", "search"),
}


def cause_words(fingerprint: str) -> str:
    """A cause as an operator recognises it: "TransientError: orders API unreachable", not its hex."""
    sample = cause_sample(fingerprint)
    if sample is None:
        return fingerprint[:12]
    error_type, message = sample
    return truncatechars(f"{error_type.rsplit('.', 1)[-1]}: {message}", 100)


def filter_values(filters) -> list[tuple[str, str, str]]:
    """(name, label, value shown) of each narrowing filter: a batch by its name, a cause by its error."""
    params = filters.as_params()
    if filters.batch:
        params["batch"] = batch_label(filters.batch)
    if filters.fingerprint:
        params["fingerprint"] = cause_words(filters.fingerprint)
    return [(name, str(label), params[name]) for name, label in FILTER_LABELS.items() if name in params]
