"""The words of the engine's refusals (reports/services/engine.py): a replay of a task that is not
dead, a control (cancel, retry now, stop) of a task that moved on. Each is raised where the
conditional UPDATE matched nothing, in the language active there (the console page's, the API
client's, a command's), so a refused action changes nothing and says why."""

from dataclasses import dataclass
from datetime import datetime

from django.utils.translation import gettext as _

from reports.models import ReportTask
from reports.wording import status_word

# What becomes of a task whose running attempt an operator stops.
STOP_THEN_CANCEL = "cancel"
STOP_THEN_RETRY = "retry"
STOP_CHOICES = (STOP_THEN_CANCEL, STOP_THEN_RETRY)
STOPPED = "stopped by an operator"


class TaskNotFound(Exception):
    pass


class TaskNotReplayable(Exception):
    """Replay asked for a task that is not dead (already replayed, running, done).

    Its message goes to API clients, so it says when, never who: `replayed_by` (an operator's
    username) is for the console's pages only."""

    def __init__(self, task: ReportTask, replayed_by: str = "", replayed_at: datetime | None = None):
        values = {"id": task.public_id, "status": status_word(task.status)}
        if replayed_at:
            values["when"] = f"{replayed_at:%Y-%m-%d %H:%M:%S}"
            detail = _("task %(id)s is %(status)s, not dead; it was replayed at %(when)s UTC") % values
        elif replayed_by:
            detail = _("task %(id)s is %(status)s, not dead; it was replayed already") % values
        else:
            detail = _("task %(id)s is %(status)s, not dead") % values
        super().__init__(detail)
        self.task = task
        self.replayed_by = replayed_by
        self.replayed_at = replayed_at


class TaskNotControllable(Exception):
    """The task is not (or no longer) in a state this control applies to."""

    def __init__(self, task: ReportTask, message: str, *, action: str = ""):
        self.task = task
        self.action = action
        super().__init__(message)


@dataclass(frozen=True)
class Controlled:
    task: ReportTask
    attempt: int | None = None  # the stopped attempt's number


def refusal(task_id: int, action: str, sentence) -> TaskNotControllable:
    """`sentence` words the refusal from the task's id and status (translated where it is raised)."""
    task = ReportTask.objects.filter(pk=task_id).first()
    if task is None:
        unknown = _("no task %(id)s") % {"id": task_id}
        return TaskNotControllable(ReportTask(pk=task_id), unknown, action=action)
    return TaskNotControllable(task, sentence({"id": task.public_id, "status": status_word(task.status)}),
                               action=action)


def stopped_message(note: str = "") -> str:
    """What a stopped attempt and its task record as their error: stored in English, like every
    error (the API and the logs read it); stopped_words gives it in the active language."""
    return f"{STOPPED}{': ' + note if note else ''}"[:500]


def stopped_words(stored: str) -> str:
    """A stored error in the active language when it is a stop's; any other error as it is."""
    stored = stored or ""
    if stored == STOPPED:
        return _("stopped by an operator")
    if stored.startswith(STOPPED + ": "):
        return _("stopped by an operator: %(note)s") % {"note": stored[len(STOPPED) + 2 :]}
    return stored


def without_note(stored: str) -> str:
    """A stored error as a client reads it: a stop's without the operator's note (the console shows it)."""
    return STOPPED if stored.startswith(STOPPED + ": ") else stored
