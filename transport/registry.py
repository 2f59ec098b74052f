"""The job functions a worker may run. Anyone who can write to Redis can push a job naming any
importable function (`os.system`, ...), and RQ imports and calls whatever a job names; the
workers hold the database, storage and DingTalk credentials. So a worker runs only the functions
the apps declared at start-up (AppConfig.ready), and refuses anything else before importing it.

What Redis access still grants: pushing, deleting or delaying the
allowed jobs with arguments of its choosing (each job function checks its payload and the
database decides, so a forged job can at most make a real task run at another time) and reading
job ids and worker names."""

import logging
import threading

from rq.job import Job
from rq.utils import import_attribute

logger = logging.getLogger(__name__)

_allowed: set[str] = set()
_refused_logged: set[str] = set()
_log_lock = threading.Lock()


class JobFunctionRefused(Exception):
    """A job named a function that is not on the allowlist; it was not imported."""


def allow_job_functions(*dotted_paths: str) -> None:
    """Declare job functions a worker may run (called from each app's AppConfig.ready)."""
    _allowed.update(dotted_paths)


def allowed_job_functions() -> frozenset[str]:
    return frozenset(_allowed)


def _refuse(what: str, name: str) -> JobFunctionRefused:
    with _log_lock:
        first = name not in _refused_logged
        _refused_logged.add(name)
    if first:  # once per name and process: a flood of forged jobs must not flood the log
        logger.error("refused a job %s %r: not on the allowlist of job functions", what, name[:200])
    return JobFunctionRefused(f"job {what} {name[:200]!r} is not on the allowlist")


def note_refusal(job: Job) -> bool:
    """True when the job names something off the list, logged here (once per name): a forking
    worker calls this before it forks, so its horses, which inherit what was logged, stay quiet."""
    if not isinstance(job, AllowlistedJob):
        return False  # another job class imports what it names; nothing to check it against here
    try:
        job.func, job.success_callback, job.failure_callback, job.stopped_callback  # noqa: B018 - the checks
    except JobFunctionRefused:
        return True
    except Exception:  # an undecodable payload: RQ fails it in the horse, with its own message
        return False
    return False


class AllowlistedJob(Job):
    """RQ's Job, but its function and callbacks are imported only when they are on the allowlist.
    A refused job fails like any failing job (the worker lives on) and runs nothing."""

    @property
    def func(self):
        name = self.func_name
        if name is None:
            return None
        if self.instance is not None:
            raise _refuse("method", name)
        if name not in _allowed:
            raise _refuse("function", name)
        return super().func

    def _callback(self, attribute: str, name_attribute: str):
        name = getattr(self, name_attribute, None)
        if name and name not in _allowed:
            raise _refuse("callback", name)
        return getattr(super(), attribute)

    @property
    def success_callback(self):
        return self._callback("success_callback", "_success_callback_name")

    @property
    def failure_callback(self):
        return self._callback("failure_callback", "_failure_callback_name")

    @property
    def stopped_callback(self):
        return self._callback("stopped_callback", "_stopped_callback_name")


def allowed_function(name: str):
    """The job function `name` names, imported only when it is on the allowlist."""
    if name not in _allowed:
        raise _refuse("function", name)
    return import_attribute(name)
