"""Limits and keyword tables of the JSON Schema front end: the bounds past which a compile refuses
(with the JSON pointer) rather than blowing up, and which keywords are annotations.
"""
from __future__ import annotations

TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")


MAX_GRAPH_STATES = 100_000


#: Arrays count items in a graph of one state per count, each edge ", item" costing a second state
#: of the rule automaton (whose budget is engine.rules.MAX_RULE_NFA_STATES): beyond this, refuse.
MAX_ARRAY_COUNT = 50_000


#: property_order="any": track every key of objects with at most this many properties
ANY_ORDER_TRACK_ALL = 4


#: ... and at most this many keys in all (2**n automaton states)
ANY_ORDER_MAX_TRACKED = 6


#: Regions of the key space an object's patternProperties may split it into (keys that match the
#: same patterns share one region and one member alternative); past it, the object is checked.
MAX_KEY_REGIONS = 32


MAX_COMBINATOR_DEPTH = 64


#: anyOf/oneOf branches compiled per schema: nested combinators distribute over each other (each
#: branch of one is compiled with each branch of the next), which grows exponentially
#: (past it, the schema is compiled again without distributing them: see schema_to_ir)
MAX_BRANCH_CONJUNCTIONS = 5_000
#: ... of which one overlapping oneOf, its branches joined with the others' negations, may take; past
#: it, that oneOf is checked instead (a compile again: see schema_to_ir)
MAX_JOIN_CONJUNCTIONS = 200


DEFAULT_MAX_WHITESPACE = 16


ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "example", "$comment", "$schema", "$id", "id", "$anchor",
    "$defs", "definitions", "readOnly", "writeOnly", "deprecated", "contentMediaType", "contentEncoding",
    "contentSchema", "$vocabulary", "$dynamicAnchor", "discriminator", "xml", "externalDocs", "$recursiveAnchor",
    "markdownDescription", "errorMessage", "deprecationMessage", "enumDescriptions", "markdownEnumDescriptions",
})


#: Keywords no automaton holds once they reach the per-type compilers (after ``allOf``/``$ref``
#: flattening, presence extraction -- which compiles ``dependentRequired``, array-form
#: ``dependencies`` and ``required`` inside combinators exactly -- the ``not``/``if`` rewrite
#: through negation, and schema-form dependencies as branches): the value holding one is validated when it completes (a check at the value
#: boundary), or, outside any value (``lenient=False`` and no check possible), refused.
#: ``uniqueItems`` and ``contains`` are not here: the array compiler handles them, and leaves to a
#: check the cases it cannot count (see ``arrays``).
CHECKED_AT_VALUE_BOUNDARY = frozenset({
    "dependencies", "dependentRequired", "dependentSchemas", "if",
    "unevaluatedProperties", "unevaluatedItems", "$recursiveRef",
})


#: "Some key matches S" (``not: {propertyNames: ...}``) schemas an object automaton counts (one state
#: bit each); more are checked as the object closes.
MAX_SOME_KEYS = 4
#: Plain ``contains`` on one array that its automaton counts (one state bit each).
MAX_SOME_ITEMS = 4


#: Enums with more strings than this lex them with one literal-set terminal (one per string below).
ENUM_STRINGS_AS_ONE_TERMINAL = 64


#: uniqueItems is compiled for item sets up to this size (one automaton state per subset).
MAX_UNIQUE_VALUES = 8


#: The JSON type a keyword constrains (values of other types satisfy it vacuously).
KEYWORD_TYPE = {
    **{k: "object" for k in ("properties", "patternProperties", "additionalProperties", "required", "minProperties",
                             "maxProperties", "propertyNames", "dependencies", "dependentRequired",
                             "dependentSchemas", "unevaluatedProperties")},
    **{k: "array" for k in ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
                            "contains", "minContains", "maxContains", "unevaluatedItems")},
    **{k: "string" for k in ("minLength", "maxLength", "pattern", "format")},
    **{k: "number" for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")},
}
