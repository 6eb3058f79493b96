"""Exact masks for grammars with checks at value boundaries (``structgen.engine.checks``).

A grammar's cached mask depends on the automaton state only; a check depends on the output too,
so the cached mask can allow a token whose value then fails its check.  A serving engine ends a
request with an error when a token drawn from the mask is refused (vLLM does), and a sampler's
distribution must be the one it masked with, so the mask handed out is made exact here: every
allowed token that *could* run a check is tried on the real output, and the ones a check refuses
are cleared.

A check runs only where a lexeme ends whose scan completes a checked value or an array item of a
distinct-items array, at a lexeme boundary or where the lexeme cannot grow (an accepting state with
no way out, e.g. a string's closing quote).  Whether it can is a function of the parser
configuration and the lexeme's terminals (:func:`~structgen.engine.checks.check_may_run`), so the
candidates are found by following the mask's own walk across the boundaries its tokens cross:

* tokens crossing a boundary where a check can run (and everything deeper in those tokens);
* tokens ending in a lexeme that can close there with a check, whose last byte can close a trigger
  lexeme -- inside the current lexeme or after a boundary.

A check on one value (a URL's format, one object's required keys) thus makes no candidates where
the output is elsewhere, though its terminal (a string, ``}``) is shared with values that have none.
The candidates are cached per automaton state, so a step with checks costs a dictionary hit plus
one trial per candidate.

**No dead ends.** A token ``accept_token`` takes can still lead into a state where every token is
refused before the output is complete: a string item of a ``uniqueItems`` array one character short
of its ``maxLength`` (``"ab`` then ``c`` when ``"abc"`` is an earlier item: only the closing quote
may follow, and the check refuses it), or a new item whose one-character value repeats an earlier
one.  A serving engine cannot take tokens back, so such tokens are cleared too: a token whose state
is *cornered* -- every token its automaton allows may run a check (outside a string, whitespace
aside: blanks between values change no value, so after them the same tokens decide), and there are
at most ``LOOKAHEAD_TOKENS`` of them -- is kept only when one of those passes its trial or the output
may end there (:func:`dead_after`).  The tokens looked at are the candidates a trial steps anyway, and the
few inside tokens that would spell an earlier item of the array being written
(:func:`_item_completions`); every token cleared this way leads into a state with no token
allowed, so no output that has a valid completion loses it.
"""
from __future__ import annotations

import json
import weakref

import numpy as np

from ..byte_lru import ByteLRU
from .checks import MAY_RUN_ENTRIES, CheckRun, can_end_checked, check_may_run
from .trie import or_words
from .walks import EV_NODES, MASK, VALS, WORDS

__all__ = ["exact_mask", "dead_after", "LOOKAHEAD_TOKENS"]

#: a state is looked ahead into (its allowed tokens tried) only when its automaton allows at most
#: this many tokens, all of which may run a check: a value that can only close
LOOKAHEAD_TOKENS = 64

_by_byte: dict[tuple[int, str], np.ndarray] = {}  # (trie uid, kind) -> [256, n_words] token sets
_closing: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # lexer core -> closing bytes
_triggers: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # grammar checks -> trigger words
#: candidate token ids per automaton state (keyed as the grammar's masks are): a function of the
#: state alone, so a step with checks costs a dictionary hit plus the trials
CANDIDATES = ByteLRU(8 << 20, name="exact.candidates")
CANDIDATE_ARRAYS = ByteLRU(4 << 20, name="exact.candidate_arrays")  # the same as arrays, where a mask filters them
#: per automaton state: (the candidates when every non-EOS token its automaton allows is one, the
#: candidates when every other one is whitespace only), each () when not so or over LOOKAHEAD_TOKENS
CORNERED = ByteLRU(4 << 20, name="exact.cornered")
_grows: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # lexer core -> bool per state
_closing_sets: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # lexer core -> accept sets that close
_token_ids: dict[int, dict] = {}  # trie uid -> {token bytes: id}


def _last_byte_sets(trie) -> np.ndarray:
    """[256, n_words] uint32: row b holds the tokens whose last byte is b (1 MB per 32k tokens)."""
    key = (trie.uid, "last")
    hit = _by_byte.get(key)
    if hit is None:
        if len(_by_byte) >= 8:
            _by_byte.clear()
        n = ((trie.vocab_size + 31) // 32) * 32
        tb = trie.token_bytes
        ids = np.array([i for i, b in enumerate(tb) if b], dtype=np.int64)
        rows = np.frombuffer(b"".join(tb[i][-1:] for i in ids.tolist()), dtype=np.uint8)
        bits = np.zeros((256, n), dtype=bool)
        bits[rows, ids] = True
        hit = np.packbits(bits, axis=1, bitorder="little").view(np.uint32)
        _by_byte[key] = hit
    return hit


def warm_up(trie) -> None:
    """Make the vocabulary's per-byte token sets now (~0.1 s over 129k tokens), not in a first mask."""
    _last_byte_sets(trie)


def _bytes_into(trans: np.ndarray, classmap: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Bool [256]: the bytes on which some state of a DFA table steps into one of ``targets``."""
    into = ((trans >= 0) & targets[np.where(trans >= 0, trans, 0)]).any(axis=0)  # per byte class
    return into[classmap.astype(np.intp)]


def _closing_states(core) -> np.ndarray:
    """Bool per state of ``core``: accepting with no way out (the lexeme is complete there)."""
    return np.frombuffer(core._dead_end_flags(), dtype=np.bool_) & (core.acc_id >= 0)


def _closing_bytes(core) -> np.ndarray:
    """The bytes that lead some state of ``core`` into an accepting state with no way out."""
    hit = _closing.get(core)
    if hit is None:
        hit = _closing[core] = np.flatnonzero(_bytes_into(core.trans, core.classmap,
                                                          _closing_states(core))).astype(np.uint8)
    return hit


def _trigger_bytes(g) -> np.ndarray:
    """The bytes that can end a lexeme of one of the grammar's trigger terminals."""
    ends = np.zeros(256, dtype=bool)
    for t in g.checks.trigger_terms:
        d = g.term_dfas[t]
        ends |= _bytes_into(d.trans, d.classmap, d.accept)
    return np.flatnonzero(ends).astype(np.uint8)


def _union(sets: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return np.bitwise_or.reduce(sets[rows], axis=0) if len(rows) else np.zeros(sets.shape[1], dtype=np.uint32)


def _static_sets(g) -> dict:
    """Per grammar: the trigger bytes, and per lexer core the tokens ending in a trigger byte that
    closes a lexeme (made on first need)."""
    hit = _triggers.get(g.checks)
    if hit is None:
        trig = _trigger_bytes(g)
        hit = _triggers[g.checks] = {"bytes": trig, "closing": {}}
    return hit


def _closing_words(g, core) -> np.ndarray:
    """The tokens whose last byte can close a lexeme of ``core`` and end a trigger lexeme."""
    static = _static_sets(g)
    hit = static["closing"].get(core.uid)
    if hit is None:
        hit = static["closing"][core.uid] = _union(
            _last_byte_sets(g.trie), np.intersect1d(_closing_bytes(core), static["bytes"]))
    return hit


def _closing_may_check(g, cid: int, lx) -> bool:
    """Whether a lexeme of ``lx`` that closes (an accepting state with no way out) in configuration
    ``cid`` can run a check there (``CompiledGrammar.step``'s ``lexeme_complete``)."""
    memo = g.checks.may_close
    key = (cid << 20) | lx.id  # lexer ids < 2**20 (as the mask keys)
    hit = memo.get(key)
    if hit is None:
        core = lx.core
        sets = _closing_sets.get(core)
        if sets is None:
            sets = _closing_sets[core] = tuple(np.unique(core.acc_id[_closing_states(core)]).tolist())
        hit = any(check_may_run(g, cid, lx.acc_set(a)) for a in sets)
        if len(memo) >= MAY_RUN_ENTRIES:
            memo.clear()
        memo[key] = hit
    return hit


def _candidates(g, cid: int, lx, ls: int, mask: np.ndarray) -> np.ndarray:
    """The allowed tokens whose advance may run a check (token ids, ascending; int64): those that
    cross a lexeme boundary where a check can run (:func:`check_may_run`), and those whose last
    byte can close a lexeme whose end can run one -- found by following the mask's own walk
    across the boundaries, so a check on one value makes no candidates elsewhere in the output."""
    walk = g._walker.inside(lx, ls)
    cand = np.zeros(len(mask), dtype=np.uint32)
    if _closing_may_check(g, cid, lx):
        cand |= walk[MASK] & _closing_words(g, lx.core)
    lexer_for = g.lexer_for

    def visit(cid, terms, c2, lx2, gid, nodes, w2, carry):
        runs = carry or check_may_run(g, cid, terms)  # then every token through here runs one
        if len(w2[WORDS]):
            if runs:
                or_words(cand, w2[WORDS], w2[VALS])
            elif _closing_may_check(g, c2, lexer_for(c2)):
                ends = np.zeros(len(mask), dtype=np.uint32)
                or_words(ends, w2[WORDS], w2[VALS])
                np.bitwise_or(cand, ends & _closing_words(g, lx2.core), out=cand)
        return runs

    if len(walk[EV_NODES]):
        with g._lock:  # the walks the mask made, as the mask follows them
            g.follow_boundaries(cid, lx, walk, visit)
    cand &= mask
    for e in g.eos_ids:  # EOS is decided by is_accepting, which runs the checks already
        cand[e >> 5] &= ~np.uint32(1 << (e & 31))
    words = np.flatnonzero(cand)
    if not len(words):
        return words
    bits = np.unpackbits(cand[words].view(np.uint8).reshape(-1, 4), axis=1, bitorder="little")
    w, b = np.nonzero(bits)
    return words[w] * 32 + b


def _by_bytes(g, cands) -> tuple[int, ...]:
    """The candidate ids sorted by their bytes, so tokens sharing a prefix are neighbours."""
    tb = g.trie.token_bytes
    return tuple(sorted(cands, key=tb.__getitem__))


def _state_key(g, cid: int, lx, ls: int) -> int:
    return g._uid | (cid << 48) | (lx.id << 28) | ls  # as CompiledGrammar.mask keys its masks


def _candidate_ids(g, cid: int, lx, ls: int, mask: np.ndarray) -> tuple[int, ...]:
    key = _state_key(g, cid, lx, ls)
    cands = CANDIDATES.get(key)
    if cands is None:
        cands = _by_bytes(g, _candidates(g, cid, lx, ls, mask).tolist())  # ints in a tuple: untracked by the GC
        CANDIDATES.put(key, cands)
    return cands


def _inside_grows(core) -> np.ndarray:
    """Bool per lexer state: a printable ASCII byte other than a quote or backslash continues the
    lexeme into a state that is not a closing one (a one-byte token there runs no check)."""
    hit = _grows.get(core)
    if hit is None:
        trans, cm = core.trans, core.classmap.astype(np.intp)
        closing = _closing_states(core)
        plain = np.array([b for b in range(0x20, 0x7F) if b not in (0x22, 0x5C)], dtype=np.intp)
        nxt = trans[:, cm[plain]]
        hit = _grows[core] = ((nxt >= 0) & ~closing[np.where(nxt >= 0, nxt, 0)]).any(axis=1)
    return hit


def _blank_tokens(trie) -> np.ndarray:
    """uint32 words: the tokens made of JSON whitespace only (cached per vocabulary)."""
    key = (trie.uid, "blank")
    hit = _by_byte.get(key)
    if hit is None:
        n = ((trie.vocab_size + 31) // 32) * 32
        bits = np.zeros(n, dtype=bool)
        for i, b in enumerate(trie.token_bytes):
            if b and not b.strip(b" \t\n\r"):
                bits[i] = True
        hit = _by_byte[key] = np.packbits(bits, bitorder="little").view(np.uint32)
    return hit


def _without(words: np.ndarray, ids) -> np.ndarray:
    """A copy of ``words`` with the bits of ``ids`` cleared."""
    out = words.copy()
    for t in ids:
        out[t >> 5] &= ~np.uint32(1 << (t & 31))
    return out


def _popcount(words: np.ndarray) -> int:
    return int(np.unpackbits(words.view(np.uint8)).sum())


def _cornered(g, cid: int, lx, ls: int, blanks_free: bool) -> tuple[int, ...]:
    """The candidates of a cornered state (see the module's docstring), or () when it is not.
    ``blanks_free``: tokens of whitespace only do not count (outside a string they change no value,
    so after them the same candidates decide)."""
    key = _state_key(g, cid, lx, ls)
    hit = CORNERED.get(key)
    if hit is None:
        hit = ((), ())
        mask = g.mask(cid, lx, ls)
        cands = _candidate_ids(g, cid, lx, ls, mask)
        if len(cands) <= LOOKAHEAD_TOKENS:
            rest = _without(mask, (*cands, *g.eos_ids))
            if not rest.any():
                hit = (cands or (-1,), cands or (-1,))  # (-1,): nothing but EOS is allowed
            elif not (rest & ~_blank_tokens(g.trie)).any():
                hit = ((), cands or (-1,))
        CORNERED.put(key, hit)
    return hit[1] if blanks_free else hit[0]


def dead_after(g, state: tuple, tracker: tuple, out) -> bool:
    """True when no token is allowed after ``out`` in ``state`` (with ``tracker``) and the output may
    not end there -- outside a string, not after any whitespace either: a dead end.  Decided only
    for cornered states (False elsewhere: some token there runs no check, or too many could to try
    them all)."""
    cid, lx, ls = state
    if ls and not lx.widened and _inside_grows(lx.core)[ls]:
        return False
    cands = _cornered(g, cid, lx, ls, not tracker[0])
    if not cands:
        return False
    if can_end_checked(g, cid, lx, ls, tracker, out):
        return False
    if cands == (-1,):
        return True
    return len(refused_tokens(g, state, tracker, out, cands, lookahead=False)) == len(cands)


def refused_tokens(g, state: tuple, tracker: tuple, out, tokens: tuple[int, ...], lookahead: bool = True) -> list[int]:
    """The ``tokens`` (sorted by bytes) that ``g.advance`` with checks refuses from ``state``
    after ``out`` -- with ``lookahead``, also those after which nothing is allowed (:func:`dead_after`).
    The tokens are walked as a trie: a prefix shared by several tokens is stepped
    (and its checks run: a closing quote's value check, an array item's identity) once, not once
    per token -- most candidates share their first byte, the one that ends the checked value."""
    token_bytes = g.trie.token_bytes
    step, finish = g.step, g.finish
    base = len(out)
    buf = bytearray(out)  # the output, then the bytes of the path being tried
    run = CheckRun.over(g, tracker, buf, base)
    cid, lx, ls = state
    path: list = [(cid, lx, ls, tracker)]  # path[d]: the state after d bytes of the current prefix, or None
    prev = b""
    refused = []
    for t in tokens:
        data = token_bytes[t]
        k = 0
        limit = min(len(data), len(prev), len(path) - 1)
        while k < limit and data[k] == prev[k]:
            k += 1
        del path[k + 1:]
        del buf[base + k:]
        buf += data[k:]
        st = path[k]
        while st is not None and k < len(data):
            c, lx, ls, tr = st
            run.tracker, run.end = tr, base + k
            nxt = step(c, lx, ls, data[k], run)
            st = None if nxt is None else (nxt[0], nxt[1], nxt[2], run.tracker)
            path.append(st)
            k += 1
        fin = None if st is None else finish(st[0], st[1], st[2])
        if fin is None or lookahead and dead_after(g, fin, st[3], buf):
            refused.append(t)
        prev = data
    return refused


def _item_completions(g, tracker: tuple, out, mask: np.ndarray, cands: tuple) -> tuple[int, ...]:
    """Allowed inside tokens that would spell more of an earlier item of the array whose string
    item is being written (its text so far a prefix of that item's, both as JSON writes them without
    escapes): the inside tokens that can corner a ``uniqueItems`` string item (sorted by bytes;
    candidates left out).  Once the item holds an escape (on its way to an earlier item spelled
    another way), every allowed token is looked at (at most 512 of them, else none)."""
    in_str, _, frames, _, _ = tracker
    top = frames[-1] if frames else None
    if not in_str or top is None or top[0] != "a" or top[1] < 0 or not top[2]:
        return ()
    typed = bytes(out[top[1]:])
    ids = _token_ids.get(g.trie.uid)
    if ids is None:
        if len(_token_ids) >= 4:
            _token_ids.clear()
        ids = _token_ids[g.trie.uid] = {b: i for i, b in reversed(list(enumerate(g.trie.token_bytes))) if b}
    skip = set(cands)
    if b"\\" in typed:  # an escape in the item: its spelling need not be JSON's plain one; look at every
        # allowed token (few follow a backslash or sit inside a \uXXXX escape; more than 512: give up)
        words = _without(mask, (*skip, *g.eos_ids))
        if _popcount(words) > 512:
            return ()
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")
        return _by_bytes(g, np.flatnonzero(bits).tolist())
    found = set()
    for ident in top[2]:
        if not (isinstance(ident, tuple) and len(ident) == 2 and ident[0] == "s"):
            continue
        text = json.dumps(ident[1], ensure_ascii=False).encode("utf-8")
        if len(text) <= len(typed) + 1 or not text.startswith(typed):
            continue
        rest = text[len(typed):-1]  # the closing quote's tokens are candidates already
        for k in range(1, len(rest) + 1):
            t = ids.get(rest[:k])
            if t is not None and t not in skip and mask[t >> 5] >> (t & 31) & 1:
                found.add(t)
    return _by_bytes(g, found) if found else ()


def _allowed_candidates(g, cid: int, lx, ls: int, cands: tuple, mask: np.ndarray) -> tuple:
    """The candidates ``mask`` still allows (in their order)."""
    key = _state_key(g, cid, lx, ls)
    arr = CANDIDATE_ARRAYS.get(key)
    if arr is None:
        arr = np.array(cands, dtype=np.int64)
        CANDIDATE_ARRAYS.put(key, arr)
    keep = ((mask[arr >> 5] >> (arr & 31).astype(np.uint32)) & 1).astype(bool)
    return cands if keep.all() else tuple(arr[keep].tolist())


def exact_mask(g, state: tuple, tracker: tuple, out: bytearray, mask: np.ndarray,
               base: np.ndarray | None = None) -> np.ndarray:
    """``mask`` without the tokens a check refuses from ``state`` after ``out``; the same array when
    nothing is refused.  ``base``: the automaton's mask at ``state`` (read-only), when ``mask`` is
    it with tokens refused already (lazily followed patterns): only the candidates ``mask`` still
    allows are tried."""
    cid, lx, ls = state
    cands = _candidate_ids(g, cid, lx, ls, mask if base is None else base)
    if base is not None and mask is not base and cands:
        cands = _allowed_candidates(g, cid, lx, ls, cands, mask)
    spelled = _item_completions(g, tracker, out, mask, cands) if g.checks.item_frames else ()
    if not cands and not spelled:
        return mask
    refused = refused_tokens(g, state, tracker, out, cands) if cands else []
    if spelled:
        refused += refused_tokens(g, state, tracker, out, spelled)
    if not refused:
        return mask
    return _without(mask, refused)
