"""A report kind's parameters as the edit-and-replay page lists them and asks for them (a field
per parameter: a switch for a boolean, a list for choices, a number with its range), in the
page's language, and the params those fields post. JSON stays as the fallback.

reports.kinds declares them (marked for translation with gettext_noop); this only words them,
and the kind's own validation judges what the fields post.
"""

from django.utils.translation import gettext, ngettext

from reports.kinds.masking import MASK


def _number(value) -> str:
    if value is None:
        return gettext("any")
    return str(int(value)) if float(value).is_integer() else str(value)


def allowed_words(param) -> str:
    if param.choices:
        return gettext("one of %(choices)s") % {"choices": ", ".join(param.choices)}
    if param.minimum is not None or param.maximum is not None:
        return gettext("%(minimum)s to %(maximum)s") % {
            "minimum": _number(param.minimum),
            "maximum": _number(param.maximum),
        }
    if param.type == "date":
        return "YYYY-MM-DD"
    if param.max_length is not None:
        return ngettext("at most %(n)d character", "at most %(n)d characters", param.max_length) % {
            "n": param.max_length
        }
    return ""


INPUT_TYPES = {"integer": "number", "number": "number", "date": "date"}
FIELD_PREFIX = "param-"


def _shown(param, value):
    if value == MASK:
        return MASK
    if param.type == "boolean":
        return value in (True, "true")
    return "" if value is None else str(value)


def param_rows(kind, values: dict | None = None) -> list[dict]:
    """Each parameter with its words and, for its field, the value to show (`values`: the
    letter's params as the operator may see them, or what the fields posted). A masked value is a
    text field holding the mask, whatever the parameter's type."""
    values = values or {}
    rows = [
        {
            "name": param.name,
            "type": param.type,
            "type_label": gettext(param.type_label),
            "default_value": param.default_value(),
            "allowed_label": allowed_words(param),
            "description": gettext(param.description) if param.description else "",
            "choices": param.choices,
            "minimum": param.minimum,
            "maximum": param.maximum,
            "max_length": param.max_length,
            "input_type": INPUT_TYPES.get(param.type, "text"),
            "value": _shown(param, values.get(param.name)),
        }
        for param in kind.params
    ]
    masked = {"type": "string", "choices": (), "input_type": "text", "minimum": None, "maximum": None,
              "max_length": None, "masked": True}
    return [{**row, **masked} if row["value"] == MASK else row for row in rows]


def fits_fields(kind, params: dict) -> bool:
    """Whether these params can be edited as the kind's fields (no name the kind does not know)."""
    return kind is not None and set(params) <= {param.name for param in kind.params}


def posted_values(kind, post) -> dict:
    """What each field posted, as text (a switch posts a hidden "false" and, when on, "true")."""
    return {p.name: post.getlist(FIELD_PREFIX + p.name)[-1]
            for p in kind.params if post.getlist(FIELD_PREFIX + p.name)}


def params_from_fields(kind, post) -> dict:
    """The params the fields ask for: an empty field is left out (the kind's default); a number
    that does not read as one is passed on as typed, for the kind's validation to name."""
    params = {}
    for name, raw in posted_values(kind, post).items():
        param = next(p for p in kind.params if p.name == name)
        raw = raw.strip()
        if raw == MASK:  # left masked: the stored value stays (reports.kinds.masking.unmask_params)
            params[name] = raw
        elif param.type == "boolean":
            params[name] = raw == "true"
        elif raw and param.type in ("integer", "number") and not param.choices:
            params[name] = _number_or_text(raw, param.type)
        elif raw:
            params[name] = raw
    return params


def _number_or_text(raw: str, kind_of_number: str):
    try:
        return int(raw) if kind_of_number == "integer" else float(raw)
    except ValueError:
        return raw
