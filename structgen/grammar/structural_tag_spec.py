"""Reading a structural tag's spec (XGrammar's structural-tag JSON format): the spec as a dict, its
format types and the fields each takes, checked field access whose errors name the JSON path, a
cache key, and the tags of a spec (for reading outputs back).  Building the grammar from it is
:mod:`structgen.grammar.structural_tag`.

The spec follows XGrammar's structural-tag JSON format, so vLLM's STRUCTURAL_TAG requests can be
served: ``{"type": "structural_tag", "format": {...}}`` (format types ``const_string``,
``json_schema``, ``regex``, ``grammar`` (Lark), ``any_text``, ``sequence``, ``or``, ``tag``,
``triggered_tags``, ``tags_with_separator``, ``dispatch``, ``optional``, ``plus``, ``star``,
``repeat``), and the legacy ``{"structures": [{"begin", "schema", "end"}], "triggers": [...]}``.
A bare format object is accepted too.
"""
from __future__ import annotations

import json
from typing import Any

from ..errors import GrammarError, UnsupportedFeature

__all__ = ["FORMAT_TYPES", "TOKEN_FORMATS", "FORMAT_KEYS", "SpecFields", "load_structural_tag", "spec_key",
           "tag_nodes"]

#: the format types compiled here
FORMAT_TYPES = ("const_string", "json_schema", "regex", "grammar", "any_text", "sequence", "or", "tag",
                "triggered_tags", "tags_with_separator", "dispatch", "optional", "plus", "star", "repeat")
#: XGrammar's formats over token ids: a byte-level grammar cannot express them
TOKEN_FORMATS = ("token", "exclude_token", "any_tokens", "token_triggered_tags", "token_dispatch")
#: the fields each format type takes (besides ``type``)
FORMAT_KEYS = {
    "const_string": {"value"},
    "json_schema": {"json_schema", "style", "any_order", "max_whitespace_cnt", "excludes"},
    "regex": {"pattern"},
    "grammar": {"grammar"},
    "any_text": {"excludes", "max_tokens", "max_chars", "max_bytes"},
    "sequence": {"elements"},
    "or": {"elements"},
    "tag": {"begin", "content", "end"},
    "triggered_tags": {"triggers", "tags", "at_least_one", "stop_after_first", "excludes", "max_chars", "max_bytes",
                       "text_before_first"},
    "tags_with_separator": {"tags", "separator", "at_least_one", "stop_after_first"},
    "dispatch": {"rules", "loop", "excludes"},
    "optional": {"content"},
    "plus": {"content"},
    "star": {"content"},
    "repeat": {"content", "min", "max"},
}


def load_structural_tag(spec: Any) -> dict:
    """The spec as a dict: a dict as is, JSON text parsed (``GrammarError`` when it is not JSON)."""
    if isinstance(spec, (str, bytes)):
        try:
            spec = json.loads(spec)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise GrammarError(f"the structural tag is not valid JSON: {e}") from None
    if not isinstance(spec, dict):
        raise GrammarError(f"a structural tag must be a JSON object, not {type(spec).__name__}")
    return spec


def _key_default(o: Any) -> Any:
    if isinstance(o, type) and hasattr(o, "model_json_schema"):
        return o.model_json_schema()
    return repr(o)


def spec_key(spec: dict) -> str:
    """A cache key for a loaded spec (Pydantic classes given as schemas by their JSON Schema)."""
    return json.dumps(spec, sort_keys=True, default=_key_default)


def tag_nodes(spec: Any) -> list[dict]:
    """Every tag of a spec, as ``{"begin", "end" (a list), "content"}`` (the legacy format's
    structures as tags with a ``json_schema`` content), in document order.  For reading outputs
    back (``structgen.structural_output``); the spec is assumed valid (compiled already)."""
    spec = load_structural_tag(spec)
    out: list[dict] = []
    if "structures" in spec:
        for s in spec.get("structures") or []:
            schema = s.get("schema")
            if isinstance(schema, str):
                schema = json.loads(schema)
            out.append({"begin": s["begin"], "end": [s["end"]],
                        "content": {"type": "json_schema", "json_schema": schema}})
        return out

    def walk(node: Any, is_tag: bool = False) -> None:
        if isinstance(node, dict):
            if is_tag or node.get("type") == "tag":
                end = node.get("end", "")
                out.append({"begin": node.get("begin", ""), "end": end if isinstance(end, list) else [end],
                            "content": node.get("content")})
            for k, v in node.items():
                if k in ("json_schema", "schema"):
                    continue
                walk(v, k == "tags")
        elif isinstance(node, list):
            for v in node:
                walk(v, is_tag)

    walk(spec.get("format", spec))
    return out


class SpecFields:
    """Checked access to the fields of a spec's node: a missing or mistyped field is a
    ``GrammarError`` (an unknown one ``UnsupportedFeature``) naming its JSON path."""

    @staticmethod
    def keys(node: dict, path: str, allowed: set[str]) -> None:
        for key in node:
            if key != "type" and key not in allowed:
                raise UnsupportedFeature(f"unknown field {key!r} (this format takes {sorted(allowed)})",
                                         pointer=f"{path}/{key}", keyword=key)

    @staticmethod
    def text(node: dict, key: str, path: str, *, default: Any = ..., nonempty: bool = False) -> str:
        if key not in node:
            if default is ...:
                raise GrammarError(f"{path}: missing field {key!r}")
            return default
        v = node[key]
        if not isinstance(v, str):
            raise GrammarError(f"{path}/{key}: expected a string, got {type(v).__name__}")
        if nonempty and not v:
            raise GrammarError(f"{path}/{key}: must not be empty")
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise GrammarError(f"{path}/{key}: not encodable as UTF-8 ({e.reason})") from None
        return v

    def texts(self, node: dict, key: str, path: str, *, nonempty: bool = True) -> list[str]:
        v = node.get(key, [])
        if not isinstance(v, list):
            raise GrammarError(f"{path}/{key}: expected a list of strings, got {type(v).__name__}")
        return [self.text({str(i): s}, str(i), f"{path}/{key}", nonempty=nonempty) for i, s in enumerate(v)]

    @staticmethod
    def flag(node: dict, key: str, path: str, default: bool = False) -> bool:
        v = node.get(key, default)
        if not isinstance(v, bool):
            raise GrammarError(f"{path}/{key}: expected true or false, got {v!r}")
        return v

    @staticmethod
    def count(node: dict, key: str, path: str, *, minimum: int = 0) -> int | None:
        v = node.get(key)
        if v is None:
            return None
        if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
            raise GrammarError(f"{path}/{key}: expected an integer >= {minimum}, got {v!r}")
        return v

    @staticmethod
    def items(node: dict, key: str, path: str, *, nonempty: bool = True) -> list:
        if key not in node:
            raise GrammarError(f"{path}: missing field {key!r}")
        v = node[key]
        if not isinstance(v, list):
            raise GrammarError(f"{path}/{key}: expected a list, got {type(v).__name__}")
        if nonempty and not v:
            raise GrammarError(f"{path}/{key}: must not be empty")
        return v
