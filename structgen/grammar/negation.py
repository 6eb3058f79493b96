"""Negation of a JSON Schema into keywords the compiler enforces exactly.

``not``, ``if``/``then``/``else`` and ``oneOf`` with overlapping branches all
need the complement of a subschema.  Most subschemas real schemas negate are
conjunctions of simple keywords, and the complement of each is again a simple
schema (De Morgan over the conjunction; ``minLength: 3`` -> a string of at
most 2 characters; ``properties: {k: S}`` -> an object that has ``k`` with a
value outside ``S``).  The result uses only standard keywords, with ``not``
left only around a ``type``, ``enum``, ``const``, ``pattern``, ``multipleOf`` or ``required``,
which the compiler handles directly -- so the rewritten schema means exactly
the same to jsonschema as the original, and candidate values can still be
validated against it.

``items`` (every item) and ``contains`` (some item) are each other's
complements, ``propertyNames`` whose negation is a few strings is "one of
these keys is present" (any other is "some key fails it", which the object automaton counts), ``patternProperties`` whose values are all false is
"some key matches one of them" (``not: {propertyNames: ...}``, which the object
automaton counts), and a pattern or ``additionalProperties`` with a value schema is "some member of
those keys has a value outside it" (``not: {patternProperties: {P: S}}`` alone, or ``not:
{additionalProperties: S}`` beside names only: :func:`member_form`, counted by the object automaton
too).  Keywords whose complement needs a relation between items (``uniqueItems``, ...),
``items`` beside ``prefixItems``, counted ``contains`` and ``format`` are not
negated: :func:`negate` returns None and the caller reports the keyword as
unsupported.  Closed objects (``additionalProperties: false``) negate to "some key is undefined".
"""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["negate", "SIMPLE_NOT_KEYS", "VALIDATION_KEYS", "is_simple_not", "is_some_key_not", "member_form"]

#: Keywords that constrain values (plus OpenAPI's ``nullable``); everything else is an annotation
#: or an unknown keyword, which constrains nothing.
VALIDATION_KEYS = {
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "format", "maxItems", "minItems", "uniqueItems", "maxContains",
    "minContains", "maxProperties", "minProperties", "required", "dependentRequired", "prefixItems", "items",
    "contains", "additionalProperties", "properties", "patternProperties", "dependentSchemas", "propertyNames",
    "if", "then", "else", "allOf", "anyOf", "oneOf", "not", "unevaluatedItems", "unevaluatedProperties",
    "additionalItems", "dependencies", "$ref", "$dynamicRef", "$recursiveRef", "nullable",
}
#: ``{"not": {K: ...}}`` with exactly one of these keys is compiled directly.
SIMPLE_NOT_KEYS = {"type", "enum", "const", "pattern", "format", "required", "multipleOf"}
MAX_DEPTH = 12

_NUMBER_BOUND_COMPLEMENT = {"minimum": "exclusiveMaximum", "maximum": "exclusiveMinimum",
                            "exclusiveMinimum": "maximum", "exclusiveMaximum": "minimum"}
_COUNT_BOUNDS = {  # keyword -> (type it applies to, complement keyword, shift)
    "minLength": ("string", "maxLength", -1), "maxLength": ("string", "minLength", +1),
    "minItems": ("array", "maxItems", -1), "maxItems": ("array", "minItems", +1),
    "minProperties": ("object", "maxProperties", -1), "maxProperties": ("object", "minProperties", +1),
}


def is_simple_not(sub: Any) -> bool:
    """True for a ``not`` operand the compiler enforces without rewriting."""
    if isinstance(sub, bool):
        return True
    if not isinstance(sub, dict):
        return False
    keys = {k for k in sub if k in VALIDATION_KEYS}
    return not keys or (len(keys) == 1 and next(iter(keys)) in SIMPLE_NOT_KEYS)


def is_some_key_not(sub: Any) -> bool:
    """True for a ``not`` operand the object compiler counts itself as "some key" or "some member"
    (rewriting it through :func:`negate` would give it back): ``propertyNames`` alone (some key fails
    it), or a member form (:func:`member_form`: some member's value fails its schema)."""
    return isinstance(sub, dict) and ({k for k in sub if k in VALIDATION_KEYS} == {"propertyNames"}
                                      or member_form(sub) is not None)


def member_form(sub: Any) -> tuple[Any, Any] | None:
    """``(K, S)`` when ``not: sub`` says "some member whose key matches K has a value failing S":
    ``sub`` is ``patternProperties`` with one pattern (K: that pattern), or ``additionalProperties``
    beside ``properties`` / ``patternProperties`` whose values constrain nothing (K: a key neither
    defined nor matched by a pattern); None otherwise, or when S constrains nothing or is ``false``
    (those are plain "some key" forms)."""
    if not isinstance(sub, dict):
        return None
    keys = {k for k in sub if k in VALIDATION_KEYS}
    if keys == {"patternProperties"}:
        pats = sub["patternProperties"]
        if not isinstance(pats, dict) or len(pats) != 1:
            return None
        (p, v), = pats.items()
        return None if v is False or _trivial(v) or not isinstance(p, str) else ({"pattern": p}, v)
    if "additionalProperties" not in keys or keys - {"additionalProperties", "properties", "patternProperties"}:
        return None
    extra = sub["additionalProperties"]
    props, pats = sub.get("properties", {}), sub.get("patternProperties", {})
    if extra is False or _trivial(extra) or not isinstance(props, dict) or not isinstance(pats, dict) or \
            not all(_trivial(v) for v in (*props.values(), *pats.values())):
        return None
    outside = [{"not": {"pattern": p}} for p in pats]
    if props:
        outside.append({"not": {"enum": list(props)}})
    return (_all_of(outside) if outside else True), extra


def _some_members(s: dict) -> list | None:
    """The complement of ``patternProperties`` / ``additionalProperties`` as "some key" and "some
    member" parts (:func:`member_form`), one per pattern and one for the other keys."""
    pats = s.get("patternProperties", {})
    props = s.get("properties", {})
    extra = s.get("additionalProperties", True)
    if not isinstance(pats, dict) or not isinstance(props, dict):
        return None
    parts: list = []
    for p, v in pats.items():
        if v is False:
            parts.append({"type": "object", "not": {"propertyNames": {"not": {"pattern": p}}}})
        elif not _trivial(v):
            parts.append({"type": "object", "not": {"patternProperties": {p: v}}})
    if extra is False:
        parts.extend({"type": "object", "not": {"propertyNames": {"not": k}}} for k in _some_key_outside(
            {"patternProperties": {p: True for p in pats}, "properties": props, "additionalProperties": False}))
    elif not _trivial(extra):
        parts.append({"type": "object", "not": {"properties": {k: True for k in props},
                                                 "patternProperties": {p: True for p in pats},
                                                 "additionalProperties": extra}})
    return parts


def _no_keys_as_count(s: dict) -> dict:
    """``additionalProperties: false`` with every ``properties`` / ``patternProperties`` value false
    forbids every key: that is ``maxProperties: 0``, whose negation is a count, not "some key"."""
    props, pats = s.get("properties", {}), s.get("patternProperties", {})
    if s.get("additionalProperties") is not False or not isinstance(props, dict) or not isinstance(pats, dict) or \
            any(v is not False for v in (*props.values(), *pats.values())):
        return s
    out = {k: v for k, v in s.items() if k not in ("additionalProperties", "properties", "patternProperties")}
    out["maxProperties"] = 0
    return out


_DRAFT4 = "http://json-schema.org/draft-04/schema#"
_DRAFT7 = "http://json-schema.org/draft-07/schema#"
#: draft-04's bounds: (bound, its exclusive flag, the complement's bound, the complement's flag)
_DRAFT4_BOUNDS = (("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"),
                  ("maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"))


def _some_item_in_draft4(n: Any) -> dict:
    """"Some item matches ``n``" for a draft-04 schema, which has no ``contains``: a draft-07 subschema
    whose ``contains`` reads ``n`` as draft-04 again (a ``$schema`` inside switches the draft for what
    it reaches, in jsonschema and in the compiler alike)."""
    if n is True:
        return {"type": "array", "minItems": 1}
    return {"$schema": _DRAFT7, "type": "array", "contains": {"$schema": _DRAFT4, "allOf": [n]}}


def _trivial(x: Any) -> bool:
    return x is True or (isinstance(x, dict) and not any(k in VALIDATION_KEYS for k in x))


def _some_key_outside(s: dict) -> list | None:
    """The complement of ``patternProperties`` / ``additionalProperties`` when their values are
    ``false`` or constrain nothing: key schemas of which some key must match (``not:
    {propertyNames: {not: K}}``, counted by the object automaton) -- a key matching a forbidden
    pattern, or, under ``additionalProperties: false``, a key neither defined nor matched by a
    pattern.  None when a value constrains the member's value (its complement would tie a key to
    its value: "some member of these keys with a value outside S")."""
    pats = s.get("patternProperties", {})
    props = s.get("properties", {})
    extra = s.get("additionalProperties", True)
    if not isinstance(pats, dict) or not isinstance(props, dict) or \
            not all(v is False or _trivial(v) for v in pats.values()) or not (extra is False or _trivial(extra)):
        return None
    out: list = [{"pattern": p} for p, v in pats.items() if v is False]
    if len(out) > 1:
        out = [{"anyOf": out}]
    if extra is False:
        outside = [{"not": {"pattern": p}} for p in pats]
        if props:
            outside.append({"not": {"enum": list(props)}})
        out.append(_all_of(outside))
    return out


def _strings_of(schema: Any) -> list | None:
    """The strings a ``const`` / ``enum`` schema (or ``false``) admits, when it is one of those."""
    if schema is False:
        return []
    if not isinstance(schema, dict) or len([k for k in schema if k in VALIDATION_KEYS]) != 1:
        return None
    vals = [schema["const"]] if "const" in schema else schema.get("enum")
    if not isinstance(vals, list):
        return None
    return list(dict.fromkeys(v for v in vals if isinstance(v, str)))


def _any_of(parts: list) -> Any:
    parts = [p for p in parts if p is not False]
    if any(p is True for p in parts):
        return True
    if not parts:
        return False
    return parts[0] if len(parts) == 1 else {"anyOf": parts}


def _all_of(parts: list) -> Any:
    parts = [p for p in parts if p is not True]
    if any(p is False for p in parts):
        return False
    if not parts:
        return True
    return parts[0] if len(parts) == 1 else {"allOf": parts}


def negate(schema: Any, resolve: Callable[[str], Any | None], depth: int = 0,
           asserted_formats: frozenset = frozenset(), refused_formats: frozenset = frozenset(),
           with_contains: bool = True) -> Any | None:
    """A schema accepting exactly the JSON values ``schema`` rejects, or None.

    ``resolve`` maps a ``$ref`` to its target schema (None when it cannot be
    followed, e.g. into another resource).  ``format`` values in
    ``asserted_formats`` are constraints, those in ``refused_formats`` cannot be
    negated, and any other format is an annotation.  ``with_contains``: the
    schema's draft has ``contains`` (draft-06 on), which the negation of ``items``
    needs ("some item fails"); without it, that item is found by a draft-07 subschema."""
    if depth > MAX_DEPTH:
        return None
    if schema is True:
        return False
    if schema is False:
        return True
    if not isinstance(schema, dict):
        return None
    if "$schema" in schema:
        from .json_schema.input import subschema_draft

        draft = subschema_draft(schema, None)
        if draft in (4, 6, 7):
            # a subschema in another draft (as _some_item_in_draft4 makes): negated in that draft, and
            # its negation declared in it too
            out = negate({k: v for k, v in schema.items() if k != "$schema"}, resolve, depth, asserted_formats,
                         refused_formats, draft != 4)
            return out if not isinstance(out, dict) else {"$schema": schema["$schema"], "allOf": [out]}
    s = _no_keys_as_count({k: v for k, v in schema.items() if k in VALIDATION_KEYS})
    if not s:
        return False
    parts: list = []
    handled: set[str] = set()

    def neg(x):
        return negate(x, resolve, depth + 1, asserted_formats, refused_formats, with_contains)

    if "$ref" in s:
        target = resolve(s["$ref"]) if isinstance(s["$ref"], str) else None
        if target is None:
            return None
        n = neg(target)
        if n is None:
            return None
        parts.append(n)
        handled.add("$ref")
    if "type" in s:
        t = s["type"]
        types = [t] if isinstance(t, str) else list(t) if isinstance(t, list) else None
        if types is None:
            return None
        if s.get("nullable") is True and "null" not in types:
            types.append("null")
        parts.append({"not": {"type": types[0] if len(types) == 1 else types}})
        handled |= {"type", "nullable"}
    elif "nullable" in s:
        handled.add("nullable")
    for k in ("enum", "const"):
        if k in s:
            parts.append({"not": {k: s[k]}})
            handled.add(k)
    if "pattern" in s:
        if not isinstance(s["pattern"], str):
            return None
        parts.append({"not": {"pattern": s["pattern"]}})
        handled.add("pattern")
    if "required" in s:
        parts.append({"not": {"required": s["required"]}})
        handled.add("required")
    if "multipleOf" in s:
        parts.append({"not": {"multipleOf": s["multipleOf"]}})
        handled.add("multipleOf")
    if "format" in s:
        f = s["format"]
        if f in refused_formats:
            return None
        if f in asserted_formats:
            parts.append({"not": {"format": f}})
        handled.add("format")
    if with_contains:
        for k, other in _NUMBER_BOUND_COMPLEMENT.items():
            if k in s:
                v = s[k]
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    return None  # draft-04 boolean exclusive bounds in a later draft
                parts.append({"type": "number", other: v})
                handled.add(k)
    else:  # draft-04: an exclusive bound is a flag beside its bound, and so is its complement's
        for k, flag, other, other_flag in _DRAFT4_BOUNDS:
            v, excl = s.get(k), s.get(flag, False)
            if not isinstance(excl, bool) or (flag in s and k not in s):
                return None
            if k in s:
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    return None
                parts.append({"type": "number", other: v} if excl else {"type": "number", other: v, other_flag: True})
            handled |= {k, flag} & set(s)
    for k, (typ, other, shift) in _COUNT_BOUNDS.items():
        if k in s:
            v = s[k]
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if isinstance(v, bool) or not isinstance(v, int):
                return None
            if v + shift >= 0:
                parts.append({"type": typ, other: v + shift})
            handled.add(k)
    if "properties" in s:
        props = s["properties"]
        if not isinstance(props, dict):
            return None
        for key, sub in props.items():
            n = neg(sub)
            if n is None:
                return None
            if n is not False:
                parts.append({"type": "object", "required": [key], "properties": {key: n}})
        handled.add("properties")
    if "items" in s and isinstance(s["items"], (dict, bool)) and "prefixItems" not in s:
        n = neg(s["items"])  # every item matches -> some item does not
        if n is None:
            return None
        if n is not False:
            parts.append({"type": "array", "contains": n} if with_contains else _some_item_in_draft4(n))
        handled.add("items")
    if "contains" in s and not {"minContains", "maxContains"} & set(s):
        n = neg(s["contains"])  # some item matches -> none does
        if n is None:
            return None
        parts.append({"type": "array", "items": n})
        handled.add("contains")
    if "patternProperties" in s or "additionalProperties" in s:
        some_key = _some_key_outside(s)
        if some_key is not None:
            parts.extend({"type": "object", "not": {"propertyNames": {"not": k}}} for k in some_key)
        else:  # a value constrained: "some member of these keys with a value outside it"
            members = _some_members(s)
            if members is None:
                return None
            parts.extend(members)
        handled |= {"patternProperties", "additionalProperties"}
    if "propertyNames" in s:
        failing = neg(s["propertyNames"])  # some key fails propertyNames
        if failing is None:
            return None
        keys = _strings_of(failing)
        if keys is None:  # a key schema: "some key matches it", counted by the object automaton
            parts.append({"type": "object", "not": {"propertyNames": s["propertyNames"]}})
        elif keys:  # a few strings: one of these keys is present
            parts.append({"type": "object", "required": keys[:1]} if len(keys) == 1 else
                         {"type": "object", "anyOf": [{"required": [k]} for k in keys]})
        handled.add("propertyNames")
    if "not" in s:
        parts.append(s["not"])
        handled.add("not")
    if "anyOf" in s:
        subs = [neg(b) for b in s["anyOf"]] if isinstance(s["anyOf"], list) else [None]
        if any(x is None for x in subs):
            return None
        parts.append(_all_of(subs))
        handled.add("anyOf")
    if "allOf" in s:
        subs = [neg(b) for b in s["allOf"]] if isinstance(s["allOf"], list) else [None]
        if any(x is None for x in subs):
            return None
        parts.append(_any_of(subs))
        handled.add("allOf")
    if "oneOf" in s:
        branches = s["oneOf"] if isinstance(s["oneOf"], list) else None
        subs = [neg(b) for b in branches] if branches else [None]
        if any(x is None for x in subs):
            return None
        # none matches, or at least two do
        two = [_all_of([branches[i], branches[j]]) for i in range(len(branches)) for j in range(i + 1, len(branches))]
        parts.append(_any_of([_all_of(subs)] + two))
        handled.add("oneOf")
    if "if" in s:
        cond = s["if"]
        then = neg(s.get("then", True))
        other = neg(s.get("else", True))
        ncond = neg(cond)
        if then is None or other is None or ncond is None:
            return None
        parts.append(_any_of([_all_of([cond, then]), _all_of([ncond, other])]))
        handled |= {"if", "then", "else"}
    else:
        handled |= {"then", "else"} & set(s)  # then/else without if mean nothing
    if set(s) - handled:
        return None
    return _any_of(parts)
