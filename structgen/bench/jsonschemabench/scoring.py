"""Scoring one output: the JSON in it (code fences stripped for the unconstrained baseline) and whether
it validates (``jsonschema``, format asserted or not)."""
from __future__ import annotations

import json
import re
from typing import Any


# --------------------------------------------------------------------------- prompt and scoring


_FENCE = re.compile(r"```(?:[A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.S)


def extract_json(text: str) -> tuple[bool, Any]:
    """(found?, value): the first top-level JSON value in a free-form reply.

    Code fences are looked into first (```json ... ```); otherwise the first
    ``{`` or ``[`` from which a complete JSON value parses; otherwise the whole
    reply, stripped (a bare scalar).
    """
    dec = json.JSONDecoder()
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for chunk in candidates:
        for i, ch in enumerate(chunk):
            if ch in "{[":
                try:
                    value, _ = dec.raw_decode(chunk, i)
                    return True, value
                except json.JSONDecodeError:
                    continue
        s = chunk.strip()
        if s:
            try:
                return True, json.loads(s)
            except json.JSONDecodeError:
                pass
    return False, None


_VALIDATORS: dict[str, Any] = {}


def _validator(schema: Any, format: str = "assert") -> Any:
    from ...grammar.json_schema import make_validator

    key = format + json.dumps(schema, sort_keys=True)
    v = _VALIDATORS.get(key)
    if v is None:
        if len(_VALIDATORS) > 64:
            _VALIDATORS.clear()
        v = _VALIDATORS[key] = make_validator(schema, format=format)
    return v


def score_output(text: str, schema: Any, *, extract: bool = False, format: str = "assert") -> dict:
    """``json_ok`` (the text is -- or, with ``extract``, contains -- one JSON value),
    ``valid`` (that value validates, format assertion on) and ``validation_error``.

    Constrained outputs are parsed strictly (``json.loads`` of the whole text);
    ``extract=True`` (the unconstrained baseline) uses :func:`extract_json`.
    """
    if extract:
        ok, value = extract_json(text)
    else:
        try:
            value, ok = json.loads(text), True
        except (json.JSONDecodeError, ValueError):
            ok, value = False, None
    if not ok:
        return {"json_ok": False, "valid": False, "validation_error": "not JSON"}
    if not isinstance(schema, (dict, bool)):
        return {"json_ok": True, "valid": False, "validation_error": "the schema is not a JSON object"}
    try:
        errors = list(_validator(schema, format).iter_errors(value))
    except Exception as e:  # noqa: BLE001 - a schema jsonschema cannot evaluate (bad regex, remote $ref)
        return {"json_ok": True, "valid": False, "validation_error": f"validator failed: {type(e).__name__}: {e}"[:300]}
    if errors:
        err = min(errors, key=lambda e: len(list(e.path)))
        ptr = "/" + "/".join(str(p) for p in err.path)
        return {"json_ok": True, "valid": False, "validation_error": f"at {ptr}: {err.message}"[:300]}
    return {"json_ok": True, "valid": True, "validation_error": None}
