"""Every capability on the real embedded SmolLM2-135M-Instruct (greedy, fp32).

Marked slow (the model decodes ~20 tokens/s on 2 CPU threads) but run in CI:
the outputs must satisfy their constraints — regexes, Lark grammars and JSON Schemas.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from lark import Lark

from structgen import generate_grammar, generate_json, generate_regex

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


REGEXES = [
    ("date", r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])", "When did the Apollo 11 mission land on the Moon?"),
    ("email", r"[a-z]{1,12}\.[a-z]{1,12}@[a-z]{2,10}\.(com|org|net)", "Give an e-mail address for Jane Doe."),
    ("phone", r"\(\d{3}\) \d{3}-\d{4}", "Write a US phone number for a pizza place."),
    ("enum", r"(positive|negative|neutral)", "Classify the sentiment: 'I love this phone, it is great!'"),
    ("decimal", r"-?\d{1,3}\.\d{1,2}", "What is the value of pi, rounded?"),
]


@pytest.mark.parametrize("name,pattern,prompt", REGEXES, ids=[r[0] for r in REGEXES])
def test_regexes_on_real_model(smol, name, pattern, prompt):
    out = generate_regex(smol, pattern, prompt, max_tokens=40)
    print(f"{name}: {out!r}")
    assert re.fullmatch(pattern, out)


@pytest.mark.parametrize("grammar,prompt", [
    ("arithmetic.lark", "Write an arithmetic expression that adds three numbers and multiplies by 2."),
    ("sql.lark", "Write a SQL query selecting the names of users older than 30 from the users table."),
])
def test_grammars_on_real_model(smol, grammar, prompt):
    path = ROOT / "grammars" / grammar
    out = generate_grammar(smol, path, prompt, max_tokens=60)
    print(f"{grammar}: {out!r}")
    Lark(path.read_text(), parser="earley").parse(out)


@pytest.mark.parametrize("name", ["person.json", "invoice.json", "tree.json", "function_call.json"])
def test_generate_json_on_real_model(smol, name):
    schema = json.loads((ROOT / "schemas" / name).read_text())
    value = generate_json(smol, schema, "Fill in a realistic example.", max_tokens=200)
    print(name, json.dumps(value))
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(value)


def test_finishes_within_a_tight_budget(smol):
    """With a budget barely above the shortest completion, the output is still complete and valid."""
    schema = json.loads((ROOT / "schemas" / "person.json").read_text())
    value = generate_json(smol, schema, "Describe a person at length.", max_tokens=45)
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(value)


@pytest.mark.parametrize("schema", [
    # more patternProperties than the key space is split by: one member per pattern, checked on close
    {"type": "object", "additionalProperties": False, "minProperties": 2,
     "patternProperties": {"^x-": {"type": "string"}, "^n_": {"type": "integer"}, "^b_": {"type": "boolean"},
                           "^l_": {"type": "array", "items": {"type": "string"}}, "^o_": {"type": "object"}}},
    # a key pattern with a lookahead: any key of its letters, checked when the object closes
    {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
     "patternProperties": {"^(?!name$)[a-z]+$": {"type": "integer"}}, "additionalProperties": False},
])
def test_checked_keywords_on_real_model(smol, schema):
    """Keywords enforced by checks at value boundaries still give valid output on the real model."""
    value = generate_json(smol, schema, "Describe a user account as JSON.", max_tokens=120, seed=0)
    print(json.dumps(value))
    jsonschema.Draft202012Validator(schema).validate(value)


PYTHON_PROMPTS = [
    "Write a Python function that returns the sum of a list of numbers.",
    "Write a Python class Point with x and y and a method that returns the distance to the origin.",
    "Write Python code that reads a file and counts the lines that contain the word 'error'.",
    "Write a Python function is_prime(n).",
]


@pytest.mark.minutes
@pytest.mark.parametrize("i", range(len(PYTHON_PROMPTS)))
def test_python_under_python_lark_parses(smol, i):
    """lark's python.lark with its indenter: every generated program parses with ``ast.parse``
    (greedy for the first two prompts, sampled for the others)."""
    import ast

    from structgen.bench.lark_corpora import CORPORA

    c = CORPORA["python"]
    out = generate_grammar(smol, c.grammar, PYTHON_PROMPTS[i], start=c.start, indenter=c.indenter,
                           max_tokens=120, temperature=0 if i < 2 else 0.8, seed=i,
                           timeout=None)  # sampled: minutes in the budget guard's parser search (issue 34)
    print(out)
    ast.parse(out)
    assert out.strip()
