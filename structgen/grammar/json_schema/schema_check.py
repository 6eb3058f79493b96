"""A schema checked against its meta-schema (the root and every registry document a ``$ref`` reaches),
each error reported with the JSON pointer of the offending keyword; and the jsonschema validator
class a schema's ``$schema`` names."""
from __future__ import annotations

from ...errors import SchemaError
from ..metaschema import fast_metaschema_ok

__all__ = ["check_schema", "validator_for"]


def validator_for(schema):
    import jsonschema
    from jsonschema import validators

    if isinstance(schema, dict) and isinstance(schema.get("$schema", ""), str):
        return validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return jsonschema.Draft202012Validator  # the metaschema check then reports a non-string $schema


_META: dict = {}


def check_schema(schema) -> None:
    """Metaschema check, reported with the JSON pointer of the offending keyword."""
    import jsonschema

    cls = validator_for(schema)
    uri = cls.META_SCHEMA.get("$id") or cls.META_SCHEMA.get("id") or ""
    if fast_metaschema_ok(schema, uri):  # a keyword-table walk; jsonschema decides everything else
        return
    meta = _META.get(cls)
    if meta is None:
        meta = _META[cls] = cls(cls.META_SCHEMA)
    if meta.is_valid(schema):
        return
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as e:
        # no "$schema": older drafts' spellings (boolean exclusiveMinimum, ...) are accepted too, but not
        # a malformed identifier ("$id": 5 means nothing to draft-04, yet the validator reads it as an id)
        if not (isinstance(schema, dict) and "$schema" in schema) and not _bad_identifier(meta, schema):
            for older in (jsonschema.Draft7Validator, jsonschema.Draft4Validator):
                try:
                    older.check_schema(schema)
                    return
                except jsonschema.exceptions.SchemaError:
                    pass
        ptr = "#/" + "/".join(str(p) for p in e.path) if e.path else "#"
        raise SchemaError(f"invalid schema: {e.message}", pointer=ptr) from None


#: keywords every draft since 6 reads as the schema's identity or its references: always strings
_IDENTIFIERS = frozenset({"$id", "$schema", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef"})


def _bad_identifier(meta, schema) -> bool:
    """Does the (latest draft's) meta-schema refuse one of the identifying keywords of ``schema``?"""
    return any(_IDENTIFIERS.intersection(str(p) for p in e.path) for e in meta.iter_errors(schema))
