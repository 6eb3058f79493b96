"""Regular expressions with lookarounds, and Lark terminals (lookarounds, lazy quantifiers), as
exact byte DFAs.

Lookarounds over regular content keep a language regular; the construction that builds it
exactly -- a Thompson NFA whose lookarounds are conditional edges, and a subset construction over
Boolean configurations (clauses of an NFA state and the obligations still to hold), bounded by
``lookaround_construction.MAX_CONFIGURATIONS`` -- is :mod:`structgen.grammar.lookaround_construction`.
This module holds its entry points (:func:`compile_lookaround`, :func:`compile_terminal`) and what a
Lark terminal makes of its result.

Not supported (``UnsupportedFeature``): a lookahead (or ``$``) inside a lookbehind, and what the
plain regex front end refuses (backreferences, atomic groups, possessive quantifiers, ``\\b``).

**Lark terminals** (:func:`compile_terminal`).  A terminal's lexeme is followed by more output,
so a lookahead at (or running past) the lexeme's end constrains the bytes after it.  Conditions
decided by the one next byte (or the end of the output) are returned per accepting state as a
:class:`FollowCondition`; the output being valid UTF-8, a byte that starts a multi-byte character
decides when every character it starts decides the same way.  A lookahead needing more than that
(``a(?!bc)``), a lookbehind that can look before the lexeme's start (``(?<=a)b``), ``^``, ``\\A``
and ``$`` (Python's ``$`` also matches before a final newline; ``\\Z`` is supported) raise
``UnsupportedFeature``.

**Lazy quantifiers in terminals.**  Lark matches a terminal with ``re.match`` at the lexeme's
start, so a lazy terminal (``*?``, ``+?``, ``??``, ``{m,n}?`` outside lookaround bodies) takes
the shortest match.  :func:`compile_terminal` gives such a terminal the semantics "the lexeme is
the shortest prefix of the text that is in the pattern's language": no transition leaves an
unconditionally accepting state, and a conditionally accepting state keeps only the transitions
on bytes its condition refuses (on the others the lexeme would already have ended).

This equals ``re.match`` exactly when the match ``re.match``'s backtracking finds first is also
the shortest matching prefix.  That holds for the usual delimited terminals, "an opening, a lazy
body, then a closing delimiter": an opening that matches at most one prefix of any text (fixed
text, or STRING's ``([ubf]?r?|r[ubf])"``), then one lazy loop whose iterations all have the same
width, then a closing delimiter of fixed width (or one that, like STRING's ``(?<!\\\\)(\\\\\\\\)*?"``,
matches at most one way where it starts), lookarounds allowed anywhere: the lazy loop tries its
lengths in increasing order, so the first end found is the earliest.  Tested in that scope:
python.lark's ``STRING`` and ``LONG_STRING``, common.lark's ``ESCAPED_STRING`` and ``C_COMMENT``,
``<!--.*?-->`` and generated ``open body*? close`` patterns.  It is *not* ``re.match`` when
something optional and greedy follows the lazy part (``a+?b+``; lark's own ``"(..)*?"i?`` and
``/(..)*?/[imslux]*``: ``re.match`` takes the trailing letters, the shortest prefix stops before
them), when two lazy loops can trade length (``a*?(?:ab)*?b`` on ``abb``: ``re.match`` gives
``abb``, the shortest is ``ab``), or when a choice before the lazy part decides the length.
Greedy terminals keep their language (longest match is the lexer's business).  In
:func:`compile_lookaround` (full-string or search semantics) lazy and greedy quantifiers mean the
same language.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from re import _constants as C  # type: ignore[attr-defined]

import numpy as np

from ..errors import GrammarError
from ..automata import charclass as cc
from ..automata.fsa import DFA, trim_order, compact_classes
from .ir import FollowCondition
from .lookaround_construction import _LOOK, _REPEATS, _Compiler, _width
from .regex_syntax import any_node, parse


@dataclass(frozen=True, eq=False)
class Terminal:
    """A Lark terminal: its lexeme DFA (trimmed) and, per accepting state whose lexeme needs one,
    the condition on what follows (states without an entry accept unconditionally)."""

    dfa: DFA
    follow: dict[int, FollowCondition]


def has_lookaround(tree) -> bool:
    """Whether a parse tree has a lookahead or lookbehind anywhere."""
    return any_node(tree, lambda op, av: op in _LOOK)


def has_lazy(tree) -> bool:
    """Whether a parse tree has a lazy quantifier outside lookaround bodies (inside one, laziness
    changes nothing: a lookaround only asks whether a match exists)."""
    return any_node(tree, lambda op, av: op is C.MIN_REPEAT, into_lookarounds=False)


def _guarded(fn):
    """Only GrammarError / UnsupportedFeature leave a compile."""
    @functools.wraps(fn)
    def wrapper(pattern, *args, **kwargs):
        try:
            return fn(pattern, *args, **kwargs)
        except (RecursionError, OverflowError, MemoryError) as e:
            raise GrammarError(f"regular expression {pattern!r} with lookarounds is too large to compile: "
                               f"{type(e).__name__}", source=pattern) from None
    return wrapper


@_guarded
def compile_lookaround(pattern: str, *, encoder=cc.UTF8, search: bool = False, flags: int = 0) -> DFA:
    """The trimmed, minimized DFA of a pattern with lookarounds: accepted iff ``re.fullmatch`` (or,
    with ``search=True``, ``re.search``) matches, the whole string being the subject; characters
    encoded by ``encoder`` (UTF-8 or JSON-string escapes).  Called by ``regex.compile_regex``."""
    tree = parse(pattern, flags)
    comp = _Compiler(pattern, encoder, terminal=False)
    m = comp.main(tree, search)
    comp.finish()
    return comp.dfa(m, comp.initial(m))


@_guarded
def compile_terminal(pattern: str, flags: int = 0) -> Terminal:
    """A Lark terminal with lookarounds or anchors: its lexeme DFA (UTF-8) and follow conditions (see
    the module docstring: lookaheads at the lexeme's end, lazy quantifiers as the shortest match).
    Errors: ``UnsupportedFeature`` / ``GrammarError`` naming the pattern (the caller adds the
    terminal).  ``regex.compile_terminal`` sends plain patterns to the plain construction."""
    tree = parse(pattern, flags)
    lazy = has_lazy(tree)
    comp = _Compiler(pattern, cc.UTF8, terminal=True)
    _check_lookbehinds(comp, list(tree), 0, tree.state)
    m = comp.main(tree, search=False)
    comp.finish()
    configs, rows = comp.construct(m, comp.initial(m))
    conds = [comp.follow(m, cfg) for cfg in configs]
    labels_of: dict = {}
    labels = np.array([0 if cond is False else labels_of.setdefault(cond, len(labels_of) + 1) for cond in conds])
    trans = np.array(rows, dtype=np.int32).reshape(len(configs), comp.ncls)
    if lazy:
        for i, cond in enumerate(conds):
            if cond is None:
                trans[i] = -1
            elif cond is not False:
                for c in range(comp.ncls):
                    if comp.reps[c] in cond.next_bytes:
                        trans[i, c] = -1
    dfa, order = trim_order(DFA(trans, labels > 0, np.array(comp.gcm, dtype=np.int32), 0))
    if order is None:
        return Terminal(dfa, {})
    dfa, block_labels = _minimize_labeled(dfa, labels[order])
    by_label = {v: k for k, v in labels_of.items()}
    follow = {s: by_label[int(lab)] for s, lab in enumerate(block_labels.tolist())
              if lab > 0 and by_label[int(lab)] is not None}
    return Terminal(dfa, follow)


def _check_lookbehinds(comp: _Compiler, items: list, offset: int, state) -> None:
    """Refuse a lookbehind that can look before the lexeme's start: ``offset`` is the fewest
    characters between the lexeme's start and the start of ``items``."""
    for item in items:
        op, av = item
        if op in _LOOK:
            direction, body = av
            if direction < 0:
                width = _width(body, state)
                if width > offset:
                    comp.unsupported("a lookbehind that can look before the start of the terminal")
                _check_lookbehinds(comp, list(body), offset - width, state)
            else:
                _check_lookbehinds(comp, list(body), offset, state)
        elif op is C.BRANCH:
            for alt in av[1]:
                _check_lookbehinds(comp, list(alt), offset, state)
        elif op is C.SUBPATTERN:
            _check_lookbehinds(comp, list(av[3]), offset, state)
        elif op in _REPEATS:
            _check_lookbehinds(comp, list(av[2]), offset, state)
        offset += _width([item], state)


def _minimize_labeled(dfa: DFA, labels: np.ndarray) -> tuple[DFA, np.ndarray]:
    """Moore's partition refinement from the partition by ``labels`` (states with different follow
    conditions never merge); the minimal DFA (start 0) and the label of each of its states."""
    trans = np.asarray(dfa.trans, dtype=np.int64)
    block = np.unique(labels, return_inverse=True)[1].reshape(-1)
    while True:
        count = int(block.max()) + 1
        succ = np.where(trans >= 0, block[np.maximum(trans, 0)], -1)
        sig = np.concatenate([block[:, None], succ], axis=1)
        new = np.unique(sig, axis=0, return_inverse=True)[1].reshape(-1)
        if int(new.max()) + 1 == count:
            break
        block = new
    n_blocks = int(block.max()) + 1
    first = np.full(n_blocks, len(block), dtype=np.int64)
    np.minimum.at(first, block, np.arange(len(block)))
    start_block = block[dfa.start]
    order = np.concatenate([[start_block], np.delete(np.arange(n_blocks), start_block)])
    renum = np.empty(n_blocks, dtype=np.int64)
    renum[order] = np.arange(n_blocks)
    reps = first[order]
    rows = trans[reps]
    new_trans = np.where(rows >= 0, renum[block[np.maximum(rows, 0)]], -1).astype(np.int32)
    out = compact_classes(DFA(new_trans, dfa.accept[reps].copy(), dfa.classmap, 0))
    return out, np.asarray(labels)[reps]
