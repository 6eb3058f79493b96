"""A fast structural check of a schema against its draft's metaschema.

Validating a schema with ``jsonschema`` against the draft 2020-12 metaschema
costs about 17 ms (its ``$dynamicRef`` resolution dominates) -- more than the
whole rest of a typical compile.  The metaschemas of 2020-12, draft-07 and
draft-04 only constrain the *type* of each keyword's value (a subschema, a map
or non-empty list of subschemas, a non-negative integer, a string list without
duplicates, ...), so they fit in a keyword table walked once over the schema.

The check is one-sided by design: :func:`fast_metaschema_ok` answers ``True``
only when the schema certainly satisfies the metaschema; anything unusual
(an integral float, an unknown draft) answers ``False`` and the caller runs
``jsonschema``'s full check, which then has the last word and the error
message.  A test compares both on real schemas and mutations of them.
"""
from __future__ import annotations

import re
from typing import Any, Callable

__all__ = ["fast_metaschema_ok", "DRAFTS"]

_SIMPLE_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_ANCHOR = re.compile(r"^[A-Za-z_][-A-Za-z0-9._]*$")
_ID_2020 = re.compile(r"^[^#]*#?$")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _nonneg(v: Any, _walk) -> bool:
    return _is_int(v) and v >= 0


def _number(v: Any, _walk) -> bool:
    return _is_number(v)


def _positive_number(v: Any, _walk) -> bool:
    return _is_number(v) and v > 0


def _string(v: Any, _walk) -> bool:
    return isinstance(v, str)


def _boolean(v: Any, _walk) -> bool:
    return isinstance(v, bool)


def _array(v: Any, _walk) -> bool:
    return isinstance(v, list)


def _anything(v: Any, _walk) -> bool:
    return True


def _anchor(v: Any, _walk) -> bool:
    return isinstance(v, str) and _ANCHOR.match(v) is not None


def _id_2020(v: Any, _walk) -> bool:
    return isinstance(v, str) and _ID_2020.match(v) is not None


def _string_array(v: Any, _walk, *, non_empty: bool = False) -> bool:
    return (isinstance(v, list) and all(isinstance(x, str) for x in v)
            and len(set(v)) == len(v) and (len(v) > 0 or not non_empty))


def _string_array_non_empty(v: Any, walk) -> bool:
    return _string_array(v, walk, non_empty=True)


def _type(v: Any, _walk) -> bool:
    if isinstance(v, str):
        return v in _SIMPLE_TYPES
    return (isinstance(v, list) and len(v) > 0 and all(isinstance(x, str) and x in _SIMPLE_TYPES for x in v)
            and len(set(v)) == len(v))


def _schema(v: Any, walk) -> bool:
    return walk(v)


def _bool_or_schema(v: Any, walk) -> bool:
    return isinstance(v, bool) or walk(v)


def _schema_map(v: Any, walk) -> bool:
    return isinstance(v, dict) and all(walk(x) for x in v.values())


def _schema_list(v: Any, walk) -> bool:
    return isinstance(v, list) and len(v) > 0 and all(walk(x) for x in v)


def _schema_or_list(v: Any, walk) -> bool:
    return _schema_list(v, walk) if isinstance(v, list) else walk(v)


def _dependencies(v: Any, walk) -> bool:
    return isinstance(v, dict) and all(
        _string_array(x, walk) if isinstance(x, list) else walk(x) for x in v.values())


def _dependent_required(v: Any, walk) -> bool:
    return isinstance(v, dict) and all(_string_array(x, walk) for x in v.values())


def _vocabulary(v: Any, _walk) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, bool) for k, x in v.items())


def _enum_draft4(v: Any, _walk) -> bool:
    # draft-04 asks for unique items; equality of JSON values is subtle (1 vs 1.0 vs true), so only
    # the obvious case is decided here and anything with repeats goes to jsonschema
    if not isinstance(v, list) or not v:
        return False
    seen = set()
    for x in v:
        if not isinstance(x, (str, int, float, bool, type(None))):
            return False
        key = ("bool", x) if isinstance(x, bool) else ("number", float(x)) if isinstance(x, (int, float)) \
            else ("other", x)
        if key in seen:
            return False
        seen.add(key)
    return True


Check = Callable[[Any, Callable[[Any], bool]], bool]

_COMMON: dict[str, Check] = {
    "$ref": _string, "$comment": _string, "title": _string, "description": _string, "default": _anything,
    "examples": _array, "format": _string, "const": _anything, "enum": _array,
    "multipleOf": _positive_number, "maximum": _number, "minimum": _number,
    "maxLength": _nonneg, "minLength": _nonneg, "pattern": _string,
    "maxItems": _nonneg, "minItems": _nonneg, "uniqueItems": _boolean,
    "maxProperties": _nonneg, "minProperties": _nonneg, "required": _string_array,
    "type": _type, "contains": _schema, "additionalProperties": _schema, "properties": _schema_map,
    "patternProperties": _schema_map, "propertyNames": _schema, "if": _schema, "then": _schema,
    "else": _schema, "allOf": _schema_list, "anyOf": _schema_list, "oneOf": _schema_list, "not": _schema,
    "definitions": _schema_map, "dependencies": _dependencies,
    "exclusiveMaximum": _number, "exclusiveMinimum": _number,
    "readOnly": _boolean, "contentEncoding": _string, "contentMediaType": _string,
}

_DRAFT2020: dict[str, Check] = {
    **_COMMON,
    "$id": _id_2020, "$schema": _string, "$anchor": _anchor, "$dynamicRef": _string,
    "$dynamicAnchor": _anchor, "$vocabulary": _vocabulary, "$defs": _schema_map,
    "$recursiveAnchor": _anchor, "$recursiveRef": _string,
    "prefixItems": _schema_list, "items": _schema, "dependentSchemas": _schema_map,
    "unevaluatedItems": _schema, "unevaluatedProperties": _schema, "contentSchema": _schema,
    "maxContains": _nonneg, "minContains": _nonneg, "dependentRequired": _dependent_required,
    "deprecated": _boolean, "writeOnly": _boolean,
}

_DRAFT7: dict[str, Check] = {
    **_COMMON,
    "$id": _string, "$schema": _string, "items": _schema_or_list, "additionalItems": _schema,
    "writeOnly": _boolean,
}

_DRAFT4: dict[str, Check] = {
    **{k: v for k, v in _COMMON.items()
       if k not in ("$comment", "const", "contains", "propertyNames", "if", "then", "else", "readOnly",
                    "contentEncoding", "contentMediaType", "examples")},
    "id": _string, "$schema": _string, "items": _schema_or_list, "additionalItems": _bool_or_schema,
    "additionalProperties": _bool_or_schema, "exclusiveMaximum": _boolean, "exclusiveMinimum": _boolean,
    "required": _string_array_non_empty, "enum": _enum_draft4,
}

#: metaschema URI (without trailing ``#``) -> (keyword table, boolean schemas allowed)
DRAFTS: dict[str, tuple[dict[str, Check], bool]] = {
    "https://json-schema.org/draft/2020-12/schema": (_DRAFT2020, True),
    "http://json-schema.org/draft-07/schema": (_DRAFT7, True),
    # draft-06 has the same keyword kinds minus draft-07's additions, which the table only makes stricter
    "http://json-schema.org/draft-06/schema": (_DRAFT7, True),
    "http://json-schema.org/draft-04/schema": (_DRAFT4, False),
}


def fast_metaschema_ok(schema: Any, metaschema_uri: str) -> bool:
    """``True`` only if ``schema`` certainly satisfies the named draft's metaschema."""
    entry = DRAFTS.get(metaschema_uri.rstrip("#"))
    if entry is None:
        return False
    table, booleans_allowed = entry
    return _MetaWalk(table, booleans_allowed).walk(schema)


class _MetaWalk:
    """The recursive check (a method, not a closure: a closure that calls itself is a
    reference cycle left for the garbage collector on every compile)."""

    __slots__ = ("table", "booleans_allowed")

    def __init__(self, table: dict, booleans_allowed: bool):
        self.table = table
        self.booleans_allowed = booleans_allowed

    def walk(self, s: Any) -> bool:  # recursion as deep as the schema: compiles run on a large stack
        if isinstance(s, bool):
            return self.booleans_allowed
        if not isinstance(s, dict):
            return False
        table = self.table
        if table is _DRAFT4 and (("exclusiveMaximum" in s and "maximum" not in s)
                                 or ("exclusiveMinimum" in s and "minimum" not in s)):
            return False
        walk = self.walk
        for k, v in s.items():
            check = table.get(k)
            if check is not None and not check(v, walk):
                return False
        return True
