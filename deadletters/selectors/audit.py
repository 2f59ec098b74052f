"""Read-side queries about the audit log."""

from django.conf import settings
from django.db.models import Q

from config.keyset import Cursor, KeysetPage, keyset_page
from deadletters.models import AuditEntry, BulkAction, DeadLetter

# The actor filter's value for entries nobody signed (the worker, the archiver, the reaper): an
# empty actor. Parentheses cannot occur in a username, so no real actor is shadowed.
NO_ACTOR = "(system)"


def audit_for_dead_letter(letter: DeadLetter, *, limit: int = 100) -> list[AuditEntry]:
    """The letter's and its task's entries, and those of the runs made for this letter alone
    (its "Replay later…": scheduled, started, cancelled)."""
    runs = BulkAction.objects.filter(selected_ids=[letter.pk]).values_list("public_id", flat=True)[:50]
    own_runs = [str(public_id) for public_id in runs]
    mine = Q(dead_letter=letter) | Q(task_id=letter.task_id)
    if own_runs:
        mine |= Q(details__bulk__in=own_runs)
    return list(AuditEntry.objects.filter(mine).order_by("-created_at", "-id")[:limit])


def audit_for_task(task, *, limit: int = 100) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(task=task).order_by("-created_at", "-id")[:limit])


def audit_page(*, actor: str = "", action: str = "", cursor: Cursor | None = None) -> KeysetPage:
    qs = AuditEntry.objects.select_related("task", "dead_letter").defer(
        "task__params",
        "task__last_error",
        "dead_letter__traceback",
        "dead_letter__params",
        "dead_letter__error_message",
    )
    if actor:
        qs = qs.filter(actor="" if actor == NO_ACTOR else actor)
    if action:
        qs = qs.filter(action=action)
    return keyset_page(qs, cursor=cursor, size=settings.CONSOLE_PAGE_SIZE)


def audit_choices() -> dict:
    return {
        "no_actor": NO_ACTOR,
        "actions": list(
            AuditEntry.objects.order_by("action").values_list("action", flat=True).distinct()[:100]
        ),
        "actors": [
            actor or NO_ACTOR
            for actor in AuditEntry.objects.order_by("actor").values_list("actor", flat=True).distinct()[:200]
        ],
    }
