"""JSON Schema (draft 2020-12, with draft-04/07 spellings) to grammar IR.

Design:
* A subschema is compiled together with every schema that constrains the same value (a
  *conjunction*: ``allOf`` members, ``$ref`` targets, the siblings of ``anyOf``), so keywords
  merge exactly instead of being dropped.
* Strings, numbers and literals become single terminals (byte DFAs); objects and arrays become
  rules whose bodies are explicit automata (counts of properties/items, optional members and
  commas without blow-up).
* ``enum``/``const`` are filtered by validating each candidate against the whole conjunction.
* Property order: the order of ``properties`` (first definition wins across ``allOf``), then
  required keys not listed there, then additional properties.  Whitespace: ``compact`` (none) or
  ``flexible`` (JSON whitespace around punctuation, at most ``max_whitespace`` bytes per run).
* What the automaton can only over-approximate is checked when its value completes (typed checks,
  ``structgen.grammar.json_schema.checks``); what cannot be enforced at all raises ``UnsupportedFeature``
  with the JSON pointer; ``lenient=True`` validates the final output instead.

One concern a module: ``input`` (input, drafts, metaschema, validators), ``refs`` (``$ref``
resolution), ``limits``, ``json_values`` (JSON equality), ``logic`` (allOf/anyOf/oneOf/not/if),
``finite`` (enum/const), ``strings``, ``numeric``, ``arrays``, ``objects``, and ``compiler``
(the compile's state and ``schema_to_ir``).
"""
from ..ir import EPSILON
from .compiler import SchemaCompiler, schema_to_ir
from .input import SchemaOptions, check_schema, make_validator, normalize_schema_input, validator_for

__all__ = ["SchemaOptions", "SchemaCompiler", "schema_to_ir", "normalize_schema_input", "make_validator",
           "check_schema", "validator_for", "EPSILON"]
