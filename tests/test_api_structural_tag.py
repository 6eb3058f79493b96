"""generate_structural_tag and generate_json(reasoning=True): on the tiny random Llama (the pipeline)
and on the real SmolLM2 (marked slow: prose with tool calls whose JSON validates; think, then JSON)."""
from __future__ import annotations

import json

import jsonschema
import pytest

from structgen import generate_json, generate_structural_tag
from structgen.errors import UnsupportedFeature

WEATHER = {"type": "object", "additionalProperties": False, "required": ["city"],
           "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["celsius", "fahrenheit"]}}}
TIME = {"type": "object", "additionalProperties": False, "required": ["timezone"],
        "properties": {"timezone": {"type": "string", "maxLength": 20}}}
TOOLS = {"get_weather": WEATHER, "get_time": TIME}
ANSWER = {"type": "object", "additionalProperties": False, "required": ["answer"],
          "properties": {"answer": {"type": "integer"}}}


def tool_spec(**kw) -> dict:
    tags = [{"begin": f'<tool_call>{{"name": "{n}", "arguments": ', "end": "}</tool_call>",
             "content": {"type": "json_schema", "json_schema": s}} for n, s in TOOLS.items()]
    return {"type": "structural_tag",
            "format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": tags, **kw}}


def _check_calls(out) -> None:
    assert out.segments
    for seg in out.segments:
        name = seg.begin.split('"name": "')[1].split('"')[0]
        jsonschema.validate(seg.value, TOOLS[name])
        assert out.text[seg.start:seg.stop] == seg.begin + seg.content + seg.end


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread(one_torch_thread):
    yield


def test_structural_tag_on_tiny_model(tiny_model):
    out = generate_structural_tag(tiny_model, tool_spec(at_least_one=True, stop_after_first=True), "Weather?",
                                  max_tokens=90)
    assert out.text.startswith("<tool_call>") and out.text.endswith("}</tool_call>") and len(out.segments) == 1
    _check_calls(out)
    assert out.free_text == "" and out.values == [out.segments[0].value]
    rows = generate_structural_tag(tiny_model, json.dumps(tool_spec(at_least_one=True)), prompts=["a", "b"],
                                   max_tokens=90)
    assert len(rows) == 2
    for r in rows:
        _check_calls(r)


def test_reasoning_on_tiny_model(tiny_model, monkeypatch):
    value, result = generate_json(tiny_model, ANSWER, "What is 2 + 2?", reasoning=True, max_tokens=40,
                                  return_result=True)
    jsonschema.validate(value, ANSWER)
    raw = result.extra["raw_text"]
    assert raw.startswith("<think>") and f"{result.reasoning}</think>" in raw
    assert json.loads(result.text) == value and result.text_bytes == result.text.encode()
    # a chat template that opens the thinking already (reasoning models'): the output starts inside it
    template = type(tiny_model).chat_prompt
    monkeypatch.setattr(type(tiny_model), "chat_prompt", lambda self, user, system=None:
                        template(self, user, system) + "<think>\n")
    value, result = generate_json(tiny_model, ANSWER, "What is 2 + 2?", reasoning=True, think_end="</reasoning>",
                                  max_tokens=40, return_result=True)
    raw = result.extra["raw_text"]
    assert not raw.startswith("<think>") and raw.startswith(result.reasoning + "</reasoning>")
    jsonschema.validate(value, ANSWER)


def test_reasoning_with_checked_schema_needs_lenient(tiny_model):
    schema = {"type": "array", "items": {"type": "string", "maxLength": 3}, "uniqueItems": True, "maxItems": 3}
    with pytest.raises(UnsupportedFeature):
        generate_json(tiny_model, schema, "Numbers?", reasoning=True, max_tokens=30)
    try:
        value = generate_json(tiny_model, schema, "Numbers?", reasoning=True, lenient=True, max_tokens=30)
    except Exception as e:  # validated after generation: a duplicate is a GenerationError, never returned
        from structgen.errors import GenerationError

        assert isinstance(e, GenerationError)
    else:
        jsonschema.validate(value, schema)


@pytest.mark.slow
def test_tool_calls_on_real_model(smol):
    """Prose, then tool calls (text_before_first: structgen's extension of at_least_one), each call's
    arguments valid for its tool."""
    system = ('You can call tools by writing <tool_call>{"name": ..., "arguments": {...}}</tool_call>. Tools: '
              + json.dumps(TOOLS))
    out = generate_structural_tag(smol, tool_spec(at_least_one=True, text_before_first=True),
                                  "What is the weather in Paris and what time is it in Tokyo?", system=system,
                                  max_tokens=100)
    print(repr(out.text))
    _check_calls(out)
    assert out.free_text.strip()


@pytest.mark.slow
def test_reasoning_on_real_model(smol):
    value, result = generate_json(smol, ANSWER, "What is 17 + 25?", reasoning=True, max_tokens=60,
                                  return_result=True)
    print(repr(result.reasoning), value)
    jsonschema.validate(value, ANSWER)
    assert result.reasoning.strip()
