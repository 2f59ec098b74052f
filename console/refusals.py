"""Why an action did nothing, in the page's language.

The services raise their refusals translated already (in the language active where they are
raised); the console words some of them again from the exceptions' own fields, where a page says
more than the API may (who replayed, local time) or names a field by its label on the form
rather than by its API name.
"""

from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy, pgettext_lazy

from console import labels


def _when(value) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S %Z") if value else ""


def letter_conflict(exc) -> str:
    """A DeadLetterConflict: the letter is no longer in a state the action applies to."""
    letter = exc.letter
    changed_at = {"replayed": letter.replayed_at, "archived": letter.archived_at,
                  "discarded": letter.discarded_at}
    when = _when(changed_at.get(letter.status))
    values = {"id": letter.pk, "status": labels.label(letter.status), "when": when, "who": letter.replayed_by}
    if letter.status == "replayed" and letter.replayed_by and when:
        detail = gettext("dead letter %(id)s is %(status)s since %(when)s (replayed by %(who)s)") % values
    elif when:
        detail = gettext("dead letter %(id)s is %(status)s since %(when)s") % values
    else:
        detail = gettext("dead letter %(id)s is %(status)s") % values
    return gettext("Cannot %(verb)s: %(detail)s.") % {"verb": labels.verb(exc.action), "detail": detail}


def replay_refusal(exc) -> str:
    """A TaskNotReplayable: replayed already, or the task is not dead."""
    task = exc.task
    status = labels.label(task.status)
    if exc.replayed_by or exc.replayed_at:
        values = {"who": exc.replayed_by or gettext("the system"), "when": _when(exc.replayed_at),
                  "status": status}
        if exc.replayed_at:
            return gettext("Already replayed by %(who)s at %(when)s; the task is now %(status)s.") % values
        return gettext("Already replayed by %(who)s; the task is now %(status)s.") % values
    if task.status == "dead":
        return gettext("This dead letter cannot be replayed.")
    return gettext("The task is %(status)s, not dead: there is nothing to replay.") % {"status": status}


def bulk_conflict(exc, action: str) -> str:
    """A BulkStateConflict: pause, resume, cancel or a rate change asked of a finished bulk."""
    values = {"status": labels.label(exc.bulk.status)}
    words = {
        "pause": gettext("cannot pause a bulk action that is %(status)s"),
        "resume": gettext("cannot resume a bulk action that is %(status)s"),
        "cancel": gettext("cannot cancel a bulk action that is %(status)s"),
        "rate": gettext("cannot change the rate of a bulk action that is %(status)s"),
    }
    return words.get(action, words["rate"]) % values


# The dead-letter filter's parameters by their labels on the filter form.
FILTER_FIELDS = {
    "status": gettext_lazy("Status"),
    "kind": gettext_lazy("Kind"),
    "error_type": gettext_lazy("Error type"),
    "fingerprint": gettext_lazy("Cause"),
    "batch": gettext_lazy("Batch"),
    "created_from": gettext_lazy("From"),
    "created_to": gettext_lazy("To"),
    "q": gettext_lazy("Search"),
    "sort": gettext_lazy("Sort"),
}

# A bulk request's fields by what the preview form calls them.
BULK_FIELDS = {
    "ids": pgettext_lazy("bulk field", "selected dead letters"),
    "max_id": pgettext_lazy("bulk field", "snapshot"),
    "filter_qs": pgettext_lazy("bulk field", "filter"),
    "rate_per_second": pgettext_lazy("bulk field", "rate"),
    "pause_threshold": pgettext_lazy("bulk field", "pause threshold"),
}


def filter_refusal(exc) -> str:
    """An InvalidFilter: the field by its label, then what is wrong with it."""
    field = FILTER_FIELDS.get(exc.param, exc.param)
    return gettext("%(field)s: %(message)s") % {"field": field, "message": exc.message}


def bulk_request_refusal(exc) -> str:
    """An InvalidBulkRequest, without the API's field names."""
    if exc.filter_error is not None:
        return gettext("%(field)s: %(message)s") % {
            "field": BULK_FIELDS["filter_qs"], "message": filter_refusal(exc.filter_error)}
    if exc.field == "action":
        return gettext("the form asked for an action the console does not know")
    if exc.field == "scope":
        return gettext(
            "the form did not say which dead letters: the selected ones or everything matching the filter")
    return gettext("%(field)s: %(message)s") % {
        "field": BULK_FIELDS.get(exc.field, exc.field), "message": exc.message}
