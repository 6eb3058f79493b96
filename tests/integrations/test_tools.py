"""tool_call_schema: one JSON Schema (and grammar) for "call one of these tools with valid arguments"."""
from __future__ import annotations

import jsonschema
import pytest
from pydantic import BaseModel

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.integrations.tools import normalize_tool, parse_tool_call, tool_call_schema, tools_instruction


class Item(BaseModel):
    sku: str
    qty: int


class Order(BaseModel):
    items: list[Item]


# Another tool whose "$defs" also has an "Item" (a different one), and that recurses through "#".
SHELF = {
    "type": "object",
    "properties": {"item": {"$ref": "#/$defs/Item"}, "parent": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
    "required": ["item"],
    "$defs": {"Item": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}},
}


def _tool(name, model):
    params = model.model_json_schema()
    return {"type": "function", "function": {"name": name, "description": f"{name} tool", "parameters": params}}


@pytest.fixture(scope="module")
def compiler(smol_info):
    return GrammarCompiler(smol_info)


def test_tools_with_colliding_defs_and_recursion(compiler):
    tools = [_tool("order", Order), {"name": "shelve", "parameters": SHELF}]
    schema = tool_call_schema(tools)
    g = compiler.compile_json_schema(schema, whitespace="compact")
    good = ['{"name":"order","arguments":{"items":[{"sku":"a1","qty":2}]}}',
            '{"name":"shelve","arguments":{"item":{"title":"x"},"parent":{"item":{"title":"y"},"parent":null}}}']
    bad = ['{"name":"order","arguments":{"items":[{"title":"a1"}]}}',  # the other tool's Item
           '{"name":"shelve","arguments":{"item":{"sku":"a","qty":1}}}',
           '{"name":"nope","arguments":{}}']
    for text in good:
        m = Matcher(g)
        assert m.accept_string(text) and m.is_accepting(), text
        name, args = parse_tool_call(text)
        jsonschema.validate({"name": name, "arguments": args}, schema)
    for text in bad:
        m = Matcher(g)
        assert not (m.accept_string(text) and m.is_accepting()), text


def test_only_restricts_to_one_tool_and_instruction_lists_tools(compiler):
    tools = [_tool("order", Order), {"name": "ping"}]
    only = tool_call_schema(tools, only="ping")
    m = Matcher(compiler.compile_json_schema(only, whitespace="compact"))
    assert m.accept_string('{"name":"ping","arguments":{}}') and m.is_accepting()
    assert not Matcher(compiler.compile_json_schema(only, whitespace="compact")).accept_string('{"name":"or')
    with pytest.raises(ValueError, match="not among the tools"):
        tool_call_schema(tools, only="missing")
    text = tools_instruction(tools, optional=True)
    assert "- order: order tool" in text and "- ping:" in text and "plain text" in text
    assert normalize_tool({"name": "ping"})["parameters"] == {"type": "object", "properties": {}}
    with pytest.raises(ValueError):
        normalize_tool({"description": "no name"})
    with pytest.raises(ValueError):
        parse_tool_call('{"name": "x", "arguments": [1]}')
