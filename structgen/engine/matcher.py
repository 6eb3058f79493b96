"""The Matcher: one per request, the contract every other part relies on.

Names follow XGrammar's GrammarMatcher (architecture.md §3).  State is three
integers (parser configuration, lexer, lexer state); history is a list of
them, so ``rollback(k)`` is O(k) whatever the length of the output.
"""
from __future__ import annotations

import itertools

import numpy as np

from .compiled import CompiledGrammar
from .char_bounds import char_bounds_mask
from .checks import CheckRun, can_end_checked
from .exact_masks import exact_mask
from .lazy_patterns import lazy_pattern_mask, pattern_shortfall
from .json_tracker import EMPTY_TRACKER


_views: dict[int, tuple] = {}
_steps = itertools.count()  # a fresh number per matcher state change: keys the exact-mask memo


def _cpu_view(tensor):
    """A numpy view sharing a CPU tensor's memory (one numpy copy per mask instead of torch
    slicing), remembered per tensor: callers fill the same bitmask every step.  Accelerator
    tensors are returned as they are."""
    hit = _views.get(id(tensor))
    if hit is not None and hit[0] is tensor and hit[1] == tensor.data_ptr() and hit[2] == tensor.shape:
        return hit[3]
    if tensor.device.type != "cpu" or tensor.requires_grad:
        return tensor
    view = tensor.numpy()
    if len(_views) > 64:
        _views.clear()
    _views[id(tensor)] = (tensor, tensor.data_ptr(), tensor.shape, view)
    return view


def write_mask_row(bitmask, index: int, mask: np.ndarray) -> None:
    """Write ``mask`` (uint32 words) into row ``index`` of an int32 bitmask (torch tensor or numpy
    array) of shape [batch, ceil(V/32)]; words beyond the mask are zeroed (never left open)."""
    words = mask.view(np.int32)
    if not isinstance(bitmask, np.ndarray):
        bitmask = _cpu_view(bitmask)
    row = bitmask[index]
    width = row.shape[0]
    n = min(width, len(words))
    if isinstance(row, np.ndarray):
        row[:n] = words[:n]
        if width > n:
            row[n:] = 0
    else:  # a tensor on an accelerator (the engine itself never imports torch)
        row[:n].copy_(row.new_tensor(words[:n]))
        if width > n:
            row[n:] = 0


def accepted_prefix(matcher, tokens: list[int]) -> list[int]:
    """The longest prefix of ``tokens`` that ``matcher`` accepts in order (any Matcher-contract
    object); its state is left as it was."""
    n = 0
    for t in tokens:
        if not matcher.accept_token(t):
            break
        n += 1
    matcher.rollback(n)
    return list(tokens[:n])


class Matcher:
    """Tracks one output against a compiled grammar, token by token."""

    def __init__(self, grammar: CompiledGrammar, *, max_rollback_tokens: int | None = None):
        self.grammar = grammar
        self.max_rollback_tokens = max_rollback_tokens
        self.reset()

    # -- state ------------------------------------------------------------------
    def reset(self) -> None:
        g = self.grammar
        cid = g.parser.initial
        self._state = (cid, g.lexer_for(cid), 0)
        # history as flat ints (configuration, lexer id, lexer state, terminated) per step: ints are
        # not tracked by the garbage collector, so a long output does not trigger collections
        self._history: list[int] = []
        self._terminated = False
        self._bytes: list[bytes] = []
        # checks at value boundaries (grammars that have them only): the value tracker and the
        # output so far, with the tracker before each history entry (see structgen.engine.checks)
        # (GrammarChecks is falsy without checks; lazily followed patterns read the tracker too, where
        # lenient=True left them without their checks)
        self._tracker = EMPTY_TRACKER if g.checks or g.lazy_patterns else None
        self._out = bytearray()
        self._tracker_history: list[tuple] = []
        self._exact: tuple | None = None  # (step, mask) of the last exact mask made
        self._step = next(_steps)

    def copy(self) -> "Matcher":
        m = Matcher.__new__(Matcher)
        m.grammar = self.grammar
        m.max_rollback_tokens = self.max_rollback_tokens
        m._state = self._state
        m._history = list(self._history)
        m._terminated = self._terminated
        m._bytes = list(self._bytes)
        m._tracker = self._tracker
        m._out = bytearray(self._out)
        m._tracker_history = list(self._tracker_history)
        m._exact, m._step = self._exact, self._step
        return m

    @property
    def vocab_size(self) -> int:
        return self.grammar.vocab_size

    def is_accepting(self) -> bool:
        """True when the output so far is complete (EOS may follow)."""
        if self._terminated:
            return True
        if self._tracker is not None:  # the pending value's checks decide too
            return can_end_checked(self.grammar, *self._state, self._tracker, self._out)
        return self.grammar.can_end(*self._state)

    def is_terminated(self) -> bool:
        """True once EOS was accepted, or when nothing but EOS can follow."""
        if self._terminated:
            return True
        cid, lx, ls = self._state
        return ls == 0 and not self.grammar.parser.allowed[cid] and self.is_accepting()

    def output_bytes(self) -> bytes:
        return b"".join(self._bytes)

    # -- masks ---------------------------------------------------------------------
    def next_token_mask(self) -> np.ndarray:
        """The allowed set as uint32 words (bit t of word t//32); read-only, cached.

        Exact: a token is allowed only when :meth:`accept_token` takes it, and every token it takes
        is allowed unless nothing could follow it.  Where the grammar has checks at value
        boundaries, the tokens whose value a check refuses are cleared, and those after which
        every token would be refused (:mod:`structgen.engine.exact_masks`)."""
        if self._terminated:
            return np.zeros(self.grammar.n_words, dtype=np.uint32)
        m = self.grammar.mask(*self._state)
        if self._tracker is None:
            return m
        memo = self._exact
        if memo is not None and memo[0] == self._step:
            return memo[1]
        base = m
        if self.grammar.lazy_patterns:  # first: the check trials below then skip the tokens it refuses
            m = lazy_pattern_mask(self.grammar, self._state, self._tracker, self._out, m)
        m = exact_mask(self.grammar, self._state, self._tracker, self._out, m, base)
        if self.grammar.char_bounds:
            m = char_bounds_mask(self.grammar, self._state, self._tracker, self._out, m)
        if self.grammar.can_end(*self._state) and not self.is_accepting():
            m = m.copy()  # the automaton could end here, but the pending value fails its check
            for e in self.grammar.eos_ids:
                m[e >> 5] &= ~np.uint32(1 << (e & 31))
        self._exact = (self._step, m)
        return m

    def fill_next_token_bitmask(self, bitmask, index: int = 0) -> None:
        """Write row ``index`` of an int32 bitmask (torch tensor or numpy array)
        of shape [batch, ceil(V/32)]; extra words beyond the vocabulary are zeroed."""
        write_mask_row(bitmask, index, self.next_token_mask())

    def is_token_allowed(self, token_id: int) -> bool:
        m = self.next_token_mask()
        return 0 <= token_id < self.grammar.vocab_size and bool((m[token_id >> 5] >> np.uint32(token_id & 31)) & 1)

    # -- advancing --------------------------------------------------------------------
    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (state unchanged) when it is not allowed."""
        if self._terminated:
            return False
        g = self.grammar
        if token_id in g.eos_ids:
            if not self.is_accepting():
                return False
            self._push(self._state, b"")
            self._terminated = True
            return True
        tb = g.tokenizer.token_bytes
        if not (0 <= token_id < len(tb)) or token_id in g.tokenizer.special_ids or not tb[token_id]:
            return False
        return self._advance(tb[token_id])

    def accept_bytes(self, data: bytes) -> bool:
        """Advance by raw bytes (jump-forward, tests); all-or-nothing; one history entry."""
        if self._terminated:
            return False
        return self._advance(data)

    def _advance(self, data: bytes) -> bool:
        run = None if self._tracker is None else CheckRun(self.grammar, self._tracker, self._out, data)
        nxt = self.grammar.advance(*self._state, data, run)
        if nxt is None:
            return False
        self._push(nxt, data, None if run is None else run.tracker)
        return True

    @property
    def may_dead_end(self) -> bool:
        """True when a check at a value boundary can leave no token allowed before the output is
        complete (the mask looks one token ahead, so only a dead end entered further back: an
        object whose only key fails a check that runs at its ``}``): the decoding loop may then
        take tokens back.  The mask stays exact either
        way: ``accept_token`` takes every token the mask allows."""
        return self._tracker is not None

    def describe_checks(self) -> str:
        """The grammar's checks at value boundaries in words ('' when it has none): what a search
        that ran long or found no completion was trying to satisfy."""
        return self.grammar.checks.describe() if self._tracker is not None else ""

    def accept_string(self, text: str) -> bool:
        return self.accept_bytes(text.encode("utf-8"))

    def _push(self, new_state, data: bytes, tracker: tuple | None = None) -> None:
        cid, lx, ls = self._state
        self._history += (cid, lx.id, ls, self._terminated)
        self._bytes.append(data)
        self._state = new_state
        self._step = next(_steps)
        if self._tracker is not None:
            self._tracker_history.append(self._tracker)
            if tracker is not None:
                self._tracker = tracker
            self._out += data
        if self.max_rollback_tokens is not None and len(self._history) > 4 * self.max_rollback_tokens:
            del self._history[:4]
            if self._tracker_history:
                del self._tracker_history[:1]

    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` accepted tokens (or byte chunks)."""
        if 4 * num_tokens > len(self._history):
            raise ValueError(f"cannot roll back {num_tokens} tokens; only {len(self._history) // 4} in history")
        h = self._history
        lexers = self.grammar.lexers.lexers
        self._step = next(_steps)
        for _ in range(num_tokens):
            terminated, ls, lx_id, cid = h.pop(), h.pop(), h.pop(), h.pop()
            self._state, self._terminated = (cid, lexers[lx_id], ls), bool(terminated)
            data = self._bytes.pop()
            if self._tracker is not None:
                self._tracker = self._tracker_history.pop()
                del self._out[len(self._out) - len(data):]

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        """The prefix of ``tokens`` that would be accepted in order (vLLM's contract: speculative
        drafts are pruned with it); the state is unchanged."""
        return accepted_prefix(self, tokens)

    def accept_tokens(self, tokens: list[int]) -> bool:
        """Accept every token in order, or none (False, state unchanged): vLLM's ``accept_tokens``."""
        for i, t in enumerate(tokens):
            if not self.accept_token(t):
                if i:
                    self.rollback(i)
                return False
        return True

    # -- look-ahead ----------------------------------------------------------------
    def allowed_next_bytes(self) -> list[int]:
        if self._terminated:
            return []
        g = self.grammar
        return [b for b in range(256) if g.advance(*self._state, bytes((b,))) is not None]

    def forced_continuation(self, limit: int = 256) -> bytes:
        """Bytes the grammar forces next (empty when there is a choice or EOS is possible)."""
        g = self.grammar
        state = self._state
        out = bytearray()
        if self._terminated:
            return b""
        while len(out) < limit:
            if g.can_end(*state):
                break
            nxt = None
            only = None
            for b in range(256):
                r = g.advance(*state, bytes((b,)))
                if r is not None:
                    if nxt is not None:
                        nxt = None
                        only = -1
                        break
                    nxt, only = r, b
            if nxt is None or only is None or only < 0:
                break
            out.append(only)
            state = nxt
        return bytes(out)

    def min_completion_bytes(self) -> float:
        """Fewest bytes that complete the output from here (0 when accepting)."""
        if self._terminated:
            return 0.0
        need = self.grammar.min_completion(*self._state)
        if self._tracker is not None and self.grammar.lazy_patterns:  # the relaxed automaton knows less
            need += pattern_shortfall(self.grammar, self._state, self._tracker, self._out)
        return need
