"""Presence predicates: ``required`` inside ``anyOf`` / ``oneOf`` / ``not`` and ``dependentRequired``,
compiled (``json_schema``) to small trees over which keys an object has.  The object automaton
tracks them exactly, and the engine's close checks (``structgen.engine.checks``) evaluate
them when an object with too many keys to track closes; both read them here.

A tree is ``("const", bool)``, ``("req", keys)``, ``("not", tree)`` or ``(tag, [trees])`` with
tag ``any`` / ``all`` / ``one``.
"""
from __future__ import annotations


def eval_presence(ast, present: set | None) -> bool:
    """Evaluate a presence predicate; ``present=None`` means the value is not an
    object, where every ``required`` holds vacuously."""
    tag = ast[0]
    if tag == "const":
        return ast[1]
    if tag == "req":
        return present is None or all(k in present for k in ast[1])
    if tag == "not":
        return not eval_presence(ast[1], present)
    vals = [eval_presence(a, present) for a in ast[1]]
    if tag == "any":
        return any(vals)
    if tag == "all":
        return all(vals)
    return sum(vals) == 1


def presence_keys(ast) -> set:
    tag = ast[0]
    if tag == "const":
        return set()
    if tag == "req":
        return set(ast[1])
    if tag == "not":
        return presence_keys(ast[1])
    out: set = set()
    for a in ast[1]:
        out |= presence_keys(a)
    return out
