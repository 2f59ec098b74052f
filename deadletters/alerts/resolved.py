"""Recovery notices: a cause (fingerprint) whose episode of deaths has been quiet for
ALERT_RESOLVED_AFTER_SECONDS gets one "resolved" alert naming it, how many died, over how long,
and how many of them were replayed. Closing the episode is a conditional UPDATE on the values
read, so two passes at once (or a death arriving meanwhile) make one notice per quiet period or
none. The notice is an ordinary outbox row: each channel sends it within its own budget, and a
storm of them coalesces into digests."""

import logging
import time
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction

from deadletters.alerts.outbox import notice
from deadletters.models import Alert, CauseState, DeadLetter, DeadLetterStatus

logger = logging.getLogger("deadletters.alerts")
BATCH = 200


def resolved_payload(cause: CauseState, *, quiet_seconds: int) -> dict:
    started, last = cause.episode_started_at, cause.last_death_at
    replayed = DeadLetter.objects.filter(
        fingerprint=cause.fingerprint,
        created_at__gte=started,
        created_at__lte=last,
        status=DeadLetterStatus.REPLAYED,
    ).count()
    return {
        "fingerprint": cause.fingerprint,
        "kind": cause.sample_kind,
        "error_type": cause.sample_error_type,
        "message": cause.sample_message,
        "deaths": cause.episode_deaths,
        "started_at": started.isoformat(),
        "last_death_at": last.isoformat(),
        "duration_seconds": int((last - started).total_seconds()),
        "quiet_seconds": quiet_seconds,
        "replayed": replayed,
    }


def announce_resolved_causes(*, clock=time.time) -> int:
    """Close every episode quiet for long enough, with one resolved alert each; returns how many."""
    quiet = settings.ALERT_RESOLVED_AFTER_SECONDS
    cutoff = datetime.fromtimestamp(clock(), tz=UTC) - timedelta(seconds=quiet)
    announced = 0
    while True:
        causes = list(
            CauseState.objects.filter(episode_started_at__isnull=False, last_death_at__lte=cutoff).order_by(
                "id"
            )[:BATCH]
        )
        for cause in causes:
            announced += _announce(cause, quiet)
        if len(causes) < BATCH:
            break
    return announced


def _announce(cause: CauseState, quiet: int) -> int:
    with transaction.atomic():
        closed = CauseState.objects.filter(
            pk=cause.pk,
            episode_started_at=cause.episode_started_at,
            episode_deaths=cause.episode_deaths,
            last_death_at=cause.last_death_at,
        ).update(episode_started_at=None, episode_deaths=0)
        if not closed:
            return 0
        notice(resolved_payload(cause, quiet_seconds=quiet), fingerprint=cause.fingerprint)
    logger.info("cause %s resolved after %s death(s)", cause.fingerprint, cause.episode_deaths)
    return 1


def announce_kind_resumed(*, kind: str, waiting: int, paused_at=None) -> Alert:
    """A kind runs again; its deaths while paused were muted, so their count goes with it."""
    muted = DeadLetter.objects.filter(kind=kind, created_at__gte=paused_at).count() if paused_at else 0
    return notice({"notice": "kind_resumed", "kind": kind, "waiting": waiting, "muted": muted})


def announce_bulk(*, bulk, news: str = "bulk_finished", **details) -> Alert:
    """A bulk run's news, with the link to act on it: bulk_finished, bulk_paused (it paused
    itself: died, finished, ratio, threshold), canary_failed (replayed, done, died, needed),
    not_started (a scheduled run that could not start: error)."""
    return notice(
        {
            "notice": news,
            "kind": "",
            "action": bulk.action,
            "bulk_id": str(bulk.public_id),
            "status": bulk.status,
            "total": bulk.total,
            "succeeded": bulk.succeeded,
            "skipped": bulk.skipped,
            "start_at": bulk.start_at.isoformat() if bulk.start_at else None,
            **details,
        }
    )


def announce_bulk_finished(*, bulk) -> Alert:
    return announce_bulk(bulk=bulk)
