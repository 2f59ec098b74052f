"""A circuit breaker per report kind: an outage of a kind's upstream pauses the kind instead of
turning its tasks into dead letters.

    closed --failures_to_open upstream failures within window_seconds--> open: the kind paused
    open --probes_to_close passing probes in a row--> half_open: the kind resumed under a canary cap
    half_open --breaker_canary successes (or nothing left to run)--> closed: the kind's own cap again
    half_open --an upstream failure--> open (no second card)
    an operator: open, hold (paused and not probed) or close (resumed at once)

`absorbs_failure` runs in the transaction of an attempt's failure: an upstream failure
(FailureInfo.origin, reports/errors.py) of a kind whose breaker is not closed, or that opens it,
costs the task no attempt (the engine retries it as soon as the kind runs again). The
housekeeper's duty `tend_breakers` probes open breakers (one housekeeper a probe: the claim of
`probed_at`), each in a thread given breaker_probe_timeout, and lets the canary through. Every change is a
conditional UPDATE of the KindBreaker row; its winner pauses or resumes the kind
(reports.services.pausing, paused_by BREAKER), sets or lifts the canary cap
(concurrency.override) and announces it (signals.breaker_changed: the audit entry, the card)."""

import logging
import threading
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone
from django.utils.translation import gettext as _

import reports.services.concurrency as concurrency
import reports.services.pausing as pausing
from reports.errors import UPSTREAM, FailureInfo, InvalidParams, escape_controls
from reports.kinds import KINDS
from reports.models import AttemptOutcome, BreakerState, KindBreaker, PausedKind, ReportTask, TaskAttempt
from reports.signals import breaker_changed

logger = logging.getLogger("reports.services")

BREAKER = "circuit breaker"  # paused_by of a breaker's pause (no user name holds a space)
BOUNDS = {"failures_to_open": (1, 1000), "window_seconds": (1, 86_400), "probes_to_close": (1, 100)}
ACTIONS = ("open", "hold", "close")
SETTLE_SECONDS = 2 * concurrency.OVERRIDES_TTL  # every process knows the canary cap before the resume
TRIPPED = (BreakerState.OPEN, BreakerState.HALF_OPEN, BreakerState.HELD)
STILL_TO_RUN = (*pausing.WAITING, "running")


def check_kind(kind: object) -> str:
    if not isinstance(kind, str) or kind not in KINDS or not KINDS[kind].has_upstream():
        with_breakers = ", ".join(sorted(name for name, each in KINDS.items() if each.has_upstream()))
        raise InvalidParams("kind", _("must be a report kind that declares an upstream: %(kinds)s")
                            % {"kinds": with_breakers or "-"})
    return kind


def clean_thresholds(values: dict) -> dict:
    """Each threshold a whole number within BOUNDS (text of digits too, for forms and the shell)."""
    cleaned = {}
    for field, value in values.items():
        low, high = BOUNDS[field]
        if isinstance(value, str) and value.strip().isdigit() and len(value) < 10:
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidParams(field, _("must be a whole number from %(low)d to %(high)d")
                                % {"low": low, "high": high})
        cleaned[field] = value
    return cleaned


def breaker_of(kind: str) -> KindBreaker:
    """The kind's row, born closed with the thresholds the kind declares."""
    row = KindBreaker.objects.filter(kind=kind).first()
    if row is not None:
        return row
    declared = KINDS[kind]
    thresholds = clean_thresholds({"failures_to_open": declared.breaker_failures,
                                   "window_seconds": declared.breaker_window,
                                   "probes_to_close": declared.breaker_probes})
    return KindBreaker.objects.get_or_create(kind=kind, defaults=thresholds)[0]


def tripped_kinds():
    """The kinds whose breaker is not closed, as a subquery."""
    return KindBreaker.objects.filter(state__in=TRIPPED).values("kind")


# --- the pipeline's half: counting --------------------------------------------------------------


def absorbs_failure(*, kind: str, failure: FailureInfo, now: datetime) -> bool:
    """Count an attempt's failure toward the kind's breaker; True when it costs no attempt."""
    declared = KINDS.get(kind)
    if failure.origin != UPSTREAM or declared is None or not declared.has_upstream():
        return False
    row = breaker_of(kind)
    mine = KindBreaker.objects.filter(pk=row.pk)
    if row.state != BreakerState.CLOSED:
        _change(kind, "reopened", "", mine.filter(state=BreakerState.HALF_OPEN), state=BreakerState.OPEN,
                passing_probes=0, probed_at=now)
        return True
    closed = mine.filter(state=BreakerState.CLOSED)
    counted = closed.filter(window_started_at__gte=now - timedelta(seconds=row.window_seconds)).update(
        failures=F("failures") + 1) or closed.update(failures=1, window_started_at=now)
    opened = _change(kind, "opened", "", closed.filter(failures__gte=F("failures_to_open")),
                     state=BreakerState.OPEN, opened_at=now, passing_probes=0, probed_at=now)
    # Not counted: the row was no longer closed (another attempt's failure tripped it meanwhile).
    return opened or not counted


def _change(kind: str, change: str, actor: str, rows, **updates) -> bool:
    """One conditional UPDATE of the breaker; its winner pauses or resumes the kind and announces."""
    with transaction.atomic():
        if not rows.update(changed_by=actor[:150], changed_at=timezone.now(), **updates):
            return False
        if change == "closed":
            try:
                waiting = pausing.resume_kind(kind=kind, paused_by=BREAKER)
            except pausing.KindNotPaused:  # an operator's pause stays, or nobody's was left
                waiting = pausing.waiting_count(kind)
            transaction.on_commit(lambda: concurrency.override(kind, None), robust=True)
        else:
            pausing.pause_kind(kind=kind, paused_by=BREAKER, reason=_breaker_reason(change, actor))
            waiting = pausing.waiting_count(kind)
        breaker_changed.send(sender=KindBreaker, breaker=KindBreaker.objects.get(kind=kind), change=change,
                             actor=actor, waiting=waiting)
    logger.warning("circuit breaker of %s %s%s", kind, change, f" by {actor}" if actor else "")
    return True


def _breaker_reason(change: str, actor: str) -> str:
    if actor:
        return f"{change} by {actor}"
    return "its upstream failed too often" if change == "opened" else "its canary met an upstream failure"


# --- the housekeeper's half: probing and recovering -----------------------------------------------


def tend_breakers(*, now: datetime | None = None) -> str:
    """The duty: probe each open breaker when its probe is due, let a canary through after enough
    passing probes, close a half-open one once its canary succeeded. Says what it did."""
    said = []
    if caps := set(concurrency.overrides()):  # a canary cap whose lift was lost (Redis down at the close)
        for kind in caps - set(KindBreaker.objects.filter(state__in=TRIPPED).values_list("kind", flat=True)):
            concurrency.override(kind, None)
    for row in KindBreaker.objects.filter(state__in=(BreakerState.OPEN, BreakerState.HALF_OPEN)):
        declared = KINDS.get(row.kind)
        if declared is None or not declared.has_upstream():
            continue
        moment = now or timezone.now()
        step = _probe if row.state == BreakerState.OPEN else _recover
        said.append(step(row, declared, moment))
    return "; ".join(filter(None, said)) or "no breaker to tend"


def _probe(row: KindBreaker, declared, now: datetime) -> str:
    mine = KindBreaker.objects.filter(pk=row.pk, state=BreakerState.OPEN)
    due = Q(probed_at__isnull=True) | Q(probed_at__lte=now - timedelta(seconds=declared.breaker_probe_every))
    if not mine.filter(due).update(probed_at=now):
        return ""  # probed lately, by this housekeeper or another
    error = probe(declared)
    if error:
        mine.filter(probed_at=now).update(passing_probes=0)
        logger.warning("circuit breaker of %s: probe failed: %s", row.kind, error)
        return f"{row.kind}: probe failed"
    mine.filter(probed_at=now).update(passing_probes=F("passing_probes") + 1)
    passed = mine.filter(passing_probes__gte=F("probes_to_close"))
    if not passed.update(state=BreakerState.HALF_OPEN, half_open_at=now, changed_by="", changed_at=now):
        return f"{row.kind}: probe passed"
    concurrency.override(row.kind, declared.breaker_canary)
    return f"{row.kind}: half open, canary of {declared.breaker_canary} next"


def probe(declared) -> str:
    """Run the kind's health check, given breaker_probe_timeout: "" when the upstream answered."""
    timeout, outcome = declared.breaker_probe_timeout, []

    def check() -> None:
        try:
            getattr(declared, declared.health_check)(timeout)
        except Exception as exc:  # noqa: BLE001 - whatever it raises, the upstream did not answer
            outcome.append(escape_controls(f"{type(exc).__name__}: {exc}")[:300])
        else:
            outcome.append("")

    thread = threading.Thread(target=check, name=f"probe {declared.name}", daemon=True)
    thread.start()
    thread.join(timeout)
    return outcome[0] if outcome else f"no answer within {timeout:g} s"


def _recover(row: KindBreaker, declared, now: datetime) -> str:
    paused_by = PausedKind.objects.filter(kind=row.kind).values_list("paused_by", flat=True).first()
    if paused_by == BREAKER:
        if now < row.half_open_at + timedelta(seconds=SETTLE_SECONDS):
            return ""
        concurrency.override(row.kind, declared.breaker_canary)  # again: a housekeeper may have died
        try:
            waiting = pausing.resume_kind(kind=row.kind, paused_by=BREAKER)
        except pausing.KindNotPaused:
            return ""  # another housekeeper was first
        return f"{row.kind}: canary let through ({waiting} waiting)"
    if paused_by is not None:
        return ""  # an operator's own pause holds it
    succeeded = TaskAttempt.objects.filter(
        task__kind=row.kind, outcome=AttemptOutcome.SUCCEEDED, finished_at__gte=row.half_open_at).count()
    left = ReportTask.objects.filter(kind=row.kind, status__in=STILL_TO_RUN).exists()
    if succeeded < declared.breaker_canary and left:
        return ""
    rows = KindBreaker.objects.filter(pk=row.pk, state=BreakerState.HALF_OPEN)
    return f"{row.kind}: closed" if _change(row.kind, "closed", "", rows, **_closed()) else ""


def _closed() -> dict:
    return {"state": BreakerState.CLOSED, "failures": 0, "window_started_at": None, "passing_probes": 0}


# --- an operator's half -----------------------------------------------------------------------------


def breaker_set(*, kind: object, action: str | None, actor: str, thresholds: dict | None = None) -> bool:
    """An operator's change: thresholds (within BOUNDS) and `action`: open (probed, resumed after
    passing probes), hold (paused until an operator closes it) or close (resumed at once). True
    when the state changed. Raises InvalidParams naming the field. The audit is the caller's."""
    if not (action == "close" and isinstance(kind, str) and kind in KINDS):  # closing needs no upstream
        check_kind(kind)
    if action is not None and action not in ACTIONS:
        raise InvalidParams("action", _("must be one of %(choices)s") % {"choices": ", ".join(ACTIONS)})
    thresholds = clean_thresholds(thresholds or {})
    row = breaker_of(kind)
    mine = KindBreaker.objects.filter(pk=row.pk)
    with transaction.atomic():
        if thresholds:
            mine.update(**thresholds)
        now = timezone.now()
        opened_at = Case(When(state=BreakerState.CLOSED, then=Value(now)), default=F("opened_at"))
        if action == "open":
            return _change(kind, "opened", actor, mine.exclude(state=BreakerState.OPEN), opened_at=opened_at,
                           state=BreakerState.OPEN, passing_probes=0, probed_at=None)
        if action == "hold":
            return _change(kind, "held", actor, mine.exclude(state=BreakerState.HELD), opened_at=opened_at,
                           state=BreakerState.HELD)
        if action == "close":
            return _change(kind, "closed", actor, mine.filter(state__in=TRIPPED), **_closed())
    return False
