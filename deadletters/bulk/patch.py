"""A params patch: one edit of the params of every task a bulk replay replays (edit-and-replay in bulk).

    {"set": {"date_from": "2026-10-01"}, "remove": ["region"],
     "replace": {"url": {"from": "old.example.com", "to": "new.example.com"}}}

`remove` drops keys, `set` gives keys a value (added or overwritten), `replace` swaps text inside a
key's string value (key "*": inside every string value), in that order, on the task's params. The
result is validated by the kind as a single letter's edited params are (validate_submission, which
requeue_dead_task uses): a task whose patched params fail is refused with its reasons, not replayed.
"""

import json
import math
import re
from dataclasses import dataclass

from django.utils.translation import gettext as _

from deadletters.bulk.selection import InvalidBulkRequest, Selection
from reports.errors import InvalidParams
from reports.kinds.masking import params_for_display
from reports.models import ReportTask, TaskStatus
from reports.services import contains_nul, validate_submission
from reports.services.submission import params_digest

NAMES_MAX = 20  # params each operation names at most
NAME = re.compile(r"\*|[A-Za-z0-9_.-]{1,64}")  # a param's name, or * (every text param)
TEXT_MAX = 2000  # characters of a value set, or of a replaced text and its replacement
TYPED_MAX = 256 * 1024  # characters of a patch typed in the console or the shell
OPERATIONS = ("set", "replace", "remove")
SAMPLE_SIZE = 5  # letters whose before/after the preview shows
REFUSALS_KEPT = 20  # refused letters (with their reasons) a preview shows and a run keeps
PREVIEW_CHECK_MAX = 20_000  # tasks a preview patches and validates; the run checks every one


def parse_params_patch(value: object, *, action: str = "replay") -> dict | None:
    """The operator's patch (a JSON object, or its text from a form or the shell), checked as the
    OpenAPI document's ParamsPatch states it; None when none was given. Raises InvalidBulkRequest
    naming params_patch. Whether the names are the kind's params, and the values right for them, the
    kind's validation says per letter."""
    if value is None or value == "":
        return None
    if action != "replay":
        raise _refused(_("only a replay can edit params"))
    if isinstance(value, str):
        try:
            value = json.loads(value) if len(value) <= TYPED_MAX else None
        except ValueError:
            value = None
    if not isinstance(value, dict) or not value or set(value) - set(OPERATIONS):
        raise _refused(_("must be a JSON object of set, replace or remove"))
    if contains_nul(value):
        raise _refused(_("holds a NUL character (\\u0000), which is never accepted"))
    for operation, given in value.items():
        shape, fits = _SHAPES[operation]
        if not (isinstance(given, shape) and 0 < len(given) <= NAMES_MAX
                and all(isinstance(name, str) and NAME.fullmatch(name) for name in given)
                and (fits is None or all(fits(item) for item in given.values()))):
            raise _refused(_shape_message(operation))
    return {**value, "remove": sorted(set(value["remove"]))} if "remove" in value else dict(value)


def _fits_set(value: object) -> bool:
    if isinstance(value, str):
        return len(value) <= TEXT_MAX
    return value is None or isinstance(value, bool | int) or isinstance(value, float) and math.isfinite(value)


def _fits_replace(swap: object) -> bool:
    return (isinstance(swap, dict) and set(swap) == {"from", "to"} and swap["from"] != ""
            and all(isinstance(text, str) and len(text) <= TEXT_MAX for text in swap.values()))


_SHAPES = {"set": (dict, _fits_set), "replace": (dict, _fits_replace), "remove": (list, None)}


def _shape_message(operation: str) -> str:
    limits = {"n": NAMES_MAX, "max": TEXT_MAX}
    if operation == "set":
        return _("set must name 1 to %(n)d params with their values (text of at most %(max)d characters, "
                 "a number, true, false or null)") % limits
    if operation == "replace":
        return _('replace must name 1 to %(n)d params, each with {"from": "text", "to": "text"} (at most '
                 "%(max)d characters each, from not empty)") % limits
    return _("remove must list 1 to %(n)d param names") % limits


def _refused(message: str) -> InvalidBulkRequest:
    return InvalidBulkRequest("params_patch", message)


def apply_params_patch(params: dict, patch: dict) -> dict:
    """The params after the patch (not validated yet)."""
    patched = {key: value for key, value in params.items() if key not in patch.get("remove", ())}
    patched.update(patch.get("set", {}))
    for key, swap in patch.get("replace", {}).items():
        for name in list(patched) if key == "*" else [key]:
            if isinstance(patched.get(name), str):
                patched[name] = patched[name].replace(swap["from"], swap["to"])
    return patched


def patch_task(task_kind: str, params: dict, priority: str, patch: dict) -> tuple[dict, dict | None]:
    """The patched params as the kind cleans them, and what changed (params_diff); InvalidParams, with
    every reason, when the kind refuses them."""
    patched = apply_params_patch(params, patch)
    after = validate_submission(kind=task_kind, params=patched, priority=priority)[1]
    return after, params_diff(params, after)


def params_diff(before: dict, after: dict) -> dict | None:
    """The keys that changed, before and after (a key left out was absent); None when none did."""
    changed = sorted(key for key in {*before, *after} if before.get(key, ...) != after.get(key, ...))
    if not changed:
        return None
    return {"before": {k: before[k] for k in changed if k in before},
            "after": {k: after[k] for k in changed if k in after}}


def refusal(letter_id: int, exc: InvalidParams) -> dict:
    """A refused letter as a run keeps it and a preview shows it: its id and each [param, reason]."""
    errors = getattr(exc, "errors", [(exc.field, exc.message)])
    return {"dead_letter": letter_id, "reasons": [[name, message] for name, message in errors]}


def patch_batch(patch: dict, acting: dict[int, int]) -> tuple[dict[int, int], dict, list[dict]]:
    """Patch and validate the dead tasks of `acting` (task id -> its acting letter), their rows locked
    in id order until the batch commits: (the tasks to replay, {task id: (new params, diff, their
    params_digest)} of those the patch changes, the refused letters)."""
    replay, edits, refused = {}, {}, []
    rows = (ReportTask.objects.select_for_update().filter(pk__in=list(acting), status=TaskStatus.DEAD)
            .order_by("pk").values_list("pk", "kind", "params", "priority", "owner_id"))
    for task_id, task_kind, params, priority, owner_id in rows:
        try:
            after, diff = patch_task(task_kind, params, priority, patch)
        except InvalidParams as exc:
            refused.append(refusal(acting[task_id], exc))
            continue
        replay[task_id] = acting[task_id]
        if diff:
            edits[task_id] = (after, diff, params_digest(task_kind, after, owner_id))
    return replay, edits, refused


@dataclass(frozen=True)
class PatchPreview:
    checked: int  # tasks patched and validated (at most PREVIEW_CHECK_MAX)
    changed: int  # of those, whose params the patch changes
    invalid: int  # of those, refused by their kind's validation
    refusals: list[dict]  # the first REFUSALS_KEPT: {"dead_letter", "reasons": [[param, message]]}
    sample: list[dict]  # the first SAMPLE_SIZE changed: {"dead_letter", "kind", "before", "after"}


def preview_params_patch(selection: Selection, patch: dict, *, can_see: bool) -> PatchPreview:
    """Dry run of the patch over the selection's replayable letters, one letter per task as the run
    takes them (the lowest id), changing nothing."""
    letters = (selection.queryset().filter(task__status=TaskStatus.DEAD).order_by("pk")
               .values_list("pk", "task_id", "task__kind", "task__params", "task__priority"))
    seen: set[int] = set()
    changed, refusals, sample, invalid = 0, [], [], 0
    for letter_id, task_id, task_kind, params, priority in letters.iterator(chunk_size=2000):
        if task_id in seen:
            continue
        if len(seen) >= PREVIEW_CHECK_MAX:
            break
        seen.add(task_id)
        try:
            diff = patch_task(task_kind, params, priority, patch)[1]
        except InvalidParams as exc:
            invalid += 1
            if len(refusals) < REFUSALS_KEPT:
                refusals.append(refusal(letter_id, exc))
            continue
        changed += bool(diff)
        if diff and len(sample) < SAMPLE_SIZE:
            shown = {side: params_for_display(diff[side], task_kind, can_see=can_see) for side in diff}
            sample.append({"dead_letter": letter_id, "kind": task_kind, **shown})
    return PatchPreview(checked=len(seen), changed=changed, invalid=invalid, refusals=refusals, sample=sample)
