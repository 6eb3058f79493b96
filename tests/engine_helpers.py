"""Reference implementations the engine is checked against (brute force, random walks)."""
from __future__ import annotations

import random

import numpy as np


def brute_force_mask(matcher) -> set[int]:
    """Allowed tokens by stepping every token's bytes through the matcher."""
    g = matcher.grammar
    tok = g.tokenizer
    allowed = set()
    for t, b in enumerate(tok.token_bytes):
        if not b or t in tok.special_ids or t >= g.vocab_size:
            continue
        if g.advance(*matcher._state, b) is not None:
            allowed.add(t)
    if matcher.is_accepting():
        allowed.update(e for e in tok.eos_ids if e < g.vocab_size)
    return allowed


def mask_set(matcher) -> set[int]:
    words = matcher.next_token_mask()
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[: matcher.grammar.vocab_size]
    return set(np.nonzero(bits)[0].tolist())


def random_walk(matcher, rng: random.Random, max_steps: int = 40, prefer_end: float = 0.3) -> list[int]:
    """Follow random allowed tokens; returns the tokens (stops at EOS or max_steps)."""
    eos = set(matcher.grammar.eos_ids)
    out = []
    for _ in range(max_steps):
        allowed = sorted(mask_set(matcher))
        if not allowed:
            break
        ends = [t for t in allowed if t in eos]
        if ends and rng.random() < prefer_end:
            matcher.accept_token(ends[0])
            break
        t = rng.choice([t for t in allowed if t not in eos] or allowed)
        assert matcher.accept_token(t)
        out.append(t)
        if t in eos:
            break
    return out


def finish_shortest(matcher, max_steps: int = 200) -> bool:
    """Drive the matcher to acceptance by always taking a short token that most
    reduces the shortest completion; True when it ends accepting."""
    eos = set(matcher.grammar.eos_ids)
    tb = matcher.grammar.tokenizer.token_bytes
    for _ in range(max_steps):
        if matcher.is_accepting():
            return True
        best = None
        for t in sorted(mask_set(matcher) - eos):
            if len(tb[t]) > 2:
                continue
            matcher.accept_token(t)
            c = matcher.min_completion_bytes()
            matcher.rollback(1)
            if best is None or c < best[0]:
                best = (c, t)
        if best is None:
            return False
        matcher.accept_token(best[1])
    return matcher.is_accepting()


def tokenize_randomly(data: bytes, vocab: dict[bytes, int], rng: random.Random) -> list[int] | None:
    """A random segmentation of ``data`` into vocabulary tokens (not the canonical one)."""
    out = []
    i = 0
    while i < len(data):
        options = [j for j in range(i + 1, min(len(data), i + 12) + 1) if data[i:j] in vocab]
        if not options:
            return None
        j = rng.choice(options)
        out.append(vocab[data[i:j]])
        i = j
    return out


def masks_agree_along_walks(a_grammar, b_grammar, rng: random.Random, pick, *, walks: int, steps: int,
                            same_completion: bool = False) -> int:
    """Walk two grammars of one language with the same tokens (``pick(rng, allowed ids, walk)`` draws
    one) and require equal masks at every step (and, with ``same_completion``, equal shortest
    completions); returns the steps compared."""
    from structgen.engine.matcher import Matcher

    def ids(m):
        return np.flatnonzero(np.unpackbits(m.next_token_mask().view(np.uint8), bitorder="little")[:m.vocab_size])

    compared = 0
    for walk in range(walks):
        a, b = Matcher(a_grammar), Matcher(b_grammar)
        for _ in range(steps):
            ma, mb = ids(a), ids(b)
            assert np.array_equal(ma, mb), (a.output_bytes(), sorted(set(ma.tolist()) ^ set(mb.tolist()))[:10])
            compared += 1
            if not len(ma) or a.is_terminated():
                break
            t = pick(rng, ma, walk)
            assert a.accept_token(t) and b.accept_token(t)
            if same_completion:
                assert a.min_completion_bytes() == b.min_completion_bytes(), a.output_bytes()
    return compared
