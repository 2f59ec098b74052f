"""Small template helpers for the console."""

from datetime import timedelta

from django import template
from django.conf import settings
from django.utils import timezone
from django.utils.timesince import timesince

register = template.Library()


@register.filter
def ago(value) -> str:
    """'3 minutes ago', '1 hour ago': one unit, so a table column does not wrap at 3 a.m."""
    if not value:
        return ""
    if timezone.now() - value < timedelta(minutes=1):
        return "just now"
    return f"{timesince(value, depth=1)} ago"


@register.simple_tag
def reason_required() -> bool:
    """DEADLETTER_REQUIRE_REASON: the reason fields are marked required (the services enforce it)."""
    return settings.DEADLETTER_REQUIRE_REASON
