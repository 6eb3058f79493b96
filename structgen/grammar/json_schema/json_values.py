"""JSON values as JSON Schema compares them (1 equals 1.0, true differs from 1), and small helpers
over literal values and keyword arguments that several compilers share.
"""
from __future__ import annotations

import re

from ...errors import GrammarError, SchemaError
from .limits import ANNOTATIONS
from .refs import SchemaNode


def simple_valid(value, schema) -> bool:
    """Validity under a schema made only of type / enum / const / nullable."""
    if schema is True:
        return True
    if schema is False:
        return False
    t = schema.get("type")
    if t is not None:
        ts = {t} if isinstance(t, str) else set(t)
        if schema.get("nullable") is True:
            ts.add("null")
        vt = json_type(value)
        if not (vt in ts or (vt == "integer" and "number" in ts)):
            return False
    if "enum" in schema and not in_enum(value, schema["enum"]):
        return False
    if "const" in schema and not json_eq(value, schema["const"]):
        return False
    return True


NOT_FINITE = object()


def number_spellings(v) -> str:
    """Regex of every positional JSON spelling of the number ``v`` (1 -> 1, 1.0, 1.00, ...)."""
    from decimal import Decimal

    d = Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
    if d == 0:
        return r"-?0(\.0+)?"
    text = format(abs(d), "f")
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0")
    sign = "-" if d < 0 else ""
    return sign + whole + (r"\." + frac + "0*" if frac else r"(\.0+)?")


def trivial(s) -> bool:
    """True for schemas that constrain nothing (true, {}, or annotations only)."""
    return s is True or (isinstance(s, dict) and ANNOTATIONS.issuperset(s))


def tighten(kw: dict, arg: str, v) -> None:
    if arg not in kw:
        kw[arg] = v
    elif arg in ("minimum", "exclusive_minimum"):
        kw[arg] = max(kw[arg], v)
    else:
        kw[arg] = min(kw[arg], v)


def nonneg(v, n: SchemaNode, name: str) -> int:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise SchemaError(f"{name} must be a non-negative integer", pointer=f"{n.ptr}/{name}")
    return v


def check_pattern(pat: str, pointer: str) -> None:
    """A ``pattern`` (or ``patternProperties`` key) that is no regular expression is a schema error
    naming it: the final validation (jsonschema, Python's ``re``) could never pass a value under
    it, so compiling it would only let generation wander to the end of its budget."""
    from ..regex import python_regex

    try:
        py = python_regex(pat)  # ECMA-262's \p{...} (Unicode properties) written as classes
    except GrammarError as e:  # an unknown property
        raise SchemaError(str(e), pointer=pointer) from None
    try:
        re.compile(py)
    except re.error as e:  # (a position in the rewritten text would mean nothing)
        raise SchemaError(f"invalid regular expression {pat!r}: {e if py is pat else e.msg}", pointer=pointer) from None


def pattern_search(pat: str, key: str, n: SchemaNode) -> bool:
    from ..regex import python_regex

    try:
        return re.search(python_regex(pat), key) is not None
    except re.error as e:
        raise SchemaError(f"invalid pattern {pat!r}: {e}", pointer=f"{n.ptr}/patternProperties") from None


def json_type(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "integer" if v.is_integer() else "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def json_eq(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_eq(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_eq(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def json_key(v):
    """A hashable key equal for JSON-equal values (1 == 1.0, true != 1, key order ignored)."""
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, (int, float)):
        return ("n", int(v) if isinstance(v, float) and v.is_integer() else v)
    if isinstance(v, list):
        return ("l", tuple(json_key(x) for x in v))
    if isinstance(v, dict):
        return ("d", frozenset((k, json_key(x)) for k, x in v.items()))
    return (type(v).__name__, v)


def json_in(v, vals) -> bool:
    return any(json_eq(v, x) for x in vals)


_ENUM_KEYS: dict[int, tuple[list, frozenset]] = {}


def in_enum(v, enum: list) -> bool:
    """``v`` JSON-equal to a member of ``enum`` (key sets memoised per list: checking every
    member of a 20,000-value enum against it must stay linear)."""
    if len(enum) < 16:
        return json_in(v, enum)
    hit = _ENUM_KEYS.get(id(enum))
    if hit is None or hit[0] is not enum:
        if len(_ENUM_KEYS) > 256:
            _ENUM_KEYS.clear()
        hit = _ENUM_KEYS[id(enum)] = (enum, frozenset(json_key(x) for x in enum))
    return json_key(v) in hit[1]


def without_enum(n: SchemaNode) -> SchemaNode:
    """``n`` without its ``enum`` and ``const`` (the same node when it has neither)."""
    s = n.schema
    if not isinstance(s, dict) or ("enum" not in s and "const" not in s):
        return n
    return n.replaced({k: v for k, v in s.items() if k != "enum" and k != "const"})


def json_filter(values: list, allowed: list) -> list:
    """The members of ``values`` JSON-equal to some member of ``allowed`` (linear time)."""
    keys = {json_key(x) for x in allowed}
    return [v for v in values if json_key(v) in keys]


def dedupe(vals: list) -> list:
    out: list = []
    seen: set = set()
    for v in vals:
        k = json_key(v)
        if k not in seen:
            seen.add(k)
            out.append(v)
    return out


def tighten_counts(s: dict, n: SchemaNode, lo: int, hi: int | None, min_key: str, max_key: str) -> tuple[int, int | None]:
    """``(lo, hi)`` narrowed by the node's ``min_key`` / ``max_key`` (minItems/maxItems, minLength/maxLength...)."""
    if min_key in s:
        lo = max(lo, nonneg(s[min_key], n, min_key))
    if max_key in s:
        v = nonneg(s[max_key], n, max_key)
        hi = v if hi is None else min(hi, v)
    return lo, hi
