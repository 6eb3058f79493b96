"""A JSON Schema told to a model in a few readable lines instead of its JSON text.

The grammar already holds the format: every key, type, bound and enum is enforced token by token, and
with ``property_order="schema"`` the model sees each key as it writes its value.  What the prompt
must carry is what the grammar cannot: what each field *means*.  A schema's JSON text is a poor
carrier of that for a small model -- it is long (real configuration schemas run to 10^4-10^5 tokens,
past the context), and its titles and examples read like values to copy (SmolLM2 answered a request
about "Marie" with ``"name": "Person"``, the schema's title).  So the description lists the fields
as ``- name (string, required): description`` lines, nested fields indented under their parent,
titles and descriptions in parentheses or after a colon as context, enums and bounds in words, and
it shrinks (fewer levels, then names alone) until it fits a token budget.
"""
from __future__ import annotations

import json
import re
from typing import Any, Callable

__all__ = ["describe_schema", "fit_description"]

#: characters of a field's description kept (the rest is cut at a word, with "...")
MAX_DESCRIPTION = 100
#: enum values listed (past it: "... (N values)")
MAX_ENUM = 8
#: fields listed per object (past it: "... and N more fields")
MAX_FIELDS = 40


def _resolve(schema: Any, root: Any, seen: tuple = ()) -> Any:
    """``schema`` with a local ``$ref`` ("#/...") followed (keywords beside it merged in); other refs
    and cycles are left as they are."""
    for _ in range(8):
        if not isinstance(schema, dict) or not isinstance(schema.get("$ref"), str):
            return schema
        ref = schema["$ref"]
        if not ref.startswith("#") or ref in seen:
            return schema
        target: Any = root
        for part in ref[1:].lstrip("/").split("/") if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                return schema
        seen = seen + (ref,)
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**target, **rest} if isinstance(target, dict) else target
    return schema


def _short(text: Any) -> str:
    s = " ".join(str(text).split())
    if len(s) <= MAX_DESCRIPTION:
        return s
    cut = s[:MAX_DESCRIPTION].rsplit(" ", 1)[0]
    return cut + "..."


def _branches(schema: dict) -> list:
    for kw in ("anyOf", "oneOf"):
        if isinstance(schema.get(kw), list):
            return schema[kw]
    return []


def _mentioned_first(values: list, source: str | None) -> list:
    """``values`` with those the source text names (whole words, any case) first: a small model
    tends to take the first value listed, and in extraction the text says which one it is."""
    if not source:
        return values
    named = [v for v in values if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v).strip()
             and re.search(r"(?<!\w)" + re.escape(str(v)) + r"(?!\w)", source, re.IGNORECASE)]
    return named + [v for v in values if not any(v is n for n in named)]


def _type_words(schema: Any, root: Any, source: str | None = None) -> str:
    """"string", "integer", "array of string", "string or null"... for a (resolved) schema; enum
    values the ``source`` names are listed first."""
    schema = _resolve(schema, root)
    if schema is True or schema == {}:
        return "any value"
    if not isinstance(schema, dict):
        return "nothing" if schema is False else "any value"
    if "const" in schema:
        return f"always {json.dumps(schema['const'], ensure_ascii=False)}"
    if isinstance(schema.get("enum"), list):
        vals = [json.dumps(v, ensure_ascii=False) for v in _mentioned_first(schema["enum"], source)[:MAX_ENUM]]
        more = f", ... ({len(schema['enum'])} values)" if len(schema["enum"]) > MAX_ENUM else ""
        return "one of " + ", ".join(vals) + more
    t = schema.get("type")
    types = [t] if isinstance(t, str) else list(t) if isinstance(t, list) else []
    if not types:
        branch_words = [_type_words(b, root, source) for b in _branches(schema)]
        if branch_words:
            return " or ".join(dict.fromkeys(branch_words))
        if "properties" in schema:
            types = ["object"]
        elif "items" in schema:
            types = ["array"]
    words = []
    for ty in types:
        if ty == "array":
            items = schema.get("items")
            words.append(f"array of {_type_words(items, root, source)}" if isinstance(items, (dict, bool)) else "array")
        else:
            words.append(ty)
    return " or ".join(words) if words else "any value"


def _bounds(schema: dict) -> list[str]:
    """Bounds and formats in words (the grammar enforces them; the words help the model choose)."""
    out = []
    if isinstance(schema.get("format"), str):
        out.append(f"format {schema['format']}")
    for kw, word in (("minimum", "at least"), ("exclusiveMinimum", "more than"), ("maximum", "at most"),
                     ("exclusiveMaximum", "less than")):
        v = schema.get(kw)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(f"{word} {v}")
    for kw, word in (("minLength", "at least {} character"), ("maxLength", "at most {} character"),
                     ("minItems", "at least {} item"), ("maxItems", "at most {} item")):
        v = schema.get(kw)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            out.append(word.format(v) + ("s" if v > 1 else ""))
    if isinstance(schema.get("pattern"), str) and len(schema["pattern"]) <= 40:
        out.append(f"matching {schema['pattern']}")
    return out


def _object_schema(schema: Any, root: Any) -> dict | None:
    """The object a field holds (directly, as its array's items, or in its one non-null branch)."""
    schema = _resolve(schema, root)
    if not isinstance(schema, dict):
        return None
    if isinstance(schema.get("properties"), dict) and schema["properties"]:
        return schema
    items = _resolve(schema.get("items"), root)
    if isinstance(items, dict) and isinstance(items.get("properties"), dict) and items["properties"]:
        return items
    real = [b for b in (_resolve(b, root) for b in _branches(schema)) if not (isinstance(b, dict) and b.get("type") == "null")]
    if len(real) == 1:
        return _object_schema(real[0], root)
    return None


def _identity(obj: dict) -> int:
    """What makes two object schemas the same for recursion: their ``properties`` (a ``$ref`` with
    keywords beside it resolves to a new dict holding the same ``properties``)."""
    return id(obj.get("properties", obj))


def _field_lines(schema: dict, root: Any, depth: int, indent: str, names_only: bool, seen: tuple,
                 source: str | None = None) -> list[str]:
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = set(schema.get("required") or []) if isinstance(schema.get("required"), list) else set()
    lines = []
    for i, (name, sub) in enumerate(props.items()):
        if i == MAX_FIELDS:
            lines.append(f"{indent}- ... and {len(props) - MAX_FIELDS} more fields")
            break
        sub_r = _resolve(sub, root)
        if names_only:
            lines.append(f"{indent}- {name}" + (" (required)" if name in required else ""))
        else:
            notes = [_type_words(sub_r, root, source)]
            if isinstance(sub_r, dict):
                notes += _bounds(sub_r)
            if name in required:
                notes.append("required")
            about = []
            if isinstance(sub_r, dict):
                title, desc = sub_r.get("title"), sub_r.get("description")
                if isinstance(desc, str) and desc.strip():
                    about.append(_short(desc))
                elif isinstance(title, str) and title.strip() and title.strip().lower() != str(name).lower():
                    about.append(_short(title))
            lines.append(f"{indent}- {name} ({', '.join(notes)})" + (f": {about[0]}" if about else ""))
        inner = _object_schema(sub, root)
        if inner is not None and _identity(inner) in seen:  # recursion: said once, not unfolded
            lines[-1] += (" -- " if names_only else "; ") + "each with the same fields as its parent"
        elif inner is not None and depth > 1:
            lines += _field_lines(inner, root, depth - 1, indent + "  ", names_only, seen + (_identity(inner),), source)
    return lines


def describe_schema(schema: Any, *, depth: int = 3, names_only: bool = False, source: str | None = None) -> str:
    """The schema in words: a header line, then one line per field (nested ``depth`` levels deep);
    ``names_only``: field names alone; ``source``: the text values are extracted from (an enum's
    values it names are listed first).  A choice of object shapes (``anyOf``/``oneOf``) lists each
    shape; any other schema is one line ("Reply with a JSON value: array of string.")."""
    root = schema
    top = _resolve(schema, root)
    about = ""
    if isinstance(top, dict):  # context, not a value: the description, else the title
        desc, title = top.get("description"), top.get("title")
        text = desc if isinstance(desc, str) and desc.strip() else title if isinstance(title, str) else ""
        about = f" ({_short(text).rstrip('.')})" if text.strip() else ""
    obj = _object_schema(top, root)
    if obj is None and isinstance(top, dict):
        shapes = [o for o in (_object_schema(b, root) for b in _branches(top)) if o is not None]
        if shapes and len(shapes) == len(_branches(top)):
            lines = [f"Reply with a JSON object{about} in one of these {len(shapes)} shapes:"]
            for i, shape in enumerate(shapes, 1):
                lines.append(f"Shape {i}:")
                lines += _field_lines(shape, root, depth, "", names_only, (_identity(shape),), source)
            return "\n".join(lines)
    if obj is None:
        return f"Reply with a JSON value{about}: {_type_words(top, root, source)}."
    kind = "a JSON array of objects" if obj is not top and isinstance(top, dict) and top.get("type") == "array" \
        else "a JSON object"
    lines = _field_lines(obj, root, depth, "", names_only, (_identity(obj),), source)
    return "\n".join([f"Reply with {kind}{about} with these fields:"] + lines)


def fit_description(schema: Any, count_tokens: Callable[[str], int], budget: int,
                    source: str | None = None) -> str | None:
    """The most detailed description of ``schema`` within ``budget`` tokens (three levels, two, one,
    then names alone), or None when not even the names fit; ``source`` as in :func:`describe_schema`."""
    for depth, names_only in ((3, False), (2, False), (1, False), (2, True), (1, True)):
        text = describe_schema(schema, depth=depth, names_only=names_only, source=source)
        if count_tokens(text) <= budget:
            return text
    return None
