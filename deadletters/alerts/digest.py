"""The daily "all quiet" digest of a channel ("daily_digest_at": "HH:MM" in TIME_ZONE): the last
24 hours' deaths and replays, the open letters and the alerts not delivered, sent every day through
the one stack (an outbox row of category daily_digest, its card below) even when nothing happened,
so the team notices when it stops coming. A housekeeper duty (deadletters/housekeeping.py): the day
is claimed by a conditional UPDATE of the channel's AlertPath row, so two housekeepers send one."""

import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, Sum
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from deadletters.alerts.channels import Channel, configured_channels
from deadletters.alerts.outbox import kick_sender
from deadletters.alerts.text import format_time, neutral
from deadletters.links import dead_letter_list_url
from deadletters.models import (
    Alert,
    AlertCategory,
    AlertPath,
    AlertStatus,
    DeadLetter,
    DeadLetterStatus,
    OpenLetterCount,
)


def daily_figures(now: datetime) -> dict:
    since = now - timedelta(hours=24)
    letters = DeadLetter.objects.filter(status__in=DeadLetterStatus.values)  # the status index
    undelivered = (
        Alert.objects.filter(status__in=(AlertStatus.PENDING, AlertStatus.FAILED), created_at__gte=since)
        .exclude(channel="").order_by().values_list("channel").annotate(n=Count("id"))
    )
    return {
        "since": since.isoformat(),
        "until": now.isoformat(),
        "deaths": letters.filter(created_at__gte=since, created_at__lt=now).count(),
        "replays": DeadLetter.objects.filter(replayed_at__gte=since, replayed_at__lt=now).count(),
        "open": int(OpenLetterCount.objects.aggregate(n=Sum("count"))["n"] or 0),
        "undelivered": dict(sorted(undelivered)),
    }


def daily_digest_write(channel: Channel, *, now: datetime) -> Alert:
    """The channel's digest in its outbox, sent by the next pass (kicked when this commits)."""
    payload = {**daily_figures(now), "at": channel.daily_digest_at}
    alert = Alert.objects.create(
        channel=channel.name, category=AlertCategory.DAILY_DIGEST, payload=payload, created_at=now
    )
    transaction.on_commit(kick_sender, robust=True)
    return alert


def daily_digests_send(*, clock=time.time) -> list[str]:
    """Each channel whose digest time has come today and whose digest of today is not written yet
    (one per day, late rather than never when no housekeeper ran at its time)."""
    now = datetime.fromtimestamp(clock(), tz=UTC)
    local = now.astimezone(ZoneInfo(settings.TIME_ZONE))
    written = []
    for channel in configured_channels():
        if not channel.daily_digest_at or local.strftime("%H:%M") < channel.daily_digest_at:
            continue
        AlertPath.objects.get_or_create(channel=channel.name)
        with transaction.atomic():
            if AlertPath.objects.filter(
                Q(digest_day__isnull=True) | Q(digest_day__lt=local.date()), channel=channel.name
            ).update(digest_day=local.date()):
                daily_digest_write(channel, now=now)
                written.append(f"{channel.name}: daily digest written")
    return written


def daily_card(payload: dict) -> dict:
    """The digest's card (render.alert_card calls it, in ALERT_LANGUAGE)."""
    deaths, undelivered = int(payload.get("deaths", 0)), payload.get("undelivered") or {}
    late = sum(int(n) for n in undelivered.values())
    if deaths or late:
        title = ngettext("Daily digest: %(deaths)s death in 24 hours",
                         "Daily digest: %(deaths)s deaths in 24 hours", deaths) % {"deaths": deaths}
    else:
        title = _("All quiet: no death in 24 hours")
    lines = [
        _("Deaths: %(n)s") % {"n": deaths},
        _("Replayed: %(n)s") % {"n": int(payload.get("replays", 0))},
        _("Open dead letters now: %(n)s") % {"n": int(payload.get("open", 0))},
        _("Alerts not delivered: %(n)s") % {"n": late}
        + "".join(f" · {neutral(name, 40)} {int(n)}" for name, n in undelivered.items()),
        f"{format_time(payload.get('since'))} → {format_time(payload.get('until'))}",
    ]
    if payload.get("at"):
        lines.append(_("This digest comes every day at %(at)s: when it stops, the alert path is broken.")
                     % {"at": neutral(payload["at"], 5)})
    return {
        "event": "daily", "title": title, "lines": lines,
        "links": [[_("Open the dead-letter console"), dead_letter_list_url()]],
    }
