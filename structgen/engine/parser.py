"""The parser over rule automata: a graph-structured stack, interned so equal states share an id.

A *configuration* is what the grammar could be at a lexeme boundary: a set of *items* (a rule
automaton's state expecting a terminal, and the *call* it runs in).  A call node is a rule
called at some position with the set of places it returns to (a frame in the caller and the
caller's call), so every reading that calls one rule at one position shares one node, as in a
GLR parser's graph-structured stack: ambiguity and nesting add items and returns instead of
multiplying whole stacks.  Call nodes are hash-consed, so configurations compare by value;
interning turns them into small integers and ``scan`` is memoised: the parser behaves like a
lazily built DFA over terminals, which makes masks cacheable by state and rollback a matter of
popping a history list.

The module is one algorithm, the graph-structured-stack parser (interning, ``scan``, the cuts a
mask reads through, the indentation context and the budget's per-configuration costs all work on
the same packed call nodes and tables), which is what needs its ~700 lines.
"""
from __future__ import annotations

import heapq
import threading
from array import array
from dataclasses import dataclass

from ..errors import GrammarError
from .rules import TERM_SHIFT, RuleAutomaton
from .untracked import ChunkedList, InternTable

FRAME_BITS = 22
FRAME_MASK = (1 << FRAME_BITS) - 1
#: an item, and a return, is one int: ``call << CALL_SHIFT | frame`` (ints hash and sort faster
#: than pairs, and a configuration of ~50 items is hashed on every lookup)
CALL_SHIFT = 48
ITEM_FRAME = (1 << CALL_SHIFT) - 1
MAX_STACKS = 4096
#: the call a start rule returns to: the output may end there
END = -1
#: the call that stands for everything below a cut configuration's horizon (:meth:`Parser.cut`),
#: and the one return its positions keep for it
OPAQUE = -2
OPAQUE_ITEM = OPAQUE << CALL_SHIFT
#: a memoised scan that reached below a cut's horizon
_BELOW_CUT = -2
INF = float("inf")


class BelowCut(Exception):
    """A scan from a cut configuration popped below its horizon: what follows depends on the part
    of the stack the cut left out, so the caller computes from the whole configuration instead."""


def _callers_first(rules: list, inside: dict) -> tuple:
    """``rules`` ordered so each comes after the rules that call it at the same position
    (``inside``: rule -> the frames it returns to there; no left recursion, so no cycle)."""
    out: list = []
    done: set = set()
    for x in rules:
        work = [(x, False)]
        while work:
            y, ready = work.pop()
            if y in done:
                continue
            if ready:
                done.add(y)
                out.append(y)
                continue
            work.append((y, True))
            work.extend((f >> FRAME_BITS, False) for f in inside[y] if (f >> FRAME_BITS) not in done)
    return tuple(out)


@dataclass(frozen=True)
class IndentIds:
    """An indenter (``structgen.grammar.indenter``) in terminal ids: the newline symbol, the
    column of each of its lexed parts (-1: the part that matches every column), the part of
    each column, the bracket terminals, the indent and dedent symbols."""

    newline: int
    columns: dict
    part_of: dict
    open_paren: frozenset
    close_paren: frozenset
    indent: int
    dedent: int
    max_column: int


class Parser:
    """Per configuration id: ``stacks`` (its items, sorted ints ``call << CALL_SHIFT | frame``),
    ``allowed`` terminals (one shared tuple per distinct set) and ``context`` in append-only chunked
    tables, ``can_end`` and ``after_ignore`` in byte arrays; ``positions``: the GSS's nodes (tuples of ints).
    A dict or list that keeps receiving new tuples is tracked again at each insertion and walked by
    every full collection, so the tables keep tuples in frozen chunks and find keys through dicts
    of ints (:mod:`structgen.engine.untracked`): a grammar's parser memo -- a hundred thousand
    entries on python.lark -- costs the collector's full passes nearly nothing; lists (always tracked, every item rescanned),
    frozensets and dataclass instances would stay tracked forever."""

    def __init__(self, autos: list[RuleAutomaton], start_rule: int, ignore_terms, *, ignore_repeats: bool = False,
                 lexed_as: dict[int, tuple[int, ...]] | None = None, symbol_of: dict[int, int] | None = None,
                 indenter: "IndentIds | None" = None, max_stacks: int = MAX_STACKS, refuse_ambiguous: bool = False):
        self.autos = autos
        # ``refuse_ambiguous``: a lexeme after which there would be more than ``max_stacks``
        # items is refused (Lark grammars) instead of raising
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
        self.stacks = ChunkedList()
        self.can_end = bytearray()  # one byte per configuration: 0 or 1 (a dict entry was ~50 bytes)
        self.after_ignore = bytearray()
        self.allowed = ChunkedList()
        self.context = ChunkedList()
        self._base_end = bytearray()
        self._index = InternTable()
        self._scan: dict[int, int] = {}
        self._cuts: dict[int, int] = {}  # cid * 64 + depth -> the cut configuration (see cut)
        self._term_set_ids: dict[tuple, int] = {}
        self._tid_lock = threading.Lock()
        self._term_info: list[tuple] = []  # tid -> what every scan of the set needs (see _readings)
        self._lexed_of: dict[tuple, tuple] = {}  # (symbols, newline parts) -> allowed terminals (see _lexed)
        self._lexed_pool: dict[tuple, tuple] = {}  # one object per distinct allowed tuple
        self._closure = InternTable()  # active items -> index into _closed
        self._closed = ChunkedList()
        self._cost: dict[int, float] = {}
        self._searched: dict[int, float] = {}
        ctx = (0, (0,)) if indenter is not None else None
        #: the graph-structured stack's nodes, one per position that called rules (see _close_all):
        #: id -> the rules called there from outside with their outside returns (sorted, as items)
        #: (tuples, not dicts: the collector untracks tuples of ints at once, dicts only in full passes)
        self._positions = InternTable()
        self.positions = self._positions.keys
        self._templates: dict[frozenset, tuple] = {}
        # per position: its roots' template (an index into _template_list; an array, which the
        # garbage collector never walks, unlike a list of a hundred thousand references)
        self._position_template = array("i")
        self._template_list: list[tuple] = []
        self._nullable_of: list[bool | None] = [None] * len(autos)
        self._rets: dict[int, int] = {}  # call -> index into _ret_values
        self._ret_values = ChunkedList()
        self._indent_after: dict[tuple, bool] = {}
        self._call_cost: dict[int, float] = {}
        self._costed = 0
        self._n_rules = len(autos)
        self._term_next = [a.term_next for a in autos]  # per rule: (state << TERM_SHIFT | terminal) -> state
        self._frames: dict[int, tuple] = {}  # frame -> what a closure reads of it (see _frame)
        k0 = self._position({start_rule: (END << CALL_SHIFT,)}) * self._n_rules + start_rule
        self.initial = self._intern(*self._close_all([(k0 << CALL_SHIFT) | (start_rule << FRAME_BITS)]), False, ctx)

    @property
    def n_configs(self) -> int:
        return len(self.stacks)

    # -- construction -------------------------------------------------------
    def _position(self, roots: dict) -> int:
        """The node of a position where ``roots`` (rule -> its callers' returns, sorted items)
        were called, hash-consed so equal futures share one id.  Call ``x`` made
        there is the int ``position * n_rules + x``; what the roots call in turn follows from the
        roots alone (:meth:`_template`), so they are the whole key."""
        key = tuple(sorted(roots.items()))
        p = self._positions.get(key)
        if p is None:
            p = self._positions.add(key)
            self._position_template.append(self._template(frozenset(roots))[4])
        return p

    def _template(self, roots: frozenset) -> tuple:
        """What calling ``roots`` at one position predicts, the same wherever it happens: the
        frames expecting a terminal (each in the call of its own rule), per rule called the
        frames it returns to from inside (its callers there), the rules in call order (callers
        first), the rules that may end there without a byte (their callers continue) and its index."""
        hit = self._templates.get(roots)
        if hit is not None:
            return hit
        autos = self.autos
        level = {m: [set(), False] for m in roots}
        order = list(roots)
        tops = []
        seen = set()
        work = [m << FRAME_BITS for m in order]
        while work:
            frame = work.pop()
            if frame in seen:
                continue
            seen.add(frame)
            r, s = frame >> FRAME_BITS, frame & FRAME_MASK
            a = autos[r]
            if a.terms[s]:
                tops.append(frame)
            for n, nxt in a.nt_edges[s]:
                ret = (r << FRAME_BITS) | nxt
                lv = level.get(n)
                if lv is None:
                    lv = level[n] = [set(), False]
                    order.append(n)
                    work.append(n << FRAME_BITS)
                if ret not in lv[0]:
                    lv[0].add(ret)
                    if lv[1]:  # n already ended here (it may be empty): the new caller continues too
                        work.append(ret)
            if a.final[s]:
                lv = level[r]
                lv[1] = True
                work.extend(lv[0])
        inside = {x: tuple(sorted(lv[0])) for x, lv in level.items()}
        # tops and returns as items of call 0 + their rule: a position adds its base call
        hit = self._templates[roots] = (tuple(((f >> FRAME_BITS) << CALL_SHIFT) | f for f in sorted(tops)),
                                        {x: tuple(((f >> FRAME_BITS) << CALL_SHIFT) | f for f in fs)
                                         for x, fs in inside.items()},
                                        _callers_first(order, inside),
                                        frozenset(x for x, lv in level.items() if lv[1]), len(self._template_list))
        self._template_list.append(hit)
        return hit

    def _nullable(self, rule: int) -> bool:
        """Whether ``rule`` may end where it is called, without a byte."""
        hit = self._nullable_of[rule]
        if hit is None:
            hit = self._nullable_of[rule] = rule in self._template(frozenset((rule,)))[3]
        return hit

    def _frame(self, frame: int) -> tuple:
        """What a closure reads of a rule state (``rule << FRAME_BITS | state``), made once: whether
        it expects a terminal, its rule edges as (rule, the frame returned to, whether the rule may
        end without a byte), whether the rule may end there."""
        r, s = frame >> FRAME_BITS, frame & FRAME_MASK
        a = self.autos[r]
        info = self._frames[frame] = (bool(a.terms[s]), tuple((n, (r << FRAME_BITS) | nxt, self._nullable(n))
                                                              for n, nxt in a.nt_edges[s]), bool(a.final[s]))
        return info

    def returns(self, call: int) -> tuple:
        """Where ``call`` returns to, as items (``END`` as the call when the output may end)."""
        i = self._rets.get(call)
        if i is not None:
            return self._ret_values[i]
        p, x = divmod(call, self._n_rules)
        outside = ()
        for rule, out in self.positions[p]:
            if rule == x:
                outside = out
                break
        inside = self._template_list[self._position_template[p]][1].get(x, ())
        base = (p * self._n_rules) << CALL_SHIFT
        rets = (outside + tuple([base + j for j in inside])) if inside else outside
        if len(self._rets) > 500_000:
            self._rets.clear()
            self._ret_values = ChunkedList()
        self._rets[call] = self._ret_values.append(rets)
        return rets

    def _close_all(self, active) -> tuple[tuple, bool]:
        """The items of ``active`` and everything they call at this position, expanded until each
        item expects a terminal: (the sorted items expecting a terminal, whether the output may
        end).  Every call of one rule at this position shares one call node whose returns are the
        union of its callers' (the GSS's packing), so nesting adds items instead of multiplying
        readings; what the called rules call in turn comes from a template cached per set of
        rules, so a closure costs the items that moved, not the ~50 rules an expression opens."""
        key = tuple(sorted(set(active))) if len(active) > 1 else tuple(active)
        hit = self._closure.get(key)
        if hit is not None:
            return self._closed[hit]
        frames = self._frames
        tops = []
        can_end = False
        roots: dict[int, set] = {}
        seen = set()
        work = list(key)
        while work:
            item = work.pop()
            if item in seen:
                continue
            seen.add(item)
            k = item >> CALL_SHIFT
            if k < 0:
                if k == END:
                    can_end = True
                    continue
                raise BelowCut
            frame = item & ITEM_FRAME
            info = frames.get(frame)
            if info is None:
                info = self._frame(frame)
            expects, edges, final = info
            if expects:
                tops.append(item)
            if edges:
                call = k << CALL_SHIFT
                for n, ret_frame, nullable in edges:
                    ret = call | ret_frame
                    rs = roots.get(n)
                    if rs is None:
                        roots[n] = {ret}
                    else:
                        rs.add(ret)
                    if nullable:  # n may end here: its caller continues
                        work.append(ret)
            if final:
                work.extend(self.returns(k))
        if roots:
            p = self._position({n: tuple(sorted(rs)) if len(rs) > 1 else tuple(rs) for n, rs in roots.items()})
            base = (p * self._n_rules) << CALL_SHIFT
            tops.extend([base + i for i in self._template_list[self._position_template[p]][0]])
        if len(tops) > self.max_stacks:
            if self._below_a_cut(tops):
                raise BelowCut  # let the whole stack refuse it (or raise), as it would uncut
            self._too_ambiguous()
        res = (tuple(sorted(tops)), can_end)
        if len(self._closure) < 200_000:
            self._closure.add(key)
            self._closed.append(res)
        return res

    def _below_a_cut(self, items) -> bool:
        """Whether any of ``items`` lies on a cut stack (returns, at some depth, to OPAQUE)."""
        nr, seen = self._n_rules, set()
        work = [item >> CALL_SHIFT for item in items]
        while work:
            k = work.pop()
            if k == OPAQUE:
                return True
            if k < 0 or k // nr in seen:
                continue
            seen.add(k // nr)
            work.extend(ret >> CALL_SHIFT for _rule, outside in self.positions[k // nr] for ret in outside)
        return False

    def _too_ambiguous(self):
        raise GrammarError(
            f"the grammar is too ambiguous here (over {self.max_stacks} parse items); simplify anyOf/oneOf overlaps"
        )

    def _intern(self, stacks: tuple, can_end: bool, after_ignore: bool, ctx: tuple | None = None) -> int:
        key = (stacks, can_end, after_ignore, ctx)
        cid = self._index.get(key)
        if cid is not None:
            return cid
        # everything is derived before the configuration is added: from a cut configuration the
        # indenter's dedents may reach below the horizon (BelowCut), which must leave no entry
        allowed = set()
        autos = self.autos
        for item in stacks:
            frame = item & ITEM_FRAME
            allowed.update(autos[frame >> FRAME_BITS].terms[frame & FRAME_MASK])
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
        newline = None
        if ind is not None and self.lexed_as and ind.newline in allowed:
            allowed.discard(ind.newline)
            newline = tuple(self._newline_parts(stacks, ctx))
        return self._add(key, end, self._lexed(frozenset(allowed), newline))

    def _lexed(self, symbols: frozenset, newline: tuple | None) -> tuple:
        """The sorted terminals a lexer needs for grammar ``symbols`` (each symbol's lexed parts) and the
        ``newline`` parts a context adds, one shared tuple per distinct result: a few hundred sets
        recur over python.lark's hundreds of thousands of configurations, and expanding ~100 symbols
        anew was a tenth of its mask time."""
        key = (symbols, newline)
        hit = self._lexed_of.get(key)
        if hit is None:
            lexed_as = self.lexed_as
            parts = {p for t in symbols for p in lexed_as.get(t, (t,))} if lexed_as else set(symbols)
            parts.update(newline or ())
            if len(self._lexed_of) > 100_000:
                self._lexed_of.clear()
                self._lexed_pool.clear()
            hit = tuple(sorted(parts))
            hit = self._lexed_of[key] = self._lexed_pool.setdefault(hit, hit)
        return hit

    def _add(self, key: tuple, end: bool, allowed: tuple) -> int:
        """Add configuration ``key`` (its items, base end, after-ignore flag and context) with the
        end and allowed terminals derived from it."""
        cid = self._index.add(key)
        stacks, can_end, after_ignore, ctx = key
        self.stacks.append(stacks)
        self.can_end.append(end)
        self._base_end.append(can_end)
        self.after_ignore.append(after_ignore)
        self.allowed.append(allowed)
        self.context.append(ctx)
        return cid

    def _newline_parts(self, stacks: tuple, ctx: tuple) -> tuple:
        """The newline's lexed parts the lexer needs here: the one of any column (its lexemes end
        where every column's would; its column is refused), and the columns a newline may end at
        outside brackets -- an open block's (a dedent or none) and, where the grammar takes an
        indent after the newline, every deeper one.  Inside brackets no column matters."""
        ind = self.indenter
        part_of = ind.part_of
        out = [part_of[-1]]
        if ctx[0] > 0:
            return out
        levels = ctx[1]
        out.extend(part_of[c] for c in levels if c in part_of)
        moved = tuple(self._move(stacks, (ind.newline,)))
        indent = self._indent_after.get(moved)
        if indent is None:  # the items a newline moves are few and shared along a statement
            indent = self._indent_after[moved] = bool(moved) and bool(
                self._move(self._close_all(moved)[0], (ind.indent,)))
        if indent:
            out.extend(part_of[c] for c in range(levels[-1] + 1, ind.max_column + 1) if c in part_of)
        return out

    def _ends_after_dedents(self, stacks: tuple, n: int) -> bool:
        """Whether the output may end once ``n`` dedents close the open blocks."""
        for _ in range(n):
            moved = self._move(stacks, (self.indenter.dedent,))
            if not moved:
                return False
            stacks, can_end = self._close_all(moved)
        return can_end

    def _move(self, stacks: tuple, real: tuple) -> list:
        """The items after a lexeme of any of ``real`` (grammar symbols)."""
        term_next = self._term_next
        moved = []
        for item in stacks:
            s = item & FRAME_MASK
            edges, base = term_next[(item & ITEM_FRAME) >> FRAME_BITS], s << TERM_SHIFT
            for t in real:
                nxt = edges.get(base | t)
                if nxt is not None:
                    moved.append(item - s + nxt)
        return moved

    # -- queries ----------------------------------------------------------------
    def scan(self, cid: int, terms: tuple) -> int:
        """Configuration after a lexeme matching any of ``terms`` (sorted terminal ids); -1 if none fits."""
        tid = self._term_set_ids.get(terms)
        if tid is None:
            with self._tid_lock:  # rare (a grammar has few distinct sets): numbered once, whatever the threads
                tid = self._term_set_ids.get(terms)
                if tid is None:
                    self._term_info.append(self._readings(terms))
                    tid = self._term_set_ids[terms] = len(self._term_info) - 1
        key = (cid << 32) | tid  # an int: a dict of ints is never tracked by the garbage collector
        hit = self._scan.get(key)
        if hit is not None:
            if hit == _BELOW_CUT:
                raise BelowCut
            return hit
        try:
            res = self._scan_new(cid, tid)
        except BelowCut:
            self._scan[key] = _BELOW_CUT
            raise
        except GrammarError:
            if not self.refuse_ambiguous:
                raise
            res = -1  # more readings than max_stacks: the lexeme is refused (documented bound)
        self._scan[key] = res
        return res

    def _readings(self, terms: tuple) -> tuple:
        """What a scan of the terminal set ``terms`` needs of it, the same from every configuration
        (made once, when the set is numbered): the newline column it ends at (None: no newline), the
        symbols that move items once a newline is set aside (the non-ignored, or all), the bracket
        depth they change and whether an ignored one is among them."""
        ind, column = self.indenter, None
        if self.symbol_of:
            if ind is not None:
                column = max((ind.columns[t] for t in terms if t in ind.columns), default=None)
            terms = tuple(sorted({self.symbol_of.get(t, t) for t in terms}))
        if column is not None:
            terms = tuple(t for t in terms if t != ind.newline)
        real = tuple(t for t in terms if t not in self.ignore_set) or terms
        delta = 0 if ind is None else (any(t in ind.open_paren for t in real) - any(t in ind.close_paren for t in real))
        return column, real, delta, any(t in self.ignore_set for t in real)

    def _scan_new(self, cid: int, tid: int) -> int:
        column, real, delta, ignored = self._term_info[tid]
        ctx = self.context[cid]
        if column is not None:
            res = self._scan_newline(cid, ctx, column)
            if res >= 0:
                return res
        if not real:
            return -1
        moved = self._move(self.stacks[cid], real)
        if moved:
            stacks, can_end = self._close_all(moved)
            if self.indenter is not None:
                depth = ctx[0] + delta
                if depth < 0:
                    return -1
                ctx = (depth, ctx[1])
            return self._intern(stacks, can_end, False, ctx)
        if ignored and not self.after_ignore[cid]:
            if self.ignore_repeats:
                return cid
            return self._intern(self.stacks[cid], bool(self._base_end[cid]), True, ctx)
        return -1

    def _scan_newline(self, cid: int, ctx: tuple, column: int) -> int:
        """lark's ``Indenter.handle_NL``: inside brackets the newline is dropped; else it is
        followed by one indent (a deeper column) or by the dedents back to an open column."""
        ind = self.indenter
        depth, levels = ctx
        if depth > 0:
            return cid
        if column < 0:
            return -1  # read only as the newline at any column: no open block's, no indent's, or past max_column
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

    def cut(self, cid: int, depth: int) -> int:
        """Configuration ``cid`` with its stack cut ``depth`` positions below its items: what lies
        deeper is one opaque return, and a scan that reaches it raises :class:`BelowCut`.  Masks
        read the stack only as deep as their tokens pop, so configurations that differ only deeper
        share one cut, its scans and its masks (json.lark's 2,571 first masks held 47 contents).

        The cut is the stack's image under a one-to-one map of its positions (each position at its
        least distance from the items); every scan from the cut that raises nothing is the image of
        the scan from ``cid``: the same terminals allowed, the same ends, as many items.  Returns
        ``cid`` where nothing lies below the horizon or two positions would share an image."""
        key = cid * 64 + depth
        hit = self._cuts.get(key)
        if hit is None:
            if len(self._cuts) > 500_000:
                self._cuts.clear()
            hit = self._cuts[key] = self._cut_new(cid, depth)
        return hit

    def _cut_new(self, cid: int, depth: int) -> int:
        nr, positions = self._n_rules, self.positions
        stacks = self.stacks[cid]
        # the positions fewer than ``depth`` returns below the items, each at its least distance:
        # one image per position, so the cut's items and the stack's correspond one to one
        kept = {item >> CALL_SHIFT for item in stacks}
        kept.discard(END)
        kept = {k // nr for k in kept}
        frontier = list(kept)
        for level in range(depth):
            nxt = set()
            for p in frontier:
                for _rule, outside in positions[p]:
                    for ret in outside:
                        if ret >= 0 and (ret >> CALL_SHIFT) // nr not in kept:
                            nxt.add((ret >> CALL_SHIFT) // nr)
            if level == depth - 1:
                if not nxt:
                    return cid  # nothing lies below the horizon
            else:
                kept |= nxt
                frontier = nxt
        image: dict[int, int] = {}
        for p in sorted(kept):  # a position returns only into older ones (smaller ids)
            roots = {}
            for rule, outside in positions[p]:
                rets = set()
                for ret in outside:
                    if ret < 0:
                        rets.add(ret)
                        continue
                    q = (ret >> CALL_SHIFT) // nr
                    if q not in kept:
                        rets.add(OPAQUE_ITEM)
                    elif q in image:
                        rets.add(((image[q] * nr + (ret >> CALL_SHIFT) % nr) << CALL_SHIFT) | (ret & ITEM_FRAME))
                    else:
                        return cid  # not the order assumed: no cut rather than a wrong one
                roots[rule] = tuple(sorted(rets))
            image[p] = self._position(roots)
        if len(set(image.values())) < len(image):
            return cid  # two positions share an image: the cut could count fewer items
        cut = []
        for item in stacks:
            k = item >> CALL_SHIFT
            cut.append(((image[k // nr] * nr + k % nr) << CALL_SHIFT) | (item & ITEM_FRAME) if k >= 0 else item)
        cut.sort()
        key = (tuple(cut), bool(self._base_end[cid]), bool(self.after_ignore[cid]), self.context[cid])
        c = self._index.get(key)
        if c is None:
            return self._add(key, self.can_end[cid], self.allowed[cid])
        # an indenter derives the end and the newline's columns from dedents, which may read below
        # the cut: a configuration whose derived values differ keeps its whole stack
        return c if self.can_end[c] == self.can_end[cid] and self.allowed[c] == self.allowed[cid] else cid

    def without_stacks(self, cid: int, drop) -> int:
        """The configuration without the items at indices ``drop`` (-1 if none is left): a check
        at a value boundary (structgen.engine.checks) failed for those readings."""
        return self.with_stacks(cid, tuple(st for i, st in enumerate(self.stacks[cid]) if i not in drop))

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
            best = 0.0 if self.can_end[cid] else INF
            call_cost = self._call_costs()
            for item in self.stacks[cid]:
                frame = item & ITEM_FRAME
                best = min(best, self.autos[frame >> FRAME_BITS].cost[frame & FRAME_MASK] + call_cost[item >> CALL_SHIFT])
            self._cost[cid] = c = best
        return c

    def _call_costs(self) -> dict[int, float]:
        """Per call: min bytes of lexemes from its return to the end of the output (filled
        position by position, callers first: a call's returns are priced before it)."""
        out, autos, nr = self._call_cost, self.autos, self._n_rules
        for p in range(self._costed, len(self.positions)):
            for x in self._template_list[self._position_template[p]][2]:
                best = INF
                for ret in self.returns(p * nr + x):
                    frame, below = ret & ITEM_FRAME, ret >> CALL_SHIFT
                    if below < 0:  # the end, or below a cut (a lower bound)
                        best = 0.0
                    else:
                        best = min(best, autos[frame >> FRAME_BITS].cost[frame & FRAME_MASK] + out[below])
                out[p * nr + x] = best
        self._costed = len(self.positions)
        return out

    def filtered_call(self, k: int, done, fails, memo: dict) -> int:
        """Call ``k`` without the returns through which a completing rule fails: a return whose
        frame's rule is ``done`` there completes too, and is dropped when ``fails(rule)``, else
        filtered the same way below (-1 when no return is left; ``k`` when nothing changed)."""
        got = memo.get(k)
        if got is not None:
            return got
        rets = self.returns(k)
        kept = []
        for ret in rets:
            frame, below = ret & ITEM_FRAME, ret >> CALL_SHIFT
            r, s = frame >> FRAME_BITS, frame & FRAME_MASK
            if below != END and done[r][s]:
                if fails(r):
                    continue
                below = self.filtered_call(below, done, fails, memo)
                if below < 0:
                    continue
            kept.append((below << CALL_SHIFT) | frame)
        kept = tuple(kept)
        x = k % self._n_rules
        got = memo[k] = k if kept == rets else (self._position({x: tuple(sorted(kept))}) * self._n_rules + x
                                                if kept else -1)
        return got

    def with_stacks(self, cid: int, stacks: tuple) -> int:
        """Configuration ``cid`` with its items replaced by ``stacks`` (-1 when empty)."""
        if not stacks:
            return -1
        return self._intern(tuple(sorted(set(stacks))), bool(self._base_end[cid]), bool(self.after_ignore[cid]),
                            self.context[cid])
