"""What alerting remembers of each cause (fingerprint), updated in the transaction of each death:
when it first died and under which release (a "new cause" is marked in its alert and in the
console), and its current episode of deaths, which deadletters.alerts.resolved closes with one
resolved notice once the cause has been quiet for ALERT_RESOLVED_AFTER_SECONDS."""

from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from deadletters.alerts.text import one_line
from deadletters.models import CauseState


def _bump(dead_letter) -> int:
    at = dead_letter.created_at
    return CauseState.objects.filter(fingerprint=dead_letter.fingerprint).update(
        last_death_at=Greatest(F("last_death_at"), at),
        episode_started_at=Coalesce(F("episode_started_at"), at),
        episode_deaths=F("episode_deaths") + 1,
        sample_kind=dead_letter.kind[:64],
        sample_error_type=dead_letter.error_type[:200],
        sample_message=one_line(dead_letter.error_message, 300),
    )


def record_death(*, dead_letter) -> dict:
    """Count the death in its cause's episode. Returns the marks for its alert: {"new": True,
    "release": RELEASE_NAME} for the first death of a cause never seen before, else {}."""
    if _bump(dead_letter):
        return {}
    release = settings.RELEASE_NAME
    try:
        with transaction.atomic():  # a savepoint: two first deaths at once, one row wins
            CauseState.objects.create(
                fingerprint=dead_letter.fingerprint,
                first_seen_at=dead_letter.created_at,
                first_release=release,
                episode_started_at=dead_letter.created_at,
                episode_deaths=1,
                last_death_at=dead_letter.created_at,
                sample_kind=dead_letter.kind[:64],
                sample_error_type=dead_letter.error_type[:200],
                sample_message=one_line(dead_letter.error_message, 300),
            )
    except IntegrityError:
        _bump(dead_letter)
        return {}
    return {"new": True, "release": release} if release else {"new": True}


NEW_CAUSE_DAYS = 1


def new_causes(fingerprints) -> dict[str, str]:
    """Of these fingerprints, the new causes, each with the release it first died under ("" when
    the deployment names none): first seen under the current RELEASE_NAME when set, else within
    the last NEW_CAUSE_DAYS."""
    causes = CauseState.objects.filter(fingerprint__in=list(fingerprints))
    if settings.RELEASE_NAME:
        causes = causes.filter(first_release=settings.RELEASE_NAME)
    else:
        causes = causes.filter(first_seen_at__gte=timezone.now() - timedelta(days=NEW_CAUSE_DAYS))
    return dict(causes.values_list("fingerprint", "first_release"))
