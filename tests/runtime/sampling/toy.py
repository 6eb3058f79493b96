"""The exact harness's toy problem (docs/algorithms.md section 0): a 5-token vocabulary with
multi-character tokens, a hashed toy LM biased towards "0", and 17 binary strings of length 5."""
from __future__ import annotations

from structgen.compiler import GrammarCompiler
from structgen.runtime.sampling.lm import HashLM
from structgen.tokenizer import TokenizerInfo

LANGUAGE = ("10111 10001 10010 11001 10011 11110 10101 11111 11101 00000 11100 11010 10110 10000 11011 "
            "10100 11000").split()
MAX_TOKENS = 8
_GRAMMAR = {}


def toy_info() -> TokenizerInfo:
    return TokenizerInfo(token_bytes=[b"0", b"1", b"00", b"11", b""], vocab_size=5, special_ids=frozenset({4}),
                         eos_ids=(4,), name="toy-binary")


def toy_grammar():
    if "g" not in _GRAMMAR:
        _GRAMMAR["g"] = GrammarCompiler(toy_info()).compile_regex("|".join(LANGUAGE))
    return _GRAMMAR["g"]


def toy_lm(seed: int = 0) -> HashLM:
    return HashLM(5, (4,), seed=seed, scale=1.0, bias={0: 1.0})
