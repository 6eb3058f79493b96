"""The served request's logic shared by the vLLM and SGLang backends (no server needed)."""
from __future__ import annotations

import numpy as np
import pytest

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.errors import StructgenError
from structgen.integrations.served import KINDS, ServedGrammar, compile_served


@pytest.fixture(scope="module")
def compiler(smol_info):
    return GrammarCompiler(smol_info)


def _ids(info, text: str) -> list[int]:
    """Byte-level token ids spelling ``text`` (one token per byte where the vocabulary has it)."""
    first = {b: i for i, b in reversed(list(enumerate(info.token_bytes)))}
    return [first[bytes([c])] for c in text.encode()]


def _allowed(words: np.ndarray, t: int) -> bool:
    return bool((int(words[t >> 5]) >> (t & 31)) & 1)


def test_every_kind_compiles_and_an_unknown_kind_says_which_are_served(compiler):
    specs = {"json": '{"type": "integer"}', "json_object": "", "regex": "a+", "choice": '["x", "y"]',
             "lark": 'start: "ok"', "structural_tag": '{"type": "structural_tag", "structures": [{"begin": "<f>", "schema": {}, "end": "</f>"}], '
                               '"triggers": ["<f>"]}'}
    for kind in KINDS:
        assert compile_served(compiler, kind, specs[kind]) is not None
    with pytest.raises(ValueError, match="structural_tag"):
        compile_served(compiler, "gbnf", "root ::= x")
    with pytest.raises(StructgenError):
        compile_served(compiler, "json", '{"type": "strin"}')


def test_a_user_stop_token_is_allowed_only_where_the_output_may_end(compiler, smol_info):
    stop = _ids(smol_info, "!")[0]
    g = ServedGrammar(Matcher(compile_served(compiler, "regex", "ab")), stop_token_ids=frozenset({stop}))
    assert not _allowed(g.mask_words(), stop)
    assert g.accept_tokens("r", _ids(smol_info, "ab"))
    assert _allowed(g.mask_words(), stop) and not g.is_terminated()
    assert g.accept_tokens("r", [stop]) and g.is_terminated()
    g.rollback(1)
    assert not g.is_terminated() and g.tokens_taken == 2


def test_the_budget_cuts_the_tokens_after_which_no_output_fits(compiler, smol_info):
    g = ServedGrammar(Matcher(compile_served(compiler, "json", '{"type": "array", "items": {"type": "integer"}}')))
    open_ = _ids(smol_info, "[")[0]
    g.accept_tokens("r", [open_])
    digit = _ids(smol_info, "7")[0]
    assert _allowed(g.mask_words(), digit)
    g.set_budget(3)  # one token taken: "]" and EOS are all that still fit
    words = g.mask_words()
    assert not _allowed(words, digit) and _allowed(words, _ids(smol_info, "]")[0])
    assert g.validate_tokens([digit]) == [] and g.tokens_taken == 1  # a draft the budget refuses is pruned


def test_a_draft_that_leads_into_a_dead_end_is_pruned(compiler, smol_info):
    """vLLM checks n-gram drafts with validate_tokens, not with the mask: a draft spelling an earlier
    unique item up to its maxLength would be accepted and leave no token allowed (a request ended
    with an error, seen in tests_vllm); it is pruned as the mask leaves it out."""
    spec = ('{"type": "array", "uniqueItems": true, "items": {"type": "string", "minLength": 2, '
            '"maxLength": 2, "pattern": "^[a-e]*$"}}')
    g = ServedGrammar(Matcher(compile_served(compiler, "json", spec)))
    assert g.accept_tokens("r", _ids(smol_info, '["bb", "'))
    b = _ids(smol_info, "b")[0]
    assert _allowed(g.mask_words(), b)  # "b" alone is fine: "ba" is new
    assert g.validate_tokens([b, b]) == [b] and g.tokens_taken == 8  # state unchanged
    assert g.validate_tokens([b, _ids(smol_info, "a")[0]]) == [b, _ids(smol_info, "a")[0]]
