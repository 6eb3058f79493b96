"""Every script in examples/ runs end to end (its ``main(model=...)``) on the tiny random Llama.

The tiny model's words are gibberish; what is checked is that each example's
pipeline works and that everything the constraint guarantees holds.
"""
from __future__ import annotations

import importlib.util
import re
import sqlite3
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread(one_torch_thread):
    """One torch thread for this module's tiny-model runs (see conftest.one_torch_thread)."""
    yield


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"structgen_example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_extract_pydantic(tiny_model, capsys):
    ex = _load("extract_pydantic")
    contacts = ex.main(tiny_model, texts=ex.TEXTS[:1], max_tokens=48)
    assert len(contacts) == 1 and all(isinstance(c, ex.Contact) for c in contacts)
    assert all("@" in c.email for c in contacts)
    assert '"email"' in capsys.readouterr().out


def test_function_call(tiny_model):
    ex = _load("function_call")
    calls = ex.main(tiny_model, requests=ex.REQUESTS[:2], max_tokens=96)
    names = {fn.__name__ for fn in ex.TOOLS}
    assert len(calls) == 2
    for name, args, result in calls:
        assert name in names and isinstance(result, str)  # the tool ran with the generated arguments


def test_regex_answer(tiny_model):
    ex = _load("regex_answer")
    answers = ex.main(tiny_model, max_tokens=16)
    assert [q for q, _ in answers] == [q for q, _ in ex.QUESTIONS]
    for (_, pattern), (_, answer) in zip(ex.QUESTIONS, answers):
        assert re.fullmatch(pattern, answer)


def test_sql_query(tiny_model):
    import lark

    ex = _load("sql_query")
    out = ex.main(tiny_model, questions=ex.QUESTIONS[:1], max_tokens=40)
    assert len(out) == 1
    from structgen.shipped import grammar_file

    parser = lark.Lark(grammar_file(ex.GRAMMAR).read_text(), parser="lalr")
    for _, sql, result in out:
        parser.parse(sql)  # in the grammar's language, as Lark itself reads it
        # SQLite has the last word (unknown columns; and sql.lark lets a keyword run into a name,
        # "selectx" = SELECT x, as Lark's contextual lexer does, which SQLite rejects)
        assert isinstance(result, (list, sqlite3.Error))


def test_langchain_chain(tiny_model):
    pytest.importorskip("langchain_core")
    ex = _load("langchain_chain")
    out = ex.main(tiny_model, reviews=ex.REVIEWS[:1], max_tokens=96)
    assert len(out["reviews"]) == 1 and all(isinstance(r, ex.Review) for r in out["reviews"])
    assert out["tool_call"]["name"] in ("lookup_order", "refund") and isinstance(out["tool_result"], str)


def test_examples_take_a_model_option():
    for name in ("extract_pydantic", "function_call", "regex_answer", "sql_query", "langchain_chain"):
        assert '"--model"' in (EXAMPLES / f"{name}.py").read_text()


def test_structural_tag_tool_calls(tiny_model):
    ex = _load("structural_tag_tool_calls")
    out, value, result = ex.main(tiny_model, max_tokens=90)
    assert out.segments and out.text.startswith("<tool_call>")  # at_least_one: the output opens with a call
    for seg in out.segments:
        name = seg.begin.split('"name": "')[1].split('"')[0]
        import jsonschema

        jsonschema.validate(seg.value, ex.TOOLS[name])
    assert isinstance(value["answer"], int) and isinstance(result.reasoning, str)
