"""A cause's lifecycle as the groups page, a letter's page, the API and the shell show it: the
releases it died under (newest first), whether it is marked fixed in the next release, fixed in
one, or regressed, and its mute until a threshold. Three queries for a page of causes."""

from django.db.models import Q
from django.utils import timezone

from deadletters.models import AlertSnooze, CauseRelease, CauseState

RELEASES_SHOWN = 5


def fixed_state(cause: CauseState) -> dict | None:
    """marked (waiting for the next release), released (its replay started under `fixed_in`) or
    regressed (it died again under `regressed_under`), or None."""
    if cause.fixed_marked_at is None and not cause.regressed_release:
        return None
    state = "regressed" if cause.fixed_marked_at is None else "released" if cause.fixed_release else "marked"
    return {
        "state": state,
        "marked_by": cause.fixed_marked_by,
        "marked_under": cause.fixed_marked_release,
        "fixed_in": cause.fixed_release or None,
        "released_at": cause.fixed_release_started.isoformat() if cause.fixed_release_started else None,
        "regressed_under": cause.regressed_release or None,
    }


def cause_lifecycles(fingerprints) -> dict[str, dict]:
    """{fingerprint: {"releases": [{"release", "deaths"}], "fixed": fixed_state or None,
    "mute": the AlertSnooze until a threshold or None}}."""
    fingerprints = list(fingerprints)
    found = {fp: {"releases": [], "fixed": None, "mute": None} for fp in fingerprints}
    for row in CauseRelease.objects.filter(fingerprint__in=fingerprints).order_by("-last_death_at", "-id"):
        releases = found[row.fingerprint]["releases"]
        if len(releases) < RELEASES_SHOWN:
            releases.append({"release": row.release, "deaths": row.deaths})
    states = CauseState.objects.filter(fingerprint__in=fingerprints).filter(
        Q(fixed_marked_at__isnull=False) | ~Q(regressed_release="")
    )
    for cause in states:
        found[cause.fingerprint]["fixed"] = fixed_state(cause)
    mutes = AlertSnooze.objects.filter(
        Q(per_minute__isnull=False) | Q(total__isnull=False), fingerprint__in=fingerprints,
        ended_at__isnull=True, until__gt=timezone.now(),
    ).order_by("created_at")
    for mute in mutes:
        found[mute.fingerprint]["mute"] = mute
    return found
