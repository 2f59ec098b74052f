"""Why a bulk action is paused: the text stored with it (BulkAction.paused_reason, kept in English
for the API, the audit log and the logs), and the same reason worded in the active language for a
person (the console's pages, a command's output).

The stored text is written here and read back here, so the two forms cannot drift apart; a text
written by an older version, or by hand, is shown as it is.
"""

import re

from django.utils.translation import gettext as _

_BY = "Paused by {actor}."
_AUTOMATIC = (
    "Paused automatically: {died_again} of {finished} replayed tasks that finished died again "
    "({ratio:.0%}, threshold {threshold:.0%}). Fix the cause, then resume, or cancel."
)
_BY_RE = re.compile(r"^Paused by (?P<actor>.*)\.$", re.DOTALL)
_AUTOMATIC_RE = re.compile(
    r"^Paused automatically: (?P<died_again>\d+) of (?P<finished>\d+) replayed tasks that finished died "
    r"again \((?P<ratio>\d+)%, threshold (?P<threshold>\d+)%\)\. Fix the cause, then resume, or cancel\.$"
)


def paused_by(actor: str) -> str:
    return _BY.format(actor=actor)


def paused_automatically(*, died_again: int, finished: int, ratio: float, threshold: float) -> str:
    return _AUTOMATIC.format(died_again=died_again, finished=finished, ratio=ratio, threshold=threshold)


def pause_reason_words(stored: str) -> str:
    """The stored reason in the active language."""
    stored = stored or ""
    found = _AUTOMATIC_RE.match(stored)
    if found:
        return (
            _(
                "Paused automatically: %(died_again)s of %(finished)s replayed tasks that finished died "
                "again (%(ratio)s%%, threshold %(threshold)s%%). Fix the cause, then resume, or cancel."
            )
            % found.groupdict()
        )
    found = _BY_RE.match(stored)
    if found:
        return _("Paused by %(who)s.") % {"who": found["actor"]}
    return stored
