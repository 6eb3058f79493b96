"""``ChatStructgen``: a LangChain chat model over a local transformers model, with grammar-enforced
structured output and tool calls.

::

    from pydantic import BaseModel
    from structgen.integrations.langchain import ChatStructgen

    class Person(BaseModel):
        name: str
        age: int

    llm = ChatStructgen()                        # the embedded SmolLM2-135M-Instruct, loaded on first use
    llm.invoke("Tell me a joke")                 # free text (AIMessage)
    llm.with_structured_output(Person).invoke("Invent a person")   # -> Person(...), always valid
    llm.bind_tools([get_weather]).invoke("Weather in Paris?")      # AIMessage.tool_calls, valid arguments

Unlike chat models that send the schema to a server and hope, every token of a
structured answer is masked by structgen's grammar for the schema, so the
output parses and validates by construction, and the finish-within-budget
guard ends it inside ``max_tokens``.

Structured output (``with_structured_output``): ``method="json_schema"`` (the
default) generates under the schema's grammar and describes the schema in the
prompt (appended to the last user message, as ``generate_json`` does;
``schema_in_prompt=False`` turns that off); ``"function_calling"`` goes
through ``bind_tools`` with the schema as the only, forced tool (the raw
message then carries ``tool_calls``); ``"json_mode"`` asks for "a JSON object"
and, when a schema is given, still generates under its grammar (the prompt is
expected to describe the fields, LangChain's convention for JSON mode).
``strict``: ``None`` (default) and ``True`` close every object schema that does
not say ``additionalProperties`` (a small model otherwise wanders into invented
keys, which a Pydantic class would drop anyway); ``strict=False`` takes the
schema exactly as written (JSON Schema's default: open objects).  The same
rule applies to tool arguments in ``bind_tools``.

Tools (``bind_tools``): the answer is generated under an ``anyOf`` over
``{"name": const, "arguments": <parameters schema>}`` objects
(``structgen.integrations.tools``).  ``tool_choice="any"``/``"required"``
forces a call, a tool name forces that tool, ``"none"`` forbids calls, and
``None``/``"auto"`` lets the model choose: its first token is sampled
unconstrained, and if the tool-call grammar allows it the rest of the answer is
a constrained call, otherwise free text.  One call per answer.

Generation kwargs per call (``invoke(..., temperature=0.7)`` or ``bind``):
``max_tokens``, ``temperature``, ``top_p``, ``top_k``, ``seed``, ``timeout``;
anything else raises ``ValueError``.  ``stop`` sequences apply to free text only
(a grammar decides where structured output ends).  ``timeout`` is a wall-clock
limit for one generation (default 300 s; past it ``GenerationError`` with ``reason="timeout"``,
the library's own mechanism; None for none); ``max_retries`` is accepted for
compatibility with LangChain's standard parameters and unused (nothing here
can fail transiently).
"""
from __future__ import annotations

try:
    import langchain_core  # noqa: F401 - the extra is installed: say so once, here
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "structgen.integrations.langchain needs LangChain: pip install 'structgen[langchain]' "
        f"(missing: {e.name or e})"
    ) from e

from .model import ChatStructgen
from .parser import StructgenOutputParser

__all__ = ["ChatStructgen", "StructgenOutputParser"]
