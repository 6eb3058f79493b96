"""The vocabulary as a byte trie in preorder arrays, and the numba walk over it.

Nodes are stored in depth-first order with the index one past their subtree,
so a mask computation is a single forward scan that skips a whole subtree as
soon as the lexer dies (the classic trie walk of XGrammar and llguidance).
Special tokens and tokens with no bytes are not in the trie: a grammar can
never allow them.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from ..automata.search_kernels import UTF8_FORMS, plain_loop_states
from ..uids import new_uid
from ..automata.kernel_cache import kernel


#: Printable ASCII except the quote and backslash: what JSON string content repeats freely.
PLAIN_BYTES = np.zeros(256, dtype=bool)
PLAIN_BYTES[0x20:0x7F] = True
PLAIN_BYTES[[0x22, 0x5C]] = False


def plain_loops(trans: np.ndarray, classmap: np.ndarray) -> np.ndarray:
    """uint8 per state: 1 where every PLAIN_BYTES byte leads back to the same state."""
    return plain_loop_states(np.ascontiguousarray(trans, dtype=np.int32),
                             np.ascontiguousarray(classmap, dtype=np.int32), PLAIN_BYTES)


class TokenTrie:
    __slots__ = ("node_byte", "node_depth", "node_end", "tok_ptr", "tok_ids", "n_nodes", "max_depth",
                 "token_bytes", "vocab_size", "node_word", "node_bit", "node_multi", "node_plain_below",
                 "root_table", "uid")

    def __init__(self, node_byte, node_depth, node_end, tok_ptr, tok_ids, token_bytes, vocab_size):
        self.node_byte = node_byte
        self.node_depth = node_depth
        self.node_end = node_end
        self.tok_ptr = tok_ptr
        self.tok_ids = tok_ids
        self.n_nodes = len(node_byte)
        self.max_depth = int(node_depth.max()) if len(node_depth) else 0
        self.token_bytes = token_bytes
        self.vocab_size = vocab_size
        self.uid = new_uid()  # walk cache key (see structgen.uids)
        # the first token of each node as (mask word, bit): the walk ORs it in without a branch
        # (bit 0 where the node ends no token); nodes with more tokens are flagged
        counts = np.diff(tok_ptr)
        first = np.where(counts > 0, tok_ids[np.minimum(tok_ptr[:-1], max(len(tok_ids) - 1, 0))], 0) \
            if len(tok_ids) else np.zeros(len(node_byte), dtype=np.int32)
        self.node_word = (first >> 5).astype(np.int32)
        self.node_bit = np.where(counts > 0, np.left_shift(np.uint32(1), (first & 31).astype(np.uint32)),
                                 np.uint32(0)).astype(np.uint32)
        self.node_multi = (counts > 1).astype(np.uint8)
        # what lies below each node, for walks from states that loop on it (whole subtrees are
        # taken without a visit: most of a JSON string's walk): 1 -- only PLAIN_BYTES; 2 -- only
        # well-formed text (plain bytes and complete UTF-8 characters, the last possibly cut)
        # starting at a character boundary; 0 -- anything else
        self.node_plain_below = _below_kinds(node_byte, node_depth, node_end, PLAIN_BYTES)
        # the root's children in one small table (node, byte, subtree end, first and past-last token of
        # the subtree): walks from the root test every first byte, and reading the node arrays at
        # ~250 places spread over the whole trie cost a cache miss each -- most of a short walk
        kids = np.nonzero(node_depth == 1)[0]
        ends = node_end[kids] if len(kids) else kids
        self.root_table = np.ascontiguousarray(np.stack(
            [kids, node_byte[kids], ends, tok_ptr[kids], tok_ptr[ends]], axis=1).astype(np.int32)) \
            if len(kids) else np.zeros((0, 5), dtype=np.int32)

    def walk_from_boundaries(self, trans, classmap, boundary, nodes, scratch, words, vals, ev_nodes, ev_states,
                             plain_loop) -> tuple[int, int]:
        """Run :func:`walk_from_boundaries` over this trie."""
        return walk_from_boundaries(self.node_byte, self.node_depth, self.node_end, self.node_word, self.node_bit,
                                    self.node_multi, self.node_plain_below, self.tok_ptr, self.tok_ids, trans, classmap,
                                    boundary, plain_loop, nodes, scratch, words, vals, ev_nodes, ev_states,
                                    self.max_depth)

    def anchored_walk(self, trans, classmap, boundary, plain_loop, x, lo, n_d, pure, pure_of, ref_mask, ref_ev_nodes,
                      ref_ev_states, mask, ev_nodes, ev_states) -> int:
        """Run :func:`anchored_walk` over this trie."""
        return anchored_walk(self.node_byte, self.node_depth, self.node_end, self.node_word, self.node_bit,
                             self.node_multi, self.node_plain_below, self.tok_ptr, self.tok_ids, self.root_table,
                             trans, classmap, boundary, plain_loop, x, lo, n_d, pure, pure_of, ref_mask,
                             ref_ev_nodes, ref_ev_states, mask, ev_nodes, ev_states, self.max_depth)

    def walk(self, trans, classmap, boundary, roots, root_states, mask, ev_nodes, ev_states,
             plain_loop=None) -> int:
        """Run :func:`walk` over this trie (see there); ``plain_loop`` from :func:`plain_loops`."""
        if plain_loop is None:
            plain_loop = np.zeros(trans.shape[0], dtype=np.uint8)
        trans = np.ascontiguousarray(trans)
        return walk(self.node_byte, self.node_depth, self.node_end, self.node_word, self.node_bit, self.node_multi,
                    self.node_plain_below, self.tok_ptr, self.tok_ids, self.root_table, trans, classmap, boundary, plain_loop, roots,
                    root_states, mask, ev_nodes, ev_states, self.max_depth)

    def end_hits(self, trans, classmap, n_prod: int, target, roots, root_states, from_boundary: bool, states,
                 toks):
        """Run :func:`end_hits` over this trie into ``states``/``toks`` (room for every token):
        ``(target states, tokens)`` arrays."""
        n = end_hits(self.node_byte, self.node_depth, self.node_end, self.tok_ptr, self.tok_ids,
                     np.ascontiguousarray(trans), classmap, n_prod, target, roots, root_states, from_boundary, states,
                     toks, self.max_depth)
        return states[:n].copy(), toks[:n].copy()

    @classmethod
    def build(cls, token_bytes: list[bytes], excluded: frozenset[int], vocab_size: int) -> "TokenTrie":
        items = sorted((b, i) for i, b in enumerate(token_bytes) if b and i not in excluded)
        node_byte = [0]
        node_depth = [0]
        node_end = [0]
        node_tok: list[list[int]] = [[]]
        path = [0]  # node index per depth
        prev = b""
        for data, tid in items:
            if data == prev:
                node_tok[path[-1]].append(tid)
                continue
            lcp = 0
            m = min(len(data), len(prev))
            while lcp < m and data[lcp] == prev[lcp]:
                lcp += 1
            del path[lcp + 1:]
            for d in range(lcp, len(data)):
                node_byte.append(data[d])
                node_depth.append(d + 1)
                node_end.append(0)
                node_tok.append([])
                path.append(len(node_byte) - 1)
            node_tok[path[-1]].append(tid)
            prev = data
        n = len(node_byte)
        depth = np.array(node_depth, dtype=np.int32)
        end = _subtree_ends(depth)
        counts = np.array([len(t) for t in node_tok], dtype=np.int32)
        tok_ptr = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(counts, out=tok_ptr[1:])
        tok_ids = np.array([t for ts in node_tok for t in ts], dtype=np.int32)
        return cls(np.array(node_byte, dtype=np.uint8), depth, end, tok_ptr, tok_ids, token_bytes, vocab_size)

    @classmethod
    def cached(cls, token_bytes: list[bytes], excluded: frozenset[int], vocab_size: int,
               fingerprint: str | None = None) -> "TokenTrie":
        """Build once per tokenizer and keep the arrays on disk."""
        if fingerprint is None:
            h = hashlib.sha256()
            for b in token_bytes:
                h.update(len(b).to_bytes(2, "little"))
                h.update(b)
            h.update(repr(sorted(excluded)).encode())
            fingerprint = h.hexdigest()[:24]
        root = Path(os.environ.get("STRUCTGEN_CACHE", Path.home() / ".cache" / "structgen")) / "tries"
        path = root / f"{fingerprint}-{vocab_size}.npz"
        try:
            z = np.load(path)
            return cls(z["node_byte"], z["node_depth"], z["node_end"], z["tok_ptr"], z["tok_ids"], token_bytes,
                       vocab_size)
        except (OSError, KeyError, ValueError):
            pass
        trie = cls.build(token_bytes, excluded, vocab_size)
        try:
            root.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
            np.savez(tmp, node_byte=trie.node_byte, node_depth=trie.node_depth, node_end=trie.node_end,
                     tok_ptr=trie.tok_ptr, tok_ids=trie.tok_ids)
            os.replace(tmp, path)
        except OSError:
            pass
        return trie


@kernel(nogil=True)
def _subtree_ends(depth):
    n = len(depth)
    end = np.empty(n, dtype=np.int32)
    stack = np.empty(n + 1, dtype=np.int32)
    sp = 0
    for i in range(n):
        d = depth[i]
        while sp > 0 and depth[stack[sp - 1]] >= d:
            end[stack[sp - 1]] = i
            sp -= 1
        stack[sp] = i
        sp += 1
    while sp > 0:
        end[stack[sp - 1]] = n
        sp -= 1
    return end


#: UTF-8 reader phase after an ill-formed byte (until the next ASCII byte); 0 is a character
#: boundary and 1 + 4 * form + read is inside character form ``form`` of ``UTF8_FORMS``.
_ILL_FORMED = 1 + 4 * UTF8_FORMS.shape[0]


@kernel(nogil=True)
def _utf8_step(phase, b):
    """(next phase, well-formed) of a UTF-8 reader over :data:`UTF8_FORMS` -- the table the
    text-loop check of lexer states uses, so the two agree on what well-formed text is."""
    if b < 0x80:
        return 0, phase == 0 or phase == _ILL_FORMED
    if phase == 0 or phase == _ILL_FORMED:
        for f in range(UTF8_FORMS.shape[0]):
            if UTF8_FORMS[f, 0, 0] <= b <= UTF8_FORMS[f, 0, 1]:
                return 2 + 4 * f, True
        return _ILL_FORMED, False
    f, read = (phase - 1) // 4, (phase - 1) % 4
    if not UTF8_FORMS[f, read, 0] <= b <= UTF8_FORMS[f, read, 1]:
        return _ILL_FORMED, False
    if read + 1 == 4 or UTF8_FORMS[f, read + 1, 0] < 0:
        return 0, True  # the character is complete
    return phase + 1, True


@kernel(nogil=True)
def _below_kinds(node_byte, node_depth, node_end, plain):
    """Per node, what its subtree below holds (see ``TokenTrie.node_plain_below``)."""
    n = len(node_byte)
    out = np.zeros(n, dtype=np.uint8)
    if n == 0:
        return out
    # phase of each node from the root, and prefix counts of non-plain bytes and of bytes that
    # are not well-formed text (an ASCII byte other than the plain ones counts as ill-formed)
    phase_at = np.zeros(int(node_depth.max()) + 2, dtype=np.int64)
    phase = np.zeros(n, dtype=np.int64)
    not_plain = np.zeros(n + 1, dtype=np.int64)
    not_text = np.zeros(n + 1, dtype=np.int64)
    for j in range(1, n):
        b = np.int64(node_byte[j])
        ph, ok = _utf8_step(phase_at[node_depth[j] - 1], b)
        if b < 0x80 and not plain[b]:
            ok = False
        phase[j] = ph
        phase_at[node_depth[j]] = ph
        not_plain[j + 1] = not_plain[j] + (0 if plain[b] else 1)
        not_text[j + 1] = not_text[j] + (0 if ok else 1)
    for j in range(n):
        e = node_end[j]
        if not_plain[e] - not_plain[j + 1] == 0:
            out[j] = 1
        elif phase[j] == 0 and not_text[e] - not_text[j + 1] == 0:
            out[j] = 2
    return out


@kernel(nogil=True, inline="always")
def _walk_range(j, end, node_byte, node_depth, node_end, node_word, node_bit, node_multi, node_plain_below, tok_ptr,
                tok_ids, flat, n_cls, classmap, boundary, plain_loop, mask, ev_nodes, ev_states, n_ev, state_at):
    """Walk nodes ``j``..``end`` (preorder, whole subtrees) from the states in ``state_at``."""
    j = np.int64(j)
    end = np.int64(end)
    while j < end:
        d = np.int64(node_depth[j])
        ps = state_at[d - 1]
        ns = np.int64(flat[ps * n_cls + np.int64(classmap[np.int64(node_byte[j])])])
        if ns < 0:
            if boundary[ps] >= 0:
                ev_nodes[n_ev] = j
                ev_states[n_ev] = ps
                n_ev += 1
            j = np.int64(node_end[j])
            continue
        state_at[d] = ns
        mask[np.int64(node_word[j])] |= node_bit[j]
        if node_multi[j]:
            for p in range(tok_ptr[j] + 1, tok_ptr[j + 1]):
                t = tok_ids[p]
                mask[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
        nb = node_plain_below[j]
        if nb and plain_loop[ns] >= nb:
            j = _take_below(j, node_end, tok_ptr, tok_ids, mask)
            continue
        j += 1
    return n_ev


@kernel(nogil=True, inline="always")
def _take_below(j, node_end, tok_ptr, tok_ids, mask):
    """Allow every token below node ``j`` (a subtree of plain text under a state that loops on
    it); returns the node after the subtree."""
    e = np.int64(node_end[j])
    for p in range(tok_ptr[j + 1], tok_ptr[e]):
        t = tok_ids[p]
        mask[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
    return e


@kernel(nogil=True, inline="always")
def _walk_subtree(r, state, node_byte, node_depth, node_end, node_word, node_bit, node_multi, node_plain_below,
                  tok_ptr, tok_ids, root_table, flat, n_cls, classmap, boundary, plain_loop, mask, ev_nodes, ev_states,
                  n_ev, state_at):
    state_at[node_depth[r]] = state
    if r == 0:  # the root: first bytes from the root table, only live children's subtrees read
        for k in range(root_table.shape[0]):
            ns = flat[np.int64(state) * n_cls + np.int64(classmap[root_table[k, 1]])]
            if ns < 0:
                if boundary[state] >= 0:
                    ev_nodes[n_ev] = root_table[k, 0]
                    ev_states[n_ev] = state
                    n_ev += 1
                continue
            n_ev = _walk_range(root_table[k, 0], root_table[k, 2], node_byte, node_depth, node_end, node_word,
                               node_bit, node_multi, node_plain_below, tok_ptr, tok_ids, flat, n_cls, classmap,
                               boundary, plain_loop, mask, ev_nodes, ev_states, n_ev, state_at)
        return n_ev
    for p in range(tok_ptr[r], tok_ptr[r + 1]):
        t = tok_ids[p]
        mask[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
    return _walk_range(r + 1, node_end[r], node_byte, node_depth, node_end, node_word, node_bit, node_multi,
                       node_plain_below, tok_ptr, tok_ids, flat, n_cls, classmap, boundary, plain_loop, mask, ev_nodes,
                       ev_states, n_ev, state_at)


@kernel(nogil=True)
def walk(node_byte, node_depth, node_end, node_word, node_bit, node_multi, node_plain_below, tok_ptr, tok_ids,
         root_table, trans, classmap, boundary, plain_loop, roots, root_states, mask, ev_nodes, ev_states, max_depth):
    """Walk the subtrees under ``roots`` (state *at* each root given).

    Sets the mask bit of every token whose bytes keep the lexer alive; records
    (node, state before the node's byte) where the current lexeme must end
    (dead transition from an accepting state) for the caller to continue with
    the parser's next lexer.  Returns the number of such events.  A subtree of
    plain bytes under a state that loops on them is taken whole, unvisited.
    """
    n_ev = 0
    state_at = np.empty(max_depth + 2, dtype=np.int64)
    flat = trans.ravel()
    for k in range(len(roots)):
        n_ev = _walk_subtree(roots[k], root_states[k], node_byte, node_depth, node_end, node_word, node_bit,
                             node_multi, node_plain_below, tok_ptr, tok_ids, root_table, flat, trans.shape[1], classmap,
                             boundary, plain_loop, mask, ev_nodes, ev_states, n_ev, state_at)
    return n_ev


_NO_ROOT_TABLE = np.zeros((0, 5), dtype=np.int32)


@kernel(nogil=True)
def walk_from_boundaries(node_byte, node_depth, node_end, node_word, node_bit, node_multi, node_plain_below, tok_ptr,
                         tok_ids, trans, classmap, boundary, plain_loop, nodes, scratch, words, vals, ev_nodes, ev_states,
                         max_depth):
    """:func:`walk` from lexeme boundaries: each node's byte starts a new lexeme (from state 0).

    The tokens are returned sparsely -- ``(word index, bits)`` pairs in ``words``/``vals`` --
    and ``scratch`` (all zero on entry) is zero again on return.  Returns ``(events, pairs)``."""
    n_ev = 0
    state_at = np.empty(max_depth + 2, dtype=np.int64)
    flat = trans.ravel()
    n_cls = trans.shape[1]
    for k in range(len(nodes)):
        r = nodes[k]
        st = flat[np.int64(classmap[np.int64(node_byte[r])])]
        if st >= 0:
            n_ev = _walk_subtree(r, st, node_byte, node_depth, node_end, node_word, node_bit, node_multi,
                                 node_plain_below, tok_ptr, tok_ids, _NO_ROOT_TABLE, flat, n_cls, classmap, boundary,
                                 plain_loop, scratch,
                                 ev_nodes, ev_states, n_ev, state_at)
    n_w = 0
    for w in range(len(scratch)):
        v = scratch[w]
        if v:
            words[n_w] = w
            vals[n_w] = v
            scratch[w] = 0
            n_w += 1
    return n_ev, n_w


@kernel(nogil=True, inline="always")
def _clear_subtree(j, node_end, tok_ptr, tok_ids, mask):
    for p in range(tok_ptr[j], tok_ptr[node_end[j]]):
        t = tok_ids[p]
        mask[t >> 5] &= ~(np.uint32(1) << np.uint32(t & 31))


@kernel(nogil=True, inline="always")
def _set_node(j, node_word, node_bit, node_multi, tok_ptr, tok_ids, mask):
    mask[np.int64(node_word[j])] |= node_bit[j]
    if node_multi[j]:
        for p in range(tok_ptr[j] + 1, tok_ptr[j + 1]):
            t = tok_ids[p]
            mask[t >> 5] |= np.uint32(1) << np.uint32(t & 31)


@kernel(nogil=True, inline="always")
def _keep_ref_events(lo_node, hi_node, e, ref_ev_nodes, ref_ev_states, pure_of, lo, ev_nodes, ev_states, n_ev):
    """Copy the reference walk's events inside the kept subtree ``[lo_node, hi_node)`` (both walks
    run in preorder, so reference events are merged in with one moving index ``e``), renumbered
    into the table's states.  Returns ``(e, n_ev)``; ``n_ev`` -1 when an event has no counterpart."""
    n_ref = len(ref_ev_nodes)
    while e < n_ref and ref_ev_nodes[e] < lo_node:
        e += 1
    while e < n_ref and ref_ev_nodes[e] < hi_node:
        rs = ref_ev_states[e]
        ps = pure_of[rs] if rs >= 0 else -1
        if ps < 0:
            return e, -1
        ev_nodes[n_ev] = ref_ev_nodes[e]
        ev_states[n_ev] = ps + lo
        n_ev += 1
        e += 1
    return e, n_ev


@kernel(nogil=True)
def anchored_walk(node_byte, node_depth, node_end, node_word, node_bit, node_multi, node_plain_below, tok_ptr, tok_ids,
                  root_table, trans, classmap, boundary, plain_loop, x, lo, n_d, pure, pure_of, ref_mask,
                  ref_ev_nodes, ref_ev_states, mask, ev_nodes, ev_states, max_depth):
    """The walk from state ``x`` reusing a shared automaton's walk (see ``TrieWalker._anchored``).

    Starts from the reference walk's mask and walks the trie only until it
    reaches a pure state of the anchored DFA (rows ``lo``..``lo + n_d``): from
    there the subtree behaves exactly as in the reference walk, so its tokens
    and events are kept (event states renumbered through ``pure_of``).  Where
    the walk is still in a carve-out (a key prefix, say) it sets the node's
    tokens itself, and clears dead subtrees.  First bytes are read from the
    root table (see ``TokenTrie.root_table``).  Returns the number of events,
    or -1 when no node becomes pure or a reference event has no pure
    counterpart (the caller walks directly)."""
    n_cls = trans.shape[1]
    flat = trans.ravel()
    mask[:] = ref_mask
    n_ev = 0
    n_kept = 0
    e = 0  # next reference event to consider
    state_at = np.empty(max_depth + 2, dtype=np.int64)
    state_at[0] = x
    for k in range(root_table.shape[0]):
        ns = np.int64(flat[np.int64(x) * n_cls + np.int64(classmap[root_table[k, 1]])])
        if ns < 0:
            for p in range(root_table[k, 3], root_table[k, 4]):
                t = tok_ids[p]
                mask[t >> 5] &= ~(np.uint32(1) << np.uint32(t & 31))
            if boundary[x] >= 0:
                ev_nodes[n_ev] = root_table[k, 0]
                ev_states[n_ev] = x
                n_ev += 1
            continue
        if ns >= lo and ns < lo + n_d and pure[ns - lo]:
            n_kept += 1
            e, n_ev = _keep_ref_events(root_table[k, 0], root_table[k, 2], e, ref_ev_nodes, ref_ev_states, pure_of,
                                       lo, ev_nodes, ev_states, n_ev)
            if n_ev < 0:
                return -1
            continue
        # a first byte where a carve-out (or another terminal) is still alive: walk its subtree
        j = np.int64(root_table[k, 0])
        end = np.int64(root_table[k, 2])
        while j < end:
            d = np.int64(node_depth[j])
            ps = state_at[d - 1]
            ns = np.int64(flat[ps * n_cls + np.int64(classmap[np.int64(node_byte[j])])])
            if ns < 0:
                _clear_subtree(j, node_end, tok_ptr, tok_ids, mask)
                if boundary[ps] >= 0:
                    ev_nodes[n_ev] = j
                    ev_states[n_ev] = ps
                    n_ev += 1
                j = np.int64(node_end[j])
                continue
            if ns >= lo and ns < lo + n_d and pure[ns - lo]:
                n_kept += 1
                e, n_ev = _keep_ref_events(j, node_end[j], e, ref_ev_nodes, ref_ev_states, pure_of, lo, ev_nodes,
                                           ev_states, n_ev)
                if n_ev < 0:
                    return -1
                j = np.int64(node_end[j])
                continue
            state_at[d] = ns
            _set_node(j, node_word, node_bit, node_multi, tok_ptr, tok_ids, mask)
            nb = node_plain_below[j]
            if nb and plain_loop[ns] >= nb:
                j = _take_below(j, node_end, tok_ptr, tok_ids, mask)
                continue
            j += 1
    if n_kept == 0:
        return -1
    return n_ev


@kernel(nogil=True)
def end_hits(node_byte, node_depth, node_end, tok_ptr, tok_ids, trans, classmap, n_prod, target, roots, root_states,
             from_boundary, out_states, out_toks, max_depth):
    """Tokens that end in a ``target`` state of a lexer table, reached through its product states
    only (``< n_prod``): the walk of a key lexer's key prefixes (see ``Lexer.end_terms``).

    From each root node (in state ``root_states[k]`` *at* it), or, with ``from_boundary``, from
    each node's own byte read in state 0 (a continuation).  Fills ``(target state, token)`` pairs
    and returns how many; the walk leaves a subtree as soon as it enters any other state, so it
    visits only the few nodes that spell key prefixes."""
    n = 0
    state_at = np.empty(max_depth + 2, dtype=np.int64)
    flat = trans.ravel()
    n_cls = trans.shape[1]
    for k in range(len(roots)):
        r = np.int64(roots[k])
        if from_boundary:
            st = np.int64(flat[np.int64(classmap[np.int64(node_byte[r])])])
            if st < 0:
                continue
            if target[st]:
                for p in range(tok_ptr[r], tok_ptr[r + 1]):
                    out_states[n] = st
                    out_toks[n] = tok_ids[p]
                    n += 1
                continue
            if st >= n_prod:
                continue
        else:
            st = np.int64(root_states[k])
        state_at[node_depth[r]] = st
        j = r + 1
        end = np.int64(node_end[r])
        while j < end:
            d = np.int64(node_depth[j])
            ns = np.int64(flat[state_at[d - 1] * n_cls + np.int64(classmap[np.int64(node_byte[j])])])
            if ns >= 0 and target[ns]:
                for p in range(tok_ptr[j], tok_ptr[j + 1]):
                    out_states[n] = ns
                    out_toks[n] = tok_ids[p]
                    n += 1
                j = np.int64(node_end[j])
                continue
            if ns < 0 or ns >= n_prod:
                j = np.int64(node_end[j])
                continue
            state_at[d] = ns
            j += 1
    return n


@kernel(nogil=True)
def clear_tokens_where(mask, states, toks, refused):
    """Clear the bit of ``toks[k]`` in a mask wherever ``refused[states[k]]``."""
    for k in range(len(toks)):
        if refused[states[k]]:
            t = toks[k]
            mask[t >> 5] &= ~(np.uint32(1) << np.uint32(t & 31))


@kernel(nogil=True)
def or_words(mask, words, vals):
    """``mask[words] |= vals`` for a sparse continuation result (one call, no temporaries)."""
    for k in range(len(words)):
        mask[words[k]] |= vals[k]


@kernel(nogil=True)
def advance_bytes(trans, classmap, state, data, start):
    """Feed ``data[start:]`` to a lexer DFA; return (state, index where it stopped).

    Stops at the first byte with no transition (index < len) so the caller can
    end the lexeme there; returns len(data) when every byte was consumed.
    """
    i = start
    n = len(data)
    while i < n:
        ns = trans[state, classmap[data[i]]]
        if ns < 0:
            return state, i
        state = ns
        i += 1
    return state, n


def warm_up_kernels(trie: "TokenTrie") -> None:
    """Load the compiled numba kernels now (part of the per-tokenizer set-up), so
    the first mask of the first grammar does not pay for it."""
    import numpy as np

    trans = np.full((1, 1), -1, dtype=np.int32)
    cm = np.zeros(256, dtype=np.int32)
    b = np.full(1, -1, dtype=np.int32)
    mask = np.zeros((trie.vocab_size + 31) // 32, dtype=np.uint32)
    ev = np.empty(1, dtype=np.int32)
    plain_loops(trans, cm)
    walk(trie.node_byte[:1], trie.node_depth[:1], np.array([1], dtype=np.int32), trie.node_word[:1],
         trie.node_bit[:1] * 0, trie.node_multi[:1] * 0, trie.node_plain_below[:1] * 0, trie.tok_ptr[:2] * 0,
         trie.tok_ids[:0], _NO_ROOT_TABLE, trans, cm, b, np.zeros(1, dtype=np.uint8), np.zeros(1, dtype=np.int32),
         np.zeros(1, dtype=np.int32), mask, ev, ev, 1)
    walk_from_boundaries(trie.node_byte[:1], trie.node_depth[:1], np.array([1], dtype=np.int32), trie.node_word[:1],
                         trie.node_bit[:1] * 0, trie.node_multi[:1] * 0, trie.node_plain_below[:1] * 0,
                         trie.tok_ptr[:2] * 0, trie.tok_ids[:0], trans, cm, b, np.zeros(1, dtype=np.uint8),
                         np.zeros(0, dtype=np.int32), mask, ev, mask[:1].copy(), ev, ev, 1)
    advance_bytes(trans, cm, 0, np.zeros(1, dtype=np.uint8), 0)
    end_hits(trie.node_byte[:1], trie.node_depth[:1], np.array([1], dtype=np.int32), trie.tok_ptr[:2] * 0,
             trie.tok_ids[:0], trans, cm, 1, np.zeros(1, dtype=np.uint8), np.zeros(1, dtype=np.int32),
             np.zeros(1, dtype=np.int32), False, ev, ev, 1)
    clear_tokens_where(mask, ev[:0], ev[:0], np.zeros(1, dtype=np.uint8))
    or_words(mask, np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.uint32))
    trie.anchored_walk(trans, cm, b, np.zeros(1, dtype=np.uint8), 0, 0, 1, np.zeros(1, dtype=np.bool_),
                       np.zeros(1, dtype=np.int64), mask, ev[:0], ev[:0], mask.copy(), ev, ev)
