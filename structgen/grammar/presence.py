"""Presence predicates: ``required`` inside ``anyOf`` / ``oneOf`` / ``not`` and ``dependentRequired``,
compiled (``json_schema``) to small trees over which keys an object has.  The object automaton
tracks them exactly, and the engine's close checks (``structgen.engine.checks``) evaluate
them when an object with too many keys to track closes; both read them here.

A tree is ``("const", bool)``, ``("req", keys)``, ``("has", keys)``, ``("not", tree)`` or
``(tag, [trees])`` with tag ``any`` / ``all`` / ``one``.  ``req`` is the keyword ``required`` (true of
every value that is not an object); ``has`` is "an object with these keys" (false of the others), the
trigger of a dependency: ``dependencies: {x: S}`` is ``any(not has x, S)``, which holds for a non-object
as the keyword does (``any(not req x, S)`` would not, where ``S`` is ``not required``).
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
    if tag == "has":
        return present is not None and all(k in present for k in ast[1])
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
    if tag in ("req", "has"):
        return set(ast[1])
    if tag == "not":
        return presence_keys(ast[1])
    out: set = set()
    for a in ast[1]:
        out |= presence_keys(a)
    return out
