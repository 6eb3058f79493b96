r"""jsonschema validators that read ECMA-262's Unicode property escapes (``\p{Letter}``,
``\P{sc=Greek}``) in ``pattern`` and ``patternProperties`` as JSON Schema means them.

jsonschema matches patterns with Python's ``re``, which has no ``\p{...}``: a value checked under
such a pattern raises ``re.error`` ("bad escape \p").  :func:`ecma_patterns` extends a validator
class so that these keywords (and ``additionalProperties`` and ``unevaluatedProperties``, which
match ``patternProperties`` keys too) match the pattern as rewritten by
:func:`structgen.grammar.regex.python_regex` -- the same classes the automata are built from.
Patterns without a property escape go to jsonschema's own functions unchanged, so a validator of a
schema that uses none validates exactly as before.
"""
from __future__ import annotations

import functools
import re

from .regex import python_regex

__all__ = ["ecma_patterns"]


def _has_property(pattern) -> bool:
    """Whether Python's ``re`` needs ``pattern`` rewritten (a property escape, a named group)."""
    return isinstance(pattern, str) and ("\\p" in pattern or "\\P" in pattern or "(?<" in pattern) \
        and python_regex(pattern) is not pattern


@functools.lru_cache(maxsize=None)
def ecma_patterns(cls):
    """``cls`` (a jsonschema validator class) extended as the module says; one class per ``cls``."""
    from jsonschema import validators

    own = cls.VALIDATORS
    new = {}
    if "pattern" in own:
        new["pattern"] = _pattern(own["pattern"])
    if "patternProperties" in own:
        new["patternProperties"] = _pattern_properties(own["patternProperties"])
    if "additionalProperties" in own:
        new["additionalProperties"] = _additional_properties(own["additionalProperties"])
    if "unevaluatedProperties" in own:
        new["unevaluatedProperties"] = _unevaluated_properties(own["unevaluatedProperties"])
    return validators.extend(cls, validators=new) if new else cls


def _pattern(original):
    def pattern(validator, patrn, instance, schema):
        if not _has_property(patrn):
            yield from original(validator, patrn, instance, schema)
            return
        from jsonschema.exceptions import ValidationError

        if validator.is_type(instance, "string") and not re.search(python_regex(patrn), instance):
            yield ValidationError(f"{instance!r} does not match {patrn!r}")
    return pattern


def _pattern_properties(original):
    def patternProperties(validator, pattern_properties, instance, schema):
        if not any(_has_property(p) for p in pattern_properties):
            yield from original(validator, pattern_properties, instance, schema)
            return
        if not validator.is_type(instance, "object"):
            return
        for pattern, subschema in pattern_properties.items():
            rx = python_regex(pattern)
            for k, v in instance.items():
                if re.search(rx, k):
                    yield from validator.descend(v, subschema, path=k, schema_path=pattern)
    return patternProperties


def _additional_properties(original):
    def additionalProperties(validator, ap, instance, schema):
        patterns = schema.get("patternProperties") or {}
        if not any(_has_property(p) for p in patterns):
            yield from original(validator, ap, instance, schema)
            return
        if not validator.is_type(instance, "object"):
            return
        from jsonschema.exceptions import ValidationError

        properties = schema.get("properties", {})
        rxs = [python_regex(p) for p in patterns]
        extras = [k for k in instance if k not in properties and not any(re.search(rx, k) for rx in rxs)]
        if validator.is_type(ap, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], ap, path=extra)
        elif not ap and extras:
            joined = ", ".join(repr(k) for k in sorted(extras))
            yield ValidationError(f"{joined} {'does' if len(extras) == 1 else 'do'} not match any of the "
                                  f"regexes: {', '.join(repr(p) for p in sorted(patterns))}")
    return additionalProperties


def _unevaluated_properties(original):
    def unevaluatedProperties(validator, up, instance, schema):
        try:  # jsonschema's own, unless a pattern it meets on the way has a property escape
            errors = list(original(validator, up, instance, schema))
        except re.error:
            errors = list(_unevaluated(validator, up, instance, schema))
        yield from errors
    return unevaluatedProperties


def _unevaluated(validator, up, instance, schema):
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema)
    bad = [k for k in instance if k not in evaluated
           and next(iter(validator.descend(instance[k], up, path=k, schema_path=k)), None) is not None]
    if bad:
        yield ValidationError(f"Unevaluated properties are not {'allowed' if up is False else 'valid'} "
                              f"({', '.join(repr(k) for k in sorted(bad, key=str))} unexpected)")


def _valid(errors) -> bool:
    return next(iter(errors), None) is None


def _evaluated_keys(validator, instance, schema) -> set:
    """The keys of ``instance`` that ``schema`` evaluates (jsonschema's
    ``find_evaluated_property_keys_by_schema``, matching patterns through ``python_regex``)."""
    if not isinstance(schema, dict):
        return set()
    out: set = set()
    for kw in ("$ref", "$dynamicRef", "$recursiveRef"):
        ref = schema.get(kw)
        if isinstance(ref, str):
            resolved = validator._resolver.lookup(ref)
            out |= _evaluated_keys(validator.evolve(schema=resolved.contents, _resolver=resolved.resolver),
                                   instance, resolved.contents)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        out |= properties.keys() & instance.keys()
    for kw in ("additionalProperties", "unevaluatedProperties"):
        sub = schema.get(kw)
        if sub is not None:
            out |= {k for k, v in instance.items() if _valid(validator.descend(v, sub))}
    for pattern in schema.get("patternProperties") or {}:
        rx = python_regex(pattern)
        out |= {k for k in instance if re.search(rx, k)}
    for key, sub in (schema.get("dependentSchemas") or {}).items():
        if key in instance:
            out |= _evaluated_keys(validator, instance, sub)
    for kw in ("allOf", "oneOf", "anyOf"):
        for sub in schema.get(kw) or []:
            if _valid(validator.descend(instance, sub)):
                out |= _evaluated_keys(validator, instance, sub)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            out |= _evaluated_keys(validator, instance, schema["if"])
            if "then" in schema:
                out |= _evaluated_keys(validator, instance, schema["then"])
        elif "else" in schema:
            out |= _evaluated_keys(validator, instance, schema["else"])
    return out
