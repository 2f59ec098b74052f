"""Why an action did nothing, in the page's language.

deadletters raises its conflicts with English messages (the JSON API shows those); the console
words them again from the exceptions' own fields.
"""

from django.utils import timezone
from django.utils.translation import gettext

from console import labels


def _when(value) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S %Z") if value else ""


def letter_conflict(exc) -> str:
    """A DeadLetterConflict: the letter is no longer in a state the action applies to."""
    letter = exc.letter
    changed_at = {"replayed": letter.replayed_at, "archived": letter.archived_at, "discarded": letter.discarded_at}
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
        values = {"who": exc.replayed_by or gettext("the system"), "when": _when(exc.replayed_at), "status": status}
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
