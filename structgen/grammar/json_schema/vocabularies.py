"""``$vocabulary``: a schema whose ``$schema`` names a meta-schema that leaves a vocabulary out is not
constrained by that vocabulary's keywords (JSON Schema 2020-12, core section 8.1.2).  The keywords of
the vocabularies left out are read as annotations, by the compiler and by the final validator alike.
"""
from __future__ import annotations

import functools

from ...errors import UnsupportedFeature

_V = "https://json-schema.org/draft/2020-12/vocab/"

#: the 2020-12 vocabularies whose keywords constrain values (core is always in force; meta-data,
#: content and format-annotation only annotate)
VOCABULARY_KEYWORDS = {
    _V + "applicator": frozenset({"prefixItems", "items", "contains", "additionalProperties", "properties",
                                  "patternProperties", "dependentSchemas", "propertyNames", "if", "then", "else",
                                  "allOf", "anyOf", "oneOf", "not"}),
    _V + "unevaluated": frozenset({"unevaluatedItems", "unevaluatedProperties"}),
    _V + "validation": frozenset({"type", "const", "enum", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
                                  "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
                                  "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties",
                                  "required", "dependentRequired"}),
    _V + "format-assertion": frozenset({"format"}),
}
KNOWN = frozenset(VOCABULARY_KEYWORDS) | {_V + v for v in ("core", "meta-data", "content", "format-annotation")}


def keywords_left_out(root, documents) -> frozenset[str]:
    """The constraining keywords of the vocabularies the root's meta-schema leaves out (empty for the
    draft meta-schemas and for a meta-schema without ``$vocabulary``).  A meta-schema that requires a
    vocabulary structgen does not know is refused, as the spec asks."""
    if not isinstance(root, dict) or not isinstance(root.get("$schema"), str):
        return frozenset()
    uri = root["$schema"].rstrip("#")
    if uri.startswith(("https://json-schema.org/", "http://json-schema.org/")):
        return frozenset()
    try:
        meta = documents.get(uri, pointer="#/$schema", ref=uri)
    except Exception:  # noqa: BLE001 - a meta-schema nobody gave: read as 2020-12, as jsonschema does
        return frozenset()
    vocab = meta.get("$vocabulary") if isinstance(meta, dict) else None
    if not isinstance(vocab, dict):
        return frozenset()
    for v, required in vocab.items():
        if required is True and v not in KNOWN:
            raise UnsupportedFeature(f"the meta-schema {uri!r} requires the vocabulary {v!r}, which structgen does "
                                     f"not know", pointer="#/$schema", keyword="$schema")
    # format: asserted or not as the caller says (SchemaOptions.format), whatever the vocabulary
    return frozenset().union(*(kws for v, kws in VOCABULARY_KEYWORDS.items()
                               if v not in vocab and v != _V + "format-assertion"))


def ignoring(cls, keywords: frozenset[str]):
    """A jsonschema validator class like ``cls`` for which ``keywords`` assert nothing (one class per
    (cls, keywords): a class made per compile would defeat jsonschema's own caches)."""
    if not keywords:
        return cls
    return _ignoring(cls, frozenset(keywords))


@functools.lru_cache(maxsize=64)
def _ignoring(cls, keywords: frozenset[str]):
    from jsonschema import validators

    def nothing(validator, value, instance, schema):
        return iter(())

    return validators.extend(cls, {k: nothing for k in keywords if k in cls.VALIDATORS})
