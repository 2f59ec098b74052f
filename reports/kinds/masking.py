"""Who sees a task's params. Every face (console pages, API, exports, alert cards) shows params
through params_for_display: the keys always, the values only to whoever may see them (the
permission `deadletters.view_params`, a client its own tasks, a channel with `show_params`), and a
kind's sensitive keys (`Param(..., sensitive=True)`) to nobody. Only the worker hands the kind the
real values, and it takes them out of the error and traceback it stores (masked_failure)."""

from dataclasses import replace

from reports.errors import FailureInfo
from reports.kinds import KINDS, get_kind

MASK = "•••"
# A shorter sensitive value is not looked for in texts: it would mask line numbers and words.
MIN_MASKED_LENGTH = 4


def _sensitive_keys(kind: str) -> frozenset[str]:
    report_kind = get_kind(kind)
    return report_kind.sensitive_keys if report_kind else frozenset()


def params_for_display(params: dict, kind: str, *, can_see: bool) -> dict:
    """The params as a face shows them: every value masked unless `can_see`, sensitive ones always."""
    params = params if isinstance(params, dict) else {}
    hidden = _sensitive_keys(kind) if can_see else params.keys()
    return {key: MASK if key in hidden else value for key, value in params.items()}


def patch_for_display(patch: dict | None, *, can_see: bool) -> dict | None:
    """A params patch (deadletters.bulk.patch) as a face shows it: its keys, and the values it sets
    and the texts it replaces as params_for_display shows values (a patch may cross kinds: a key any
    kind holds sensitive is masked for everyone)."""
    if not isinstance(patch, dict):
        return patch
    hidden = frozenset().union(*(kind.sensitive_keys for kind in KINDS.values())) if can_see else None

    def shown(key, value):
        return MASK if hidden is None or key in hidden else value

    shown_patch = dict(patch)
    if isinstance(patch.get("set"), dict):
        shown_patch["set"] = {key: shown(key, value) for key, value in patch["set"].items()}
    if isinstance(patch.get("replace"), dict):
        shown_patch["replace"] = {
            key: {side: shown(key, text) for side, text in rule.items()} if isinstance(rule, dict) else rule
            for key, rule in patch["replace"].items()
        }
    return shown_patch


def unmask_params(edited: dict, stored: dict) -> dict:
    """Edited params with each value left masked (the operator typed nothing new) as it was stored."""
    return {key: stored[key] if value == MASK and key in stored else value for key, value in edited.items()}


def masked_failure(failure: FailureInfo, params: dict, kind: str) -> FailureInfo:
    """The failure as it is stored: the sensitive values it quotes (message, traceback) masked."""
    values = {str(params[key]) for key in _sensitive_keys(kind) & set(params) if params[key] is not None}
    values = sorted((v for v in values if len(v) >= MIN_MASKED_LENGTH), key=len, reverse=True)
    if not values:
        return failure
    message, traceback = failure.message, failure.traceback
    for value in values:
        message, traceback = message.replace(value, MASK), traceback.replace(value, MASK)
    return replace(failure, message=message, traceback=traceback)
