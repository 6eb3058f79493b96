"""GrammarCompiler, the one joint of front ends and engine: caches, and structgen errors only."""
from __future__ import annotations

import pytest

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.errors import GrammarError, SchemaError, StructgenError
from structgen.grammar.ir import GrammarIR, Sym
from structgen.grammar.regex import compile_regex


@pytest.fixture(scope="module")
def comp(smol_info):
    return GrammarCompiler(smol_info)


def test_the_same_constraint_compiles_once(comp):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    assert comp.compile_json_schema(schema) is comp.compile_json_schema(dict(schema))
    assert comp.compile_regex(r"[a-c]{2}") is comp.compile_regex(r"[a-c]{2}")
    assert comp.compile_json_schema(schema, whitespace="compact") is not comp.compile_json_schema(schema)


def test_compile_ir_joins_any_front_end(comp):
    ir = GrammarIR(rules={}, terminals={}, start="start", source="test")
    ir.rules["start"] = ir.add_terminal("WORD", compile_regex("yes|no"))
    m = Matcher(comp.compile_ir(ir))
    assert m.accept_string("ye") and not m.is_accepting() and m.accept_string("s") and m.is_accepting()
    assert isinstance(ir.rules["start"], Sym)


@pytest.mark.parametrize("call", [
    lambda c: c.compile_json_schema({"type": "strin"}),
    lambda c: c.compile_json_schema({"allOf": [{"type": "string"}, {"type": "integer"}]}),
    lambda c: c.compile_json_schema("{not json"),
    lambda c: c.compile_lark("start: undefined_rule"),
    lambda c: c.compile_regex("a{3,1}"),
])
def test_bad_constraints_raise_structgen_errors(comp, call):
    with pytest.raises(StructgenError):
        call(comp)


def test_errors_name_where(comp):
    with pytest.raises(SchemaError) as e:
        comp.compile_json_schema({"properties": {"a": {"type": "strin"}}})
    assert e.value.pointer == "#/properties/a/type"
    with pytest.raises(GrammarError):
        comp.compile_lark("start: A\nA: /[a-/\n")
