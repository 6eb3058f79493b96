"""How ``structgen bench values`` scores a record (:mod:`structgen.bench.values`): field accuracy against the
record the text states (light normalisation, one leaf per scalar and per array element), invented members,
validity, and the JSON a free-running model wrote (parsed out of its text)."""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

__all__ = ["values_equal", "count_invented", "score_record", "is_valid", "parse_output"]


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


def _norm_str(s: str) -> str:
    return " ".join(s.split()).casefold()


def values_equal(got: Any, exp: Any) -> bool:
    """``got == exp`` after light normalisation (see the module docstring)."""
    if isinstance(exp, bool) or isinstance(got, bool):
        return isinstance(got, bool) and isinstance(exp, bool) and got == exp
    if isinstance(exp, (int, float)):
        return isinstance(got, (int, float)) and math.isclose(got, exp, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(exp, str):
        return isinstance(got, str) and _norm_str(got) == _norm_str(exp)
    return got == exp


def _nonempty(v: Any) -> bool:
    return v is not None and v != "" and v != [] and v != {}


def _is_scalar(v: Any) -> bool:
    return not isinstance(v, (dict, list))


@dataclasses.dataclass
class _Acc:
    correct: int = 0
    total: int = 0
    spurious: int = 0
    wrong: list = dataclasses.field(default_factory=list)
    extra: list = dataclasses.field(default_factory=list)


def _ptr(path: tuple) -> str:
    return "/" + "/".join(str(p) for p in path)


def _compare(got: Any, exp: Any, schema: Any, path: tuple, acc: _Acc) -> None:
    schema = schema if isinstance(schema, dict) else {}
    if isinstance(exp, dict):
        props = schema.get("properties") or {}
        g = got if isinstance(got, dict) else {}
        for k, v in exp.items():
            _compare(g.get(k, MISSING), v, props.get(k), path + (k,), acc)
        for k, v in g.items():
            if k not in exp and k in props and _nonempty(v):
                acc.spurious += 1
                acc.extra.append(_ptr(path + (k,)))
    elif isinstance(exp, list):
        g = got if isinstance(got, list) else []
        if all(_is_scalar(e) for e in exp):  # a multiset of scalars
            pool = list(g)
            for e in exp:
                acc.total += 1
                j = next((j for j, x in enumerate(pool) if values_equal(x, e)), None)
                if j is None:
                    acc.wrong.append({"path": _ptr(path), "expected": e, "got": g if got is not MISSING else None,
                                      "missing": got is MISSING})
                else:
                    acc.correct += 1
                    del pool[j]
        else:  # element-wise, in order
            items = schema.get("items")
            for i, e in enumerate(exp):
                _compare(g[i] if i < len(g) else MISSING, e, items, path + (i,), acc)
        if len(g) > len(exp):
            acc.spurious += len(g) - len(exp)
            acc.extra.append(f"{_ptr(path)}[{len(exp)}:]")
    else:
        acc.total += 1
        if got is not MISSING and values_equal(got, exp):
            acc.correct += 1
        else:
            acc.wrong.append({"path": _ptr(path), "expected": exp, "got": None if got is MISSING else got,
                              "missing": got is MISSING})


def count_invented(value: Any, schema: Any) -> int:
    """Keys of ``value``, at any depth, that the schema's ``properties`` do not name."""
    if not isinstance(schema, dict):
        return 0
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        n = 0
        for k, v in value.items():
            if k in props:
                n += count_invented(v, props[k])
            else:
                n += 1
        return n
    if isinstance(value, list):
        return sum(count_invented(v, schema.get("items")) for v in value)
    return 0


def score_record(value: Any, expected: dict, schema: dict, *, parsed: bool = True) -> dict:
    """Score one extracted value against the expected record (see the module docstring).

    ``parsed=False``: there is no value (the output was not JSON); every leaf scores 0."""
    acc = _Acc()
    got = value if parsed else MISSING
    _compare(got if isinstance(got, dict) else MISSING, expected, schema, (), acc)
    invented = count_invented(value, schema) if parsed else 0
    return {
        "fields_correct": acc.correct,
        "fields_total": acc.total,
        "field_acc": acc.correct / acc.total if acc.total else 1.0,
        "spurious": acc.spurious,
        "invented": invented,
        "exact": bool(parsed and isinstance(value, dict) and acc.correct == acc.total and acc.spurious == 0
                      and invented == 0),
        "wrong": acc.wrong,
        "spurious_at": acc.extra,
    }


_VALIDATORS: dict[str, Any] = {}


def is_valid(value: Any, schema: dict) -> tuple[bool, str | None]:
    """(valid?, first error): ``jsonschema`` with ``format`` asserted, as ``generate_json`` checks."""
    from ..grammar.json_schema import make_validator

    key = json.dumps(schema, sort_keys=True)
    v = _VALIDATORS.get(key)
    if v is None:
        v = _VALIDATORS[key] = make_validator(schema, format="assert")
    errors = list(v.iter_errors(value))
    if not errors:
        return True, None
    err = min(errors, key=lambda e: len(list(e.path)))
    return False, f"at {_ptr(tuple(err.path))}: {err.message}"[:300]


def parse_output(text: str, *, extract: bool) -> tuple[bool, Any]:
    """(parsed?, value): the whole text as JSON, or with ``extract`` the first JSON value in it."""
    if extract:
        from .jsonschemabench.scoring import extract_json

        return extract_json(text)
    try:
        return True, json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return False, None
