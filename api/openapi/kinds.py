"""Per-kind request schemas, generated from each kind's own parameter declaration
(reports.kinds.base.Param): the document and the validation cannot drift apart."""

from api.openapi.common import IDEMPOTENCY_KEY
from reports.kinds import KINDS
from reports.models import Priority


def _title(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _params_ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{_title(name)}Params"}


def kind_components(*, public: bool = False) -> dict:
    """`<Kind>Params` for each kind, a submit body and a batch item per kind, and the two `oneOf`s."""
    schemas: dict[str, dict] = {}
    for name, kind in sorted(KINDS.items()):
        title = _title(name)
        params = kind.params_schema(public=public)
        params["description"] = f"Parameters of `{name}` ({kind.title}); any other name is refused (422)."
        schemas[f"{title}Params"] = params
        kind_and_params = {
            "kind": {"type": "string", "const": name},
            "params": _params_ref(name),
            "priority": {"type": "string", "enum": list(Priority.values)},
        }
        # Params with a required member (http_export's url without a default source) must be given.
        required = ["kind", "params"] if params.get("required") else ["kind"]
        schemas[f"{title}Submit"] = {
            "type": "object",
            "required": required,
            "additionalProperties": False,
            "properties": {**kind_and_params, "idempotency_key": IDEMPOTENCY_KEY},
        }
        schemas[f"{title}BatchItem"] = {
            "type": "object",
            "required": required,
            "additionalProperties": False,
            "properties": kind_and_params,
        }
    schemas["SubmitRequest"] = _one_of_by_kind("Submit")
    schemas["BatchItem"] = _one_of_by_kind("BatchItem")
    return schemas


def _one_of_by_kind(suffix: str) -> dict:
    refs = {name: f"#/components/schemas/{_title(name)}{suffix}" for name in sorted(KINDS)}
    return {
        "oneOf": [{"$ref": ref} for ref in refs.values()],
        "discriminator": {"propertyName": "kind", "mapping": refs},
    }
