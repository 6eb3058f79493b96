"""Reading JSON string literals out of generated text (a leaf: the engine's trackers and the
front ends' checks both decode keys and items, once per trial token)."""
from __future__ import annotations

import json

__all__ = ["json_string_text"]


def json_string_text(raw: bytes) -> str:
    """The text of one JSON string literal (quotes included in ``raw``); ValueError when ``raw`` is
    not exactly one.  Literals without escapes or control bytes (nearly all keys and items) skip the
    JSON parser: checks and trackers decode one per trial token."""
    if (len(raw) >= 2 and raw[0] == 0x22 and raw[-1] == 0x22 and raw.count(b'"') == 2 and 0x5C not in raw
            and min(raw) >= 0x20):
        return raw[1:-1].decode("utf-8")
    text = json.loads(raw)
    if not isinstance(text, str):
        raise ValueError(f"not a JSON string: {raw[:40]!r}")
    return text
