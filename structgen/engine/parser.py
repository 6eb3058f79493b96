"""The parser: sets of rule stacks, interned so that equal states share an id.

A *configuration* is the set of stacks the grammar could be in at a lexeme
boundary (several when the grammar is ambiguous, e.g. ``anyOf``), each closed
so its top frame expects a terminal.  Interning turns configurations into
small integers, and ``scan`` is memoised: in practice the parser behaves like
a lazily built DFA over terminals, which makes masks cacheable by state and
rollback a matter of popping a history list.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from ..errors import GrammarError
from .rules import TERM_SHIFT, RuleAutomaton

FRAME_BITS = 22
FRAME_MASK = (1 << FRAME_BITS) - 1
MAX_STACKS = 4096
MAX_DEPTH = 4096


@dataclass(frozen=True)
class IndentIds:
    """An indenter (``structgen.grammar.indenter``) in terminal ids: the newline symbol, the
    column of each of its lexed parts, the bracket terminals, the indent and dedent symbols."""

    newline: int
    columns: dict
    open_paren: frozenset
    close_paren: frozenset
    indent: int
    dedent: int
    max_column: int


class Parser:
    """Configurations are kept in dicts keyed by configuration id, of plain tuples and ints
    (stacks: tuples of frames; a configuration's stack set and allowed terminals: sorted tuples).
    The garbage collector drops tuples of ints from its tracking once it has seen them, and then
    dicts holding only such values, so a grammar's parser memo -- tens of thousands of entries on
    a large schema -- costs its full passes nothing; lists (always tracked, every item rescanned),
    frozensets and dataclass instances would stay tracked forever."""

    def __init__(self, autos: list[RuleAutomaton], start_rule: int, ignore_terms, *, ignore_repeats: bool = False,
                 lexed_as: dict[int, tuple[int, ...]] | None = None, symbol_of: dict[int, int] | None = None,
                 indenter: "IndentIds | None" = None, max_stacks: int = MAX_STACKS, refuse_ambiguous: bool = False):
        self.autos = autos
        # a configuration carries every reading (no graph-structured stack): nesting multiplies
        # them (python.lark: 3x a bracket level).  ``refuse_ambiguous``: a lexeme after which
        # there would be more than ``max_stacks`` is refused (Lark grammars) instead of raising
        self.max_stacks = max_stacks
        self.refuse_ambiguous = refuse_ambiguous
        self.start_rule = start_rule
        # a grammar symbol lexed as several terminals (follow conditions, newline columns): the
        # lexer sees the parts, the rules the symbol (both count as ignored when the symbol is)
        self.lexed_as = lexed_as or {}
        self.symbol_of = symbol_of or {}
        ignore_terms = set(ignore_terms)
        ignore_terms |= {self.symbol_of[t] for t in ignore_terms if t in self.symbol_of}
        self.ignore = tuple(sorted(ignore_terms))
        self.ignore_set = frozenset(self.ignore)
        self.ignore_repeats = ignore_repeats
        self.indenter = indenter
        # per configuration id: its stacks, whether the output may end, whether the last lexeme
        # was ignored (whitespace), and the terminal ids a lexeme may be now (sorted); with an
        # indenter, its context (bracket depth, indentation stack)
        self.stacks: dict[int, tuple] = {}
        self.can_end: dict[int, bool] = {}
        self.after_ignore: dict[int, bool] = {}
        self.allowed: dict[int, tuple[int, ...]] = {}
        self.context: dict[int, tuple | None] = {}
        self._base_end: dict[int, bool] = {}
        self._index: dict[tuple, int] = {}
        self._scan: dict[tuple, int] = {}
        self._closure: dict[tuple, tuple[tuple, bool]] = {}
        self._cost: dict[int, float] = {}
        self._searched: dict[int, float] = {}
        ctx = (0, (0,)) if indenter is not None else None
        self.initial = self._intern(*self._close_all([((start_rule << FRAME_BITS) | 0,)]), False, ctx)

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
            if len(res[0]) > self.max_stacks:
                self._too_ambiguous()
            return res
        out: set = set()
        can_end = False
        for st in stacks:
            s, e = self._closure_of(st)
            out.update(s)
            can_end |= e
            if len(out) > self.max_stacks:
                self._too_ambiguous()
        return tuple(sorted(out)), can_end

    def _too_ambiguous(self):
        raise GrammarError(
            f"the grammar is too ambiguous here (over {self.max_stacks} parse stacks); simplify anyOf/oneOf overlaps"
        )

    def _intern(self, stacks: tuple, can_end: bool, after_ignore: bool, ctx: tuple | None = None) -> int:
        key = (stacks, can_end, after_ignore, ctx)
        cid = self._index.get(key)
        if cid is None:
            allowed = set()
            for st in stacks:
                top = st[-1]
                allowed.update(self.autos[top >> FRAME_BITS].terms[top & FRAME_MASK])
            end = can_end
            ind = self.indenter
            if ind is not None:
                if ctx[0] > 0:  # inside brackets the indenter drops newlines: lexed, then ignored
                    allowed.add(ind.newline)
                if len(ctx[1]) > 1:  # at the end, the indenter closes every open block
                    end = self._ends_after_dedents(stacks, len(ctx[1]) - 1)
                allowed.discard(ind.indent)
                allowed.discard(ind.dedent)
            if not after_ignore and (allowed or end):
                allowed.update(self.ignore)
            if self.lexed_as:
                parts = set()
                for t in allowed:
                    parts.update(self.lexed_as.get(t, (t,)))
                allowed = parts
            cid = len(self.stacks)
            self.stacks[cid] = stacks
            self.can_end[cid] = end
            self._base_end[cid] = can_end
            self.after_ignore[cid] = after_ignore
            self.allowed[cid] = tuple(sorted(allowed))
            self.context[cid] = ctx
            self._index[key] = cid
        return cid

    def _ends_after_dedents(self, stacks: tuple, n: int) -> bool:
        """Whether the output may end once ``n`` dedents close the open blocks."""
        for _ in range(n):
            moved = self._move(stacks, (self.indenter.dedent,))
            if not moved:
                return False
            stacks, can_end = self._close_all(moved)
        return can_end

    def _move(self, stacks: tuple, real: tuple) -> list:
        """The stacks after a lexeme of any of ``real`` (grammar symbols)."""
        moved = []
        for st in stacks:
            top = st[-1]
            r, s = top >> FRAME_BITS, top & FRAME_MASK
            edges, base = self.autos[r].term_next, s << TERM_SHIFT
            for t in real:
                nxt = edges.get(base | t)
                if nxt is not None:
                    moved.append(st[:-1] + ((r << FRAME_BITS) | nxt,))
        return moved

    # -- queries ----------------------------------------------------------------
    def scan(self, cid: int, terms: tuple) -> int:
        """Configuration after a lexeme matching any of ``terms`` (sorted terminal ids); -1 if none fits."""
        key = (cid, terms)
        hit = self._scan.get(key)
        if hit is not None:
            return hit
        try:
            res = self._scan_new(cid, terms)
        except GrammarError:
            if not self.refuse_ambiguous:
                raise
            res = -1  # more readings than max_stacks: the lexeme is refused (documented bound)
        self._scan[key] = res
        return res

    def _scan_new(self, cid: int, terms: tuple) -> int:
        ignore = self.ignore_set
        ctx = self.context[cid]
        ind = self.indenter
        column = None
        if self.symbol_of:
            sym = self.symbol_of
            if ind is not None:
                column = next((ind.columns[t] for t in terms if t in ind.columns), None)
            terms = tuple(sorted({sym.get(t, t) for t in terms}))
        if column is not None:
            res = self._scan_newline(cid, ctx, column)
            if res >= 0:
                return res
            terms = tuple(t for t in terms if t != ind.newline)
            if not terms:
                return -1
        real = tuple(t for t in terms if t not in ignore) or terms
        moved = self._move(self.stacks[cid], real)
        if moved:
            stacks, can_end = self._close_all(moved)
            if ind is not None:
                depth = ctx[0] + any(t in ind.open_paren for t in real) - any(t in ind.close_paren for t in real)
                if depth < 0:
                    return -1
                ctx = (depth, ctx[1])
            return self._intern(stacks, can_end, False, ctx)
        if not self.after_ignore[cid] and any(t in ignore for t in real):
            if self.ignore_repeats:
                return cid
            return self._intern(self.stacks[cid], self._base_end[cid], True, ctx)
        return -1

    def _scan_newline(self, cid: int, ctx: tuple, column: int) -> int:
        """lark's ``Indenter.handle_NL``: inside brackets the newline is dropped; else it is
        followed by one indent (a deeper column) or by the dedents back to an open column."""
        ind = self.indenter
        depth, levels = ctx
        if depth > 0:
            return cid
        if column > ind.max_column:
            return -1  # deeper than the indenter's bound (IndenterConfig.max_column)
        moved = self._move(self.stacks[cid], (ind.newline,))
        if not moved:
            return -1
        stacks, can_end = self._close_all(moved)
        if column > levels[-1]:
            moved = self._move(stacks, (ind.indent,))
            if not moved:
                return -1
            stacks, can_end = self._close_all(moved)
            levels = levels + (column,)
        else:
            while column < levels[-1]:
                moved = self._move(stacks, (ind.dedent,))
                if not moved:
                    return -1
                stacks, can_end = self._close_all(moved)
                levels = levels[:-1]
            if column != levels[-1]:
                return -1  # lark's DedentError: a dedent to a column no open block has
        return self._intern(stacks, can_end, False, (0, levels))

    def without_stacks(self, cid: int, drop) -> int:
        """The configuration without the stacks at indices ``drop`` (-1 if none is left): a check
        at a value boundary (structgen.engine.checks) failed for those readings."""
        kept = tuple(st for i, st in enumerate(self.stacks[cid]) if i not in drop)
        if not kept:
            return -1
        return self._intern(kept, self._base_end[cid], self.after_ignore[cid], self.context[cid])

    def searched_cost(self, cid: int, lengths, limit: int = 300) -> float:
        """Fewest bytes of lexemes that finish the output from ``cid``, by an A* search over
        configurations (``lengths``: each lexed terminal's shortest lexeme; the rule costs of
        :meth:`cost` are the heuristic, a lower bound).  For grammars whose configurations carry
        an indenter context: the rule costs alone cannot know that a dedent back to column 4 needs
        a newline of five bytes.  A lower bound if the search stops at ``limit`` configurations
        (memoised per configuration)."""
        memo = self._searched
        hit = memo.get(cid)
        if hit is not None:
            return hit
        best = {cid: 0.0}
        heap = [(self.cost(cid), 0.0, cid)]
        result, settled = float("inf"), 0
        while heap:
            f, d, c = heapq.heappop(heap)
            if d > best[c]:
                continue
            if self.can_end[c]:
                result = d
                break
            settled += 1
            if settled > limit:
                result = f
                break
            depth, levels = self.context[c]
            columns = self.indenter.columns
            for t in self.allowed[c]:
                if t in self.ignore_set:
                    continue
                col = columns.get(t)
                if col is not None and (depth or (col not in levels and col != levels[-1] + 1)):
                    continue  # a newline dropped in brackets, or one deeper than needed
                try:
                    c2 = self.scan(c, (t,))
                except GrammarError:  # a path too ambiguous to follow is never the shortest one needed
                    continue
                if c2 < 0 or c2 == c or len(self.stacks[c2]) > 64:
                    continue
                nd = d + lengths[t]
                if nd < best.get(c2, float("inf")):
                    best[c2] = nd
                    heapq.heappush(heap, (nd + self.cost(c2), nd, c2))
        if len(memo) > 100_000:
            memo.clear()
        memo[cid] = result
        return result

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
