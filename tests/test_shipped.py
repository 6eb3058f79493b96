"""The grammars and schemas that ship as package data, found by name (``structgen.shipped``), and
the benchmark data found by path or in the data folders (``structgen.bench.data_paths``)."""
from __future__ import annotations

import json

import pytest

from structgen.bench.data_paths import DataNotFound, data_path
from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.errors import GrammarError, SchemaError, StructgenError
from structgen.shipped import grammar_file, schema_file, shipped_grammar, shipped_grammar_names, shipped_schema_names


def test_every_shipped_grammar_compiles_by_name(smol_info):
    comp = GrammarCompiler(smol_info)
    names = shipped_grammar_names()
    assert {"json", "sql", "sparql", "arithmetic", "python", "lark"} <= set(names)
    for name in names:
        g = comp.compile_lark(name)
        assert g.vocab_size == smol_info.vocab_size, name
    py = Matcher(comp.compile_lark("python"))  # start file_input and the indenter come with the name
    assert py.accept_string("if x:\n    y = _\n") and py.is_accepting()
    js = Matcher(comp.compile_lark("json"))
    assert js.accept_string('{"a": [1, 2]}') and js.is_accepting()


def test_a_name_is_not_mistaken_for_grammar_text_or_a_path(smol_info, tmp_path):
    comp = GrammarCompiler(smol_info)
    assert shipped_grammar("start: \"a\"") is None and shipped_grammar("nope") is None
    assert Matcher(comp.compile_lark('start: "a"')).accept_string("a")
    f = tmp_path / "json.lark"
    f.write_text('start: "b"\n')
    assert Matcher(comp.compile_lark(f)).accept_string("b")  # a path stays a path
    with pytest.raises(GrammarError, match="shipped"):
        grammar_file("nope")


def test_example_schemas_are_package_data():
    assert {"person", "invoice", "function_call", "tree"} <= set(shipped_schema_names())
    assert json.loads(schema_file("person").read_text())["type"] == "object"
    with pytest.raises(SchemaError, match="person"):
        schema_file("persn")


def test_missing_benchmark_data_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTGEN_DATA", str(tmp_path))
    (tmp_path / "maskbench-dev.jsonl.gz").write_bytes(b"")
    assert data_path("maskbench-dev.jsonl.gz") == tmp_path / "maskbench-dev.jsonl.gz"
    with pytest.raises(DataNotFound, match="--data PATH") as e:
        data_path("no-such-benchmark.jsonl.gz")
    assert str(tmp_path) in str(e.value) and isinstance(e.value, StructgenError)
    with pytest.raises(DataNotFound, match="does not exist"):
        data_path("maskbench-dev.jsonl.gz", tmp_path / "elsewhere.gz")


@pytest.mark.parametrize("misspelt, close", [("jsonn", "json"), ("sqll", "sql"), ("arithmetc.lark", "arithmetic")])
def test_a_misspelt_grammar_name_is_said_with_the_shipped_names(smol_info, misspelt, close):
    comp = GrammarCompiler(smol_info)
    with pytest.raises(GrammarError) as e:
        comp.compile_lark(misspelt)
    msg = str(e.value)
    assert "missing colon" not in msg.lower() and all(n in msg for n in shipped_grammar_names())
    assert f"did you mean {close!r}" in msg
    assert (f"grammar file {misspelt} not found" if misspelt.endswith(".lark")
            else f"no shipped grammar or file named {misspelt!r}") in msg


def test_one_line_grammar_text_and_a_file_without_the_suffix_still_load(smol_info, tmp_path):
    comp = GrammarCompiler(smol_info)
    assert Matcher(comp.compile_lark('start: "a" | "b"')).accept_string("b")
    f = tmp_path / "grammar.txt"
    f.write_text('start: "c"\n')
    assert Matcher(comp.compile_lark(str(f))).accept_string("c")


def test_a_shipped_schema_is_found_by_its_bare_name(tmp_path, monkeypatch):
    from structgen.grammar.json_schema import normalize_schema_input

    person = json.loads(schema_file("person").read_text())
    for name in ("person", "person.json", " person "):
        assert normalize_schema_input(name) == person
    for name in ("invoice", "tree", "function_call"):
        assert normalize_schema_input(name) == json.loads(schema_file(name).read_text())
    monkeypatch.chdir(tmp_path)
    (tmp_path / "person.json").write_text('{"type": "string"}')
    assert normalize_schema_input("person.json") == {"type": "string"}  # a file of that name wins
    with pytest.raises(SchemaError, match="did you mean 'person'") as e:
        normalize_schema_input("persn")
    assert all(n in str(e.value) for n in shipped_schema_names())
    with pytest.raises(SchemaError, match="schema file invoic.json not found.*did you mean 'invoice'"):
        normalize_schema_input("invoic.json")
    with pytest.raises(SchemaError, match="not valid JSON"):
        normalize_schema_input("not json at all")
