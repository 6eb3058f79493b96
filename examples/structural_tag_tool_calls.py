"""Structural tags: prose with tool-call blocks whose JSON follows each tool's schema.

The spec is XGrammar's structural-tag format (what vLLM's STRUCTURAL_TAG requests carry): free
text until the trigger ``<tool_call>``, then one of the tools' tags up to ``</tool_call>``.
Run: ``python examples/structural_tag_tool_calls.py [--model PATH]``.
"""
from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from structgen import generate_json, generate_structural_tag, load_model  # noqa: E402

TOOLS = {
    "get_weather": {"type": "object", "additionalProperties": False, "required": ["city"],
                    "properties": {"city": {"type": "string", "maxLength": 30},
                                   "unit": {"enum": ["celsius", "fahrenheit"]}}},
    "get_time": {"type": "object", "additionalProperties": False, "required": ["timezone"],
                 "properties": {"timezone": {"type": "string", "maxLength": 30}}},
}


def tool_call_spec(tools: dict, *, at_least_one: bool = True) -> dict:
    """One tag per tool, Hermes style: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""
    tags = [{"begin": f'<tool_call>{{"name": "{name}", "arguments": ',
             "content": {"type": "json_schema", "json_schema": schema},
             "end": "}</tool_call>"} for name, schema in tools.items()]
    return {"type": "structural_tag",
            "format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": tags,
                       "at_least_one": at_least_one}}


def main(model=None, max_tokens: int = 100):
    """Prose with tool calls, then "think first, then the JSON"; returns both outputs."""
    model = model if hasattr(model, "hf_model") else load_model(model)
    system = ("You can call tools by writing <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>. "
              "Tools: " + json.dumps(TOOLS))
    out = generate_structural_tag(model, tool_call_spec(TOOLS), "What is the weather in Paris?", system=system,
                                  max_tokens=max_tokens)
    print(out.text)
    for seg in out.segments:
        print("tool call:", seg.begin, "->", seg.value)

    schema = {"type": "object", "required": ["answer"], "additionalProperties": False,
              "properties": {"answer": {"type": "integer"}}}
    value, result = generate_json(model, schema, "What is 17 + 25?", reasoning=True, max_tokens=max_tokens,
                                  return_result=True)
    print("reasoning:", repr(result.reasoning))
    print("value:", value)
    return out, value, result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None,
                    help="transformers model folder, hub id or .gguf (default: the embedded SmolLM2-135M-Instruct)")
    main(ap.parse_args().model)
