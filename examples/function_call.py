"""Function calling: the model picks one of several Python functions and fills in its arguments.

The tools' parameter schemas (derived from the functions' signatures with
Pydantic) become one JSON Schema: ``anyOf`` over ``{"name": <const>,
"arguments": <that tool's parameters>}``.  Under its grammar the answer always
names a real tool and its arguments are always valid for it, so the call below
never fails on a missing or mistyped argument.

Run: ``python examples/function_call.py [--model PATH]``.
"""
from __future__ import annotations

import argparse
import inspect
import os
from typing import Any, Callable, Literal

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pydantic import Field, create_model  # noqa: E402

from structgen import generate_json, load_model  # noqa: E402
from structgen.integrations.tools import tool_call_schema, tools_instruction  # noqa: E402


def get_weather(city: str = Field(max_length=40), unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Get the current weather in a city."""
    return f"It is 21 degrees {unit} and sunny in {city}."


def send_email(to: str = Field(json_schema_extra={"format": "email"}, max_length=60),
               subject: str = Field(max_length=60), body: str = Field(max_length=300)) -> str:
    """Send an e-mail."""
    return f"E-mail to {to} sent: {subject!r}."


def convert_currency(amount: float = Field(gt=0), source: str = Field(pattern="^[A-Z]{3}$"),
                     target: str = Field(pattern="^[A-Z]{3}$")) -> str:
    """Convert an amount of money from one currency (ISO code, e.g. EUR) to another."""
    return f"{amount} {source} is about {amount * 1.1:.2f} {target}."


TOOLS: list[Callable[..., str]] = [get_weather, send_email, convert_currency]
REQUESTS = [
    "What's the weather like in Lisbon right now?",
    "Send an e-mail to anna@example.com saying that the meeting moves to Thursday.",
    "How much is 250 EUR in US dollars?",
]


def tool_spec(fn: Callable[..., Any]) -> dict[str, Any]:
    """``{"name", "description", "parameters"}`` from a function's signature (via a Pydantic model)."""
    fields = {}
    for name, p in inspect.signature(fn).parameters.items():
        fields[name] = (p.annotation, ... if p.default is inspect.Parameter.empty else p.default)
    params = create_model(fn.__name__, **fields).model_json_schema()
    params.pop("title", None)
    return {"name": fn.__name__, "description": inspect.getdoc(fn) or "", "parameters": params}


def main(model=None, *, requests: list[str] = REQUESTS, max_tokens: int = 200) -> list[tuple[str, dict, str]]:
    """Route each request to a tool and run it; returns ``(tool name, arguments, result)`` per request."""
    model = model if hasattr(model, "hf_model") else load_model(model)
    specs = [tool_spec(fn) for fn in TOOLS]
    schema = tool_call_schema(specs)
    by_name = {fn.__name__: fn for fn in TOOLS}
    out = []
    for request in requests:
        prompt = f"{tools_instruction(specs)}\n\nRequest: {request}"
        # strict=True closes the argument objects: no invented extra arguments
        call = generate_json(model, schema, prompt, max_tokens=max_tokens, strict=True)
        fn = by_name[call["name"]]  # always a real tool: the grammar allows no other name
        args = call["arguments"]
        result = fn(**args)  # always valid arguments for it
        print(f"--- {request}\n{call['name']}({args}) -> {result}")
        out.append((call["name"], args, result))
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None,
                    help="transformers model folder, hub id or .gguf (default: the embedded SmolLM2-135M-Instruct)")
    main(ap.parse_args().model)
