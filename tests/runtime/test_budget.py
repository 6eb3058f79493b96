"""BudgetGuard.costs: the cost of every allowed token at once equals BudgetGuard.cost token by token."""
from __future__ import annotations

import numpy as np
import pytest

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.runtime.budget import BudgetGuard

SCHEMA = {"type": "object", "required": ["name", "tags"],
          "properties": {"name": {"type": "string", "maxLength": 12},
                         "tags": {"type": "array", "items": {"type": "object", "required": ["a", "b"],
                                                             "properties": {"a": {"type": "string"},
                                                                            "b": {"type": "integer"}}}}}}
TEXT = '{"name": "Al", "tags": [{"a": "x y", "b": 12}, {"a": "q'
#: with checks at value boundaries (uniqueItems over objects, oneOf branches that overlap): the
#: tokens that complete a lexeme are tried one by one there, the others still walk together
CHECKED = {"type": "object", "required": ["name", "tags"],
           "properties": {"name": {"oneOf": [{"type": "string", "maxLength": 1}, {"type": "string", "pattern": "^A"}]},
                          "tags": {"type": "array", "uniqueItems": True, "items": SCHEMA["properties"]["tags"]["items"]}}}


def _allowed(m: Matcher) -> np.ndarray:
    words = np.ascontiguousarray(m.next_token_mask(), dtype=np.uint32)
    return np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))[: m.grammar.vocab_size]


@pytest.mark.parametrize("whitespace,schema", [("compact", SCHEMA), ("flexible", SCHEMA), ("flexible", CHECKED)])
def test_costs_equal_cost_token_by_token(smol_info, smol_hf_tokenizer, whitespace, schema):
    g = GrammarCompiler(smol_info).compile_json_schema(schema, whitespace=whitespace)
    assert bool(g.checks) == (schema is CHECKED)
    m = Matcher(g)
    guard = BudgetGuard(m)
    text = TEXT if whitespace == "flexible" else TEXT.replace(": ", ":").replace(", ", ",")
    ids_text = smol_hf_tokenizer.encode(text, add_special_tokens=False)
    checked_big = 0
    for k in range(len(ids_text) + 1):
        ids = _allowed(m)
        if len(ids) >= 256 or k % 4 == 0:  # every state the vectorised path serves, and some others
            fast = guard.costs(ids)
            slow = np.array([guard.cost(int(t)) for t in ids])
            assert np.array_equal(fast, slow), (k, ids[fast != slow][:5])
            checked_big += len(ids) >= 256
        if k < len(ids_text):
            assert m.accept_token(ids_text[k])
    assert checked_big >= 2  # inside "Al" and inside "x y" / "q": most of the vocabulary allowed
