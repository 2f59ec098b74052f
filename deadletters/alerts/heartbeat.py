"""The dead-man's switch of each channel ("heartbeat_url" in ALERT_CHANNELS: a healthchecks.io,
Cronitor or Better Stack check): pinged after a pass that delivered on the channel and at least
every "heartbeat_minutes" while nothing is sent, as long as the channel delivers. A channel whose
sends fail (health.channel_delivery) is not pinged, so the outside watchdog raises its alarm: a
broken alert path no longer looks like a quiet night. A housekeeper duty (deadletters/housekeeping.py).

A ping is claimed by a conditional UPDATE of the channel's AlertPath row (two housekeepers ping
once), is one GET with a short timeout that follows no redirect, and is told by its outcome alone:
its URL carries a token and never reaches a log line, a page or a stored error."""

import logging
import time
from datetime import UTC, datetime, timedelta

import requests
from django.db.models import Q

from deadletters.alerts.channels import Channel, configured_channels
from deadletters.alerts.health import ChannelStatus, channel_delivery
from deadletters.models import AlertPath

logger = logging.getLogger("deadletters.alerts")
TIMEOUT_SECONDS = 3.0  # a hanging check must not hold up the housekeeper's other duties


def ping(url: str) -> str:
    """"" when the check took the ping, else why not (never the URL)."""
    try:
        response = requests.get(url, timeout=TIMEOUT_SECONDS, allow_redirects=False)
    except requests.Timeout:
        return f"no answer within {TIMEOUT_SECONDS:g}s"
    except requests.RequestException as exc:
        return type(exc).__name__
    return "" if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"


def heartbeat_ping(channel: Channel, *, now: datetime, force: bool = False) -> str:
    """Ping the channel's switch when it is due (or `force`d) and the channel delivers; says what
    happened, or "" when nothing was due."""
    status = channel_delivery(ChannelStatus(channel.name, channel.type))
    if status.failing:
        return f"{channel.name}: not pinged, its sends fail since {status.failing_since:%Y-%m-%d %H:%M} UTC"
    due = now - timedelta(minutes=channel.heartbeat_minutes)
    if status.last_sent_at is not None:
        due = max(due, status.last_sent_at)  # a delivery since the last ping is news
    AlertPath.objects.get_or_create(channel=channel.name)
    mine = AlertPath.objects.filter(channel=channel.name)
    if not (mine if force else mine.filter(Q(pinged_at__isnull=True) | Q(pinged_at__lt=due))).update(
        pinged_at=now
    ):
        return ""
    error = ping(channel.heartbeat_url)
    if error:
        logger.warning("alert channel %s: heartbeat ping failed (%s)", channel.name, error)
        return f"{channel.name}: heartbeat ping failed ({error})"
    return f"{channel.name}: heartbeat pinged"


def heartbeats_ping(*, clock=time.time, force: bool = False) -> list[str]:
    """Every channel's switch that is due (every one with `force`: `send_alerts --heartbeat`)."""
    now = datetime.fromtimestamp(clock(), tz=UTC)
    said = [heartbeat_ping(c, now=now, force=force) for c in configured_channels() if c.heartbeat_url]
    return [line for line in said if line]
