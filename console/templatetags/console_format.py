"""Small template helpers for the console."""

import re
from datetime import timedelta

from django import template
from django.conf import settings
from django.utils import timezone
from django.utils.formats import number_format
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.utils.timesince import timesince, timeuntil
from django.utils.translation import gettext, pgettext

from console import labels
from deadletters.bulk.canary import canary_reason_words
from deadletters.bulk.pause_reasons import pause_reason_words
from reports.models import TaskStatus
from reports.services.controls import stopped_words

register = template.Library()


@register.filter
def ago(value) -> str:
    """'3 minutes ago', '1 hour ago': one unit, so a table column does not wrap at 3 a.m."""
    if not value:
        return ""
    if timezone.now() - value < timedelta(minutes=1):
        return gettext("just now")
    return pgettext("time ago", "%(duration)s ago") % {"duration": timesince(value, depth=1)}


@register.filter
def until(value) -> str:
    """'in 3 minutes', or 'soon' within the minute (never "in 0 minutes"); a time passed: 'just now'."""
    if not value:
        return ""
    left = value - timezone.now()
    if left < timedelta(0):
        return ago(value)
    if left < timedelta(minutes=1):
        return gettext("soon")
    return pgettext("time until", "in %(duration)s") % {"duration": timeuntil(value)}


@register.filter
def etype(value) -> str:
    """An error type that a narrow screen wraps after its dots, never mid-word ("reports.<wbr>errors...")."""
    return mark_safe(escape(value or "").replace(".", ".<wbr>"))


_HORSE = re.compile(r"^(?P<name>.*) horse (?P<child>\d+) pid (?P<pid>\d+)$")


@register.filter
def worker(stored) -> str:
    """The worker an attempt ran in, as recorded ("<name> horse 812 pid 790"), in the page's words:
    "<name> pid 790 · worker process 812" (never "horse"); any other text as it is."""
    found = _HORSE.match(stored or "")
    if not found:
        return stored or ""
    return (f"{found['name']} pid {found['pid']} · "
            + gettext("worker process %(pid)s") % {"pid": found["child"]})


@register.filter
def audit_reason(entry) -> str:
    """An audit entry's stored (English) reason in the page's language when the system wrote it."""
    if str(entry.action).startswith("bulk_canary_") and isinstance(entry.details, dict):
        return canary_reason_words(entry.details) or entry.reason
    return pause_reason_words(str(entry.reason or ""))


@register.filter
def label(value, context: str = "") -> str:
    """A stored status, outcome, priority or action in the page's language ("open" -> "未处理")."""
    return labels.label(value, context)


@register.filter
def verb(action) -> str:
    """A bulk action as a verb inside a sentence ("replay" -> "重放")."""
    return labels.verb(action)


@register.filter
def chain_note(note) -> str:
    """Python's line that links two exceptions of a traceback, in the page's language."""
    return labels.chain_note(str(note or ""))


@register.filter
def pause_reason(stored) -> str:
    """Why a bulk action paused (the stored English text) in the page's language; any other text as it is."""
    return pause_reason_words(str(stored or ""))


@register.filter
def task_error(stored) -> str:
    """A task's or an attempt's stored error: an operator's stop in the page's language, any other as
    it is."""
    return stopped_words(str(stored or ""))


@register.simple_tag
def reason_required() -> bool:
    """DEADLETTER_REQUIRE_REASON: the reason fields are marked required (the services enforce it)."""
    return settings.DEADLETTER_REQUIRE_REASON


def attempt_words(number: int, run_number: int, budget: int) -> str:
    """`number` is the attempt's number in the attempt list (#4: counted over the task's whole life,
    across replays); `run_number` of `budget` counts within the current run (a replay starts one)."""
    if number == run_number:  # never replayed: the two counts are the same
        return gettext("attempt %(number)s of %(budget)s") % {"number": number, "budget": budget}
    return gettext("attempt %(number)s (%(run)s of %(budget)s in this run)") % {
        "number": number,
        "run": run_number,
        "budget": budget,
    }


@register.simple_tag
def task_attempt(task) -> str:
    """The one wording of a task's attempt on every page: "attempt 4 (1 of 3 in this run)"."""
    if task.status == TaskStatus.PENDING:
        return gettext("next: %(attempt)s") % {
            "attempt": attempt_words(task.attempt + 1, task.run_attempt + 1, task.run_budget)
        }
    if task.attempt == 0:
        return gettext("no attempt yet")
    return attempt_words(task.attempt, task.run_attempt, task.run_budget)


@register.filter
def seconds(value) -> str:
    """A run time or a wait in the unit that reads best: "850 ms", "4.20 s", "3.5 min", "1.2 h"."""
    if value is None:
        return "—"
    value = float(value)
    if value < 1:
        return gettext("%(n)s ms") % {"n": _decimal(value * 1000, 0)}
    if value < 60:
        return gettext("%(n)s s") % {"n": _decimal(value, 2 if value < 10 else 1)}
    if value < 3600:
        return gettext("%(n)s min") % {"n": _decimal(value / 60, 1)}
    return gettext("%(n)s h") % {"n": _decimal(value / 3600, 1)}


def _decimal(value: float, places: int) -> str:
    # number_format cuts a float's digits off; rounded first, 6.3999 reads 6.40, not 6.39.
    return number_format(round(value, places), places)
