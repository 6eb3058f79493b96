"""Chat prompts: the one place a conversation becomes prompt text.

Also the user turn built from a JSON Schema (``schema_prompt``, ``task_prompt``), which every entry
point and benchmark sends.  Every entry point that talks to a chat model (``generate_*``, the LangChain chat model, the CLI,
the benchmarks) renders through :func:`render_chat`, so they agree on the template, on the
fallback for tokenizers without one, and on roles a template refuses.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Sequence

__all__ = ["render_chat", "user_prompt", "schema_prompt", "task_prompt", "request_prompt", "schema_instruction", "SCHEMA_PROMPTS",
           "DESCRIPTION_BUDGET"]

#: how a request presents its schema to the model (``generate_json(schema_prompt=...)``): "auto" (the
#: default: a compact description within a token budget), "full" (the schema's JSON text), "compact"
#: (the description, shrunk to the budget), "none" (the request alone: the grammar carries the format)
SCHEMA_PROMPTS = ("auto", "full", "compact", "none")
#: tokens a schema's description may take at most: more does not help a small model, and what is left
#: of the context goes to the request and the output
DESCRIPTION_BUDGET = 1500


def render_chat(hf_tokenizer: Any, messages: Sequence[dict[str, str]]) -> str:
    """Prompt text for ``messages`` (``{"role", "content"}`` dicts), ending where the assistant's
    reply starts.

    Uses the tokenizer's chat template with ``add_generation_prompt=True``.  A template that
    rejects the ``tool`` role gets tool results as user turns.  A tokenizer without a template
    gets plain text: the system turn, a blank line, then the other turns (``role: content``
    lines when there are several)."""
    messages = [dict(m) for m in messages]
    if getattr(hf_tokenizer, "chat_template", None):
        try:
            out = hf_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except Exception:  # noqa: BLE001 - e.g. a template that rejects the "tool" role
            if not any(m["role"] == "tool" for m in messages):
                raise
            messages = [m if m["role"] != "tool" else {"role": "user", "content": f"Tool result: {m['content']}"}
                        for m in messages]
            out = hf_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        if isinstance(out, str):
            return out
    system = [m["content"] for m in messages if m["role"] == "system"]
    turns = [m for m in messages if m["role"] != "system"]
    if len(turns) == 1 and turns[0]["role"] == "user":
        body = f"{turns[0]['content']}\n"
    else:
        body = "\n".join(f"{m['role']}: {m['content']}" for m in turns) + "\nassistant:"
    return f"{system[0]}\n\n{body}" if system else body


def user_prompt(hf_tokenizer: Any, user: str, system: str | None = None) -> str:
    """Prompt text for one user turn (and an optional system turn)."""
    messages = ([{"role": "system", "content": system}] if system is not None else []) + \
        [{"role": "user", "content": user}]
    return render_chat(hf_tokenizer, messages)


def schema_prompt(schema: dict, user: str | None = None) -> str:
    """The user turn: the request (or one built from the schema's title and
    description when there is none), then the schema the answer must follow."""
    return request_prompt(schema, user, "full", len)


def schema_instruction(schema: Any, mode: str, count_tokens: Callable[[str], int], room: int | None = None,
                       source: str | None = None) -> str | None:
    """What the prompt says of ``schema`` under a ``schema_prompt`` policy (``SCHEMA_PROMPTS``), or
    None for nothing.  ``count_tokens``: the model's tokenizer; ``room``: the tokens of context left
    beside the rest of the prompt and the output budget (None: unknown).  "auto" and "compact" never
    take more than ``room`` (nor ``DESCRIPTION_BUDGET``): the description shrinks, and is left out
    when not even the field names fit, so a schema never makes a request too long by itself.
    ``source``: the text values are extracted from (an enum's values it names are listed first)."""
    from .schema_text import fit_description

    if mode == "full":
        return f"Reply with JSON only, following this JSON Schema:\n{json.dumps(schema)}"
    if mode == "none":
        return None
    budget = DESCRIPTION_BUDGET if room is None else min(DESCRIPTION_BUDGET, room)
    return fit_description(schema, count_tokens, budget, source) if budget > 0 else None


def request_prompt(schema: Any, user: str | None, mode: str, count_tokens: Callable[[str], int],
                   room: int | None = None, source: str | None = None) -> str:
    """The user turn under a ``schema_prompt`` policy: the request (:func:`task_prompt`), then
    :func:`schema_instruction` (``room``: the context left beside the output budget)."""
    task = task_prompt(schema, user)
    text = schema_instruction(schema, mode, count_tokens, None if room is None else room - count_tokens(task) - 8,
                              source)
    return f"{task}\n\n{text}" if text else task


def task_prompt(schema: dict, user: str | None = None) -> str:
    """The request alone (or one built from the schema's title and description), no format."""
    if not user:
        parts = []
        if isinstance(schema, dict):
            if schema.get("title"):
                parts.append(f"Create an example {schema['title']}.")
            if schema.get("description"):
                parts.append(str(schema["description"]))
        user = " ".join(parts) or "Create an example value."
    return user
