"""The params patch of a bulk replay in the OpenAPI document (deadletters/bulk/patch.py, whose
parse_params_patch checks exactly this shape): the patch a start request carries, what a dry run
says it would do, and the letters a run refused."""

from api.openapi.common import NO_NUL
from deadletters.bulk import patch
from deadletters.bulk.patch import NAMES_MAX, PREVIEW_CHECK_MAX, REFUSALS_KEPT, SAMPLE_SIZE, TEXT_MAX

NAME = f"^({patch.NAME.pattern})$"


def _named(value: dict) -> dict:
    """An object of 1 to NAMES_MAX params (or *), each with `value`."""
    return {"type": "object", "minProperties": 1, "maxProperties": NAMES_MAX,
            "patternProperties": {NAME: value}, "additionalProperties": False}


def _params_patch() -> dict:
    text = {"type": "string", "maxLength": TEXT_MAX, "pattern": NO_NUL}
    return {
        "type": "object",
        "additionalProperties": False,
        "minProperties": 1,
        "description": "A replay's only (sessions also need `deadletters.replay_edited_deadletter`): one "
        "edit of the params of every task the run replays. `remove` drops params, `set` gives params a "
        "value, `replace` swaps text inside a param's text (the name `*`: inside every text param), in "
        "that order; each task's result is validated by its kind, and a task it makes invalid is not "
        "replayed (`refused`, `refusals`). In a run's answer its values show as `•••` unless the caller "
        "may see params (the `params` scope, or `deadletters.view_params`).",
        "properties": {
            "set": _named({"anyOf": [text, {"type": ["number", "boolean", "null"]}]}),
            "replace": _named({
                "type": "object",
                "additionalProperties": False,
                "required": ["from", "to"],
                "properties": {"from": {**text, "minLength": 1}, "to": text},
            }),
            "remove": {"type": "array", "minItems": 1, "maxItems": NAMES_MAX,
                       "items": {"type": "string", "pattern": NAME}},
        },
    }


def _refusals() -> dict:
    return {
        "type": "array",
        "maxItems": REFUSALS_KEPT,
        "description": f"The first {REFUSALS_KEPT} letters the params patch made invalid, with their kind's "
        "reasons ([param, message] pairs); they are not replayed.",
        "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["dead_letter", "reasons"],
            "properties": {
                "dead_letter": {"type": "integer"},
                "reasons": {
                    "type": "array",
                    "items": {"type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "string"}},
                },
            },
        },
    }


def _preview() -> dict:
    return {
        "type": "object",
        "additionalProperties": False,
        "description": f"What the params patch would do: the replayable tasks checked (at most the first "
        f"{PREVIEW_CHECK_MAX}), how many it changes, how many their kind would refuse (the first with their "
        f"reasons), and the changed params before and after of the first {SAMPLE_SIZE} it changes.",
        "required": ["checked", "changed", "invalid", "refusals", "sample"],
        "properties": {
            **{name: {"type": "integer", "minimum": 0} for name in ("checked", "changed", "invalid")},
            "refusals": {"$ref": "#/components/schemas/BulkPatchRefusals"},
            "sample": {
                "type": "array",
                "maxItems": SAMPLE_SIZE,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["dead_letter", "kind", "before", "after"],
                    "properties": {
                        "dead_letter": {"type": "integer"},
                        "kind": {"type": "string"},
                        "before": {"type": "object"},
                        "after": {"type": "object"},
                    },
                },
            },
        },
    }


def patch_components() -> dict:
    """The patch, its preview and refusals, and the dry run's answer that carries the preview."""
    return {
        "ParamsPatch": _params_patch(), "BulkPatchPreview": _preview(), "BulkPatchRefusals": _refusals(),
        "BulkDryRun": {
            "type": "object",
            "additionalProperties": False,
            "required": ["dry_run", "count", "superseded"],
            "properties": {
                "dry_run": {"type": "boolean", "const": True},
                "count": {"type": "integer", "minimum": 0},
                "params_patch": {"$ref": "#/components/schemas/BulkPatchPreview"},
                "superseded": {"type": "integer", "minimum": 0,
                               "description": "Superseded letters left out (without include_superseded)."},
            },
        },
    }
