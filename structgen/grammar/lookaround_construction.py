"""The construction behind :mod:`structgen.grammar.lookaround`: a pattern with lookarounds as a
subset construction over Boolean configurations (one algorithm; :func:`lookaround.compile_lookaround`
and :func:`lookaround.compile_terminal` are its entry points, and what a Lark terminal makes of
its result lives there).

Lookarounds over regular content keep a language regular; this module builds it exactly.  The
pattern becomes a Thompson NFA (``regex_syntax._Builder``) whose lookarounds are *conditional edges*,
and a subset construction runs over **Boolean configurations**: a set of clauses (a disjunction),
each clause one NFA state plus the obligations that must still hold for it (a conjunction).

* A lookahead ``(?=R)`` / ``(?!R)`` becomes an obligation ``(automaton, state, polarity)`` on the
  rest of the input.  Its automaton is the DFA of ``R`` followed by any bytes, compiled with this
  same construction (so lookarounds nest).  A positive obligation is discharged when that DFA
  reaches a state accepting everything and fails when it dies; a negative one the other way
  round; at the end of the subject a positive one holds iff its state accepts.
* A lookbehind ``(?<=R)`` / ``(?<!R)`` (Python requires fixed width) is a condition on what was
  already read: the DFA of "any characters, then ``R``" runs over the whole input as part of the
  configuration, and the condition is tested when the assertion is passed.  Lookbehinds inside a
  lookahead are tracked by the enclosing construction too; the lookahead's automaton is compiled
  once per starting state of those trackers.  ``^`` / ``\\A`` not at the pattern's ends are
  "no character before", ``$`` / ``\\Z`` "no byte after" (ECMA-262's meaning, as at the ends).
* Clauses with a weaker clause on the same NFA state are dropped, satisfied obligations vanish,
  a clause "matched, anything may follow" makes the whole configuration universal, and the
  number of configurations is bounded (:data:`MAX_CONFIGURATIONS`, then ``GrammarError``).  The
  result is trimmed and minimized.

Not supported (``UnsupportedFeature``): a lookahead (or ``$``) inside a lookbehind, and what the

``_Compiler.follow`` reads a configuration of a terminal's construction as the condition on the
byte after the lexeme (see ``lookaround.py``).
"""
from __future__ import annotations

import re
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

import numpy as np

from ..errors import GrammarError, UnsupportedFeature
from ..automata.fsa import DFA, NFA, minimize, trim
from .ir import FollowCondition
from .regex_syntax import _ANY, _Builder, add_alternatives


#: Configurations one construction (the pattern, or one lookaround body) may create.
MAX_CONFIGURATIONS = 40_000
#: Configurations all the constructions of one pattern may create together.
MAX_TOTAL_CONFIGURATIONS = 100_000

_LOOK = (C.ASSERT, C.ASSERT_NOT)
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None))
_START_ANCHORS = (C.AT_BEGINNING, C.AT_BEGINNING_STRING)
_END_ANCHORS = (C.AT_END, C.AT_END_STRING)
#: the body of the lookbehind that ``^`` stands for ("a character before": negated)
_ONE_CHAR = [(C.ANY, None)]

_LA, _LB, _END = 0, 1, 2  # kinds of conditional edges
_PENDING, _UNIV, _DEAD = 0, 1, 2  # states of a lookahead obligation
_EMPTY: frozenset = frozenset()
_END_OB = (-1, 0, True)  # the obligation "no byte follows"
#: UTF-8: byte ranges of the continuation bytes after each kind of leading byte
_UTF8_LEADS = [((0xC2, 0xDF), [(0x80, 0xBF)]), ((0xE0, 0xE0), [(0xA0, 0xBF), (0x80, 0xBF)]),
               ((0xE1, 0xEC), [(0x80, 0xBF)] * 2), ((0xED, 0xED), [(0x80, 0x9F), (0x80, 0xBF)]),
               ((0xEE, 0xEF), [(0x80, 0xBF)] * 2), ((0xF0, 0xF0), [(0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)]),
               ((0xF1, 0xF3), [(0x80, 0xBF)] * 3), ((0xF4, 0xF4), [(0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)])]


class _Machine:
    """One NFA of the construction: the pattern, a lookahead body followed by any bytes, or any
    characters followed by a lookbehind body."""

    __slots__ = ("id", "nfa", "cond", "universal", "tracked", "tidx", "moves", "mrow", "keep")

    def __init__(self, mid: int, nfa: NFA, cond: dict, universal: set):
        self.id = mid
        self.nfa = nfa
        self.cond = cond  # state -> [(kind, machine or None, polarity, target)]
        self.universal = universal  # states whose clause, with no obligations, accepts everything
        lbs: set[int] = set()
        for edges in cond.values():
            for kind, ref, _pol, _t in edges:
                if kind == _LB:
                    lbs.add(ref.id)
                elif kind == _LA:
                    lbs.update(ref.tracked)
        #: the lookbehind machines whose trackers this construction runs (its own lookbehinds and
        #: those of its lookaheads, at any depth; not those inside its lookbehinds)
        self.tracked = tuple(sorted(lbs))
        self.tidx = {x: i for i, x in enumerate(self.tracked)}
        self.moves: list = []
        self.mrow: list = []  # per state, its targets per class (None: no move)
        self.keep: list = []


class _LookBuilder(_Builder):
    """The regex NFA builder, with lookarounds and inner anchors as conditional edges."""

    def __init__(self, nfa: NFA, comp: "_Compiler", in_behind: bool):
        super().__init__(nfa, comp.enc, comp.pattern)
        self.comp = comp
        self.in_behind = in_behind
        self.cond: dict[int, list] = {}

    def node(self, item, a: int, b: int, flags: int) -> None:
        op, av = item
        if op in _LOOK:
            direction, body = av
            pol = op is C.ASSERT
            if direction < 0:
                lo, hi = body.getwidth()
                if lo != hi:
                    raise GrammarError(f"invalid regular expression {self.pattern!r}: look-behind requires "
                                       "fixed-width pattern", source=self.pattern)
                self.cond.setdefault(a, []).append((_LB, self.comp.machine("behind", body, flags), pol, b))
            else:
                if self.in_behind:
                    self.comp.unsupported("a lookahead inside a lookbehind")
                self.cond.setdefault(a, []).append((_LA, self.comp.machine("ahead", body, flags), pol, b))
        elif op is C.AT and av in _START_ANCHORS:
            if self.comp.terminal:
                self.comp.unsupported("an anchor (^ or \\A) in a terminal")
            self.cond.setdefault(a, []).append((_LB, self.comp.machine("behind", _ONE_CHAR, re.DOTALL), False, b))
        elif op is C.AT and av in _END_ANCHORS:
            if self.in_behind:
                self.comp.unsupported("an end anchor ($ or \\Z) inside a lookbehind")
            if self.comp.terminal and av is C.AT_END:
                self.comp.unsupported("a $ anchor in a terminal (Python's $ also matches before a final newline; "
                                      "\\Z does not)")
            self.cond.setdefault(a, []).append((_END, None, True, b))
        else:
            super().node(item, a, b, flags)


def _width(items, state) -> int:
    """Fewest characters ``items`` (a parse tree or a list of its items) can match."""
    sub = items if isinstance(items, sre_parse.SubPattern) else sre_parse.SubPattern(state, list(items))
    return int(sub.getwidth()[0])


class _Compiler:
    """The machines of one pattern and the constructions over them (one per compile)."""

    def __init__(self, pattern: str, encoder, terminal: bool):
        self.pattern = pattern
        self.enc = encoder
        self.terminal = terminal
        self.machines: list[_Machine] = []
        self._by_body: dict = {}
        self.gcm: list[int] = []
        self.reps: list[int] = []
        self.ncls = 0
        # lookahead automata, by (machine id, tracker context): index into the tables below
        self.la_index: dict = {}
        self.la_T: list = []
        self.la_acc: list = []
        self.la_univ: list = []
        self.la_start: list = []
        # lookbehind trackers, by machine id
        self.lb_T: dict = {}
        self.lb_acc: dict = {}
        self.lb_start: dict = {}
        self.total = 0
        self._closures: dict = {}
        self._advances: dict = {}

    def unsupported(self, what: str):
        raise UnsupportedFeature(f"regular expression {self.pattern!r} uses {what}, which structgen does not "
                                 "support")

    def too_large(self):
        raise GrammarError(f"regular expression {self.pattern!r} with lookarounds is too large: over "
                           f"{MAX_CONFIGURATIONS} automaton configurations (or {MAX_TOTAL_CONFIGURATIONS} in all)",
                           source=self.pattern)

    # -- machines ---------------------------------------------------------------------------------

    def machine(self, kind: str, body, flags: int) -> _Machine:
        key = (kind, id(body), flags)
        m = self._by_body.get(key)
        if m is None:
            nfa = NFA()
            b = _LookBuilder(nfa, self, in_behind=kind == "behind")
            if kind == "ahead":  # R, then any bytes
                u = nfa.new_state()
                b.seq(body, nfa.start, u, flags)
                nfa.add_range(u, 0, 255, u)
                nfa.add_eps(u, nfa.final)
                universal = {u}
            else:  # any characters, then R
                loop = nfa.new_state()
                nfa.add_eps(nfa.start, loop)
                b.chars(loop, _ANY, loop)
                b.seq(body, loop, nfa.final, flags)
                universal = set()
            m = self._register(nfa, b.cond, universal)
            self._by_body[key] = m
        return m

    def _register(self, nfa: NFA, cond: dict, universal: set) -> _Machine:
        m = _Machine(len(self.machines), nfa, cond, universal)
        self.machines.append(m)
        return m

    def main(self, tree, search: bool) -> _Machine:
        """The pattern's machine, with the regex front end's top-level anchors and search loops."""
        nfa = NFA()
        builder = _LookBuilder(nfa, self, in_behind=False)
        gflags = tree.state.flags
        universal = set()
        if self.terminal:
            builder.seq(tree, nfa.start, nfa.final, gflags)
        else:
            universal.update(add_alternatives(nfa, builder, tree, nfa.start, nfa.final, search))
        return self._register(nfa, builder.cond, universal)

    def finish(self) -> None:
        """Byte classes shared by every machine, and each machine's moves over them."""
        cuts = np.zeros(257, dtype=bool)
        cuts[0] = True
        for m in self.machines:
            lo = np.asarray(m.nfa.e_lo, dtype=np.int64)
            hi = np.asarray(m.nfa.e_hi, dtype=np.int64)
            cuts[lo] = True
            cuts[hi + 1] = True
        if self.terminal:  # classes never mix kinds of UTF-8 leading bytes (see _next_value)
            for x in (0x80, 0xC0, 0xC2, 0xE0, 0xE1, 0xED, 0xEE, 0xF0, 0xF1, 0xF4, 0xF5):
                cuts[x] = True
        gcm = np.cumsum(cuts[:256]) - 1
        self.gcm = gcm.tolist()
        self.ncls = int(gcm[-1]) + 1
        self.reps = [self.gcm.index(c) for c in range(self.ncls)]
        for m in self.machines:
            nfa = m.nfa
            moves: list[dict] = [{} for _ in nfa.eps]
            for s, lo, hi, d in zip(nfa.e_src, nfa.e_lo, nfa.e_hi, nfa.e_dst):
                row = moves[s]
                for c in range(self.gcm[lo], self.gcm[hi] + 1):
                    row.setdefault(c, set()).add(d)
            m.moves = [{c: tuple(sorted(ts)) for c, ts in row.items()} for row in moves]
            m.mrow = [[row.get(c) for c in range(self.ncls)] for row in m.moves]
            m.keep = [bool(row) or s == nfa.final or s in m.universal for s, row in enumerate(m.moves)]

    # -- automata of lookarounds ----------------------------------------------------------------

    def _classes_of(self, dfa: DFA) -> list[list[int]]:
        """``dfa``'s transitions over the shared byte classes."""
        if dfa.is_empty():
            return [[-1] * self.ncls]
        return dfa.trans[:, dfa.classmap[np.asarray(self.reps)]].tolist()

    def initial(self, m: _Machine) -> tuple:
        """Tracker states at the start of the subject (or of the lexeme)."""
        return tuple(self._lookbehind(x) for x in m.tracked)

    def _lookbehind(self, mid: int) -> int:
        """Compile lookbehind machine ``mid``'s tracker once; its start state (-1: never matches)."""
        if mid not in self.lb_T:
            m = self.machines[mid]
            dfa = self.dfa(m, self.initial(m))
            self.lb_T[mid] = self._classes_of(dfa)
            self.lb_acc[mid] = dfa.accept.tolist()
            self.lb_start[mid] = -1 if dfa.is_empty() else int(dfa.start)
        return self.lb_start[mid]

    def la_key(self, a: _Machine, trk: tuple, m: _Machine) -> int:
        """The lookahead automaton of machine ``a`` entered from machine ``m`` with trackers ``trk``."""
        ctx = tuple(trk[m.tidx[x]] for x in a.tracked)
        key = (a.id, ctx)
        k = self.la_index.get(key)
        if k is None:
            dfa = self.dfa(a, ctx)
            T = self._classes_of(dfa)
            acc = dfa.accept.copy() if not dfa.is_empty() else np.zeros(1, dtype=bool)
            Tn = np.asarray(T, dtype=np.int64)
            univ = acc.copy()
            while True:  # greatest fixed point: accepting, and every byte leads to such a state
                nxt = univ & (Tn >= 0).all(axis=1) & univ[np.maximum(Tn, 0)].all(axis=1)
                if (nxt == univ).all():
                    break
                univ = nxt
            k = len(self.la_T)
            self.la_T.append(T)
            self.la_acc.append(acc.tolist())
            self.la_univ.append(univ.tolist())
            self.la_start.append(-1 if dfa.is_empty() else int(dfa.start))
            self.la_index[key] = k
        return k

    def status(self, k: int, s: int) -> int:
        if s < 0:
            return _DEAD
        return _UNIV if self.la_univ[k][s] else _PENDING

    def dfa(self, m: _Machine, trk0: tuple) -> DFA:
        configs, rows = self.construct(m, trk0)
        accept = np.array([self.accepts(m, cfg) for cfg in configs], dtype=bool)
        trans = np.array(rows, dtype=np.int32).reshape(len(configs), self.ncls)
        return minimize(trim(DFA(trans, accept, np.array(self.gcm, dtype=np.int32), 0)))

    # -- the construction -----------------------------------------------------------------------

    def construct(self, m: _Machine, trk0: tuple) -> tuple[list, list]:
        """Breadth-first subset construction over configurations ``(trackers, clauses)``; a clause
        is ``(NFA state, obligations)``.  Returns the configurations (start first; None never
        appears) and the transition rows over the shared classes."""
        start = self._normalize(m, self._closure(m, m.nfa.start, _EMPTY, trk0), trk0)
        if start is None:
            return [(trk0, _EMPTY)], [[-1] * self.ncls]
        index = {start: 0}
        configs = [start]
        rows = []
        i = 0
        while i < len(configs):
            cfg = configs[i]
            i += 1
            trk, clauses = cfg
            # classes on which every clause state, obligation and tracker moves alike lead to the
            # same configuration: one step per group of them
            looks = [m.mrow[q] for q, _ in clauses]
            looks.extend(self.la_T[k][s] for k, s, _ in {ob for _, obs in clauses for ob in obs if ob[0] >= 0})
            if trk:
                looks.extend(self.lb_T[x][s] for x, s in zip(m.tracked, trk) if s >= 0)
            done: dict = {}
            row = []
            for c, col in enumerate(zip(*looks)):
                j = done.get(col)
                if j is None:
                    nxt = self._step(m, cfg, c)
                    if nxt is None:
                        j = -1
                    else:
                        j = index.get(nxt)
                        if j is None:
                            if len(configs) >= MAX_CONFIGURATIONS or self.total >= MAX_TOTAL_CONFIGURATIONS:
                                self.too_large()
                            j = len(configs)
                            index[nxt] = j
                            configs.append(nxt)
                            self.total += 1
                    done[col] = j
                row.append(j)
            rows.append(row)
        return configs, rows

    def _step(self, m: _Machine, cfg, c: int):
        trk, clauses = cfg
        if trk is not None:
            trk2 = tuple(self.lb_T[x][s][c] if s >= 0 else -1 for x, s in zip(m.tracked, trk))
        else:
            trk2 = None
        out: list = []
        moves = m.moves
        for q, obs in clauses:
            ts = moves[q].get(c)
            if not ts:
                continue
            obs2 = self._advance(obs, c)
            if obs2 is None:
                continue
            for t in ts:
                out.extend(self._closure(m, t, obs2, trk2))
        return self._normalize(m, out, trk2)

    def _advance(self, obs: frozenset, c: int):
        """The obligations after one more byte of class ``c`` (None: one failed)."""
        if not obs:
            return obs
        key = (obs, c)
        hit = self._advances.get(key, 0)
        if hit != 0:
            return hit
        out = []
        res: frozenset | None = None
        for k, s, pol in obs:
            if k < 0:  # "no byte follows"
                break
            s2 = self.la_T[k][s][c]
            st = self.status(k, s2)
            if st == _PENDING:
                out.append((k, s2, pol))
            elif (st == _UNIV) != pol:
                break
        else:
            res = frozenset(out)
            if any((k, s, not pol) in res for k, s, pol in out):
                res = None
        self._advances[key] = res
        return res

    def _closure(self, m: _Machine, q: int, obs: frozenset, trk) -> list:
        """Clauses reached from ``(q, obs)`` by empty moves, conditional edges decided on the way."""
        key = (m.id, q, obs, trk)
        hit = self._closures.get(key)
        if hit is not None:
            return hit
        stack = [(q, obs)]
        seen = set()
        out = []
        eps, cond, keep = m.nfa.eps, m.cond, m.keep
        while stack:
            item = stack.pop()
            if item in seen:
                continue
            seen.add(item)
            q, obs = item
            if keep[q]:
                out.append(item)
            for t in eps[q]:
                stack.append((t, obs))
            edges = cond.get(q)
            if not edges:
                continue
            for kind, ref, pol, t in edges:
                if kind == _LA:
                    k = self.la_key(ref, trk, m)
                    s0 = self.la_start[k]
                    st = self.status(k, s0)
                    if st == _PENDING:
                        if (k, s0, not pol) not in obs:
                            stack.append((t, obs | {(k, s0, pol)}))
                    elif (st == _UNIV) == pol:
                        stack.append((t, obs))
                elif kind == _LB:
                    s = trk[m.tidx[ref.id]]
                    if (s >= 0 and self.lb_acc[ref.id][s]) == pol:
                        stack.append((t, obs))
                else:
                    stack.append((t, obs | {_END_OB}))
        self._closures[key] = out
        return out

    def _normalize(self, m: _Machine, clauses: list, trk):
        """The canonical configuration of ``clauses`` (None: no clause)."""
        if not clauses:
            return None
        by_state: dict[int, list] = {}
        for q, obs in clauses:
            if not obs and q in m.universal:  # matched, anything may follow: accepts everything
                return (None, frozenset(self._closure(m, q, _EMPTY, None)))
            by_state.setdefault(q, []).append(obs)
        out = []
        for q, group in by_state.items():
            if len(group) == 1:
                out.append((q, group[0]))
                continue
            kept: list[frozenset] = []
            for obs in sorted(set(group), key=len):
                if not any(k <= obs for k in kept):
                    kept.append(obs)
            out.extend((q, obs) for obs in kept)
        return (trk, frozenset(out))

    def _holds_at_end(self, ob) -> bool:
        k, s, pol = ob
        return True if k < 0 else self.la_acc[k][s] == pol

    def accepts(self, m: _Machine, cfg) -> bool:
        final = m.nfa.final
        return any((q == final or q in m.universal) and all(self._holds_at_end(ob) for ob in obs)
                   for q, obs in cfg[1])

    # -- terminals ------------------------------------------------------------------------------

    def follow(self, m: _Machine, cfg):
        """None (unconditional), False (never accepting) or the FollowCondition of a configuration."""
        final = m.nfa.final
        ends = [obs for q, obs in cfg[1] if q == final or q in m.universal]
        if not ends:
            return False
        if any(not obs for obs in ends):
            return None
        at_end = any(all(self._holds_at_end(ob) for ob in obs) for obs in ends)
        allowed = []
        for c in range(self.ncls):
            b = self.reps[c]
            value: bool | None = False
            for obs in ends:
                clause: bool | None = True
                for ob in obs:
                    v = self._next_value(ob, c)
                    if v is False:
                        clause = False
                        break
                    if v is None:
                        clause = None
                if clause is True:
                    value = True
                    break
                if clause is None:
                    value = None
            if value is None:
                if b < 0x80 or 0xC2 <= b <= 0xF4:
                    raise UnsupportedFeature(
                        f"regular expression {self.pattern!r} has a lookahead at the end of the terminal that needs "
                        "more than the one following byte to decide, which structgen cannot enforce")
                value = False  # a byte that starts no UTF-8 character never follows
            if value:
                allowed.append(c)
        next_bytes = frozenset(b for b in range(256) if self.gcm[b] in set(allowed))
        if len(next_bytes) == 256 and at_end:
            return None
        if not next_bytes and not at_end:
            return False
        return FollowCondition(next_bytes, at_end)

    def _next_value(self, ob, c: int):
        """Whether obligation ``ob`` holds once the character starting with a byte of class ``c``
        follows (None: that character does not decide it)."""
        k, s, pol = ob
        if k < 0:
            return False
        s1 = self.la_T[k][s][c]
        st = self.status(k, s1)
        if st == _PENDING:
            b = self.reps[c]
            conts = next((rs for (lo, hi), rs in _UTF8_LEADS if lo <= b <= hi), None)
            if conts is None:
                return None
            states = {s1}
            for lo, hi in conts:
                cls = set(self.gcm[lo:hi + 1])
                states = {self.la_T[k][x][d] if x >= 0 else -1 for x in states for d in cls}
            kinds = {self.status(k, x) for x in states}
            if len(kinds) != 1 or _PENDING in kinds:
                return None
            st = kinds.pop()
        return (st == _UNIV) == pol
