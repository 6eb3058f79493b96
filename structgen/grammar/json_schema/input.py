"""Schema input: Pydantic classes, JSON text and dicts in; the declared draft; the metaschema
check; jsonschema validators with format assertion (for final and value checks).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import SchemaError
from .schema_check import check_schema, validator_for  # noqa: F401 - re-exported
from ..formats import FORMAT_REGEXES
from ..json_strings import string_dfa


@dataclass(frozen=True)
class SchemaOptions:
    whitespace: str = "flexible"
    strict: bool = False
    lenient: bool = False
    max_whitespace: int | None = None
    property_order: str = "schema"  # or "any": members in any order (for checking JSON written elsewhere)
    #: "assert": a known format constrains strings (the default for generation); "annotate": the
    #: spec's default reading, where ``format`` is an annotation and any string passes
    format: str = "assert"
    #: which members an object may hold beyond those its schema requires: "any" (the spec: what the
    #: schema allows), "named" (generation's default: only members the schema names -- properties,
    #: patternProperties, required keys -- in objects that name some; free-form and map-like objects
    #: stay open, and an object the policy would empty stays open too).  ``strict`` closes every
    #: object, free-form ones too, and refuses the schema where that empties it.
    members: str = "any"
    #: "type": "integer" written as integer literals only (no ``5.0``): values come back as ints
    plain_integers: bool = False
    #: other documents ``$ref`` may name (see ``documents``); part of the compile cache key through
    #: ``registry_key``, not through equality
    registry: Any = field(default=None, compare=False, hash=False)
    #: grounded extraction: string values must be spans of this text (``structgen.grammar.grounding``;
    #: not ``enum``/``const`` literals, object keys, or fields with ``"x-grounded": false``).  Compared
    #: by value, so it is part of the compile cache key; left out of the repr (it may be long)
    source: str | None = field(default=None, repr=False)
    #: with ``source``: numbers too are ones the source writes (those that meet the number's keywords;
    #: the number is left free where none does)
    ground_numbers: bool = False
    #: with ``source``: optional members the text plainly states are written (``strings.stated_in_source``)
    stated_members: bool = True

    def __post_init__(self) -> None:
        if self.format not in FORMAT_MODES:
            raise SchemaError(f"format must be 'assert' or 'annotate', not {self.format!r}")
        if self.members not in MEMBER_POLICIES:
            raise SchemaError(f"members must be one of {', '.join(map(repr, MEMBER_POLICIES))}, not {self.members!r}")
        if self.source is not None and not isinstance(self.source, str):
            raise SchemaError(f"source must be the text (a str) string values are grounded in, "
                              f"not {type(self.source).__name__}")


#: SchemaOptions.members
MEMBER_POLICIES = ("any", "named")
#: how ``format`` is read (SchemaOptions.format)
FORMAT_MODES = ("assert", "annotate")


def normalize_schema_input(schema: Any) -> Any:
    """Accept a dict/bool, JSON text, the path of a JSON file (``str`` or ``Path``), a shipped
    schema's name (``"person"``, ``"person.json"``: ``structgen.shipped``; a file of that name wins),
    a Pydantic model class, a dataclass or a TypedDict."""
    if isinstance(schema, (dict, bool)):
        return schema
    if isinstance(schema, str) and not _looks_like_json(schema) and not _is_file(schema.strip()):
        from ...shipped import shipped_schema, unknown_schema_name

        name = schema.strip()
        shipped = shipped_schema(name)
        if shipped is not None:
            return read_schema_file(shipped)
        if _NAME.fullmatch(name):  # a file name or a misspelt shipped name, not JSON text
            raise unknown_schema_name(name)
    if isinstance(schema, os.PathLike) or (isinstance(schema, str) and _looks_like_a_path(schema)):
        return read_schema_file(schema)
    if isinstance(schema, (str, bytes)):
        try:
            return json.loads(schema)
        except json.JSONDecodeError as e:
            raise SchemaError(f"schema is not valid JSON: {e}") from None
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return schema.model_json_schema()
    if hasattr(type(schema), "model_json_schema"):  # pydantic's own message for this is about its internals
        cls = type(schema).__name__
        raise SchemaError(f"got an instance of {cls}; pass the class {cls} itself (or its .model_json_schema())")
    try:
        from pydantic import TypeAdapter

        return TypeAdapter(schema).json_schema()
    except Exception as e:  # noqa: BLE001 - any failure means "not a schema"
        raise SchemaError(f"cannot turn {schema!r} into a JSON Schema: {e}") from None


#: a bare file or schema name: no path separator, no blank, nothing JSON text starts with
_NAME = re.compile(r"[A-Za-z_][\w.\-]*")


def _looks_like_json(text: str) -> bool:
    """Whether ``text`` starts as a JSON value does (what is not JSON text may be a path or a name)."""
    t = text.strip()
    return not t or t[0] in '{["-0123456789' or t in ("true", "false", "null")


def _looks_like_a_path(text: str) -> bool:
    """Not JSON text (which starts with a JSON value) but a file name: ends in .json, or names a file."""
    t = text.strip()
    if _looks_like_json(t) or "\n" in t:
        return False
    return t.endswith(".json") or _is_file(t)


def _is_file(text: str) -> bool:
    """``Path(text).is_file()``, False for text no file can be named (too long, a NUL)."""
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def read_schema_file(path: str | os.PathLike) -> Any:
    """A JSON Schema read from a file, with errors that name the file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        from ...shipped import shipped_schema

        hint = f" (the shipped {p.stem!r} is found by its name alone: {p.stem})" if shipped_schema(p.name) else ""
        raise SchemaError(f"schema file {p} not found{hint}") from None
    except OSError as e:
        raise SchemaError(f"cannot read schema file {p}: {e.strerror or e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(f"schema file {p} is not valid JSON: {e}") from None


def declared_draft(schema) -> int | None:
    """The draft the root's ``$schema`` declares (4, 6, 7, 2019, 2020) as jsonschema resolves it
    (:func:`validator_for`, the validator the final check uses too); None when the schema names
    none: undeclared schemas get 2020-12 semantics with the older drafts' spellings accepted too."""
    import jsonschema

    if not (isinstance(schema, dict) and "$schema" in schema):
        return None
    return _draft_of(validator_for(schema))


def subschema_draft(schema, inherited: int | None) -> int | None:
    """The draft a subschema is evaluated in, as jsonschema switches: the one its ``$schema`` names
    where jsonschema knows that meta-schema, else ``inherited`` (its parent's, or the referrer's)."""
    if not (isinstance(schema, dict) and isinstance(schema.get("$schema"), str)):
        return inherited
    from jsonschema import validators

    cls = validators.validator_for(schema, default=None)
    return inherited if cls is None else _draft_of(cls)


def _draft_of(cls) -> int:
    import jsonschema

    return {jsonschema.Draft3Validator: 4, jsonschema.Draft4Validator: 4, jsonschema.Draft6Validator: 6,
            jsonschema.Draft7Validator: 7, jsonschema.Draft201909Validator: 2019}.get(cls, 2020)


_SINCE_2019 = frozenset({"dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
                         "minContains", "maxContains", "prefixItems"})


#: assertion keywords a declared draft does not know (its validator ignores them)
LATER_KEYWORDS = {
    4: _SINCE_2019 | {"const", "contains", "propertyNames", "if", "then", "else"},
    6: _SINCE_2019 | {"if", "then", "else"},
    7: _SINCE_2019,
}


def make_validator(schema, *, format: str = "assert", registry=None, ignore: frozenset = frozenset()):
    """A jsonschema validator for final checks and value checks, reading the same documents as the
    compiler (``registry``; never the network).  With ``format="assert"``, formats the compiler
    asserts are checked with the compiler's own automata (as the grammar checks them: jsonschema's
    own checkers for ``uri`` and others need optional packages, and without them it accepts any
    string); with ``"annotate"`` no format is checked.  ``ignore``: keywords that assert nothing here
    (those of vocabularies the schema's meta-schema leaves out)."""
    from .documents import as_registry

    from ..regex_jsonschema import ecma_patterns

    from .vocabularies import ignoring

    cls = ignoring(ecma_patterns(validator_for(schema)), ignore)  # patterns may use ECMA-262's \p{...}
    checker = format_checker() if format == "assert" else None
    return cls(schema, format_checker=checker, registry=as_registry(registry))


_FORMAT_CHECKER = None


def format_checker():
    global _FORMAT_CHECKER
    if _FORMAT_CHECKER is None:
        import jsonschema

        fc = jsonschema.FormatChecker()
        for fmt in FORMAT_REGEXES:
            def check(value, fmt=fmt) -> bool:
                if not isinstance(value, str):
                    return True  # formats say nothing about other types
                return string_dfa(formats=(fmt,)).matches(json.dumps(value, ensure_ascii=False).encode())
            fc.checks(fmt)(check)
        _FORMAT_CHECKER = fc
    return _FORMAT_CHECKER
