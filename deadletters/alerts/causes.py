"""What alerting remembers of each cause (fingerprint), updated in the transaction of each death:
when it first died and under which release (a "new cause" is marked in its alert and in the
console), its current episode of deaths, which deadletters.alerts.resolved closes with one
resolved notice once the cause has been quiet for ALERT_RESOLVED_AFTER_SECONDS, its deaths per
release, and whether this death regresses a cause marked fixed."""

from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from deadletters.alerts.text import one_line, visible
from deadletters.audit import record_audit
from deadletters.models import CauseRelease, CauseState


def current_release() -> str:
    """RELEASE_NAME as recorded and shown: bounded, without control characters."""
    return visible(settings.RELEASE_NAME, 100)


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


def _count_release(dead_letter, release: str) -> None:
    """One more death of the cause under this release (CauseRelease), in the death's transaction."""
    rows = CauseRelease.objects.filter(fingerprint=dead_letter.fingerprint, release=release)
    bump = {"deaths": F("deaths") + 1, "last_death_at": Greatest(F("last_death_at"), dead_letter.created_at)}
    if rows.update(**bump):
        return
    try:
        with transaction.atomic():
            CauseRelease.objects.create(
                fingerprint=dead_letter.fingerprint, release=release, deaths=1,
                last_death_at=dead_letter.created_at,
            )
    except IntegrityError:
        rows.update(**bump)


def _regression(dead_letter, release: str) -> dict:
    """A cause fixed in a release that has started, dying under another release than the one it
    was marked under: regressed. One conditional UPDATE makes it one alert; the mark ends."""
    regressed = CauseState.objects.filter(
        fingerprint=dead_letter.fingerprint, fixed_marked_at__isnull=False,
        fixed_release_started__isnull=False,
    ).exclude(fixed_marked_release=release)
    if not regressed.update(regressed_release=release, fixed_marked_at=None):
        return {}
    cause = CauseState.objects.get(fingerprint=dead_letter.fingerprint)
    marks = {"event": "regression", "fixed_under": cause.fixed_marked_release,
             "fixed_in": cause.fixed_release, "died_under": release}
    record_audit(action="cause_regressed", source="system", dead_letter=dead_letter,
                 details={"fingerprint": cause.fingerprint, **marks})
    return {"lifecycle": marks}


def record_death(*, dead_letter) -> dict:
    """Count the death in its cause's episode and under its release. Returns the marks for its
    alert: {"new": True, "release": RELEASE_NAME} for the first death of a cause never seen
    before, {"lifecycle": {"event": "regression", ...}} for a regression, else {}."""
    release = current_release()
    if release:
        _count_release(dead_letter, release)
    if _bump(dead_letter):
        return _regression(dead_letter, release) if release else {}
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
    if current_release():
        causes = causes.filter(first_release=current_release())
    else:
        causes = causes.filter(first_seen_at__gte=timezone.now() - timedelta(days=NEW_CAUSE_DAYS))
    return dict(causes.values_list("fingerprint", "first_release"))
