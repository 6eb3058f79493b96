"""JSON Schema's checks at value boundaries: the typed :class:`~structgen.grammar.ir.Check` objects
the schema compiler lists in ``GrammarIR.checks`` for what its automata can only over-approximate.

* :class:`SchemaCheck` -- a value whose schemas hold keywords the automaton over-approximates
  (``oneOf`` branches that overlap, ``not`` of a compound schema, ``contains``,
  ``dependentSchemas`` ...): the completed value is validated with ``jsonschema``;
* :class:`KeySetCheck` -- an object whose members come in any order but whose keys are too many
  to track in the automaton: its distinct keys against ``required``, presence conditions
  (``dependentRequired``, ``required`` inside ``anyOf``...) and property-count bounds;
* :class:`UniqueJsonItems` -- ``uniqueItems`` over items that are not a small finite set: items
  are compared as JSON Schema compares values (``1`` equals ``1.0``, key order does not matter,
  ``1`` differs from ``true``).
"""
from __future__ import annotations

import json
from decimal import Decimal
from typing import Hashable

from ...json_text import json_string_text
from ..ir import CheckContext, DistinctItems, ValueCheck
from ..presence import eval_presence


__all__ = ["SchemaCheck", "KeySetCheck", "UniqueJsonItems", "canonical"]


def canonical(v) -> Hashable:
    """A hashable value equal exactly when two JSON values are equal under JSON Schema."""
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, (int, Decimal)):
        return ("n", v)
    if isinstance(v, str):
        return ("s", v)
    if v is None:
        return ("z",)
    if isinstance(v, list):
        return ("a", tuple(canonical(x) for x in v))
    return ("o", frozenset((k, canonical(x)) for k, x in v.items()))


def _excerpt(schema, limit: int = 100) -> str:
    text = json.dumps(schema, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class SchemaCheck(ValueCheck):
    """The completed value validates against every one of ``validators`` (jsonschema validators
    bound to the schemas of the conjunction the value was compiled from)."""

    __slots__ = ("validators", "where")

    def __init__(self, rule: str, validators: tuple, where: str = ""):
        super().__init__(rule)
        self.validators = validators
        self.where = where  # the JSON pointer(s) of the schemas checked, for error messages

    def describe(self) -> str:
        shown = "; ".join(_excerpt(v.schema) for v in self.validators[:2])
        return f"the check of the schema at {self.where or '#'} ({shown})"

    def accepts(self, value: bytes, context: CheckContext) -> bool:
        try:
            v = json.loads(value)
            return all(x.is_valid(v) for x in self.validators)
        except Exception:  # noqa: BLE001 - not a whole value, or a schema jsonschema cannot evaluate
            return False


class KeySetCheck(ValueCheck):
    """An object's distinct keys (``context.keys``) against its required keys, presence predicates
    (``structgen.grammar.presence``) and ``minProperties``/``maxProperties``."""

    __slots__ = ("required", "presence", "min_properties", "max_properties")
    pure = False

    def __init__(self, rule: str, required: frozenset, presence: tuple, min_properties: int,
                 max_properties: int | None):
        super().__init__(rule)
        self.required = frozenset(required)
        self.presence = tuple(presence)
        self.min_properties = min_properties
        self.max_properties = max_properties

    def describe(self) -> str:
        parts = [f"required keys {sorted(self.required)}"] if self.required else []
        if self.min_properties or self.max_properties is not None:
            parts.append(f"{self.min_properties} to {self.max_properties if self.max_properties is not None else 'any'} "
                         "properties")
        if self.presence:
            parts.append("dependent keys")
        return f"the check of an object's keys ({', '.join(parts) or 'key set'})"

    def accepts(self, value: bytes, context: CheckContext) -> bool:
        keys = context.keys
        return (self.required <= keys and self.min_properties <= len(keys)
                and (self.max_properties is None or len(keys) <= self.max_properties)
                and all(eval_presence(p, keys) for p in self.presence))


class UniqueJsonItems(DistinctItems):
    """Items of a ``uniqueItems`` array, told apart by their JSON value."""

    __slots__ = ()

    def describe(self) -> str:
        return "the uniqueItems check (items must differ)"

    def identity(self, value: bytes) -> Hashable | None:
        try:
            if value[:1] == b'"':
                return ("s", json_string_text(value))
            return canonical(json.loads(value, parse_float=Decimal))
        except ValueError:  # not a whole JSON value: the parser's view and the text disagree
            return None
