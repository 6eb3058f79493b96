"""The parser: sets of rule stacks, interned so that equal states share an id.

A *configuration* is the set of stacks the grammar could be in at a lexeme
boundary (several when the grammar is ambiguous, e.g. ``anyOf``), each closed
so its top frame expects a terminal.  Interning turns configurations into
small integers, and ``scan`` is memoised: in practice the parser behaves like
a lazily built DFA over terminals, which makes masks cacheable by state and
rollback a matter of popping a history list.
"""
from __future__ import annotations

from ..errors import GrammarError
from .rules import TERM_SHIFT, RuleAutomaton

FRAME_BITS = 22
FRAME_MASK = (1 << FRAME_BITS) - 1
MAX_STACKS = 4096
MAX_DEPTH = 4096


class Parser:
    """Configurations are kept in dicts keyed by configuration id, of plain tuples and ints
    (stacks: tuples of frames; a configuration's stack set and allowed terminals: sorted tuples).
    The garbage collector drops tuples of ints from its tracking once it has seen them, and then
    dicts holding only such values, so a grammar's parser memo -- tens of thousands of entries on
    a large schema -- costs its full passes nothing; lists (always tracked, every item rescanned),
    frozensets and dataclass instances would stay tracked forever."""

    def __init__(self, autos: list[RuleAutomaton], start_rule: int, ignore_terms):
        self.autos = autos
        self.start_rule = start_rule
        self.ignore = tuple(sorted(ignore_terms))
        self.ignore_set = frozenset(self.ignore)
        # per configuration id: its stacks, whether the output may end, whether the last lexeme
        # was ignored (whitespace), and the terminal ids a lexeme may be now (sorted)
        self.stacks: dict[int, tuple] = {}
        self.can_end: dict[int, bool] = {}
        self.after_ignore: dict[int, bool] = {}
        self.allowed: dict[int, tuple[int, ...]] = {}
        self._index: dict[tuple, int] = {}
        self._scan: dict[tuple, int] = {}
        self._closure: dict[tuple, tuple[tuple, bool]] = {}
        self._cost: dict[int, float] = {}
        self.initial = self._intern(*self._close_all([((start_rule << FRAME_BITS) | 0,)]), False)

    @property
    def n_configs(self) -> int:
        return len(self.stacks)

    # -- construction -------------------------------------------------------
    def _closure_of(self, stack: tuple) -> tuple[tuple, bool]:
        hit = self._closure.get(stack)
        if hit is not None:
            return hit
        autos = self.autos
        out = set()
        can_end = False
        work = [stack]
        seen = set()
        while work:
            st = work.pop()
            if st in seen:
                continue
            seen.add(st)
            if not st:
                can_end = True
                continue
            if len(st) > MAX_DEPTH:
                raise GrammarError(f"nesting deeper than {MAX_DEPTH} levels")
            top = st[-1]
            r, s = top >> FRAME_BITS, top & FRAME_MASK
            a = autos[r]
            if a.terms[s]:
                out.add(st)
            below = st[:-1]
            for n, nxt in a.nt_edges[s]:
                work.append(below + ((r << FRAME_BITS) | nxt, n << FRAME_BITS))
            if a.final[s]:
                work.append(below)
        res = (tuple(sorted(out)), can_end)
        if len(self._closure) < 200_000:
            self._closure[stack] = res
        return res

    def _close_all(self, stacks) -> tuple[tuple, bool]:
        if len(stacks) == 1:  # the usual case: one closure, already sorted
            res = self._closure_of(stacks[0])
            if len(res[0]) > MAX_STACKS:
                self._too_ambiguous()
            return res
        out: set = set()
        can_end = False
        for st in stacks:
            s, e = self._closure_of(st)
            out.update(s)
            can_end |= e
            if len(out) > MAX_STACKS:
                self._too_ambiguous()
        return tuple(sorted(out)), can_end

    @staticmethod
    def _too_ambiguous():
        raise GrammarError(
            f"the grammar is too ambiguous here (over {MAX_STACKS} parse stacks); simplify anyOf/oneOf overlaps"
        )

    def _intern(self, stacks: tuple, can_end: bool, after_ignore: bool) -> int:
        key = (stacks, can_end, after_ignore)
        cid = self._index.get(key)
        if cid is None:
            allowed = set()
            for st in stacks:
                top = st[-1]
                allowed.update(self.autos[top >> FRAME_BITS].terms[top & FRAME_MASK])
            if not after_ignore and (allowed or can_end):
                allowed.update(self.ignore)
            cid = len(self.stacks)
            self.stacks[cid] = stacks
            self.can_end[cid] = can_end
            self.after_ignore[cid] = after_ignore
            self.allowed[cid] = tuple(sorted(allowed))
            self._index[key] = cid
        return cid

    # -- queries ----------------------------------------------------------------
    def scan(self, cid: int, terms: tuple) -> int:
        """Configuration after a lexeme matching any of ``terms`` (sorted terminal ids); -1 if none fits."""
        key = (cid, terms)
        hit = self._scan.get(key)
        if hit is not None:
            return hit
        ignore = self.ignore_set
        real = tuple(t for t in terms if t not in ignore) or terms
        moved = []
        for st in self.stacks[cid]:
            top = st[-1]
            r, s = top >> FRAME_BITS, top & FRAME_MASK
            edges, base = self.autos[r].term_next, s << TERM_SHIFT
            for t in real:
                nxt = edges.get(base | t)
                if nxt is not None:
                    moved.append(st[:-1] + ((r << FRAME_BITS) | nxt,))
        if moved:
            stacks, can_end = self._close_all(moved)
            res = self._intern(stacks, can_end, False)
        elif not self.after_ignore[cid] and any(t in ignore for t in real):
            res = self._intern(self.stacks[cid], self.can_end[cid], True)
        else:
            res = -1
        self._scan[key] = res
        return res

    def without_stacks(self, cid: int, drop) -> int:
        """The configuration without the stacks at indices ``drop`` (-1 if none is left): a check
        at a value boundary (structgen.engine.checks) failed for those readings."""
        kept = tuple(st for i, st in enumerate(self.stacks[cid]) if i not in drop)
        if not kept:
            return -1
        return self._intern(kept, self.can_end[cid], self.after_ignore[cid])

    def cost(self, cid: int) -> float:
        """Min bytes of lexemes needed to finish from this configuration."""
        c = self._cost.get(cid)
        if c is None:
            best = 0.0 if self.can_end[cid] else float("inf")
            for st in self.stacks[cid]:
                total = 0.0
                for fr in st:
                    total += self.autos[fr >> FRAME_BITS].cost[fr & FRAME_MASK]
                best = min(best, total)
            self._cost[cid] = c = best
        return c
