"""SynCode's side of ``structgen bench grammar --engines ...,syncode``, run by SynCode's own Python.

SynCode pins an older transformers than structgen, so it lives in its own virtualenv
(``make syncode-venv``) and this file is run there as a script: it imports only the standard
library, torch, transformers and syncode. It reads one JSON request on stdin (the tokenizer file,
SynCode's grammar name and mode, the token ids of every text, tokenized by the parent so both
engines step through the same tokens) and writes one JSON result to the file the request names
(SynCode prints on stdout).

A step is what SynCode's logits processor does before it masks the scores: decode the prefix,
parse it incrementally (``IncrementalParser.get_acceptable_next_terminals``) and look the mask up
in its mask store (``MaskStore.get_accept_mask``). The parser deep-copies its state at every lexeme,
so a step's cost grows with the prefix; ``seconds_per_text`` stops a text after that long. The
store is built once per grammar, tokenizer and mode (a Python loop over lexer states and tokens)
and cached under ``$SYNCODE_CACHE``.
"""
from __future__ import annotations

import json
import os
import resource
import sys
import time

# run as a script, this folder comes first on sys.path, and its tokenizers.py would shadow the
# tokenizers package transformers imports
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]


def _constrainer(request: dict):
    from transformers import PreTrainedTokenizerFast

    from syncode.grammar_mask.grammar_constrainer import GrammarConstrainer
    from syncode.mask_store.byte_tokenizer import ByteTokenizer
    from syncode.parsers.grammars import Grammar

    import syncode.common as common

    tok = PreTrainedTokenizerFast(tokenizer_file=request["tokenizer_file"])
    if tok.eos_token is None:
        tok.eos_token = tok.convert_ids_to_tokens(0)
    grammar = Grammar(request["grammar"])
    # the path MaskStore.init_mask_store caches the store at
    store = (f"{common.SYNCODE_CACHE}mask_stores/{type(tok).__name__}/{request['mode']}_{grammar.hash()}_"
             f"{tok.vocab_size}.pkl")
    cached = os.path.exists(store)
    g = GrammarConstrainer(grammar, tok, ByteTokenizer(tok), use_cache=True, parse_output_only=False,
                           mode=request["mode"], indent=request["indent"])
    return g, cached


def _step(g, ids: list[int]):
    """SynCode's mask for the text ``ids`` decodes to (``GrammarConstrainer.mask_scores`` without
    the scores); None where its parser fails on the prefix (it then decodes unconstrained)."""
    partial, remainder = g._bytes_to_string(g.byte_tokenizer.decode(ids, skip_special_tokens=True))
    res, skip = g._parse_partial_output(0, partial, remainder, accepted_generation=False)
    return None if skip else g.dfa_mask_store.get_accept_mask(res)


def run(request: dict) -> dict:
    t0 = time.perf_counter()
    g, cached = _constrainer(request)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    g.reset()
    _step(g, [])
    first_mask_ms = (time.perf_counter() - t0) * 1e3
    docs = []
    budget = request.get("seconds_per_text")
    for ids in request["texts"]:
        g.reset()
        times, outcome = [], "accepted"
        t_text = time.perf_counter()
        for i, t in enumerate(ids):
            if budget is not None and time.perf_counter() - t_text > budget:
                outcome = f"stopped at token {i}: {budget:g} s a text"
                break
            t1 = time.perf_counter()
            mask = _step(g, ids[:i])
            times.append((time.perf_counter() - t1) * 1e6)
            if mask is None:
                outcome = f"parse failed at token {i}"
                break
            if t >= len(mask) or not bool(mask[t]):
                outcome = f"token {i} masked"
                break
        docs.append({"tbm_us": times, "outcome": outcome})
    return {"build_s": build_s, "store_cached": cached, "first_mask_ms": first_mask_ms, "docs": docs,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> int:
    request = json.load(sys.stdin)
    os.environ["SYNCODE_CACHE"] = request["cache"]  # read when syncode.common is first imported
    result = run(request)
    with open(request["output"], "w") as f:  # not stdout: SynCode prints there
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
