"""Regular expressions (Python / JSON Schema ``pattern`` syntax) as a parse tree and a Thompson NFA.

Python's own parser (``re._parser``) gives the syntax tree, so error positions and escapes match
what users already know; the builder turns it into an NFA whose character edges are encoded per
character (UTF-8, or JSON string escapes).  Both constructions read this one module: the plain one
(:mod:`structgen.grammar.regex`, which determinizes the NFA or hands it to a lazy DFA) and the
lookaround one (:mod:`structgen.grammar.lookaround`, which extends the builder with conditional
edges).  Constructs a DFA cannot express exactly (backreferences, word boundaries) raise
``UnsupportedFeature`` instead of being approximated.
"""
from __future__ import annotations

import functools
import re
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

from ..automata import charclass as cc
from ..automata.fsa import DFA, NFA, counted_repeat, determinize, minimize
from ..errors import GrammarError, UnsupportedFeature
from .unicode_props import expand_property_escapes

MAX_REPEAT_EXPANSION = 20_000
#: A whole pattern ``^C{lo,hi}$`` (one character class repeated) with a bound at least this large
#: is built as a chain of copies (:func:`structgen.automata.fsa.counted_repeat`), not determinized.
COUNTED_REPEAT_MIN = 16
_ONE_CHAR_OPS = (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN, C.CATEGORY)

_ANY_NO_NL: cc.Ranges = cc.complement([(0x0A, 0x0A)])
_ANY: cc.Ranges = [(0, cc.MAX_CP)]
_CATS = {
    C.CATEGORY_DIGIT: ("digit", False), C.CATEGORY_NOT_DIGIT: ("digit", True),
    C.CATEGORY_WORD: ("word", False), C.CATEGORY_NOT_WORD: ("word", True),
    C.CATEGORY_SPACE: ("space", False), C.CATEGORY_NOT_SPACE: ("space", True),
}


@functools.lru_cache(maxsize=16)
def parse(pattern: str, flags: int = 0):
    """Python's parse tree of ``pattern`` (cached and only read: the counted-class fast path and
    the NFA builder both look at it, one right after the other; a longer memory would only keep
    thousands of parse nodes for the garbage collector to rescan, since compiled patterns are
    cached as automata)."""
    text = python_regex(pattern)  # ECMA-262's \p{...} as classes, (?<name>...) as (?P<name>...)
    try:
        return sre_parse.parse(text, flags)
    except re.error as e:
        # a position in the rewritten text means nothing in the pattern past its first \p{...}
        pos = e.pos if text is pattern or (e.pos is not None and e.pos < _first_property(pattern)) else None
        raise GrammarError(f"invalid regular expression {pattern!r}: {e.msg}", position=pos, source=pattern) from None
    except (OverflowError, RecursionError) as e:
        raise GrammarError(f"regular expression {pattern!r} too large: {e}", source=pattern) from None


def _first_property(pattern: str) -> int:
    return min((i for i in (pattern.find("\\p"), pattern.find("\\P")) if i >= 0), default=len(pattern))


def python_regex(pattern: str) -> str:
    r"""``pattern`` in the syntax of Python's ``re``: ECMA-262's ``\p{...}``/``\P{...}`` (Unicode
    properties, which JSON Schema patterns may use) written as the classes they stand for
    (:mod:`structgen.grammar.unicode_props`) and its named groups ``(?<name>...)`` as Python's
    ``(?P<name>...)``; the same string when it has neither.  For the code that matches patterns
    with ``re`` (key matching, validation) beside the automata built here."""
    return expand_property_escapes(ecma_named_groups(pattern))


def ecma_named_groups(pattern: str) -> str:
    r"""ECMA-262's named groups ``(?<name>...)`` (.NET's global.json and other real schemas use
    them) written as Python's ``(?P<name>...)``; lookbehinds ``(?<=``/``(?<!`` and character
    classes are left alone, and a named backreference ``\k<name>`` is refused (``GrammarError``:
    no finite automaton holds a backreference).  The same string when there is nothing to write."""
    if "(?<" not in pattern and "\\k<" not in pattern:
        return pattern
    out, i, in_class, changed = [], 0, False, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if not in_class and pattern.startswith("k<", i + 1):
                raise GrammarError(f"regular expression {pattern!r} uses a named backreference "
                                   f"({pattern[i:pattern.find('>', i) + 1]}), which no finite automaton holds",
                                   position=i, source=pattern)
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern.startswith("]", i + 1) or pattern.startswith("^]", i + 1):  # a literal ] first
                out.append(pattern[i:i + (2 if pattern[i + 1] == "]" else 3)])
                i += 2 if pattern[i + 1] == "]" else 3
                continue
        elif pattern.startswith("(?<", i) and i + 3 < len(pattern) and pattern[i + 3] not in "=!":
            out.append("(?P<")
            i += 3
            changed = True
            continue
        out.append(c)
        i += 1
    return "".join(out) if changed else pattern


#: the kinds of anchor edge (see :func:`resolve_anchors`)
_BEGIN, _END = 0, 1


class _Builder:
    def __init__(self, nfa: NFA, encoder, pattern: str, anchors: list | None = None):
        self.nfa = nfa
        self.enc = encoder
        self.pattern = pattern
        #: ``(a, b, kind)``: ``^`` / ``$`` inside the pattern, as edges that :func:`resolve_anchors`
        #: makes plain (None: such anchors are refused)
        self.anchors = anchors

    def unsupported(self, what: str):
        raise UnsupportedFeature(f"regular expression {self.pattern!r} uses {what}, which a finite automaton cannot enforce exactly")

    def class_ranges(self, items, icase: bool) -> cc.Ranges:
        negate = bool(items) and items[0][0] is C.NEGATE
        ranges: cc.Ranges = []
        for op, av in items:
            if op is C.NEGATE:
                negate = True
            elif op is C.LITERAL:
                ranges.append((av, av))
            elif op is C.RANGE:
                ranges.append(av)
            elif op is C.CATEGORY:
                name, neg = _CATS[av]
                ranges.extend(cc.category(name, neg, widest=negate))
            else:
                self.unsupported(f"class item {op}")
        ranges = cc.normalize(ranges)
        if icase:
            ranges = cc.casefold_ranges(ranges)
        return cc.complement(ranges) if negate else ranges

    def chars(self, a: int, ranges: cc.Ranges, b: int) -> None:
        if ranges:
            self.enc.add_chars(self.nfa, a, ranges, b)

    def seq(self, items, a: int, b: int, flags: int) -> None:
        items = list(items)
        cur = a
        for i, item in enumerate(items):
            nxt = b if i == len(items) - 1 else self.nfa.new_state()
            self.node(item, cur, nxt, flags)
            cur = nxt
        if not items:
            self.nfa.add_eps(a, b)

    def node(self, item, a: int, b: int, flags: int) -> None:
        op, av = item
        icase = bool(flags & re.IGNORECASE)
        if op is C.LITERAL:
            self.chars(a, cc.casefold_ranges([(av, av)]) if icase else [(av, av)], b)
        elif op is C.NOT_LITERAL:
            r = cc.casefold_ranges([(av, av)]) if icase else [(av, av)]
            self.chars(a, cc.complement(r), b)
        elif op is C.ANY:
            self.chars(a, _ANY if flags & re.DOTALL else _ANY_NO_NL, b)
        elif op is C.IN:
            self.chars(a, self.class_ranges(av, icase), b)
        elif op is C.CATEGORY:
            name, neg = _CATS.get(av, (None, None))
            if name is None:
                self.unsupported(f"category {av}")
            self.chars(a, cc.category(name, neg), b)
        elif op is C.BRANCH:
            for alt in av[1]:
                self.seq(alt, a, b, flags)
        elif op is C.SUBPATTERN:
            _group, add, dele, p = av
            self.seq(p, a, b, (flags | add) & ~dele)
        elif op is C.ATOMIC_GROUP:
            self.unsupported("an atomic group")
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, hi, p = av
            if op is C.POSSESSIVE_REPEAT:
                self.unsupported("a possessive quantifier")
            self.repeat(p, lo, None if hi == C.MAXREPEAT else hi, a, b, flags)
        elif op is C.AT:
            if av not in _ANCHORS:
                self.unsupported("a word-boundary assertion")
            if self.anchors is None or (flags & re.MULTILINE and av in (C.AT_BEGINNING, C.AT_END)):
                self.unsupported("an anchor (^ or $) in the middle of the pattern")
            self.anchors.append((a, b, _BEGIN if av in (C.AT_BEGINNING, C.AT_BEGINNING_STRING) else _END))
        elif op in (C.GROUPREF, C.GROUPREF_EXISTS):
            self.unsupported("a backreference")
        elif op in (C.ASSERT, C.ASSERT_NOT):
            self.unsupported("a lookaround assertion")
        else:
            self.unsupported(str(op))

    def repeat(self, p, lo: int, hi: int | None, a: int, b: int, flags: int) -> None:
        if lo > MAX_REPEAT_EXPANSION or (hi is not None and hi > MAX_REPEAT_EXPANSION):
            raise GrammarError(
                f"repetition bound {max(lo, hi or 0)} in {self.pattern!r} exceeds the limit of {MAX_REPEAT_EXPANSION}"
            )
        nfa = self.nfa
        cur = a
        for _ in range(lo):
            nxt = nfa.new_state()
            self.seq(p, cur, nxt, flags)
            cur = nxt
        if hi is None:
            loop = nfa.new_state()
            nfa.add_eps(cur, loop)
            body_end = nfa.new_state()
            self.seq(p, loop, body_end, flags)
            nfa.add_eps(body_end, loop)
            nfa.add_eps(loop, b)
        else:
            for _ in range(hi - lo):
                nfa.add_eps(cur, b)
                nxt = nfa.new_state()
                self.seq(p, cur, nxt, flags)
                cur = nxt
            nfa.add_eps(cur, b)


_ANCHORS = (C.AT_BEGINNING, C.AT_BEGINNING_STRING, C.AT_END, C.AT_END_STRING)


def has_anchor(pattern: str, flags: int = 0) -> bool:
    """Whether ``pattern`` contains ``^``, ``$``, ``\\A`` or ``\\Z`` anywhere (for front ends in which an
    anchor means more than "the whole token": in a Lark terminal it ties the terminal to the start or
    end of the whole input)."""
    return any_node(parse(pattern, flags), lambda op, arg: op is C.AT and arg in _ANCHORS)


def _split_anchors(items: list) -> tuple[bool, list, bool]:
    """Strip a leading ^ and trailing $ of one top-level alternative."""
    start = end = False
    while items and items[0][0] is C.AT and items[0][1] in (C.AT_BEGINNING, C.AT_BEGINNING_STRING):
        start = True
        items = items[1:]
    while items and items[-1][0] is C.AT and items[-1][1] in (C.AT_END, C.AT_END_STRING):
        end = True
        items = items[:-1]
    return start, items, end


def _top_alternatives(tree) -> list[list]:
    """Top-level alternatives, looking through a single enclosing group."""
    items = list(tree)
    start, inner, end = _split_anchors(items)
    if len(inner) == 1 and inner[0][0] is C.BRANCH:
        alts = [list(alt) for alt in inner[0][1][1]]
    elif len(inner) == 1 and inner[0][0] is C.SUBPATTERN and not (start or end) and inner[0][1][1] == 0:
        return _top_alternatives(inner[0][1][3])
    else:
        return [items]
    if start or end:  # ^(a|b)$ : anchors apply to every alternative
        pre = [(C.AT, C.AT_BEGINNING)] if start else []
        post = [(C.AT, C.AT_END)] if end else []
        return [pre + alt + post for alt in alts]
    return alts


def add_alternatives(nfa: NFA, builder, tree, a: int, b: int, search: bool) -> list[int]:
    """Add the pattern's top-level alternatives between ``a`` and ``b`` (``search``: unanchored
    sides may have any characters); returns the states after which any characters may follow."""
    gflags = tree.state.flags
    open_ends = []
    for alt in _top_alternatives(tree):
        start, body, end = _split_anchors(alt)
        cur = a
        if search and not start:
            loop = nfa.new_state()
            nfa.add_eps(cur, loop)
            builder.chars(loop, _ANY, loop)
            cur = loop
        mid = nfa.new_state()
        builder.seq(body, cur, mid, gflags)
        if search and not end:
            builder.chars(mid, _ANY, mid)
            open_ends.append(mid)
        nfa.add_eps(mid, b)
    return open_ends


def any_node(tree, pred, *, into_lookarounds: bool = True) -> bool:
    """Whether ``pred(op, arg)`` holds for a node anywhere in a parse tree (through groups,
    alternations, repetitions and, unless told not to, lookaround bodies)."""
    for op, av in tree:
        if pred(op, av):
            return True
        if op is C.BRANCH and any(any_node(alt, pred, into_lookarounds=into_lookarounds) for alt in av[1]):
            return True
        if op is C.SUBPATTERN and any_node(av[3], pred, into_lookarounds=into_lookarounds):
            return True
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)) \
                and any_node(av[2], pred, into_lookarounds=into_lookarounds):
            return True
        if into_lookarounds and op in (C.ASSERT, C.ASSERT_NOT) and any_node(av[1], pred):
            return True
    return False


def build_nfa(pattern: str, *, encoder=cc.UTF8, search: bool = False, flags: int = 0) -> NFA:
    """``pattern`` as an NFA from its start to its final state.

    ``search=True`` gives JSON Schema ``pattern`` semantics: the pattern may
    match anywhere unless anchored with ``^`` / ``$``.  Anchors inside it (``^$|^(a+)$``, and
    ``^01$|^07$``, which Python's parser factors into ``^0(?:1$|7$)``) hold where the string starts
    and ends (:func:`resolve_anchors`).
    """
    tree = parse(pattern, flags)
    nfa = NFA()
    anchors: list = []
    builder = _Builder(nfa, encoder, pattern, anchors)
    # "matched; any characters may follow": every string of whole characters is accepted from here
    # (and any subset holding it has no other language)
    nfa.universal.extend(add_alternatives(nfa, builder, tree, nfa.start, nfa.final, search))
    return resolve_anchors(nfa, anchors) if anchors else nfa


def resolve_anchors(nfa: NFA, anchors: list) -> NFA:
    """``nfa`` with its anchor edges (``(a, b, kind)``) made plain epsilon edges, by a product with
    two flags: whether a byte has been read (a ``^`` edge passes only before the first) and whether a
    ``$`` edge has passed (no byte after it).  Only the product states reachable from the start are
    made.  ``$`` is the end of the string, as in ECMA-262 (the JSON Schema pattern dialect)."""
    n = len(nfa.eps)
    byte_edges: list[list[int]] = [[] for _ in range(n)]
    for i, src in enumerate(nfa.e_src):
        byte_edges[src].append(i)
    anchor_edges: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for a, b, kind in anchors:
        anchor_edges[a].append((b, kind))
    universal = set(nfa.universal)
    out = NFA()
    ids: dict[tuple[int, int], int] = {}
    todo: list[tuple[int, int, int]] = []

    def state(q: int, f: int) -> int:  # f: 1 = a byte was read, 2 = "$" passed
        s = ids.get((q, f))
        if s is None:
            s = ids[(q, f)] = out.new_state()
            todo.append((q, f, s))
        return s

    out.add_eps(out.start, state(nfa.start, 0))
    while todo:
        q, f, s = todo.pop()
        if q == nfa.final:
            out.add_eps(s, out.final)
        for t in nfa.eps[q]:
            out.add_eps(s, state(t, f))
        for t, kind in anchor_edges[q]:
            if kind == _END:
                out.add_eps(s, state(t, f | 2))
            elif not f & 1:
                out.add_eps(s, state(t, f))
        if not f & 2:
            if q in universal:
                out.universal.append(s)
            for i in byte_edges[q]:
                out.add_range(s, nfa.e_lo[i], nfa.e_hi[i], state(nfa.e_dst[i], 1))
    return out


def _unwrap_groups(items: list) -> list:
    """Look through plain groups, ``(x)`` and ``(?:x)``, that hold the whole sequence."""
    while len(items) == 1 and items[0][0] is C.SUBPATTERN and items[0][1][1] == 0 and items[0][1][2] == 0:
        items = list(items[0][1][3])
    return items


def counted_class_dfa(pattern: str, *, encoder=cc.UTF8, search: bool = False, flags: int = 0) -> DFA | None:
    """The DFA of a pattern that is one character class repeated ``lo``..``hi`` times over the whole
    string (``^[0-9a-z_-]{1,255}$``), built directly; None for any other pattern (or small bounds).

    A Thompson NFA of 255 copies of a JSON-encoded class and its subset construction cost ~60 ms;
    the chain of copies of the class's one-character automaton is the same language in ~1 ms."""
    tree = parse(pattern, flags)
    alts = _top_alternatives(tree)
    if len(alts) != 1:
        return None
    start, body, end = _split_anchors(alts[0])
    if search and not (start and end):
        return None
    body = _unwrap_groups(body)
    if len(body) != 1 or body[0][0] not in (C.MAX_REPEAT, C.MIN_REPEAT):
        return None
    lo, hi, unit_items = body[0][1]
    hi = None if hi == C.MAXREPEAT else hi
    unit_items = _unwrap_groups(list(unit_items))
    bound = hi if hi is not None else lo
    if (len(unit_items) != 1 or unit_items[0][0] not in _ONE_CHAR_OPS or bound < COUNTED_REPEAT_MIN
            or bound > MAX_REPEAT_EXPANSION):
        return None
    nfa = NFA()
    _Builder(nfa, encoder, pattern).node(unit_items[0], nfa.start, nfa.final, tree.state.flags)
    unit = determinize(nfa)
    if unit.n_states < 2:  # a class with no characters: the general path says what that means
        return None
    return minimize(counted_repeat(unit, lo, hi))


_CAT_TEXT = {C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D", C.CATEGORY_WORD: r"\w",
             C.CATEGORY_NOT_WORD: r"\W", C.CATEGORY_SPACE: r"\s", C.CATEGORY_NOT_SPACE: r"\S"}
_AT = {C.AT_BEGINNING: "^", C.AT_END: "$", C.AT_BEGINNING_STRING: r"\A", C.AT_END_STRING: r"\Z",
       C.AT_BOUNDARY: r"\b", C.AT_NON_BOUNDARY: r"\B"}
_FLAG_LETTERS = ((2, "i"), (4, "L"), (8, "m"), (16, "s"), (32, "u"), (64, "x"), (256, "a"))


# -- back to text ---------------------------------------------------------------------------------
def _char(c: int) -> str:
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"


def _class_item(op, av) -> str:
    if op is C.LITERAL:
        return _char(av)
    if op is C.RANGE:
        return f"{_char(av[0])}-{_char(av[1])}"
    if op is C.CATEGORY:
        return _CAT_TEXT[av]
    raise UnsupportedFeature(f"character class item {op}")


def unparse(items) -> str:
    """A parse tree (a list of ``(op, av)`` items) as pattern text (classes and characters escaped)."""
    out = []
    for op, av in items:
        if op is C.LITERAL:
            out.append(_char(av))
        elif op is C.NOT_LITERAL:
            out.append(f"[^{_char(av)}]")
        elif op is C.ANY:
            out.append(".")
        elif op is C.IN:
            neg = "^" if av and av[0][0] is C.NEGATE else ""
            out.append("[" + neg + "".join(_class_item(o, a) for o, a in av if o is not C.NEGATE) + "]")
        elif op is C.CATEGORY:
            out.append(_CAT_TEXT[av])
        elif op is C.BRANCH:
            out.append("(?:" + "|".join(unparse(a) for a in av[1]) + ")")
        elif op is C.SUBPATTERN:
            _, add, dele, p = av
            on = "".join(ch for bit, ch in _FLAG_LETTERS if add & bit)
            off = "".join(ch for bit, ch in _FLAG_LETTERS if dele & bit)
            out.append(f"(?{on}{'-' + off if off else ''}:" + unparse(p) + ")")
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, p = av
            bound = "{%d,}" % lo if hi == C.MAXREPEAT else "{%d,%d}" % (lo, hi)
            out.append("(?:" + unparse(p) + ")" + bound + ("?" if op is C.MIN_REPEAT else ""))
        elif op is C.AT:
            out.append(_AT[av])
        elif op in (C.ASSERT, C.ASSERT_NOT):
            direction, p = av
            kind = ("=" if op is C.ASSERT else "!") if direction == 1 else ("<=" if op is C.ASSERT else "<!")
            out.append(f"(?{kind}" + unparse(p) + ")")
        else:
            raise UnsupportedFeature(f"regular expression construct {op} cannot be written back as text")
    return "".join(out)


#: Repetition bounds kept by :func:`relaxed_pattern`; larger ones become open loops.
RELAXED_BOUND = 4


def relaxed_pattern(pattern: str, flags: int = 0) -> str | None:
    """A pattern matching every string ``pattern`` matches, and usually more, whose automaton is
    small: each counted repetition above :data:`RELAXED_BOUND` becomes an open loop (``X{22}``:
    ``X{4,}``), a backreference the group it refers to, lookarounds and word boundaries are dropped.
    None when nothing changes or the tree has a construct it cannot write back.

    For a JSON Schema ``pattern`` too large for its exact automaton: the string's automaton
    over-approximates with this one (only strings that can still match get through) and the exact
    pattern is checked where the value ends."""
    tree = parse(pattern, flags)
    groups: dict[int, list] = {}
    changed = False

    def collect(items) -> None:
        for op, av in items:
            if op is C.SUBPATTERN:
                if av[0] is not None:
                    groups[av[0]] = list(av[3])
                collect(av[3])
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
                collect(av[2])
            elif op is C.BRANCH:
                for a in av[1]:
                    collect(a)
            elif op is C.ATOMIC_GROUP:
                collect(av)

    def relax(items) -> list:
        nonlocal changed
        out = []
        for op, av in items:
            if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
                lo, hi, body = av
                if lo > RELAXED_BOUND or (hi != C.MAXREPEAT and hi > RELAXED_BOUND):
                    lo, hi, changed = min(lo, RELAXED_BOUND), C.MAXREPEAT, True
                out.append((C.MAX_REPEAT, (lo, hi, relax(body))))
            elif op is C.SUBPATTERN:
                out.append((op, (None, av[1], av[2], relax(av[3]))))
            elif op is C.BRANCH:
                out.append((op, (None, [relax(a) for a in av[1]])))
            elif op is C.GROUPREF and av in groups:
                changed = True
                out.append((C.SUBPATTERN, (None, 0, 0, relax(groups[av]))))
            elif op is C.ATOMIC_GROUP:
                out.append((C.SUBPATTERN, (None, 0, 0, relax(av))))
            elif op in (C.ASSERT, C.ASSERT_NOT) or (op is C.AT and av in (C.AT_BOUNDARY, C.AT_NON_BOUNDARY)):
                changed = True
            else:
                out.append((op, av))
        return out

    collect(list(tree))
    try:
        text = unparse(relax(list(tree)))
    except (UnsupportedFeature, KeyError):
        return None
    if not changed:
        return None
    global_flags = "".join(ch for bit, ch in _FLAG_LETTERS if tree.state.flags & bit and ch in "imsa")
    return (f"(?{global_flags})" if global_flags else "") + text
