"""Submitting a report task: validate, insert, enqueue once the row is committed."""

import hashlib
import json
import logging
from contextlib import nullcontext
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils.translation import gettext as _

from reports.errors import InvalidParams
from reports.kinds import KINDS, get_kind
from reports.models import ApiToken, Priority, ReportTask
from reports.services.enqueue import enqueue_attempts_on_commit

logger = logging.getLogger(__name__)

IDEMPOTENCY_KEY_MAX = 200
# A task's params, as JSON, at most this large.
PARAMS_MAX_BYTES = 64 * 1024


class IdempotencyConflict(Exception):
    """The key was used before for a different kind or different params."""

    def __init__(self, task: ReportTask):
        super().__init__(f"idempotency key already used for task {task.public_id} with other params")
        self.task = task


@dataclass(frozen=True)
class SubmitResult:
    task: ReportTask
    created: bool


def validate_submission(*, kind: object, params: object, priority: object = None) -> tuple[str, dict, str]:
    """Check kind, params and priority; return them cleaned or raise InvalidParams naming the field."""
    if not isinstance(kind, str) or not kind:
        raise InvalidParams("kind", _("is required"))
    report_kind = get_kind(kind)
    if report_kind is None:
        raise InvalidParams(
            "kind",
            _("unknown report kind %(kind)r; known: %(known)s")
            % {"kind": kind[:64], "known": ", ".join(sorted(KINDS))},
        )
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise InvalidParams("params", _("must be a JSON object"))
    if contains_nul(params):
        # No database column takes NUL (PostgreSQL refuses it in text and JSON).
        raise InvalidParams("params", _("holds a NUL character (\\u0000), which is never accepted"))
    size = len(json.dumps(params, ensure_ascii=False).encode())
    if size > PARAMS_MAX_BYTES:
        raise InvalidParams(
            "params",
            _("is %(size)d bytes; the limit is %(limit)d") % {"size": size, "limit": PARAMS_MAX_BYTES},
        )
    if priority is None or priority == "":
        priority = settings.REPORT_KIND_PRIORITIES.get(kind, report_kind.default_priority)
    if priority not in Priority.values:
        raise InvalidParams("priority",
                            _("must be one of %(choices)s") % {"choices": ", ".join(Priority.values)})
    cleaned = report_kind.validate(params)
    return kind, cleaned, priority


def contains_nul(value) -> bool:
    """A NUL character anywhere in a JSON value, keys included: every face (API, console edit,
    batch) refuses it through this one check."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def params_digest(kind: str, params: dict, owner_id: int | None) -> str:
    """What makes two tasks the same report for supersession: kind, client (None: the operators)
    and params, whatever the order of their keys."""
    text = json.dumps([kind, owner_id, params], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(text.encode(), digest_size=20).hexdigest()


def validate_idempotency_key(key: object) -> str | None:
    if key is None or key == "":
        return None
    if not isinstance(key, str) or len(key) > IDEMPOTENCY_KEY_MAX or not key.isprintable():
        raise InvalidParams(
            "idempotency_key", f"must be printable text of at most {IDEMPOTENCY_KEY_MAX} characters"
        )
    return key


def submit_task(
    *,
    kind: object,
    params: object,
    priority: object = None,
    idempotency_key: object = None,
    submitted_by: str = "",
    owner: ApiToken | None = None,
) -> SubmitResult:
    """`owner`: the API client submitting; its idempotency keys are its own (None: console, shell)."""
    kind, cleaned, priority = validate_submission(kind=kind, params=params, priority=priority)
    key = validate_idempotency_key(idempotency_key)
    try:
        # One INSERT: in autocommit its own transaction, inside a caller's a savepoint (a used key
        # must not break the caller's transaction). A key used before (or by a concurrent submit)
        # fails it on the unique index, so the usual submit, with a new key, reads nothing first.
        with transaction.atomic() if connection.in_atomic_block else nullcontext():
            task = ReportTask.objects.create(
                kind=kind,
                params=cleaned,
                params_digest=params_digest(kind, cleaned, owner.pk if owner else None),
                priority=priority,
                max_attempts=settings.REPORT_MAX_ATTEMPTS,
                timeout_seconds=settings.REPORT_JOB_TIMEOUT,
                idempotency_key=key,
                submitted_by=submitted_by[:150],
                owner=owner,
            )
    except IntegrityError:
        existing = ReportTask.objects.filter(owner=owner, idempotency_key=key).first() if key else None
        if existing is None:
            raise
        return _idempotent_repeat(existing, kind, cleaned)
    # The attempt's job, once the row is committed (at once in autocommit): one Redis round trip.
    enqueue_attempts_on_commit([(task.pk, task.attempt + 1, priority, task.timeout_seconds, kind)])
    logger.info("submitted task %s kind=%s priority=%s", task.public_id, kind, priority)
    return SubmitResult(task=task, created=True)


def _idempotent_repeat(existing: ReportTask, kind: str, cleaned: dict) -> SubmitResult:
    if existing.kind != kind or existing.params != cleaned:
        raise IdempotencyConflict(existing)
    return SubmitResult(task=existing, created=False)
