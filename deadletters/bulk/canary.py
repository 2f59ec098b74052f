"""Canary replays: a bulk replay that makes its first k replays, waits for what they lead to, and
then carries on with the rest at its rate by itself, or stops for good ("canary_failed").

    running --k replays made (or the selection ran out)--> canary   (the runner's job ends here)
    canary --at least canary_success of them done--> pending --> running ... completed
    canary --too many died again, or the deadline passed first--> canary_failed   (final)

The runner makes the k replays and moves the run to `canary` with a deadline
(BULK_CANARY_WAIT_SECONDS); no worker waits. The verdict is given by whoever calls
decide_canaries: the housekeeper (its `canary verdicts` duty, twice a second). It is given as
soon as it is certain: passed once enough are done, failed once too few can still succeed (the
rest died again, or were cancelled) or the deadline has passed. Each
verdict is one conditional UPDATE from `canary`, audited; the counts and the causes of the deaths
are frozen in canary_result, so the run's page and status keep saying why.

While the run waits, the tasks it replayed are exactly the canary: nothing else is replayed in it.
"""

import logging
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from deadletters.alerts.resolved import announce_bulk
from deadletters.audit import record_audit
from deadletters.bulk.control import enqueue_after_commit
from deadletters.bulk.plans import needed_successes
from deadletters.bulk.watch import died_again_causes
from deadletters.models import BulkAction, BulkActionStatus, CanaryPhase, DeadLetter
from reports.models import ReportTask, TaskStatus

logger = logging.getLogger("deadletters.bulk")

UNFINISHED = (TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.RETRYING)
CAUSES_KEPT = 5


@dataclass(frozen=True)
class CanaryCounts:
    replayed: int
    done: int
    died_again: int
    unfinished: int

    @property
    def other(self) -> int:
        """Finished neither done nor dead (cancelled meanwhile): not a success."""
        return self.replayed - self.done - self.died_again - self.unfinished


def canary_counts(bulk: BulkAction) -> CanaryCounts:
    """What the tasks this run replayed so far did: while the run waits on its canary, the canary's."""
    counts = ReportTask.objects.filter(
        pk__in=DeadLetter.objects.filter(replayed_in=bulk).values("task_id")
    ).aggregate(
        replayed=Count("pk"),
        done=Count("pk", filter=Q(status=TaskStatus.DONE)),
        dead=Count("pk", filter=Q(status=TaskStatus.DEAD)),
        unfinished=Count("pk", filter=Q(status__in=UNFINISHED)),
    )
    return CanaryCounts(
        replayed=counts["replayed"], done=counts["done"], died_again=counts["dead"],
        unfinished=counts["unfinished"],
    )


def begin_canary_wait(bulk: BulkAction) -> bool:
    """running -> canary, with its deadline, once the runner made the canary's replays. False when
    the run changed under the runner (paused, cancelled, another runner moved on)."""
    now = timezone.now()
    deadline = now + timedelta(seconds=settings.BULK_CANARY_WAIT_SECONDS)
    with transaction.atomic():
        waiting = BulkAction.objects.filter(
            pk=bulk.pk,
            status=BulkActionStatus.RUNNING,
            canary_phase=CanaryPhase.RUNNING,
            last_processed_id=bulk.last_processed_id,
        ).update(status=BulkActionStatus.CANARY, canary_deadline=deadline, updated_at=now)
        if waiting:
            record_audit(
                action="bulk_canary_wait",
                source="system",
                item_count=bulk.succeeded,
                details={"bulk": str(bulk.public_id), "replayed": bulk.succeeded,
                         "deadline": deadline.isoformat()},
            )
    if waiting:
        logger.info("bulk %s: %s canary replays made, waiting until %s", bulk.public_id, bulk.succeeded,
                    deadline)
    return bool(waiting)


def decide_canaries(*, now: datetime | None = None) -> list[tuple[int, str]]:
    """Give the verdict of every waiting canary whose outcome is certain: [(bulk id, verdict)]."""
    decided = []
    for bulk in BulkAction.objects.filter(status=BulkActionStatus.CANARY).order_by("pk"):
        verdict = decide_canary(bulk, now=now)
        if verdict:
            decided.append((bulk.pk, verdict))
    return decided


def decide_canary(bulk: BulkAction, *, now: datetime | None = None) -> str | None:
    """passed, failed, or None while it is not certain yet (or the run left `canary` meanwhile)."""
    now = now or timezone.now()
    counts = canary_counts(bulk)
    needed = needed_successes(bulk.canary_success, counts.replayed)
    timed_out = bulk.canary_deadline is not None and now >= bulk.canary_deadline
    if counts.done >= needed:
        verdict = CanaryPhase.PASSED
    elif counts.done + counts.unfinished < needed or timed_out:
        verdict = CanaryPhase.FAILED
    else:
        return None
    result = {
        "verdict": str(verdict),
        **asdict(counts),
        "other": counts.other,
        "needed": needed,
        "timed_out": verdict == CanaryPhase.FAILED and counts.done + counts.unfinished >= needed,
        "decided_at": now.isoformat(),
        "causes": died_again_causes(bulk, limit=CAUSES_KEPT),
    }
    result["reason"] = canary_reason(bulk, result)
    with transaction.atomic():
        if verdict == CanaryPhase.PASSED:
            # The died-again watch of the rest starts now: the canary's deaths were judged already.
            changed = BulkAction.objects.filter(pk=bulk.pk, status=BulkActionStatus.CANARY).update(
                status=BulkActionStatus.PENDING,
                canary_phase=CanaryPhase.PASSED,
                canary_result=result,
                filters=dict(bulk.filters or {}, watch_since=now.isoformat()),
                updated_at=now,
            )
        else:
            changed = BulkAction.objects.filter(pk=bulk.pk, status=BulkActionStatus.CANARY).update(
                status=BulkActionStatus.CANARY_FAILED,
                canary_phase=CanaryPhase.FAILED,
                canary_result=result,
                finished_at=now,
                updated_at=now,
            )
        if not changed:
            return None  # cancelled meanwhile, or another planner gave the verdict first
        record_audit(
            action=f"bulk_canary_{str(verdict)}",
            source="system",
            item_count=counts.replayed,
            reason=result["reason"],
            details={"bulk": str(bulk.public_id), **{k: v for k, v in result.items() if k != "reason"}},
        )
        if verdict == CanaryPhase.PASSED:
            enqueue_after_commit(bulk.pk)
        else:
            bulk.status = BulkActionStatus.CANARY_FAILED
            announce_bulk(
                bulk=bulk,
                news="canary_failed",
                replayed=counts.replayed,
                done=counts.done,
                died=counts.died_again,
                needed=needed,
            )
    log = logger.info if verdict == CanaryPhase.PASSED else logger.warning
    log("bulk %s: %s", bulk.public_id, result["reason"])
    return str(verdict)


def canary_reason(bulk: BulkAction, result: dict) -> str:
    """The verdict in a sentence (the audit log, the API, the shell; the console words its own)."""
    share = f"{bulk.canary_success:.0%}"
    if result["verdict"] == CanaryPhase.PASSED:
        return (
            f"Canary passed: {result['done']} of {result['replayed']} replayed tasks done "
            f"(at least {result['needed']}, {share}, had to succeed); carrying on with the rest."
        )
    causes = ", ".join(f"{c['error_type']} x{c['count']}" for c in result["causes"])
    text = (
        f"Canary failed: {result['died_again']} of {result['replayed']} replayed tasks died again"
        + (f" ({causes})" if causes else "")
        + f", {result['done']} done"
    )
    if result.get("other"):
        text += f", {result['other']} cancelled"
    if result["unfinished"]:
        text += f", {result['unfinished']} unfinished" + (" at the deadline" if result["timed_out"] else "")
    return text + (
        f"; at least {result['needed']} ({share}) had to succeed. The rest of the selection was not replayed."
    )


def canary_reason_words(result: dict) -> str:
    """canary_reason's sentence in the active language, from the verdict's counts (kept with it);
    "" when they are not there."""
    try:
        counts = {k: int(result[k]) for k in ("replayed", "done", "died_again", "needed")}
    except (KeyError, TypeError, ValueError):
        return ""
    if result.get("verdict") == CanaryPhase.PASSED:
        return _(
            "Canary passed: %(done)s of its %(replayed)s replays ended done (at least %(needed)s had to); "
            "the rest runs at the run's rate."
        ) % counts
    text = _("Canary failed: the run stopped.") + " " + ngettext(
        "%(died)s of the %(replayed)s canary replay died again, %(done)s done",
        "%(died)s of the %(replayed)s canary replays died again, %(done)s done",
        counts["replayed"],
    ) % {"died": counts["died_again"], **counts}
    causes = [c for c in result.get("causes") or () if isinstance(c, dict)]
    if causes:
        text += " (" + ", ".join(f"{c.get('error_type', '')} ×{c.get('count', '')}" for c in causes) + ")"
    if result.get("unfinished"):
        text += _(", %(n)s unfinished when it was decided") % {"n": result["unfinished"]}
    return text + _("; at least %(needed)s had to end done.") % counts


def canary_view(bulk: BulkAction) -> dict | None:
    """The canary of a run for its page and its status: its settings, phase and counts (frozen at
    the verdict, live before it), the deaths' causes and the verdict's reason."""
    if not bulk.canary_size:
        return None
    if bulk.canary_result:
        counts = {k: bulk.canary_result.get(k, 0) for k in ("replayed", "done", "died_again", "unfinished")}
        causes = bulk.canary_result.get("causes", [])
        reason = bulk.canary_result.get("reason", "")
        needed = bulk.canary_result.get("needed", 0)
    else:
        live = canary_counts(bulk) if bulk.canary_phase == CanaryPhase.RUNNING else CanaryCounts(0, 0, 0, 0)
        counts = asdict(live)
        causes = died_again_causes(bulk, limit=CAUSES_KEPT) if live.died_again else []
        reason = ""
        needed = needed_successes(bulk.canary_success, bulk.canary_size)
    return {
        "size": bulk.canary_size,
        "success_share": bulk.canary_success,
        "phase": bulk.canary_phase,
        "needed": needed,
        **counts,
        "deadline": bulk.canary_deadline,
        "causes": [
            {"fingerprint": c["fingerprint"], "error_type": c["error_type"], "count": c["count"],
             "newest": c["newest"]}
            for c in causes
        ],
        "reason": reason,
    }
