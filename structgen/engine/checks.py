"""Running the IR's checks at value boundaries (``structgen.grammar.ir.Check``).

A front end wraps a value its automata can only over-approximate in a rule of its own and lists a
typed check for that rule in ``GrammarIR.checks``.  This module runs them while bytes are fed
(:meth:`CompiledGrammar.advance <structgen.engine.compiled.CompiledGrammar.advance>` calls a
:class:`CheckRun` at each lexeme boundary and byte):

* a :class:`~structgen.grammar.ir.ValueCheck` runs *before* the lexeme that completes its rule is
  scanned: the stacks whose reading completes a failing value are dropped;
* a :class:`~structgen.grammar.ir.DistinctItems` check runs *after* the scan, when a stack returns
  from one of its items: the item's identity must be new in its array, and is then recorded.

Where a value's last lexeme cannot grow (a string's closing quote, ``}``, ``]``, ``true``) the
checks run on the byte that completes it, so the token writing the closing quote of a duplicate
string (or the ``}`` of an object missing a required key) is the one refused and decoding can pick
another; a number is only complete at the byte after it (``1`` may become ``12``).  When the
parser is ambiguous (several stacks) and only some fail, those stacks are dropped and the others
kept, so checks stay exact under ``anyOf``.

The cached masks do not run the checks (they depend on the output, not on the automaton state);
the Matcher's mask does, by trying the few allowed tokens that can reach a value boundary
(:mod:`structgen.engine.exact_masks`), so a token the Matcher's mask allows is always accepted.  Values are located in the output by
:mod:`structgen.engine.json_tracker`.
"""
from __future__ import annotations

from ..grammar.ir import CheckContext, DistinctItems, ValueCheck
from .json_tracker import track, value_start
from .parser import CALL_SHIFT, FRAME_BITS, FRAME_MASK, ITEM_FRAME
from .rules import TERM_SHIFT

__all__ = ["GrammarChecks", "CheckRun", "can_end_checked", "check_may_run"]

#: Verdicts of pure value checks remembered per grammar (the early check and the scan meet the
#: same text); the memo is cleared past this many entries.
CHECK_MEMO_ENTRIES = 4096
#: Entries of a grammar's "can a check run at this lexeme's end" table before it is cleared.
MAY_RUN_ENTRIES = 65536


class GrammarChecks:
    """A compiled grammar's checks, indexed by rule and parser frame."""

    def __init__(self, checks, autos, rule_index: dict[str, int]):
        self.value: dict[int, tuple[ValueCheck, ...]] = {}
        distinct: dict[int, DistinctItems] = {}
        for c in checks:
            r = rule_index.get(c.rule)
            if r is None:
                continue  # the rule was never reached from the start rule
            if isinstance(c, ValueCheck):
                self.value[r] = self.value.get(r, ()) + (c,)
            elif isinstance(c, DistinctItems):
                distinct[r] = c
            else:
                raise TypeError(f"unknown check kind {type(c).__name__} for rule {c.rule!r}")
        #: parser frame (rule << FRAME_BITS | state) a stack's top is in right after an item of a
        #: DistinctItems rule completed -> that check
        self.item_frames: dict[int, DistinctItems] = return_frames(autos, distinct)
        #: per rule, per state: 1 where the rule is complete and nothing can follow (it pops at once)
        self.rule_done = rule_done_states(autos) if self.value else []
        self.memo: dict = {}
        #: (configuration, terminals) -> whether ending such a lexeme there can run a check
        self.may_run: dict[tuple, bool] = {}
        #: (configuration << 20 | lexer id) -> whether a lexeme of that lexer closing there can run one
        self.may_close: dict[int, bool] = {}
        #: terminals whose lexeme can complete a checked value or an item of a distinct-items array
        #: (exact masks try only the tokens that can end such a lexeme: structgen.engine.exact_masks)
        self.trigger_terms: frozenset[int] = trigger_terminals(autos, set(self.value) | set(distinct))
        self._all = tuple(checks)

    def describe(self, limit: int = 3) -> str:
        """The checks in words, for error messages ('' when there are none)."""
        said = list(dict.fromkeys(c.describe() for c in self._all))
        more = f" and {len(said) - limit} more" if len(said) > limit else ""
        return "; ".join(said[:limit]) + more

    def __bool__(self) -> bool:
        return bool(self.value or self.item_frames)

    def remembered(self, key: tuple, fn, *args):
        """``fn(*args)``, kept under ``key`` in the grammar's bounded memo (pure verdicts, item
        identities: a trial meets the same value at its closing byte and where the next lexeme
        starts)."""
        memo = self.memo
        hit = memo.get(key, memo)
        if hit is memo:
            if len(memo) > CHECK_MEMO_ENTRIES:
                memo.clear()
            hit = memo[key] = fn(*args)
        return hit

    def verdict(self, rule: int, value: bytes, context: CheckContext) -> bool:
        """Every value check of ``rule`` accepts ``value`` (pure verdicts remembered)."""
        for c in self.value[rule]:
            if c.pure:
                hit = self.remembered((rule, id(c), value), c.accepts, value, context)
            else:
                hit = c.accepts(value, context)
            if not hit:
                return False
        return True


def return_frames(autos, rules: dict) -> dict:
    """Parser frames (rule << FRAME_BITS | state) that a stack's top is in right after one of
    ``rules`` completed, when the caller still has a symbol to read there (an array's item:
    ``,`` or ``]`` follow) -- the return states of the edges that call them -> the rule's value."""
    out = {}
    for r, a in enumerate(autos):
        for edges in a.nt_edges:
            for n, nxt in edges:
                if n in rules:
                    out[(r << FRAME_BITS) | nxt] = rules[n]
    return out


def trigger_terminals(autos, checked: set[int]) -> frozenset[int]:
    """The terminals whose scan can complete one of ``checked`` (directly, or by completing a rule
    that ends it, at any depth).  Rule ends are taken as any final state, a superset of the ends
    where a check runs, so the set errs towards more terminals, never fewer."""
    closing = set(checked)
    todo = list(closing)
    while todo:
        a = autos[todo.pop()]
        for edges in a.nt_edges:
            for n, nxt in edges:
                if a.final[nxt] and n not in closing:
                    closing.add(n)
                    todo.append(n)
    terms: set[int] = set()
    for r in closing:
        a = autos[r]
        for st in range(a.n_states):
            terms.update(t for t, nxt in a.term_edges(st) if a.final[nxt])
    return frozenset(terms)


def rule_done_states(autos) -> list[bytes]:
    """Per rule: per state, 1 where the rule is complete there and nothing can follow (final, no
    outgoing edge): a stack whose top reaches such a state pops it at once."""
    return [bytes(1 if a.final[st] and not a.terms[st] and not a.nt_edges[st] else 0 for st in range(a.n_states))
            for a in autos]


class CheckRun:
    """The checks' side of one :meth:`CompiledGrammar.advance`: the tracker and the output.

    ``out`` is the output before ``data`` (not modified).  ``end`` is the offset of the next byte
    to track (so the advance loop carries no index).  After a successful advance, ``tracker`` is
    the new tracker."""

    __slots__ = ("g", "checks", "tracker", "buf", "end", "ignore")

    def __init__(self, g, tracker: tuple, out, data: bytes):
        self.g = g
        self.checks: GrammarChecks = g.checks
        self.tracker = tracker
        self.buf = out + data
        self.end = len(out)
        self.ignore = g.parser.ignore_set

    @classmethod
    def over(cls, g, tracker: tuple, buf: bytearray, end: int) -> "CheckRun":
        """A run whose output and data are already one buffer (``buf[:end]`` the output): trials of
        many tokens after one output share it instead of copying the output for each."""
        run = cls.__new__(cls)
        run.g, run.checks, run.tracker, run.buf, run.end = g, g.checks, tracker, buf, end
        run.ignore = g.parser.ignore_set
        return run

    def before_scan(self, cid: int, terms: tuple) -> int:
        """The configuration without the stacks whose scan of ``terms`` (the lexeme ending before
        the byte being fed) completes a value failing a check; -1 when none is left."""
        return pruned(self.g, cid, terms, self.tracker, self.buf, self.end) if self.checks.value else cid

    def after_scan(self, cid2: int, terms: tuple) -> int:
        """Distinct-items checks for the configuration just scanned (an item ending before the
        byte being fed): stacks returning from a duplicate item dropped, a new item recorded."""
        if not self.checks.item_frames or self.ignore.issuperset(terms):
            return cid2
        failing, self.tracker = _duplicates(self.g, cid2, self.tracker, self.buf, self.end, True)
        return self.g.parser.without_stacks(cid2, failing) if failing else cid2

    def byte(self, b: int) -> None:
        """Track the byte being fed."""
        self.tracker = track(self.tracker, b, self.end, self.buf)
        self.end += 1

    def lexeme_complete(self, cid: int, terms: tuple) -> bool:
        """The pending lexeme (``terms``) cannot grow past the byte just tracked: False when every
        reading of its end completes a value that fails a check."""
        return ended(self.g, cid, terms, self.tracker, self.buf, self.end) >= 0


def _current_item(frames: tuple, buf, end: int, check: DistinctItems, checks: GrammarChecks):
    """(the innermost array's frame, the identity of its item ending at ``end``) or None when no
    array item is open there or the text is not a whole item (identities remembered by ``checks``)."""
    top = frames[-1] if frames else None
    if top is None or top[0] != "a" or top[1] < 0:
        return None
    value = bytes(buf[top[1]:end])
    ident = checks.remembered((id(check), value), check.identity, value)
    return None if ident is None else (top, ident)


def _duplicates(g, cid2: int, tracker: tuple, buf, end: int, record: bool):
    """The stacks of ``cid2`` that return from a duplicate item (a set of stack indices, or None)
    and the tracker with the completed item recorded (when ``record``)."""
    frames_of = g.checks.item_frames
    stacks = g.parser.stacks[cid2]
    done = [i for i, item in enumerate(stacks) if item & ITEM_FRAME in frames_of]
    if not done:
        return None, tracker
    in_str, esc, frames, closed, root = tracker
    cur = _current_item(frames, buf, end, frames_of[stacks[done[0]] & ITEM_FRAME], g.checks)
    if cur is None:
        return None, tracker
    top, ident = cur
    if ident in top[2]:
        return set(done), tracker
    if record:
        frames = frames[:-1] + (("a", top[1], top[2] | {ident}),)
    return None, (in_str, esc, frames, closed, root)


def pruned(g, cid: int, terms: tuple, tracker: tuple, buf, end: int) -> int:
    """Before scanning ``terms`` from ``cid`` (the lexeme ending at ``end``): drop the readings
    whose lexeme completes a checked value that fails -- an item whose rule fails, or the returns
    of its call through which a failing rule completes (-1 when no reading is left)."""
    checks = g.checks
    parser = g.parser
    done = checks.rule_done
    context = None
    verdicts: dict[int, bool] = {}

    def fails(rule: int) -> bool:
        nonlocal context
        if rule not in checks.value:
            return False
        hit = verdicts.get(rule)
        if hit is None:
            if context is None:
                context = CheckContext(bytes(buf[:end]), value_start(tracker), end, tracker[3])
            hit = verdicts[rule] = context.start < 0 or not checks.verdict(rule, context.output[context.start:], context)
        return hit

    memo: dict[int, int] = {}
    kept = []
    changed = False
    for item, r in _endings(g, cid, terms):
        if r >= 0:  # the rule ends with this lexeme: it returns, and maybe its callers end too
            k = item >> CALL_SHIFT
            k2 = -1 if fails(r) else parser.filtered_call(k, done, fails, memo)
            if k2 != k:
                changed = True
                item = (k2 << CALL_SHIFT) | (item & ITEM_FRAME) if k2 >= 0 else None
        if item is not None:
            kept.append(item)
    return parser.with_stacks(cid, tuple(kept)) if changed else cid


def _endings(g, cid: int, terms: tuple):
    """Each reading of ``cid`` with the rule a lexeme of ``terms`` completes there (-1: none)."""
    autos, done = g.parser.autos, g.checks.rule_done
    for item in g.parser.stacks[cid]:
        frame = item & ITEM_FRAME
        r, s = frame >> FRAME_BITS, frame & FRAME_MASK
        edges, base = autos[r].term_next, s << TERM_SHIFT
        for t in terms:
            nxt = edges.get(base | t)
            if nxt is not None and done[r][nxt]:
                yield item, r
                break
        else:
            yield item, -1


def ended(g, cid: int, terms: tuple, tracker: tuple, buf, end: int) -> int:
    """The configuration after the pending lexeme (``terms``, ending at ``end``) ends, with the
    checks it would run (nothing recorded); -1 when every reading fails one."""
    c1 = pruned(g, cid, terms, tracker, buf, end) if g.checks.value else cid
    c2 = g.parser.scan(c1, terms) if c1 >= 0 else -1
    if c2 >= 0 and g.checks.item_frames and not g.parser.ignore_set.issuperset(terms):
        failing, _ = _duplicates(g, c2, tracker, buf, end, False)
        if failing and len(failing) == len(g.parser.stacks[c2]):
            return -1
    return c2


def check_may_run(g, cid: int, terms: tuple) -> bool:
    """Whether a lexeme of ``terms`` ending in configuration ``cid`` can run a check, whatever the
    output: a value check of a rule the scan completes (directly or through the callers that
    complete with it, as :func:`pruned` walks them) or the distinct-items check of an array item
    it ends (as :func:`_duplicates` finds them).  Checks only drop readings, so a configuration
    with more readings than the one a trial meets errs towards True.  Cached per grammar."""
    checks = g.checks
    key = (cid, terms)
    hit = checks.may_run.get(key)
    if hit is None:
        hit = _value_check_may_run(g, cid, terms) or _item_check_may_run(g, cid, terms)
        if len(checks.may_run) >= MAY_RUN_ENTRIES:
            checks.may_run.clear()
        checks.may_run[key] = hit
    return hit


def _value_check_may_run(g, cid: int, terms: tuple) -> bool:
    checks = g.checks
    if not checks.value:
        return False
    parser = g.parser
    done, checked = checks.rule_done, checks.value
    met: list[int] = []

    def meets(rule: int) -> bool:  # filtered_call's "fails": never drops, notes a checked rule
        if rule in checked:
            met.append(rule)
        return False

    memo: dict[int, int] = {}
    for item, r in _endings(g, cid, terms):
        if r < 0:
            continue
        if r in checked:
            return True
        parser.filtered_call(item >> CALL_SHIFT, done, meets, memo)
        if met:
            return True
    return False


def _item_check_may_run(g, cid: int, terms: tuple) -> bool:
    frames_of = g.checks.item_frames
    if not frames_of or g.parser.ignore_set.issuperset(terms):
        return False
    c2 = g.parser.scan(cid, terms)
    return c2 >= 0 and any(item & ITEM_FRAME in frames_of for item in g.parser.stacks[c2])


def can_end_checked(g, cid: int, lx, ls: int, tracker: tuple, out) -> bool:
    """``CompiledGrammar.can_end`` with the checks the pending lexeme's end would run."""
    if ls == 0:
        return bool(g.parser.can_end[cid])
    a = int(lx.acc_id[ls])
    if a < 0:
        return False
    c2 = ended(g, cid, lx.acc_set(a), tracker, out, len(out))
    return c2 >= 0 and bool(g.parser.can_end[c2])
