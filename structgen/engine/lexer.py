"""Combined lexer DFAs: one per set of terminals the parser allows.

Lexing is maximal munch (as Lark's lexers do): a lexeme ends only when the
next byte cannot extend it, so lexing is deterministic given the parser
configuration.  The combined DFA runs all allowed terminals at once; each
state knows which terminals accept there.  Its start state is never
re-entered, so "at a lexeme start" is simply ``state == 0``.

The product is explored only while two or more terminals are alive; once a
single terminal remains, the lexer jumps into a copy of that terminal's own
table, so a 4,000-state ``maxLength`` string costs a table copy, not a search.
Cores are shared between grammars (keyed by the terminal DFAs themselves) and
carry the per-state "inside the lexeme" mask cache, so schemas that reuse a
string or number shape reuse its masks too.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from ..errors import GrammarError
from ..grammar.fsa import DFA, unique_rows

MAX_LEXER_STATES = 200_000
CORE_CACHE_ENTRIES = 2048


class LexerCore:
    """The product automaton of a tuple of DFAs (terminal-independent)."""

    def __init__(self, dfas: tuple[DFA, ...]):
        self.dfas = dfas
        k = len(dfas)
        self.inside_cache: dict = {}
        self.lock = threading.Lock()
        if k == 0:
            self.trans = np.full((1, 1), -1, dtype=np.int32)
            self.classmap = np.zeros(256, dtype=np.int32)
            self.acc_members: list[tuple[int, ...]] = [()]
            self._product: list[tuple] = [()]
            self.blocks: list[tuple[int, int]] = []
            self._index_acc()
            self._finish()
            return
        cms = np.stack([d.classmap for d in dfas])
        cols, classmap = unique_rows(cms.T)
        classmap = classmap.astype(np.int32)
        n_classes = cols.shape[0]
        tabs = [np.ascontiguousarray(d.trans[:, cols[:, i]]) for i, d in enumerate(dfas)]
        # each table gets a dead row (index n_j) so -1 sub-states stay -1
        ext = [np.vstack([t, np.full((1, n_classes), -1, dtype=t.dtype)]).astype(np.int64) for t in tabs]
        dead = np.array([t.shape[0] for t in tabs], dtype=np.int64)
        starts = tuple(int(d.start) for d in dfas)
        index: dict[bytes, int] = {}
        order: list[tuple] = [starts]
        layer_rows: list[np.ndarray] = []
        singles_r: list[np.ndarray] = []
        singles_c: list[np.ndarray] = []
        singles_j: list[np.ndarray] = []
        singles_s: list[np.ndarray] = []
        frontier = np.array([starts], dtype=np.int64)
        row_base = 0
        while len(frontier):
            F = len(frontier)
            idx = np.where(frontier < 0, dead[None, :], frontier)
            nxt = np.stack([ext[j][idx[:, j]] for j in range(k)], axis=1)  # [F, k, C]
            alive = nxt >= 0
            n_alive = alive.sum(axis=1)  # [F, C]
            rows = np.full((F, n_classes), -1, dtype=np.int64)
            fs, cs = np.nonzero(n_alive == 1)
            if len(fs):
                js = alive[fs, :, cs].argmax(axis=1)
                singles_r.append(fs + row_base)
                singles_c.append(cs)
                singles_j.append(js)
                singles_s.append(nxt[fs, js, cs])
            fm, cm_ = np.nonzero(n_alive >= 2)
            new_states = []
            if len(fm):
                keys = np.ascontiguousarray(nxt[fm, :, cm_])  # [M, k]
                kv = keys.view(np.dtype((np.void, keys.dtype.itemsize * k))).reshape(-1)
                uniq, first, inv = np.unique(kv, return_index=True, return_inverse=True)
                uid = np.empty(len(uniq), dtype=np.int64)
                for u in range(len(uniq)):
                    b = uniq[u].tobytes()
                    sid = index.get(b)
                    if sid is None:
                        sid = len(order)
                        if sid >= MAX_LEXER_STATES:
                            raise GrammarError(f"lexer too large (over {MAX_LEXER_STATES} states)")
                        index[b] = sid
                        order.append(tuple(int(x) for x in keys[first[u]]))
                        new_states.append(keys[first[u]])
                    uid[u] = sid
                rows[fm, cm_] = uid[inv.reshape(-1)]
            layer_rows.append(rows)
            row_base += F
            frontier = np.array(new_states, dtype=np.int64).reshape(-1, k)
        n_prod = len(order)
        sr = np.concatenate(singles_r) if singles_r else np.zeros(0, dtype=np.int64)
        sc = np.concatenate(singles_c) if singles_c else np.zeros(0, dtype=np.int64)
        sj = np.concatenate(singles_j) if singles_j else np.zeros(0, dtype=np.int64)
        ss = np.concatenate(singles_s) if singles_s else np.zeros(0, dtype=np.int64)
        used = sorted(set(sj.tolist()))
        offset = np.zeros(k, dtype=np.int64)
        total = n_prod
        self.blocks = []
        for j in used:
            offset[j] = total
            self.blocks.append((total, j))
            total += dfas[j].n_states
        if total > MAX_LEXER_STATES:
            raise GrammarError(f"lexer too large (over {MAX_LEXER_STATES} states)")
        trans = np.empty((total, n_classes), dtype=np.int32)
        trans[:n_prod] = np.concatenate(layer_rows, axis=0)
        if len(sr):
            trans[sr, sc] = offset[sj] + ss
        for j in used:
            t = tabs[j]
            trans[offset[j]:offset[j] + t.shape[0]] = np.where(t >= 0, t + offset[j], -1)
        self.trans = trans
        self.classmap = classmap
        self._product = order
        # accepting members per state (indices into dfas)
        acc: list[tuple[int, ...]] = []
        for sub in order:
            acc.append(tuple(j for j, s in enumerate(sub) if s >= 0 and dfas[j].accept[s]))
        for j in used:
            acc.extend((j,) if a else () for a in dfas[j].accept)
        self.acc_members = acc
        self._index_acc()
        self._finish()

    def _index_acc(self) -> None:
        """acc_key[state] indexes acc_kinds, the distinct tuples of accepting members."""
        kinds: dict[tuple, int] = {}
        keys = np.empty(len(self.acc_members), dtype=np.int32)
        for sid, m in enumerate(self.acc_members):
            kid = kinds.get(m)
            if kid is None:
                kid = kinds[m] = len(kinds)
            keys[sid] = kid
        self.acc_key = keys
        self.acc_kinds = list(kinds)

    def _finish(self) -> None:
        self._trans_list = None
        self.classmap_list = self.classmap.tolist()
        self.n_states = self.trans.shape[0]

    @property
    def trans_list(self) -> list:
        """Python-list copy of the table for byte-by-byte stepping (built on first use)."""
        if self._trans_list is None:
            self._trans_list = self.trans.tolist()
        return self._trans_list

    def block_of(self, state: int):
        """(terminal DFA, offset) when ``state`` lies in a single terminal's copied table."""
        if state < len(self._product):
            return None
        for start, j in reversed(self.blocks):
            if state >= start:
                return self.dfas[j], start
        return None

    def substates(self, state: int) -> tuple:
        """Per-DFA sub-state of a combined state (-1 where that DFA is dead)."""
        if state < len(self._product):
            return self._product[state]
        for start, j in reversed(self.blocks):
            if state >= start:
                sub = [-1] * len(self.dfas)
                sub[j] = state - start
                return tuple(sub)
        raise IndexError(state)


_cores: OrderedDict[tuple, LexerCore] = OrderedDict()
_cores_lock = threading.Lock()


def lexer_core(dfas: tuple[DFA, ...]) -> LexerCore:
    key = tuple(id(d) for d in dfas)
    with _cores_lock:
        core = _cores.get(key)
        if core is not None and core.dfas == dfas:
            _cores.move_to_end(key)
            return core
    core = LexerCore(dfas)
    with _cores_lock:
        _cores[key] = core
        if len(_cores) > CORE_CACHE_ENTRIES:
            _cores.popitem(last=False)
    return core


class Lexer:
    """A core bound to one grammar's terminal ids."""

    def __init__(self, lexer_id: int, term_ids: tuple[int, ...], dfas: list[DFA]):
        self.id = lexer_id
        self.term_ids = term_ids
        self.core = lexer_core(tuple(dfas))
        core = self.core
        self.trans = core.trans
        self.classmap = core.classmap
        self.classmap_list = core.classmap_list
        acc_index: dict[frozenset, int] = {}
        self.acc_sets: list[frozenset] = []
        kind_to_acc = np.full(len(core.acc_kinds), -1, dtype=np.int32)
        for kid, members in enumerate(core.acc_kinds):
            if members:
                acc = frozenset(term_ids[j] for j in members)
                a = acc_index.get(acc)
                if a is None:
                    a = acc_index[acc] = len(self.acc_sets)
                    self.acc_sets.append(acc)
                kind_to_acc[kid] = a
        acc_id = kind_to_acc[core.acc_key]
        self.acc_id = acc_id
        self.boundary = acc_id.copy()
        self.boundary[0] = -1  # no zero-width lexemes
        self._dfas = dfas

    @property
    def trans_list(self) -> list:
        return self.core.trans_list

    def step(self, state: int, byte: int) -> int:
        return self.trans_list[state][self.classmap_list[byte]]

    def completions(self, state: int) -> list[tuple[int, int]]:
        """(terminal id, min bytes to finish that terminal) for each live terminal."""
        out = []
        for j, s in enumerate(self.core.substates(state)):
            if s >= 0:
                d = int(self._dfas[j].dist_to_accept()[s])
                if d >= 0:
                    out.append((self.term_ids[j], d))
        return out


class LexerCache:
    """One Lexer per distinct allowed-terminal set, built on first use."""

    def __init__(self, term_dfas: list[DFA]):
        self.term_dfas = term_dfas
        self.lexers: list[Lexer] = []
        self._by_set: dict[frozenset, Lexer] = {}

    def get(self, allowed: frozenset) -> Lexer:
        lx = self._by_set.get(allowed)
        if lx is None:
            ids = tuple(sorted(allowed))
            lx = Lexer(len(self.lexers), ids, [self.term_dfas[t] for t in ids])
            self.lexers.append(lx)
            self._by_set[allowed] = lx
        return lx
