"""Random texts for the canonical-tokenization checks, and the exhaustive check of one text."""
from __future__ import annotations

import json
import random

WORDS = ["the", "red", "cat", "blue", "dog", "green", "fish", "hello", "world", "it's", "we'll", "don't", "they're",
         "I'm", "you've", "she'd", "can't", "Hello", "JSON", "value", "name", "age", "true", "false", "null",
         "über", "naïve", "café", "日本語", "中文", "Привет", "мир", "😀", "👍🏽", "e.g.", "x'tis", "'s", "'ll",
         "a", "b", "ll", "ve", "re", "s", "t", "m", "d", "résumé", "straße", "ﬁ", "½", "²", "Ⅻ", "١٢٣", "λ", "Ω"]
PUNCT = list(".,;:!?-_()[]{}<>\"'`~@#$%^&*+=/\\|") + ["...", "?!", "--", "''", "\"\"", "://", "=>", "->", "/*", "*/"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", " \n", "\n ", "\t\t", " \t", "\t ", "\r\n", "    ", "\n    ", "\u00a0",
          "\u3000", "\n\n\n", "  \n  ", " \t\n"]


def _number(rng: random.Random) -> str:
    k = rng.randrange(6)
    if k == 0:
        return str(rng.randrange(10))
    if k == 1:
        return str(rng.randrange(10 ** rng.randrange(1, 12)))
    if k == 2:
        return f"{rng.uniform(-1000, 1000):.{rng.randrange(1, 6)}f}"
    if k == 3:
        return f"{rng.randrange(1900, 2100)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
    if k == 4:
        return f"{rng.random():.3e}"
    return "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 20)))


def _json(rng: random.Random) -> str:
    def value(d: int):
        k = rng.randrange(6 if d < 2 else 4)
        if k == 0:
            return rng.choice(WORDS)
        if k == 1:
            return rng.randrange(-10 ** 6, 10 ** 6)
        if k == 2:
            return rng.choice([True, False, None, 1.5, -0.25])
        if k == 3:
            return " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 4)))
        if k == 4:
            return [value(d + 1) for _ in range(rng.randrange(0, 4))]
        return {rng.choice(WORDS): value(d + 1) for _ in range(rng.randrange(0, 4))}
    v = value(0)
    if rng.random() < 0.5:
        return json.dumps(v, ensure_ascii=rng.random() < 0.3)
    return json.dumps(v, indent=rng.choice([None, 2, 4]), separators=rng.choice([None, (",", ":")]), ensure_ascii=False)


#: whitespace characters outside ASCII: the one known gap of the filter is such a character split across
#: two tokens at the end of a whitespace run (see structgen/tokenizer/canonical.py)
EXOTIC_SPACES = frozenset(c for c in map(chr, range(0x80, 0x3001)) if c.isspace())


def has_exotic_space(text: str) -> bool:
    return any(c in EXOTIC_SPACES for c in text)


def random_text(rng: random.Random, max_parts: int = 12) -> str:
    """A random mixture of words, digits, punctuation, whitespace runs, JSON fragments and unicode."""
    parts = []
    for _ in range(rng.randrange(1, max_parts + 1)):
        k = rng.randrange(10)
        if k < 3:
            parts.append(rng.choice(WORDS))
        elif k == 3:
            parts.append(_number(rng))
        elif k == 4:
            parts.append(rng.choice(PUNCT))
        elif k == 5:
            parts.append(rng.choice(SPACES))
        elif k == 6:
            parts.append(_json(rng))
        elif k == 7:
            parts.append("".join(chr(rng.choice([rng.randrange(0x20, 0x7f), rng.randrange(0xa0, 0x2000),
                                                  rng.randrange(0x3000, 0x9fff), rng.randrange(0x1f300, 0x1f6ff)]))
                                 for _ in range(rng.randrange(1, 6))))
        else:
            parts.append(" " + rng.choice(WORDS))
        if rng.random() < 0.4:
            parts.append(rng.choice([" ", " ", "\n", "  "]))
    return "".join(parts)


class TokenIndex:
    """Every token whose bytes start at a position of a text."""

    def __init__(self, token_bytes) -> None:
        self.by_bytes = {}
        for i, b in enumerate(token_bytes):
            if b:
                self.by_bytes.setdefault(b, i)
        self.max_len = max(len(b) for b in token_bytes)

    def at(self, data: bytes, pos: int):
        for n in range(1, min(self.max_len, len(data) - pos) + 1):
            t = self.by_bytes.get(data[pos:pos + n])
            if t is not None:
                yield t, n


def accepted_tokenizations(filt, index: TokenIndex, data: bytes, cap: int = 3) -> list[list[int]]:
    """Up to ``cap`` tokenizations of ``data`` that the filter accepts at every step (and at the end)."""
    out: list[list[int]] = []
    dead: set = set()  # (pos, state) with no accepted completion

    def walk(pos: int, state: int, path: list[int]) -> bool:
        if len(out) >= cap:
            return True
        if pos == len(data):
            if filt.can_end(state):
                out.append(list(path))
                return True
            return False
        if (pos, state) in dead:
            return False
        allowed = filt.allowed(state)
        found = False
        for t, n in index.at(data, pos):
            if allowed[t]:
                path.append(t)
                found |= walk(pos + n, filt.advance(state, t), path)
                path.pop()
                if len(out) >= cap:
                    return True
        if not found:
            dead.add((pos, state))
        return found

    walk(0, filt.start, [])
    return out
