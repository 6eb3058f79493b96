"""``generate_*(stream=True)`` on the tiny random Llama with the real SmolLM2 tokenizer: the events
add up to the non-streamed output, partial values are prefixes of the final one, and the last
event carries the validated value."""
from __future__ import annotations

import json

import pytest

from structgen.api import generate_grammar, generate_json, generate_regex
from structgen.errors import InvalidArgument
from structgen.partial_json import MISSING

from test_partial_json import is_prefix

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                                           "age": {"type": "integer", "minimum": 0}},
          "required": ["name", "tags", "age"]}


@pytest.mark.parametrize("kw", [{}, {"temperature": 1.0, "seed": 3}, {"speculative": False}])
def test_a_streamed_json_run_equals_the_plain_one(tiny_model, kw):
    plain, result = generate_json(tiny_model, SCHEMA, "A person.", max_tokens=60, return_result=True, **kw)
    events = list(generate_json(tiny_model, SCHEMA, "A person.", max_tokens=60, stream=True, **kw))
    assert [e.done for e in events] == [False] * (len(events) - 1) + [True]
    last = events[-1]
    assert last.value == plain and last.result.token_ids == result.token_ids
    assert "".join(e.text for e in events) == result.text
    assert [t for e in events for t in e.token_ids] == result.token_ids
    partials = [e.partial for e in events[:-1]]
    assert all(is_prefix(p, plain) for p in partials)
    assert any(isinstance(p, dict) and p for p in partials)  # the object fills in as it is written
    assert json.loads(last.result.text) == plain


def test_regex_and_grammar_stream_text(tiny_model):
    events = list(generate_regex(tiny_model, r"(yes|no), [0-9]{2}", "Answer.", max_tokens=20, stream=True))
    assert events[-1].done and "".join(e.text for e in events) == events[-1].value
    assert all(e.partial is MISSING for e in events)
    events = list(generate_grammar(tiny_model, "arithmetic", "A sum.", max_tokens=16, stream=True))
    assert "".join(e.text for e in events) == events[-1].value


def test_stream_takes_one_prompt(tiny_model):
    with pytest.raises(InvalidArgument, match="one prompt"):
        generate_json(tiny_model, SCHEMA, prompts=["a", "b"], stream=True)
