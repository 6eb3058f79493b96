"""Generated inputs for ``structgen bench fuzz``: every case is a pure function of (seed, index).

Four kinds:
- ``schema-mutation``: a real MaskBench dev schema (with its valid and invalid instances) after 1-3
  random mutations: a keyword dropped, a type changed, a bound perturbed (to 0, negative, huge or
  crossed), two sibling values swapped, a generated pattern inserted, objects closed, the whole
  wrapped in ``allOf`` / ``anyOf`` / ``not``, ``uniqueItems`` switched on;
- ``schema-random``: a small schema grown from a keyword grammar (types, enum/const, properties,
  items, combinators, patterns, formats, numeric and length bounds);
- ``regex``: a random syntax tree printed as a pattern (classes, Unicode, counted and lazy
  repetition, groups, alternation, and now and then anchors, lookaround or a backreference, which
  the engine must refuse cleanly);
- ``lark``: a random rule set (literals, regex terminals without lazy quantifiers or alternation,
  rule references with recursion, optional and repeated groups).
"""
from __future__ import annotations

import copy
import gzip
import json
import random
from pathlib import Path
from typing import Any

__all__ = ["KINDS", "make_case", "load_maskbench_rows"]

KINDS = ("schema-mutation", "schema-random", "regex", "lark")
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
           "minItems", "maxItems", "minProperties", "maxProperties")
_TYPES = ("string", "integer", "number", "boolean", "null", "object", "array")
_FORMATS = ("date", "time", "date-time", "email", "uuid", "ipv4", "ipv6", "uri", "hostname", "duration")


def load_maskbench_rows(path: str | Path) -> list[dict]:
    """MaskBench dev rows (schema, valid and invalid instances), in file order."""
    rows = []
    with gzip.open(path, "rt") as f:
        for line in f:
            rows.append(json.loads(line))
    return rows


# -- regexes ------------------------------------------------------------------------------------------
def _regex(rng: random.Random, depth: int = 0, exotic: bool = True, lazy: bool = True) -> str:
    """``lazy=False``: neither lazy quantifiers nor alternation (see ``_lark``)."""
    r = rng.random()
    if depth > 3 or r < 0.3:
        return _atom(rng, exotic)
    if r < 0.5 or (not lazy and r < 0.65):
        return "".join(_regex(rng, depth + 1, exotic, lazy) for _ in range(rng.randint(2, 4)))
    if r < 0.65:
        return "(" + "|".join(_regex(rng, depth + 1, exotic, lazy) for _ in range(rng.randint(2, 3))) + ")"
    if r < 0.9:
        inner = _regex(rng, depth + 1, exotic, lazy)
        inner = inner if len(inner) == 1 or inner.startswith(("(", "[")) and inner.endswith((")", "]")) else f"(?:{inner})"
        q = rng.choice(["*", "+", "?", "{%d}" % rng.randint(0, 5), "{%d,%d}" % (lambda a: (a, a + rng.randint(0, 6)))(rng.randint(0, 4)),
                        "{%d,}" % rng.randint(0, 3)])
        if lazy and rng.random() < 0.15:
            q += "?"  # lazy
        return inner + q
    if not exotic:
        return _atom(rng, exotic)
    return rng.choice([
        "(?=" + _atom(rng, exotic) + ")" + _atom(rng, exotic),  # lookahead: refused or handled, never wrong
        "(?!" + _atom(rng, exotic) + ")" + _atom(rng, exotic),
        "(" + _atom(rng, exotic) + ")\\1",  # backreference
        "^" + _atom(rng, exotic),
        _atom(rng, exotic) + "$",
        "\\b" + _atom(rng, exotic),
    ])


def _atom(rng: random.Random, exotic: bool = True) -> str:
    r = rng.random()
    if r < 0.35:
        return rng.choice("abcxyz019-_ ") if rng.random() < 0.9 else rng.choice(["é", "ß", "数", "🤖", "\\.", "\\+"])
    if r < 0.6:
        return rng.choice(["[a-z]", "[A-Z0-9]", "[^a-c]", "[0-9a-f]", "[ -~]", "[à-ÿ]", "[\\w.-]", "[^\\s]"])
    if r < 0.8:
        return rng.choice(["\\d", "\\w", "\\s", "\\D", "\\W", "."])
    if exotic and r < 0.85:
        return rng.choice(["\\u00e9", "\\x41", "[\\u4e00-\\u4e10]", "\\p{L}", "[z-a]", "(", "a{3,1}"])  # some invalid
    return rng.choice(["abc", "id", "key", "0x", "__"])


# -- schemas ----------------------------------------------------------------------------------------
def _random_schema(rng: random.Random, depth: int = 0) -> dict:
    r = rng.random()
    if depth > 2 or r < 0.35:
        t = rng.choice(_TYPES[:5])
        s: dict[str, Any] = {"type": t}
        if t == "string":
            if rng.random() < 0.3:
                s["pattern"] = _regex(rng, 2, exotic=rng.random() < 0.1)
            if rng.random() < 0.2:
                s["format"] = rng.choice(_FORMATS)
            if rng.random() < 0.4:
                s["minLength"] = rng.randint(0, 5)
            if rng.random() < 0.4:
                s["maxLength"] = rng.randint(0, 30)
        elif t in ("integer", "number"):
            for k in ("minimum", "maximum", "exclusiveMinimum", "multipleOf"):
                if rng.random() < 0.3:
                    s[k] = rng.choice([0, 1, -3, 2.5, 10, 1e6, 0.1]) if k != "multipleOf" else rng.choice([1, 2, 0.5, 0.25, 7])
        return s
    if r < 0.45:
        return {"enum": rng.sample([1, "a", None, True, 2.5, {"k": 1}, [1, 2], "b", 0, ""], rng.randint(1, 4))}
    if r < 0.5:
        return {"const": rng.choice(["x", 3, None, {"a": [1]}, False])}
    if r < 0.75:
        props = {f"p{i}": _random_schema(rng, depth + 1) for i in range(rng.randint(0, 4))}
        s = {"type": "object", "properties": props}
        if props and rng.random() < 0.6:
            s["required"] = rng.sample(sorted(props), rng.randint(1, len(props)))
        if rng.random() < 0.4:
            s["additionalProperties"] = rng.choice([False, True, {"type": "integer"}])
        if rng.random() < 0.15:
            s["patternProperties"] = {_regex(rng, 3, exotic=False): {"type": "boolean"}}
        if rng.random() < 0.2:
            s["minProperties"] = rng.randint(0, 3)
        return s
    if r < 0.88:
        s = {"type": "array", "items": _random_schema(rng, depth + 1)}
        for k in ("minItems", "maxItems"):
            if rng.random() < 0.4:
                s[k] = rng.randint(0, 4)
        if rng.random() < 0.2:
            s["uniqueItems"] = True
        if rng.random() < 0.15:
            s["prefixItems"] = [_random_schema(rng, depth + 1)]
        return s
    comb = rng.choice(["anyOf", "oneOf", "allOf", "not", "if"])
    if comb == "not":
        return {"not": _random_schema(rng, depth + 1)}
    if comb == "if":
        return {"if": _random_schema(rng, depth + 1), "then": _random_schema(rng, depth + 1),
                "else": _random_schema(rng, depth + 1)}
    return {comb: [_random_schema(rng, depth + 1) for _ in range(rng.randint(1, 3))]}


def _nodes(doc: Any, path: tuple = ()) -> list[tuple[tuple, dict]]:
    """Every schema-like dict in ``doc`` with its path."""
    out = []
    if isinstance(doc, dict):
        out.append((path, doc))
        for k, v in doc.items():
            out += _nodes(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _nodes(v, path + (i,))
    return out


def _mutate(rng: random.Random, schema: Any) -> tuple[Any, list[str]]:
    s = copy.deepcopy(schema)
    notes = []
    for _ in range(rng.randint(1, 3)):
        nodes = _nodes(s)
        if not nodes:
            break
        path, node = rng.choice(nodes)
        where = "/" + "/".join(map(str, path))
        r = rng.random()
        keys = [k for k in node if not str(k).startswith("$")]
        if r < 0.2 and keys:
            k = rng.choice(keys)
            del node[k]
            notes.append(f"drop {k} at {where}")
        elif r < 0.35:
            node["type"] = rng.choice(_TYPES) if rng.random() < 0.8 else rng.sample(_TYPES, 2)
            notes.append(f"type {node['type']} at {where}")
        elif r < 0.55:
            k = rng.choice(_BOUNDS)
            node[k] = rng.choice([0, 1, -1, 3, 2**40, 0.5, 1e-9, 100000])
            notes.append(f"{k}={node[k]} at {where}")
        elif r < 0.65 and len(keys) >= 2:
            a, b = rng.sample(keys, 2)
            node[a], node[b] = node[b], node[a]
            notes.append(f"swap {a},{b} at {where}")
        elif r < 0.75:
            node["pattern"] = _regex(rng, 2, exotic=rng.random() < 0.3)
            notes.append(f"pattern {node['pattern']!r} at {where}")
        elif r < 0.82:
            node["additionalProperties"] = False
            notes.append(f"closed at {where}")
        elif r < 0.9:
            node["uniqueItems"] = True
            notes.append(f"uniqueItems at {where}")
        else:
            comb = rng.choice(["allOf", "anyOf", "not"])
            inner = {k: node.pop(k) for k in list(node) if not str(k).startswith("$") and k not in ("definitions", "$defs")}
            node[comb] = inner if comb == "not" else [inner, _random_schema(rng, 2)]
            notes.append(f"wrap in {comb} at {where}")
    return s, notes


# -- lark -------------------------------------------------------------------------------------------
def _lark(rng: random.Random) -> str:
    n_rules = rng.randint(1, 4)
    names = ["start"] + [f"r{i}" for i in range(1, n_rules)]
    n_terms = rng.randint(0, 3)
    terms = [f"T{i}" for i in range(n_terms)]
    lines = []

    def item(depth: int) -> str:
        r = rng.random()
        if r < 0.35:
            return json.dumps(rng.choice(["a", "b", "xy", "(", ")", ",", " ", "key", "é", "1"]))
        if r < 0.5 and terms:
            return rng.choice(terms)
        if r < 0.65 and len(names) > 1:
            return rng.choice(names[1:])
        if r < 0.8 and depth < 2:
            return "(" + seq(depth + 1) + ")" + rng.choice(["*", "+", "?", ""])
        if depth < 2:
            return "[" + seq(depth + 1) + "]"
        return json.dumps(rng.choice(["z", "w"]))

    def seq(depth: int) -> str:
        return " ".join(item(depth) for _ in range(rng.randint(1, 3)))

    for name in names:
        alts = [seq(0) for _ in range(rng.randint(1, 3))]
        lines.append(f"{name}: " + " | ".join(alts))
    for t in terms:
        # no lazy quantifiers and no alternation: lark's Earley matches a terminal's regex as Python's
        # re.match does (the first alternative that matches, the shortest lazy run), while structgen gives
        # a terminal its whole regular language; which one a Lark terminal means is the CFG issue's
        # open question, so the fuzzer keeps to terminals on which both agree
        lines.append(f"{t}: /{_regex(rng, 2, exotic=rng.random() < 0.2, lazy=False).replace('/', '')}/")
    if rng.random() < 0.3:
        lines.append('%import common.WS\n%ignore WS')
    return "\n".join(lines) + "\n"


# -- cases ------------------------------------------------------------------------------------------
def make_case(seed: int, index: int, kinds: tuple[str, ...], rows: list[dict] | None) -> dict:
    """Case ``index`` of the campaign ``seed``: ``{"id", "kind", "source", ...}``."""
    rng = random.Random(f"{seed}:{index}")
    kind = kinds[index % len(kinds)]
    case: dict[str, Any] = {"id": f"{kind}-{seed}-{index}", "kind": kind}
    if kind == "schema-mutation" and rows:
        row = rows[rng.randrange(len(rows))]
        schema, notes = _mutate(rng, row["schema"] if "schema" in row else row["json_schema"])
        tests = row.get("tests") or []
        case.update(source=schema, base=row.get("id") or row.get("unique_id"), mutations=notes,
                    instances=[t.get("data") for t in tests[:6] if isinstance(t, dict) and "data" in t])
    elif kind in ("schema-random", "schema-mutation"):
        case.update(kind="schema-random", source=_random_schema(rng))
    elif kind == "regex":
        case.update(source=_regex(rng))
    else:
        case.update(source=_lark(rng))
    return case
