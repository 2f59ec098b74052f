"""Stored values (statuses, action verbs) as words inside the sentences services raise and commands
print, in the active language.

The msgids and contexts are the console's own (console/labels.py), so one catalogue entry serves
a badge on a page and a word in a refusal alike. A value not listed is shown as it is stored.
"""

from django.utils.translation import pgettext_lazy

STATUSES = {
    # Report tasks.
    "pending": pgettext_lazy("status", "pending"),
    "running": pgettext_lazy("status", "running"),
    "retrying": pgettext_lazy("status", "retrying"),
    "done": pgettext_lazy("status", "done"),
    "dead": pgettext_lazy("status", "dead"),
    "cancelled": pgettext_lazy("status", "cancelled"),
    # Dead letters.
    "open": pgettext_lazy("dead letter status", "open"),
    "replayed": pgettext_lazy("status", "replayed"),
    "archived": pgettext_lazy("status", "archived"),
    "discarded": pgettext_lazy("status", "discarded"),
    "superseded": pgettext_lazy("status", "superseded"),
    "all": pgettext_lazy("status filter", "all"),
    # Bulk actions.
    "paused": pgettext_lazy("status", "paused"),
    "completed": pgettext_lazy("status", "completed"),
    "failed": pgettext_lazy("status", "failed"),
}

VERBS = {
    "replay": pgettext_lazy("verb", "replay"),
    "archive": pgettext_lazy("verb", "archive"),
    "discard": pgettext_lazy("verb", "discard"),
    "restore": pgettext_lazy("verb", "restore"),
}


def status_word(value) -> str:
    key = str(value if value is not None else "")
    return str(STATUSES[key]) if key in STATUSES else key


def verb_word(action) -> str:
    key = str(action or "")
    return str(VERBS[key]) if key in VERBS else key
