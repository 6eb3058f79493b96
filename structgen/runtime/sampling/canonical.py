"""The canonical-tokenization filter as the sequence samplers see it: a Matcher that also refuses
non-canonical tokenizations (``structgen.tokenizer.canonical``).

Wrapping the constraint's Matcher (:class:`CanonicalMatcher`) makes the filter a factor of every
proposal and of the target alike: masking, ASAp, AWRS, SMC and the exact enumeration all query it
through ``allowed_ids`` / ``is_viable`` unchanged, and the target becomes the model's distribution
over *canonical* tokenizations restricted to the constraint (the distribution over texts users
mean).  ``canonical=False`` everywhere gives the old target (every tokenization).

A canonical prefix can be a dead end: ``te`` is canonical, but ``teal`` is one token, so no canonical
tokenization of ``teal lemur`` continues ``te``.  Where the constraint is regular the wrapper also
reads its token automaton and drops such tokens from the mask (a search of the product of the
automaton and the filter, remembered per product state), so a prefix the mask lets through can
always be finished, as the Matcher contract asks; elsewhere the samplers redraw a dead end."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import InvalidArgument, UnsupportedFeature

__all__ = ["CanonicalMatcher", "canonical_filter_for", "resolve_canonical", "with_canonical"]

_FILTERS: dict[str, Any] = {}  # tokenizer fingerprint -> CanonicalFilter


def canonical_filter_for(model: Any):
    """The canonical filter of a structgen ``Model``'s tokenizer (built once per tokenizer, its tables
    cached on disk).  ``UnsupportedFeature`` for tokenizers it does not cover (SentencePiece)."""
    from ...tokenizer.canonical import CanonicalFilter

    key = model.info.fingerprint()
    filt = _FILTERS.get(key)
    if filt is None:
        hf = getattr(model, "hf_tokenizer", None)
        backend = getattr(hf, "backend_tokenizer", None)
        try:
            if backend is None:
                raise UnsupportedFeature("canonical tokenizations need a tokenizer with a `tokenizers` backend "
                                         "(tokenizer.json); pass canonical=False")

            def encode(texts):
                return [e.ids for e in backend.encode_batch(list(texts), add_special_tokens=False)]

            filt = CanonicalFilter.from_tokenizer_json(backend.to_str(), model.info.token_bytes, model.info.eos_ids,
                                                       hf_encode=encode)
        except UnsupportedFeature as e:
            filt = e  # remembered: a tokenizer that is not covered is not read again
        _FILTERS[key] = filt
    if isinstance(filt, UnsupportedFeature):
        raise filt
    return filt


def resolve_canonical(canonical: Any, lm: Any = None, model: Any = None):
    """The filter ``canonical=`` asks for: ``False``/``None`` -> None (every tokenization); ``True`` ->
    the filter of the model behind ``lm`` (``ModelLM.model``) or ``model`` (``UnsupportedFeature`` for
    a tokenizer it does not cover), None for an LM without a tokenizer (the toy LMs); ``"auto"`` (the
    default) -> the same, but every tokenization, with a ``CanonicalTokenizationsUnavailable``
    warning, where the tokenizer is not covered; a ``CanonicalFilter`` as it is."""
    if canonical is None or canonical is False:
        return None
    if canonical is True or canonical == "auto":
        model = model if model is not None else getattr(lm, "model", None)
        if model is None or getattr(model, "info", None) is None:
            return getattr(lm, "canonical_filter", None)
        try:
            return canonical_filter_for(model)
        except UnsupportedFeature as e:
            if canonical is True:
                raise
            _warn_unavailable(model, e)
            return None
    if hasattr(canonical, "allowed") and hasattr(canonical, "advance"):
        return canonical
    raise InvalidArgument(f"canonical= must be 'auto', True, False or a CanonicalFilter, got {canonical!r}")


_WARNED: set[str] = set()


def _warn_unavailable(model: Any, err: Exception) -> None:
    """Once per tokenizer and process: the samplers fall back to every tokenization."""
    import warnings

    from ...errors import CanonicalTokenizationsUnavailable

    key = model.info.fingerprint()
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(f"{err}; sampling over every tokenization of each text instead (canonical=False to silence, "
                  "canonical=True to make this an error)", CanonicalTokenizationsUnavailable, stacklevel=4)


#: product states (token automaton x filter) a liveness search visits before it gives up and allows
LIVE_SEARCH_NODES = 4096
#: a state allowing more tokens than this is not searched for dead ends
LIVE_CHECK_TOKENS = 512
#: token automata built for liveness only up to this many states (a larger constraint: no look-ahead)
LIVE_DFA_STATES = 4096


def _live_dfa(grammar):
    """The constraint's token automaton for the liveness search, or None (not regular, value checks,
    or larger than ``LIVE_DFA_STATES``): then a canonical prefix may still meet a dead end, and the
    samplers redraw."""
    from .token_dfa import cached_token_dfa

    try:
        return cached_token_dfa(grammar, max_states=LIVE_DFA_STATES)
    except (UnsupportedFeature, TypeError):  # TypeError: an object the cache cannot hold a weak reference to
        return None


def with_canonical(matcher: Any, filt: Any, *, lookahead: bool = True):
    """``matcher`` (at its start) wrapped by the filter (as it is when ``filt`` is None).
    ``lookahead``: where the constraint is regular, the mask also drops tokens after which no
    canonical tokenization can finish inside it (see :class:`CanonicalMatcher`)."""
    if filt is None:
        return matcher
    return CanonicalMatcher(matcher, filt, dfa=_live_dfa(matcher.grammar) if lookahead else None)


class CanonicalMatcher:
    """A Matcher (the methods the sequence samplers use) that refuses, besides what the constraint
    refuses, the tokens the canonical filter refuses, and EOS where the filter says the output may
    not end.  The filter's state follows ``accept_token`` / ``rollback``."""

    def __init__(self, matcher: Any, filt: Any, states: list[int] | None = None, *, dfa: Any = None,
                 dfa_states: list[int] | None = None, live: dict | None = None, dead: dict | None = None) -> None:
        self.matcher, self.filter = matcher, filt
        self.dfa = dfa
        self._dfa_states = list(dfa_states) if dfa_states is not None else ([dfa.start] if dfa is not None else [])
        self._live = live if live is not None else {}  # (dfa state, filter state) -> can finish canonically
        self._dead = dead if dead is not None else {}  # (dfa state, filter state) -> dead tokens, shared by copies
        self.grammar = matcher.grammar
        if filt.vocab_size != self.grammar.vocab_size:
            raise InvalidArgument(f"the canonical filter covers {filt.vocab_size} tokens, the grammar "
                                  f"{self.grammar.vocab_size}: build it from the model's tokenizer")
        self._eos = frozenset(self.grammar.eos_ids)
        self._states = list(states) if states is not None else [filt.start]

    @property
    def vocab_size(self) -> int:
        return self.grammar.vocab_size

    @property
    def state(self) -> int:
        return self._states[-1]

    def reset(self) -> None:
        self.matcher.reset()
        self._states = [self.filter.start]
        self._dfa_states = [self.dfa.start] if self.dfa is not None else []

    def copy(self) -> "CanonicalMatcher":
        return CanonicalMatcher(self.matcher.copy(), self.filter, self._states, dfa=self.dfa,
                                dfa_states=self._dfa_states, live=self._live, dead=self._dead)

    # -- liveness: a canonical completion inside the constraint exists --------------------------
    def _is_live(self, d: int, c: int) -> bool:
        """A breadth-first search of the product (token automaton x filter) from ``(d, c)`` for the
        end; past ``LIVE_SEARCH_NODES`` states it answers True (allow: the samplers redraw a dead end)."""
        dfa, filt = self.dfa, self.filter
        hit = self._live.get((d, c))
        if hit is not None:
            return hit
        parent: dict[tuple[int, int], tuple[int, int] | None] = {(d, c): None}
        frontier = [(d, c)]
        found = None
        while frontier and found is None and len(parent) < LIVE_SEARCH_NODES:
            nxt = []
            for node in frontier:
                sd, sc = node
                if self._live.get(node) is True or dfa.absorbing[sd]:
                    found = node
                    break
                if self._live.get(node) is False:
                    continue
                toks = dfa.tokens[sd]
                if not len(toks):
                    continue
                allowed = filt.allowed(sc)
                for t, nd in zip(toks.tolist(), dfa.dests[sd].tolist()):
                    if t in self._eos:
                        if filt.can_end(sc):
                            found = node
                            break
                        continue
                    if t >= len(allowed) or not allowed[t]:
                        continue
                    child = (nd, filt.advance(sc, t))
                    if child not in parent:
                        parent[child] = node
                        nxt.append(child)
                if found is not None:
                    break
            frontier = nxt
        if found is not None:
            node = found
            while node is not None:  # every state on the path reaches the end
                self._live[node] = True
                node = parent[node]
            return True
        if frontier:  # the search was cut short: allow
            return True
        for node in parent:  # the whole reachable product was searched: none of it reaches the end
            self._live[node] = False
        return False

    def _dead_tokens(self, words: np.ndarray | None = None) -> frozenset:
        """The tokens both the constraint and the filter allow here after which no canonical
        completion exists (remembered per product state).  A state allowing more than
        ``LIVE_CHECK_TOKENS`` tokens is not searched (free text: a dead end there is rare)."""
        if self.dfa is None:
            return frozenset()
        key = (self._dfa_states[-1], self.state)
        hit = self._dead.get(key)
        if hit is not None:
            return hit
        if words is None:
            words = np.asarray(self.matcher.next_token_mask(), dtype=np.uint32)
            words = words & self.filter.allowed_words(self.state, len(words))
        bits = np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")
        ids = np.flatnonzero(bits)
        dead = []
        if len(ids) <= LIVE_CHECK_TOKENS:
            d0, c0 = key
            for t in ids.tolist():
                if t in self._eos:
                    continue
                d = self.dfa.step(d0, t)
                if d is not None and not self._is_live(d, self.filter.advance(c0, t)):
                    dead.append(t)
        hit = self._dead[key] = frozenset(dead)
        return hit

    def is_accepting(self) -> bool:
        return self.filter.can_end(self.state) and self.matcher.is_accepting()

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def min_completion_bytes(self):
        return self.matcher.min_completion_bytes()

    def next_token_mask(self) -> np.ndarray:
        words = np.asarray(self.matcher.next_token_mask(), dtype=np.uint32)
        out = words & self.filter.allowed_words(self.state, len(words))
        dead = self._dead_tokens(out)
        if dead:
            out = out.copy()
            for t in dead:
                w, b = divmod(t, 32)
                out[w] &= np.uint32(~(1 << b) & 0xFFFFFFFF)
        if self.filter.can_end(self.state):  # EOS bits as the constraint set them
            for e in self._eos:
                w, b = divmod(e, 32)
                if w < len(words):
                    out[w] |= words[w] & np.uint32(1 << b)
        return out

    def accept_token(self, token: int) -> bool:
        s = self.state
        if token in self._eos:
            if not self.filter.can_end(s):
                return False
            ok = self.matcher.accept_token(token)
            if ok:
                self._states.append(s)
                if self.dfa is not None:
                    self._dfa_states.append(self.dfa.step(self._dfa_states[-1], token))
            return ok
        if not self.filter.allowed(s)[token] or token in self._dead_tokens():
            return False
        ok = self.matcher.accept_token(token)
        if ok:
            self._states.append(self.filter.advance(s, token))
            if self.dfa is not None:
                self._dfa_states.append(self.dfa.step(self._dfa_states[-1], token))
        return ok

    def rollback(self, num_tokens: int = 1) -> None:
        self.matcher.rollback(num_tokens)
        if num_tokens:
            del self._states[-num_tokens:]
            if self.dfa is not None:
                del self._dfa_states[-num_tokens:]
