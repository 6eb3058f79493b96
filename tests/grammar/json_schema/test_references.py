"""References across documents (registries, meta-schemas), $dynamicRef with its dynamic scope,
``format`` read as an assertion or an annotation, and the errors each can raise."""
from __future__ import annotations

import pytest

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.errors import InvalidArgument, SchemaError, UnsatisfiableSchema


@pytest.fixture(scope="module")
def comp(smol_info):
    return GrammarCompiler(smol_info)


def accepts(grammar, text: str) -> bool:
    m = Matcher(grammar)
    return m.accept_bytes(text.encode()) and m.is_accepting()


DOCS = {
    "https://example.com/schemas/address.json": {
        "type": "object",
        "properties": {"street": {"type": "string"}, "zip": {"$ref": "defs.json#/$defs/zip"}},
        "required": ["street", "zip"],
        "additionalProperties": False,
    },
    # a relative $ref in a registry document resolves against that document's URI
    "https://example.com/schemas/defs.json": {"$defs": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                                              "$anchor": "defs"},
}


def test_refs_into_registry_documents_resolve_against_their_own_uri(comp):
    schema = {"type": "object", "properties": {"home": {"$ref": "https://example.com/schemas/address.json"}},
              "required": ["home"]}
    g = comp.compile_json_schema(schema, registry=DOCS, property_order="any")
    assert accepts(g, '{"home": {"street": "Main", "zip": "12345"}}')
    assert not accepts(g, '{"home": {"street": "Main", "zip": "1234"}}')
    assert not accepts(g, '{"home": {"street": "Main", "zip": 12345}}')


def test_a_referencing_registry_is_taken_as_is(comp):
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    reg = Registry().with_resources((uri, DRAFT202012.create_resource(doc)) for uri, doc in DOCS.items())
    g = comp.compile_json_schema({"$ref": "https://example.com/schemas/defs.json#/$defs/zip"}, registry=reg)
    assert accepts(g, '"54321"') and not accepts(g, '"5432"')
    # the final validator reads the same registry
    assert g.validator.is_valid("54321") and not g.validator.is_valid("5432")


def test_the_draft_meta_schemas_are_known_without_a_registry(comp):
    g = comp.compile_json_schema({"$ref": "https://json-schema.org/draft/2020-12/schema"}, property_order="any")
    assert accepts(g, '{"type": "integer", "minimum": 3}')
    assert not accepts(g, '{"type": 1}')
    assert not accepts(g, '{"minimum": "three"}')


def test_urn_base_uris_resolve_fragments(comp):
    schema = {"$id": "urn:uuid:deadbeef-1234-00ff-ff00-4321feebdaed",
              "properties": {"foo": {"$ref": "#/$defs/bar"}}, "$defs": {"bar": {"type": "string"}}}
    g = comp.compile_json_schema(schema)
    assert accepts(g, '{"foo": "x"}') and not accepts(g, '{"foo": 1}')


def test_nested_ids_are_applied_once(comp):
    # $id inside $defs is resolved against the enclosing resource once, not twice
    schema = {"$id": "https://example.com/root/base.json", "$ref": "nested/foo.json",
              "$defs": {"foo": {"$id": "nested/foo.json", "$ref": "./bar.json"},
                        "bar": {"$id": "nested/bar.json", "type": "number"}}}
    g = comp.compile_json_schema(schema)
    assert accepts(g, "5") and not accepts(g, '"a"')


@pytest.mark.parametrize("registry,match", [
    ({"https://e.com/a.json": 3}, "registry entry 'https://e.com/a.json' is a int"),
    ([1, 2], "registry must be a referencing.Registry or a mapping"),
    ({"": {}}, "registry key '' is not a URI"),
])
def test_bad_registries_are_schema_errors_naming_the_entry(comp, registry, match):
    with pytest.raises(SchemaError, match=match):
        comp.compile_json_schema({"$ref": "https://e.com/a.json"}, registry=registry)


def test_an_unknown_document_names_the_uri_and_the_pointer(comp):
    with pytest.raises(SchemaError) as e:
        comp.compile_json_schema({"properties": {"a": {"$ref": "https://e.com/missing.json#/x"}}})
    assert e.value.pointer == "#/properties/a"
    assert "https://e.com/missing.json" in str(e.value) and "registry=" in str(e.value)


def test_a_retriever_that_fails_is_reported_not_raised(comp):
    from referencing import Registry

    def retrieve(uri):
        raise OSError("no network here")

    with pytest.raises(SchemaError, match="no network here"):
        comp.compile_json_schema({"$ref": "https://e.com/x.json"}, registry=Registry(retrieve=retrieve))


@pytest.mark.parametrize("schema,pointer", [
    ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "#/$defs/b"),
    ({"$ref": "#"}, "#"),
    ({"$defs": {"a": {"$ref": "#/$defs/a", "type": "object"}}, "$ref": "#/$defs/a"}, "#/$defs/a"),
])
def test_reference_cycles_are_schema_errors(comp, schema, pointer):
    with pytest.raises(SchemaError, match="reference cycle") as e:
        comp.compile_json_schema(schema)
    assert e.value.pointer == pointer


def test_recursion_through_values_is_not_a_cycle(comp):
    tree = {"$defs": {"t": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}}}},
            "$ref": "#/$defs/t"}
    g = comp.compile_json_schema(tree)
    assert accepts(g, '{"kids": [{"kids": []}, {}]}') and not accepts(g, '{"kids": [1]}')


# a generic list whose item type a referring schema chooses through $dynamicAnchor (the suite's
# "generic list" pattern, in one document)
GENERIC = {
    "$id": "https://example.com/strings.json",
    "$ref": "list.json",
    "$defs": {
        "items": {"$dynamicAnchor": "item", "type": "string"},
        "list": {"$id": "list.json", "type": "array", "items": {"$dynamicRef": "#item"},
                 "$defs": {"default": {"$dynamicAnchor": "item"}}},
    },
}


def test_dynamic_refs_take_the_outermost_dynamic_anchor(comp):
    g = comp.compile_json_schema(GENERIC)
    assert accepts(g, '["a", "b"]') and not accepts(g, '["a", 1]')
    # the list reached without the referring resource in scope: its own anchor, any item
    alone = comp.compile_json_schema({"$ref": "https://example.com/list.json"},
                                     registry={"https://example.com/list.json": GENERIC["$defs"]["list"]})
    assert accepts(alone, '["a", 1, null]')


def test_the_same_list_under_two_scopes_compiles_twice(comp):
    ints = {"$id": "https://example.com/ints.json", "$ref": "https://example.com/list.json",
            "$defs": {"i": {"$dynamicAnchor": "item", "type": "integer"}}}
    lst = {"$id": "https://example.com/list.json", "type": "array", "items": {"$dynamicRef": "#item"},
           "$defs": {"default": {"$dynamicAnchor": "item"}}}
    both = {"type": "object", "properties": {"n": {"$ref": "https://example.com/ints.json"},
                                             "any": {"$ref": "https://example.com/list.json"}}}
    reg = {"https://example.com/ints.json": ints, "https://example.com/list.json": lst}
    g = comp.compile_json_schema(both, registry=reg, property_order="any")
    assert accepts(g, '{"n": [1, 2], "any": ["x", 1, null]}')
    assert not accepts(g, '{"n": [1, "x"]}')


def test_a_dynamic_ref_without_a_dynamic_anchor_bookend_is_a_plain_ref(comp):
    schema = {"$id": "https://example.com/s.json", "type": "array", "items": {"$dynamicRef": "#/$defs/n"},
              "$defs": {"n": {"type": "number"}}}
    g = comp.compile_json_schema(schema)
    assert accepts(g, "[1, 2.5]") and not accepts(g, '["a"]')


@pytest.mark.parametrize("fmt,ok", [("assert", False), ("annotate", True)])
def test_format_is_asserted_or_an_annotation(comp, fmt, ok):
    g = comp.compile_json_schema({"type": "string", "format": "date"}, format=fmt)
    assert accepts(g, '"2026-11-27"')
    assert accepts(g, '"next tuesday"') is ok
    assert g.validator.is_valid("next tuesday") is ok


def test_not_format_under_annotate_excludes_every_string(comp):
    with pytest.raises(UnsatisfiableSchema):
        comp.compile_json_schema({"type": "string", "not": {"format": "email"}}, format="annotate")


def test_format_mode_is_checked(comp):
    with pytest.raises(InvalidArgument, match="format must be"):
        comp.compile_json_schema({"type": "string"}, format="strict")


@pytest.mark.parametrize("schema", [False, {"enum": []}, {"allOf": [{"type": "string"}, {"type": "integer"}]},
                                    {"not": {}}])
def test_schemas_no_value_satisfies_are_unsatisfiable(comp, schema):
    with pytest.raises(UnsatisfiableSchema):
        comp.compile_json_schema(schema)


def test_an_empty_enum_inside_a_branch_only_removes_that_branch(comp):
    g = comp.compile_json_schema({"anyOf": [{"enum": []}, {"type": "integer"}]})
    assert accepts(g, "3") and not accepts(g, '"a"')
    # a property no value satisfies is a property that cannot be present (as jsonschema reads it)
    g = comp.compile_json_schema({"type": "object", "properties": {"a": {"enum": []}}})
    assert accepts(g, '{"b": 1}') and not accepts(g, '{"a": 1}')


def test_registry_contents_are_part_of_the_cache_key(comp):
    schema = {"$ref": "https://e.com/t.json"}
    a = comp.compile_json_schema(schema, registry={"https://e.com/t.json": {"type": "integer"}})
    b = comp.compile_json_schema(schema, registry={"https://e.com/t.json": {"type": "string"}})
    assert accepts(a, "1") and not accepts(a, '"x"')
    assert accepts(b, '"x"') and not accepts(b, "1")


NO_VALIDATION = {
    "$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "https://example.com/meta/no-validation",
    "$vocabulary": {"https://json-schema.org/draft/2020-12/vocab/applicator": True,
                    "https://json-schema.org/draft/2020-12/vocab/core": True},
    "$dynamicAnchor": "meta",
    "allOf": [{"$ref": "https://json-schema.org/draft/2020-12/meta/applicator"},
              {"$ref": "https://json-schema.org/draft/2020-12/meta/core"}],
}


def test_a_meta_schema_without_the_validation_vocabulary_makes_its_keywords_annotations(comp):
    schema = {"$schema": "https://example.com/meta/no-validation",
              "properties": {"bad": False, "n": {"minimum": 10}}}
    g = comp.compile_json_schema(schema, registry={"https://example.com/meta/no-validation": NO_VALIDATION})
    assert accepts(g, '{"n": 1}') and not accepts(g, '{"bad": 1}')
    assert g.validator.is_valid({"n": 1}) and not g.validator.is_valid({"bad": 1})


def test_a_meta_schema_requiring_an_unknown_vocabulary_is_refused(comp):
    from structgen.errors import UnsupportedFeature

    meta = dict(NO_VALIDATION, **{"$vocabulary": {"https://example.com/vocab/mine": True}})
    with pytest.raises(UnsupportedFeature, match="vocabulary"):
        comp.compile_json_schema({"$schema": "https://example.com/meta/mine", "type": "integer"},
                                 registry={"https://example.com/meta/mine": meta})


@pytest.mark.parametrize("draft", ["http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-07/schema#"])
def test_an_id_beside_a_ref_changes_no_base_before_2019_09(comp, draft):
    """SchemaStore's CryEngine and poetry schemas: {"$id": ..., "$ref": ...} where the draft ignores the
    $id (draft-04 has no "$id"; draft-07 ignores every keyword beside "$ref"), as jsonschema does."""
    import jsonschema

    schema = {"$schema": draft, "definitions": {"a": {"type": "integer"}},
              "type": "object", "properties": {"n": {"$id": "/properties/n", "$ref": "#/definitions/a"}}}
    jsonschema.validate({"n": 3}, schema)
    g = comp.compile_json_schema(schema)
    assert accepts(g, '{"n": 3}') and not accepts(g, '{"n": "x"}')


def test_a_draft_04_root_reads_no_dollar_id(comp):
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "$id": "https://example.com/other/x.json",
              "definitions": {"a": {"type": "string"}}, "properties": {"s": {"$ref": "#/definitions/a"}}}
    assert accepts(comp.compile_json_schema(schema), '{"s": "x"}')


@pytest.mark.parametrize("doc,pointer", [
    ({"properties": []}, "https://e.com/a.json#/properties"),
    ({"type": "object", "properties": {"x": {"$id": 5}}}, "https://e.com/a.json#/properties/x/$id"),
    ({"$ref": 3}, "https://e.com/a.json#/$ref"),
])
def test_a_malformed_registry_document_is_named_with_its_uri_and_pointer(comp, doc, pointer):
    """A document a $ref reaches is checked against its meta-schema as the root is: before, it compiled
    (``properties: []``) or surfaced as referencing's AttributeError."""
    schema = {"type": "object", "properties": {"a": {"$ref": "https://e.com/a.json"}}}
    with pytest.raises(SchemaError) as e:
        comp.compile_json_schema(schema, registry={"https://e.com/a.json": doc})
    assert e.value.pointer == pointer
    assert "registry document 'https://e.com/a.json'" in str(e.value) and "#/properties/a" in str(e.value)


def test_a_registry_entry_referencing_cannot_read_says_why(comp):
    with pytest.raises(SchemaError, match=r"is not a schema: invalid schema: 5 is not of type 'string' at #/\$schema"):
        comp.compile_json_schema({"$ref": "https://e.com/a.json"}, registry={"https://e.com/a.json": {"$schema": 5}})


def test_a_non_string_id_is_refused_whatever_the_draft(comp):
    """Without "$schema", older drafts' spellings are accepted, but draft-04 ignoring "$id" let
    ``{"$id": 5}`` through to jsonschema, which raised AttributeError building its validator."""
    with pytest.raises(SchemaError) as e:
        comp.compile_json_schema({"$id": 5})
    assert e.value.pointer == "#/$id"


def test_a_dict_registry_is_converted_once_and_again_when_its_entries_change(comp):
    from structgen.grammar.json_schema.documents import as_registry

    docs = {f"https://e.com/d{i}.json": {"type": "object", "properties": {"n": {"type": "integer"}}}
            for i in range(50)}
    docs["https://e.com/t.json"] = {"type": "integer"}
    first = as_registry(docs)
    assert as_registry(docs) is first  # the same mapping, unchanged: not converted again
    g = comp.compile_json_schema({"$ref": "https://e.com/t.json"}, registry=docs)
    assert accepts(g, "5") and not accepts(g, '"a"')
    docs["https://e.com/t.json"] = {"type": "string"}  # an entry replaced: converted again, compiled again
    assert as_registry(docs) is not first
    g = comp.compile_json_schema({"$ref": "https://e.com/t.json"}, registry=docs)
    assert accepts(g, '"a"') and not accepts(g, "5")
