"""A real (tiny) implementation of the Matcher contract, for testing the decoding loop.

The language is one fixed byte string.  Any token whose bytes continue the
target is allowed -- not only the tokenizer's own tokenization -- so the loop
is exercised with several ways to spell the same bytes; EOS is allowed only
once the whole target has been produced.
"""
from __future__ import annotations

from collections import defaultdict

import torch

from structgen.runtime.masks import bool_to_bitmask
from structgen.tokenizer import TokenizerInfo


_INDEX: dict[str, tuple[dict[bytes, list[int]], int]] = {}


def _index(info: TokenizerInfo) -> tuple[dict[bytes, list[int]], int]:
    """bytes -> ids of the (non-special) tokens with exactly those bytes; built once per vocabulary."""
    key = info.fingerprint()
    if key not in _INDEX:
        by_bytes: dict[bytes, list[int]] = defaultdict(list)
        for i, b in enumerate(info.token_bytes):
            if b and i not in info.special_ids:
                by_bytes[b].append(i)
        _INDEX[key] = (dict(by_bytes), max(map(len, by_bytes)))
    return _INDEX[key]


class FixedStringMatcher:
    may_dead_end = False
    def __init__(self, info: TokenizerInfo, target: str | bytes, *, terminate_at_end: bool = False):
        self.info = info
        self.target = target.encode("utf-8") if isinstance(target, str) else target
        self.terminate_at_end = terminate_at_end
        self._by_bytes, self._max_len = _index(info)
        self.masks_filled: list[torch.Tensor] = []  # every row we produced, for assertions
        self.reset()

    # -- contract ---------------------------------------------------------------
    def reset(self) -> None:
        self.pos = 0
        self.ended = False
        self._history: list[tuple[int, bool]] = []

    def allowed_ids(self) -> list[int]:
        if self.is_terminated():
            return []
        rest = self.target[self.pos:]
        ids: list[int] = []
        for k in range(1, min(len(rest), self._max_len) + 1):
            ids.extend(self._by_bytes.get(rest[:k], ()))
        if not rest:
            ids.extend(self.info.eos_ids)
        return ids

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, index: int = 0) -> None:
        allowed = torch.zeros(bitmask.shape[-1] * 32, dtype=torch.bool)
        ids = self.allowed_ids()
        if ids:
            allowed[torch.tensor(ids)] = True
        row = bool_to_bitmask(allowed)
        bitmask[index] = row
        self.masks_filled.append(row.clone())

    def accept_token(self, token_id: int) -> bool:
        if self.is_terminated():
            return False
        if token_id in self.info.eos_ids:
            if self.pos != len(self.target):
                return False
            self._history.append((self.pos, self.ended))
            self.ended = True
            return True
        b = self.info.token_bytes[token_id]
        if not b or token_id in self.info.special_ids or not self.target.startswith(b, self.pos):
            return False
        self._history.append((self.pos, self.ended))
        self.pos += len(b)
        return True

    def is_accepting(self) -> bool:
        return self.pos == len(self.target)

    def is_terminated(self) -> bool:
        return self.ended or (self.terminate_at_end and self.pos == len(self.target))

    def rollback(self, k: int) -> None:
        for _ in range(k):
            self.pos, self.ended = self._history.pop()
