"""LangChain: a prompt piped into ``ChatStructgen(...).with_structured_output(Review)``, and tool calls.

``ChatStructgen`` is a LangChain chat model over a local transformers model;
``with_structured_output`` generates under the schema's grammar and returns
validated Pydantic objects, so the chain never fails to parse.  Needs
``pip install 'structgen[langchain]'``.

Run: ``python examples/langchain_chain.py [--model PATH]``.
"""
from __future__ import annotations

import argparse
import os
from typing import Literal

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

from structgen.integrations.langchain import ChatStructgen  # noqa: E402


class Review(BaseModel):
    # No descriptions: the schema is shown to the model, and a 135M model tends to copy them
    # into the answer; the field names say enough.
    product: str = Field(max_length=40)
    sentiment: Literal["positive", "neutral", "negative"]
    stars: int = Field(ge=1, le=5)
    summary: str = Field(max_length=60)


REVIEWS = [
    "I love these headphones: great sound, the battery lasts all week. Five stars!",
    "The blender broke after two days and support never answered. Avoid.",
]


@tool
def lookup_order(order_id: str) -> str:
    """Look up the status of a customer order by its id."""
    return f"Order {order_id} shipped yesterday."


@tool
def refund(order_id: str, reason: str) -> str:
    """Start a refund for an order."""
    return f"Refund for {order_id} started ({reason})."


def main(model=None, *, reviews: list[str] = REVIEWS, max_tokens: int = 160) -> dict:
    """Run the review chain (batched) and one tool call; returns ``{"reviews": [...], "tool_call": ...}``."""
    llm = ChatStructgen(model=model, max_tokens=max_tokens)
    prompt = ChatPromptTemplate.from_messages([
        ("system", "You analyse customer reviews."),
        ("human", "Review: {review}"),
    ])
    chain = prompt | llm.with_structured_output(Review)
    results = chain.batch([{"review": r} for r in reviews], config={"max_concurrency": 1})
    for text, review in zip(reviews, results):
        print(f"--- {text}\n{review!r}")

    tools = {"lookup_order": lookup_order, "refund": refund}
    agent_step = llm.bind_tools(list(tools.values()), tool_choice="any")
    msg = agent_step.invoke("Where is my order A1234?")
    call = msg.tool_calls[0]
    result = tools[call["name"]].invoke(call["args"])
    print(f"--- tool call: {call['name']}({call['args']}) -> {result}")
    return {"reviews": results, "tool_call": call, "tool_result": result}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None,
                    help="transformers model folder, hub id or .gguf (default: the embedded SmolLM2-135M-Instruct)")
    main(ap.parse_args().model)
