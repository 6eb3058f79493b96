"""The Matcher contract: masks equal brute force, outputs satisfy the constraint,
strings of the language are accepted under any tokenization, rollback is exact."""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from lark import Lark

from engine_helpers import brute_force_mask, finish_shortest, mask_set, random_walk, tokenize_randomly
from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.runtime.masks import allocate_token_bitmask

GRAMMARS = Path(__file__).resolve().parents[2] / "grammars"


@pytest.fixture(scope="module")
def smol_compiler(smol_info):
    return GrammarCompiler(smol_info)


def _check_states(matcher, rng, n_walks=4, steps=12):
    """Mask equals brute force on random reachable states."""
    for _ in range(n_walks):
        matcher.reset()
        for _ in range(rng.randint(0, steps)):
            allowed = sorted(mask_set(matcher) - set(matcher.grammar.eos_ids))
            if not allowed:
                break
            assert matcher.accept_token(rng.choice(allowed))
        assert mask_set(matcher) == brute_force_mask(matcher)


CASES = [
    ("regex", r"\d{4}-(0[1-9]|1[0-2])-\d{2}"),
    ("regex", r"[a-z]+(\.[a-z]+)*@[a-z]+\.(com|org)"),
    ("regex", r"(yes|no|maybe)"),
    ("lark", "arithmetic.lark"),
    ("lark", "sql.lark"),
    ("lark", "json.lark"),
    ("json", {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 120}},
              "required": ["name"]}),
    ("json", {"type": "array", "items": {"enum": ["a", "bc", 1, None]}, "minItems": 1, "maxItems": 3}),
    # length-bounded strings take the counted-walk path (structgen.engine.counted)
    ("json", {"type": "array", "items": {"type": "string", "minLength": 3, "maxLength": 40}, "maxItems": 2}),
    ("json", {"type": "object", "properties": {"k": {"type": "string", "minLength": 1, "maxLength": 2}},
              "additionalProperties": {"type": "string", "maxLength": 130}}),
]


def _compile(comp, kind, spec):
    if kind == "regex":
        return comp.compile_regex(spec)
    if kind == "lark":
        return comp.compile_lark(GRAMMARS / spec)
    return comp.compile_json_schema(spec)


@pytest.mark.parametrize("kind,spec", CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CASES)])
def test_mask_equals_brute_force(smol_compiler, kind, spec):
    g = _compile(smol_compiler, kind, spec)
    _check_states(Matcher(g), random.Random(0))


def _validator(kind, spec):
    if kind == "regex":
        rx = re.compile(spec)
        return lambda s: rx.fullmatch(s) is not None
    if kind == "lark":
        parser = Lark((GRAMMARS / spec).read_text(), parser="earley")

        def ok(s):
            try:
                parser.parse(s)
                return True
            except Exception:
                return False
        return ok
    import jsonschema

    v = jsonschema.Draft202012Validator(spec)
    return lambda s: v.is_valid(json.loads(s))


@pytest.mark.parametrize("kind,spec", CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CASES)])
def test_accepted_outputs_satisfy_the_constraint(smol_compiler, kind, spec):
    g = _compile(smol_compiler, kind, spec)
    check = _validator(kind, spec)
    rng = random.Random(1)
    m = Matcher(g)
    n_done = 0
    for _ in range(30):
        m.reset()
        random_walk(m, rng, max_steps=rng.randint(0, 30), prefer_end=0.5)
        if finish_shortest(m):
            text = m.output_bytes().decode("utf-8")
            assert check(text), text
            n_done += 1
    assert n_done > 0


LANG = {
    "json.lark": ['{"a": [1, 2.5e3, true, null], "b": {"c": "d\\n\\u00e9"}}', "[]", '"x"', "-0.5"],
    "arithmetic.lark": ["1 + 2 * (3 - x) ^ 2", "-f(1, y)", "a/b/c"],
    "sql.lark": ["SELECT name, COUNT(*) FROM users u JOIN orders o ON u.id = o.user_id WHERE age >= 18 "
                 "GROUP BY name ORDER BY name DESC LIMIT 10;", "select * from t where x is not null"],
}


@pytest.mark.parametrize("grammar", sorted(LANG))
def test_strings_accepted_under_any_tokenization(smol_compiler, smol_info, smol_hf_tokenizer, grammar):
    g = smol_compiler.compile_lark(GRAMMARS / grammar)
    m = Matcher(g)
    vocab = {b: i for i, b in enumerate(smol_info.token_bytes) if b and i not in smol_info.special_ids}
    rng = random.Random(2)
    for s in LANG[grammar]:
        canonical = smol_hf_tokenizer.encode(s, add_special_tokens=False)
        for ids in [canonical] + [tokenize_randomly(s.encode(), vocab, rng) for _ in range(3)]:
            m.reset()
            assert all(m.accept_token(t) for t in ids), (s, ids)
            assert m.is_accepting()
        # and strings outside the language are rejected somewhere
        m.reset()
        bad = s + ")"
        ids = smol_hf_tokenizer.encode(bad, add_special_tokens=False)
        assert not (all(m.accept_token(t) for t in ids) and m.is_accepting())


def test_rollback_restores_state(smol_compiler, smol_hf_tokenizer):
    g = smol_compiler.compile_lark(GRAMMARS / "json.lark")
    m = Matcher(g)
    ids = smol_hf_tokenizer.encode('{"key": [1, 2, {"x": null}]}', add_special_tokens=False)
    masks = []
    for t in ids:
        masks.append(m.next_token_mask().copy())
        assert m.accept_token(t)
    for k in range(len(ids), 0, -1):
        m.rollback(1)
        assert np.array_equal(m.next_token_mask(), masks[k - 1])
    with pytest.raises(ValueError):
        m.rollback(1)


def test_rejected_token_leaves_state_unchanged(smol_compiler, smol_hf_tokenizer):
    m = Matcher(smol_compiler.compile_regex(r"ab+c"))
    assert m.accept_string("a")
    before = m.next_token_mask().copy()
    assert not m.accept_token(smol_hf_tokenizer.encode("z", add_special_tokens=False)[0])
    assert np.array_equal(before, m.next_token_mask())


def test_eos_only_when_accepting_and_bitmask_fill(smol_compiler, smol_info):
    m = Matcher(smol_compiler.compile_regex(r"ab"))
    eos = smol_info.eos_ids[0]
    bm = allocate_token_bitmask(2, smol_info.vocab_size)
    m.fill_next_token_bitmask(bm, 1)
    assert eos not in mask_set(m)
    assert m.accept_string("ab")
    assert eos in mask_set(m) and m.is_accepting()
    assert m.accept_token(eos) and m.is_terminated()


def test_forced_continuation(smol_compiler):
    m = Matcher(smol_compiler.compile_json_schema(
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
         "additionalProperties": False}, whitespace="compact"))
    assert m.forced_continuation() == b'{"name":"'


def test_unreachable_bytes_do_not_break_the_engine(smol_compiler, smol_info):
    """SmolLM2 has no token for some bytes (e.g. 0x04): such characters are simply unreachable."""
    first = smol_info.first_bytes()
    missing = [b for b in range(256) if b not in first]
    assert 0x04 in missing
    m = Matcher(smol_compiler.compile_regex("(\x04|a)b"))
    assert mask_set(m) == brute_force_mask(m)
    assert m.accept_string("ab") and m.is_accepting()


def test_deepseek_vocabulary_masks(deepseek_info):
    comp = GrammarCompiler(deepseek_info)
    m = Matcher(comp.compile_lark(GRAMMARS / "json.lark"))
    _check_states(m, random.Random(3), n_walks=2, steps=8)
    m = Matcher(comp.compile_json_schema({"type": "array", "items": {"type": "string", "minLength": 2,
                                                                       "maxLength": 12}}))
    _check_states(m, random.Random(4), n_walks=2, steps=8)


def test_lexer_with_hundreds_of_terminals(smol_compiler):
    """A key lexer with more terminals than the product's initial entry buffer (300 properties)."""
    props = {f"p{i}": {"type": "integer"} for i in range(300)}
    m = Matcher(smol_compiler.compile_json_schema({"type": "object", "properties": props}))
    assert m.accept_string('{"p7": 2, "p299": 1}') and m.is_accepting()
    assert mask_set(m) == brute_force_mask(m)
