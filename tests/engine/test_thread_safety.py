"""Many threads compiling and matching on one compiler give what one thread gives."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher

SCHEMAS = [
    {"type": "object", "properties": {"id": {"type": "integer", "minimum": 3}, "tags": {
        "type": "array", "items": {"type": "string", "pattern": "^[a-z]{2,6}$"}, "maxItems": 3}},
     "required": ["id"]},
    {"type": "array", "items": {"enum": ["red", "green", {"a": 1}]}, "uniqueItems": True, "maxItems": 3},
    {"anyOf": [{"type": "string", "format": "date"}, {"type": "number", "multipleOf": 0.25}]},
    {"type": "object", "patternProperties": {"^x-[0-9]+$": {"type": "boolean"}}, "additionalProperties": False},
]
REGEXES = [r"[A-Z]{3}-\d{2,4}", r"(yes|no|maybe)( because [a-z ]{1,20})?"]


def _walk(grammar, seed: int, steps: int = 25) -> list:
    """A random walk through allowed tokens; returns each step's mask digest and chosen token."""
    rng = np.random.default_rng(seed)
    m = Matcher(grammar)
    trace = []
    for _ in range(steps):
        words = m.next_token_mask()
        ids = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")[: grammar.vocab_size])
        ids = [t for t in ids.tolist() if t not in grammar.eos_ids]
        trace.append(hash(words.tobytes()))
        if not ids:
            break
        for t in rng.permutation(ids)[:20].tolist():
            if m.accept_token(t):
                trace.append(t)
                break
        else:
            break
    return trace


def _work(compiler, jobs):
    out = {}
    for kind, i, seed in jobs:
        g = compiler.compile_json_schema(SCHEMAS[i]) if kind == "schema" else compiler.compile_regex(REGEXES[i])
        out[(kind, i, seed)] = _walk(g, seed)
    return out


@pytest.mark.minutes  # 40 s: compiles every case on 4 threads and on 1
def test_threads_compiling_and_matching_agree_with_one_thread(smol_info):
    jobs = [("schema", i, s) for i in range(len(SCHEMAS)) for s in range(3)]
    jobs += [("regex", i, s) for i in range(len(REGEXES)) for s in range(3)]
    # the threads run first, so they meet cold process-wide caches (regex automata, lexer walks) too
    shared = GrammarCompiler(smol_info)  # one compiler used by every thread at once
    results: list = []
    errors: list = []

    def run(offset: int) -> None:
        try:
            order = jobs[offset:] + jobs[:offset]  # same and different constraints at the same time
            results.append(_work(shared, order))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k * 5,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert len(results) == 6
    serial = _work(GrammarCompiler(smol_info), jobs)
    for r in results:
        assert r == serial


@pytest.mark.minutes  # 75 s on 2 cores: make test-slow
@pytest.mark.parametrize("n_threads", [4])
def test_threads_sharing_one_grammar_give_serial_masks(smol_info, n_threads):
    g2 = GrammarCompiler(smol_info).compile_json_schema(SCHEMAS[0])
    got: dict = {}

    def run(k: int) -> None:
        for s in range(k, 8, n_threads):
            got[s] = _walk(g2, s)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    g = GrammarCompiler(smol_info).compile_json_schema(SCHEMAS[0])
    assert [got[s] for s in range(8)] == [_walk(g, s) for s in range(8)]
