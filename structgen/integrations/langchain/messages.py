"""Messages and schemas as structgen reads them: LangChain messages to a chat, Pydantic classes and
JSON Schemas to a schema dict, the instruction appended to the last user turn, stop-sequence prefixes."""
from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage


# -- helpers: schemas ------------------------------------------------------------------------------
def _is_pydantic_v1_class(obj: Any) -> bool:
    if not isinstance(obj, type):
        return False
    try:
        from pydantic.v1 import BaseModel as BaseModelV1
    except ImportError:  # pragma: no cover
        return False
    return issubclass(obj, BaseModelV1)


def _is_pydantic_class(obj: Any) -> bool:
    """A Pydantic model class, v2 or v1 (``pydantic.v1``)."""
    return (isinstance(obj, type) and hasattr(obj, "model_json_schema") and hasattr(obj, "model_validate")) \
        or _is_pydantic_v1_class(obj)


def _schema_dict(schema: Any) -> dict[str, Any]:
    """A JSON Schema from a Pydantic class, TypedDict/dataclass, JSON Schema dict or OpenAI tool/function dict."""
    from ...grammar.json_schema import normalize_schema_input

    if isinstance(schema, Mapping):
        if schema.get("type") == "function" and isinstance(schema.get("function"), Mapping):
            return dict(schema["function"].get("parameters") or {"type": "object", "properties": {}})
        if "parameters" in schema and "name" in schema and "properties" not in schema:
            return dict(schema["parameters"])
        return dict(schema)
    if _is_pydantic_v1_class(schema):
        return schema.schema()
    out = normalize_schema_input(schema)
    if not isinstance(out, dict):
        raise ValueError(f"cannot use {schema!r} as a schema")
    return out


def _schema_name(schema: Any, schema_dict: Mapping[str, Any]) -> str:
    if isinstance(schema, type):
        return schema.__name__
    if isinstance(schema, Mapping):
        if schema.get("type") == "function" and isinstance(schema.get("function"), Mapping):
            return str(schema["function"].get("name", "output"))
        if isinstance(schema.get("name"), str):
            return schema["name"]
    return str(schema_dict.get("title") or "output")


# -- helpers: messages -----------------------------------------------------------------------------
# content blocks that repeat what the message says elsewhere (tool calls) or that a plain chat
# template has no place for (reasoning): left out of the prompt
_SKIPPED_BLOCKS = frozenset({"tool_use", "tool_call", "tool_call_chunk", "server_tool_call", "reasoning", "thinking"})


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, Mapping) and block.get("type") in _SKIPPED_BLOCKS:
            continue
        else:
            kind = block.get("type") if isinstance(block, Mapping) else type(block).__name__
            raise ValueError(f"ChatStructgen handles text only; got a {kind!r} content block")
    return "".join(parts)


def _tool_call_text(name: str, args: Any) -> str:
    return json.dumps({"name": name, "arguments": args}, ensure_ascii=False, separators=(",", ":"))


def _to_chat(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    """LangChain messages -> the ``[{"role", "content"}]`` list chat templates take."""
    out: list[dict[str, str]] = []
    for m in messages:
        text = _content_text(m.content)
        if isinstance(m, SystemMessage):
            role = "system"
        elif isinstance(m, HumanMessage):
            role = "user"
        elif isinstance(m, AIMessage):
            role = "assistant"
            calls = [_tool_call_text(tc["name"], tc["args"]) for tc in m.tool_calls]
            text = "\n".join(([text] if text else []) + calls)
        elif isinstance(m, ToolMessage):
            role = "tool"
        elif isinstance(m, ChatMessage):
            role = m.role
        else:
            raise ValueError(f"ChatStructgen cannot render a {type(m).__name__} ({m.type!r}) message")
        out.append({"role": role, "content": text})
    return out


def _with_instruction(chat: list[dict[str, str]], instruction: str) -> list[dict[str, str]]:
    """Append ``instruction`` to the last user message (a new user message if the last is not one)."""
    chat = [dict(m) for m in chat]
    if chat and chat[-1]["role"] == "user":
        chat[-1]["content"] = f"{chat[-1]['content']}\n{instruction}" if chat[-1]["content"] else instruction
    else:
        chat.append({"role": "user", "content": instruction})
    return chat


def _with_source(chat: list[dict[str, str]], source: str) -> list[dict[str, str]]:
    """The source text added to the last user message, unless some message already holds it."""
    if any(source in m["content"] for m in chat):
        return chat
    return _with_instruction(chat, f"\nText:\n{source}")


def _longest_partial_stop(text: str, stops: Sequence[str]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of a stop sequence."""
    best = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:k]):
                best = k
                break
    return best


