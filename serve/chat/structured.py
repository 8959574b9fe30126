"""A JSON schema as a backend constrains an answer to it (GenerationParams.json_schema).

An in-process vLLM engine compiles a JSON schema with xgrammar, which lets the model put any
whitespace between tokens: the engine-wide `disable_any_whitespace` is not a per-request setting,
and a small model fills that freedom with blank lines until max_tokens (the answer is then cut and
no longer JSON). A flat object of small integer fields, which is what a rubric asks for, is sent
as the regex of its one `json.dumps` layout instead: the same values, one layout, so the answer's
length is known before the call (the dry run counts it) and each value's position in it too.
"""
from __future__ import annotations

import json
import re
from typing import Any


def _allowed(prop: dict[str, Any]) -> list[int] | None:
    """The integers a property allows (an integer enum, or an integer between minimum and maximum), else None."""
    if prop.get("type") != "integer":
        return None
    if "enum" in prop:
        values = prop["enum"]
        return values if all(isinstance(v, int) and not isinstance(v, bool) for v in values) and values else None
    lo, hi = prop.get("minimum"), prop.get("maximum")
    if isinstance(lo, int) and isinstance(hi, int) and lo <= hi and hi - lo < 100:
        return list(range(lo, hi + 1))
    return None


def flat_schema_regex(schema: dict[str, Any]) -> str | None:
    """The regex of `json.dumps` of an object whose every property is a required small integer (enum or
    minimum..maximum), in the schema's property order: '\\{"a": [0-4], "b": [0-4]\\}'. None for any
    other schema (it is then sent as a JSON schema)."""
    props = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(props, dict) or not props:
        return None
    if set(schema.get("required") or []) != set(props) or schema.get("additionalProperties", True) is not False:
        return None
    fields = []
    for name, prop in props.items():
        values = _allowed(prop if isinstance(prop, dict) else {})
        if values is None:
            return None
        alternatives = "|".join(re.escape(str(v)) for v in sorted(set(values), key=values.index))
        fields.append(re.escape(json.dumps(name)) + ": " + f"({alternatives})")
    return r"\{" + ", ".join(fields) + r"\}"
