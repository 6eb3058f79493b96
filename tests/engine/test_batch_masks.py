"""Batch masks: rows filled in a thread pool equal rows filled one by one."""
from __future__ import annotations

import numpy as np
import pytest

from structgen.compiler import GrammarCompiler
from structgen.engine.batch_masks import fill_next_token_bitmasks
from structgen.engine.matcher import Matcher


@pytest.fixture(scope="module")
def matchers(smol_info):
    c = GrammarCompiler(smol_info)
    grammars = [c.compile_json_schema({"type": "object", "properties": {"n": {"type": "integer"}}}),
                c.compile_regex(r"[a-z]{2,5}@example\.(com|org)"),
                c.compile_json_schema({"type": "array", "items": {"type": "string"}, "uniqueItems": True})]
    prefixes = ['{"n": 1', "ab", '["x", "x']
    out = []
    for k in range(40):
        m = Matcher(grammars[k % 3])
        p = prefixes[k % 3]
        assert m.accept_string(p[: 1 + k % len(p)])
        out.append(m)
    return out


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_pool_rows_equal_serial_rows(matchers, threads):
    words = (matchers[0].vocab_size + 31) // 32
    expected = np.full((64, words + 3), -1, dtype=np.int32)
    rows = [63 - 2 * i for i in range(len(matchers))]
    for m, r in zip(matchers, rows):
        m.fill_next_token_bitmask(expected, r)
    got = np.full_like(expected, -1)
    fill_next_token_bitmasks(matchers, got, rows, threads=threads)
    assert (got == expected).all()
    assert (got[rows, words:] == 0).all()  # words past the vocabulary are closed


def test_a_matcher_twice_and_a_length_mismatch(matchers):
    words = (matchers[0].vocab_size + 31) // 32
    got = np.zeros((32, words), dtype=np.int32)
    twice = [matchers[0]] * 16 + [matchers[1]] * 16
    fill_next_token_bitmasks(twice, got, threads=2)
    assert (got[:16] == got[0]).all() and (got[16:] == got[16]).all()
    with pytest.raises(ValueError, match="row indices"):
        fill_next_token_bitmasks(matchers, got, [0, 1])
