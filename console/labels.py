"""The words the console shows for stored values (statuses, outcomes, actions), in the page's language.

The database keeps the English values ("open", "bulk_replay"); templates show them through the
`label` filter (console_format), and a value not listed here is shown as it is stored.
"""

from django.utils.translation import gettext_lazy, pgettext_lazy

# Values whose meaning is the same wherever they appear.
COMMON = {
    # Dead letters.
    "open": pgettext_lazy("dead letter status", "open"),
    "replayed": pgettext_lazy("status", "replayed"),
    "archived": pgettext_lazy("status", "archived"),
    "discarded": pgettext_lazy("status", "discarded"),
    "superseded": pgettext_lazy("status", "superseded"),
    "all": pgettext_lazy("status filter", "all"),
    # Report tasks.
    "pending": pgettext_lazy("status", "pending"),
    "running": pgettext_lazy("status", "running"),
    "retrying": pgettext_lazy("status", "retrying"),
    "done": pgettext_lazy("status", "done"),
    "dead": pgettext_lazy("status", "dead"),
    # Batches, bulk actions, alerts, attempts.
    "completed": pgettext_lazy("status", "completed"),
    "cancelled": pgettext_lazy("status", "cancelled"),
    "paused": pgettext_lazy("status", "paused"),
    "failed": pgettext_lazy("status", "failed"),
    "sent": pgettext_lazy("status", "sent"),
    "skipped": pgettext_lazy("status", "skipped"),
    "succeeded": pgettext_lazy("status", "succeeded"),
    "timeout": pgettext_lazy("status", "timeout"),
    "abandoned": pgettext_lazy("status", "abandoned"),
    "active": pgettext_lazy("status", "active"),
    "scheduled": pgettext_lazy("status", "scheduled"),
    "canary": pgettext_lazy("bulk status", "canary: waiting"),
    "canary_failed": pgettext_lazy("status", "canary failed"),
    "muted": pgettext_lazy("alert status", "muted"),
    "stopped": pgettext_lazy("attempt outcome", "stopped"),
    "infra": pgettext_lazy("attempt outcome", "our outage (not charged)"),
    # RQ workers.
    "busy": pgettext_lazy("worker state", "busy"),
    "idle": pgettext_lazy("worker state", "idle"),
    "suspended": pgettext_lazy("worker state", "suspended"),
    "started": pgettext_lazy("worker state", "started"),
    # Priorities (queues).
    "high": pgettext_lazy("priority", "high"),
    "default": pgettext_lazy("priority", "default"),
    "low": pgettext_lazy("priority", "low"),
    # Actions (bulk actions and audit entries).
    "replay": pgettext_lazy("action", "replay"),
    "archive": pgettext_lazy("action", "archive"),
    "discard": pgettext_lazy("action", "discard"),
    "restore": pgettext_lazy("action", "restore"),
    "pause": pgettext_lazy("action", "pause"),
    "resume": pgettext_lazy("action", "resume"),
    "cancel": pgettext_lazy("action", "cancel"),
    "purge": pgettext_lazy("action", "purge"),
    "restore_purge": pgettext_lazy("action", "restore purge"),
    "stop": pgettext_lazy("action", "stop attempt"),
    "retry_now": pgettext_lazy("action", "retry now"),
    "snooze_alerts": pgettext_lazy("action", "mute alerts"),
    "cause_note": pgettext_lazy("action", "runbook note"),
    "cause_note_clear": pgettext_lazy("action", "runbook note cleared"),
    "lift_snooze": pgettext_lazy("action", "unmute alerts"),
    "replay_later": pgettext_lazy("action", "replay later"),
    "pause_kind": pgettext_lazy("action", "pause kind"),
    "resume_kind": pgettext_lazy("action", "resume kind"),
    "breaker_opened": pgettext_lazy("action", "breaker opened"),
    "breaker_reopened": pgettext_lazy("action", "breaker opened again"),
    "breaker_held": pgettext_lazy("action", "breaker held open"),
    "breaker_closed": pgettext_lazy("action", "breaker closed"),
    "breaker_thresholds": pgettext_lazy("action", "breaker thresholds changed"),
    "supersede": pgettext_lazy("action", "mark superseded"),
    "bulk_replay": pgettext_lazy("action", "bulk replay"),
    "bulk_archive": pgettext_lazy("action", "bulk archive"),
    "bulk_discard": pgettext_lazy("action", "bulk discard"),
    "bulk_restore": pgettext_lazy("action", "bulk restore"),
    "bulk_pause": pgettext_lazy("action", "bulk pause"),
    "bulk_resume": pgettext_lazy("action", "bulk resume"),
    "bulk_cancel": pgettext_lazy("action", "bulk cancel"),
    "bulk_rate": pgettext_lazy("action", "bulk rate change"),
    "bulk_scheduled_start": pgettext_lazy("action", "scheduled bulk started"),
    "bulk_canary_wait": pgettext_lazy("action", "bulk canary made"),
    "bulk_canary_passed": pgettext_lazy("action", "bulk canary passed"),
    "bulk_canary_failed": pgettext_lazy("action", "bulk canary failed"),
    # Where an audited action came from.
    "console": pgettext_lazy("source", "console"),
    "api": pgettext_lazy("source", "API"),
    "cli": pgettext_lazy("source", "command line"),
    "cron": pgettext_lazy("source", "cron"),
    "system": pgettext_lazy("source", "system"),
}

# Values that mean something else in one place.
BY_CONTEXT = {
    "batch": {"open": pgettext_lazy("batch status", "open")},
    "breaker": {
        "closed": pgettext_lazy("breaker state", "closed: running"),
        "open": pgettext_lazy("breaker state", "open: paused, probing"),
        "half_open": pgettext_lazy("breaker state", "half open: canary running"),
        "held": pgettext_lazy("breaker state", "held open"),
    },
}

# Verbs inside sentences ("This will replay 12 dead letters").
VERBS = {
    "replay": pgettext_lazy("verb", "replay"),
    "archive": pgettext_lazy("verb", "archive"),
    "discard": pgettext_lazy("verb", "discard"),
    "restore": pgettext_lazy("verb", "restore"),
}


# How Python links two exceptions of one traceback (console.traceback keeps its English line).
CHAIN_NOTES = {
    "The above exception was the direct cause of the following exception:": gettext_lazy(
        "The exception above was the direct cause of the one below"
    ),
    "During handling of the above exception, another exception occurred:": gettext_lazy(
        "Raised while handling the exception above"
    ),
}


def label(value, context: str = "") -> str:
    key = str(value if value is not None else "")
    found = BY_CONTEXT.get(context, {}).get(key) or COMMON.get(key)
    return str(found) if found is not None else key


def verb(action) -> str:
    key = str(action or "")
    return str(VERBS[key]) if key in VERBS else key


def chain_note(note: str) -> str:
    found = CHAIN_NOTES.get(note)
    return str(found) if found is not None else note
