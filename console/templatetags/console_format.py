"""Small template helpers for the console."""

from datetime import timedelta

from django import template
from django.conf import settings
from django.utils import timezone
from django.utils.timesince import timesince
from django.utils.translation import gettext, pgettext

from console import labels

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


@register.simple_tag
def reason_required() -> bool:
    """DEADLETTER_REQUIRE_REASON: the reason fields are marked required (the services enforce it)."""
    return settings.DEADLETTER_REQUIRE_REASON
