"""Tool calling as a JSON Schema: one grammar for "call one of these tools with valid arguments".

A tool is ``{"name": str, "description": str (optional), "parameters": JSON Schema}``
(OpenAI's ``function`` object; ``{"type": "function", "function": {...}}`` is
unwrapped).  ``tool_call_schema(tools)`` is an ``anyOf`` over::

    {"name": {"const": <tool name>}, "arguments": <the tool's parameters>}

objects (closed, both keys required, ``name`` first), so under the grammar the
model first commits to a tool and then writes arguments that are valid for that
tool's schema.  A parameters schema without ``$ref`` is inlined (the schema
stays readable when it is shown to the model); one with ``$ref``s is moved
under the root ``$defs`` (``#/$defs/tool_<i>``) and its local ``$ref``s
rewritten, so Pydantic-style ``$defs`` in several tools neither collide nor
dangle.

No LangChain here: ``examples/function_call.py`` uses it with ``generate_json``
and ``structgen.integrations.langchain`` with ``bind_tools``.
"""
from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

__all__ = ["normalize_tool", "tool_call_schema", "tools_instruction", "parse_tool_call"]

# Keywords whose values are data, not subschemas: never rewrite a "$ref" inside them.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})


def normalize_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """``{"name", "description", "parameters"}`` from an OpenAI-style tool or function dict."""
    if not isinstance(tool, Mapping):
        raise TypeError(f"a tool must be a dict, got {type(tool).__name__}")
    fn = tool.get("function") if tool.get("type") == "function" else tool
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
        raise ValueError(f"a tool needs a non-empty 'name': {dict(tool)!r}")
    params = fn.get("parameters")
    if params is None:
        params = {"type": "object", "properties": {}}
    if not isinstance(params, (Mapping, bool)):
        raise ValueError(f"tool {fn['name']!r}: 'parameters' must be a JSON Schema object")
    return {"name": fn["name"], "description": fn.get("description") or "", "parameters": params}


def _rewrite_refs(node: Any, base: str) -> Any:
    """Copy of a schema with every local ``$ref`` ("#...") re-rooted at ``base``."""
    if isinstance(node, Mapping):
        out = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and v.startswith("#"):
                out[k] = base + v[1:]
            elif k in _DATA_KEYWORDS:
                out[k] = v
            else:
                out[k] = _rewrite_refs(v, base)
        return out
    if isinstance(node, list):
        return [_rewrite_refs(v, base) for v in node]
    return node


def _has_ref(node: Any) -> bool:
    if isinstance(node, Mapping):
        return any(k == "$ref" or (k not in _DATA_KEYWORDS and _has_ref(v)) for k, v in node.items())
    if isinstance(node, list):
        return any(_has_ref(v) for v in node)
    return False


def tool_call_schema(tools: Iterable[Mapping[str, Any]], *, only: str | None = None) -> dict[str, Any]:
    """The JSON Schema of one call ``{"name": ..., "arguments": {...}}`` to one of ``tools``.

    ``only``: restrict to the tool of that name (a forced ``tool_choice``).
    Tools sharing a name keep the first definition.
    """
    seen: dict[str, dict[str, Any]] = {}
    for t in tools:
        nt = normalize_tool(t)
        seen.setdefault(nt["name"], nt)
    if not seen:
        raise ValueError("no tools given")
    if only is not None:
        if only not in seen:
            raise ValueError(f"tool_choice names {only!r}, which is not among the tools {sorted(seen)}")
        seen = {only: seen[only]}
    defs: dict[str, Any] = {}
    branches = []
    for i, (name, t) in enumerate(seen.items()):
        params = t["parameters"]
        if _has_ref(params):
            key = f"tool_{i}"
            defs[key] = _rewrite_refs(params, f"#/$defs/{key}")
            params = {"$ref": f"#/$defs/{key}"}
        branches.append({
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": params},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        })
    schema: dict[str, Any] = {"$defs": defs} if defs else {}
    if len(branches) == 1:
        schema.update(branches[0])
    else:
        schema["anyOf"] = branches
    return schema


def tools_instruction(tools: Iterable[Mapping[str, Any]], *, choice: str | None = None,
                      optional: bool = False) -> str:
    """A plain-language description of the tools and of the call format, for the prompt."""
    lines = ["You can call the following tools:"]
    for t in tools:
        nt = normalize_tool(t)
        desc = f" {nt['description'].strip()}" if nt["description"] else ""
        lines.append(f"- {nt['name']}:{desc} Arguments (JSON Schema): {json.dumps(nt['parameters'])}")
    lines.append('To call a tool, answer with a JSON object {"name": <tool name>, "arguments": <arguments object>}.')
    if choice is not None:
        lines.append(f"Call the tool {choice!r}.")
    elif optional:
        lines.append("If no tool is needed, answer the user directly in plain text.")
    return "\n".join(lines)


def parse_tool_call(text: str) -> tuple[str, dict[str, Any]]:
    """``(name, arguments)`` from the text of one call; ``ValueError`` when it is not one."""
    value = json.loads(text)
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or "arguments" not in value:
        raise ValueError(f"not a tool call: {text!r}")
    args = value["arguments"]
    if not isinstance(args, dict):
        raise ValueError(f"tool call arguments are not an object: {text!r}")
    return value["name"], args
