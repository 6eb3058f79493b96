"""Lazy quantifiers in terminals, rewritten as greedy ones with a lookahead.

Lark matches a terminal with ``re.match`` at the lexeme's start, so a lazy loop ``X*?`` stops at
the first iteration where the rest of the pattern ``K`` can match: leftmost-first order decides
where the lexeme ends, not the language alone (``/(a|b)*?/[imslux]*`` in ``lark.lark`` stops at
the first ``/``, and then takes every flag greedily).  That is exactly the *tempered* greedy loop
``(?:(?!K)X)*`` followed by ``K``: it cannot take another ``X`` where ``K`` can match, and must
leave there.  So ``eager_equivalent`` rewrites each lazy quantifier ``X{m,n}?`` whose rest is
``K`` into ``X{m}(?:(?!K)X){0,n-m}`` (laziness inside ``K`` or inside a lookaround does not change
whether it *can* match, so there it becomes greedy; a body that is an alternation takes its first
alternative that matches, as ``re`` does), and the lookaround builder
(:mod:`structgen.grammar.lookaround`) does the rest.  A lazy quantifier inside a counted
repetition (``(a*?b){2,5}``), whose rest depends on the iteration count, is refused.

Greedy quantifiers keep the engine's maximal munch (a lexeme ends where the next byte cannot
extend it), which is what ``re.match`` gives unless a greedy loop must give bytes back.
"""
from __future__ import annotations

from re import _constants as C  # type: ignore[attr-defined]

from ..errors import UnsupportedFeature
from .lookaround import has_lazy
from .regex_syntax import parse, unparse



def eager_equivalent(pattern: str, flags: int = 0) -> str:
    """``pattern`` with every lazy quantifier rewritten as a tempered greedy loop (see the module
    docstring); ``pattern`` itself when it has none."""
    tree = parse(pattern, flags)
    if not has_lazy(tree):
        return pattern
    return unparse(_seq(list(tree), [], pattern))


def _greedy(items) -> list:
    """The same language with every lazy quantifier greedy (what "can the rest match" reads)."""
    out = []
    for op, av in items:
        if op in (C.MIN_REPEAT, C.MAX_REPEAT):
            out.append((C.MAX_REPEAT, (av[0], av[1], _greedy(av[2]))))
        elif op is C.SUBPATTERN:
            out.append((op, (av[0], av[1], av[2], _greedy(av[3]))))
        elif op is C.BRANCH:
            out.append((op, (av[0], [_greedy(a) for a in av[1]])))
        elif op in (C.ASSERT, C.ASSERT_NOT):
            out.append((op, (av[0], _greedy(av[1]))))
        else:
            out.append((op, av))
    return out


def _seq(items: list, cont: list, pattern: str) -> list:
    """Rewrite a sequence whose continuation (what follows it up to the pattern's end) is ``cont``."""
    return [_item(op, av, list(items[i + 1:]) + cont, pattern) for i, (op, av) in enumerate(items)]


def _item(op, av, rest: list, pattern: str):
    if op is C.MIN_REPEAT:
        lo, hi, body = av
        inner = _body(_first_alternative_first(list(body)), lo, hi, rest, pattern)
        out = []
        if lo:
            out.append((C.MAX_REPEAT, (lo, lo, inner)))
        if hi != lo:  # (?!K) X, greedily: another X only where the rest cannot match yet
            tempered = [(C.ASSERT_NOT, (1, _greedy(rest)))] + inner
            out.append((C.MAX_REPEAT, (0, C.MAXREPEAT if hi == C.MAXREPEAT else hi - lo, tempered)))
        return (C.SUBPATTERN, (None, 0, 0, out))
    if op is C.MAX_REPEAT:
        lo, hi, body = av
        return (op, (lo, hi, _body(list(body), lo, hi, rest, pattern)))
    if op is C.SUBPATTERN:
        return (op, (av[0], av[1], av[2], _seq(list(av[3]), rest, pattern)))
    if op is C.BRANCH:
        return (op, (av[0], [_seq(list(a), rest, pattern) for a in av[1]]))
    if op in (C.ASSERT, C.ASSERT_NOT):
        return (op, (av[0], _greedy(av[1])))
    if op is C.POSSESSIVE_REPEAT and has_lazy(av[2]):
        _refuse(pattern)
    return (op, av)


def _first_alternative_first(body: list) -> list:
    """A lazy loop's body ``A | B | C`` as ``A | (?!A)B | (?!A|B)C``: ``re`` takes the first
    alternative that matches here, so a body that reads ``\\\\/`` as an escaped backslash must not
    also read it as ``\\`` and an escaped slash (``lark.lark``'s ``REGEXP``).  Exact while the
    match does not have to come back into the loop (``re`` would then retry a later alternative,
    when nothing after the lexeme lets the first one finish)."""
    items = body
    while len(items) == 1 and items[0][0] is C.SUBPATTERN and not items[0][1][1] and not items[0][1][2]:
        items = list(items[0][1][3])
    if len(items) != 1 or items[0][0] is not C.BRANCH:
        return body
    alts = [list(a) for a in items[0][1][1]]
    out = [alts[0]]
    for k in range(1, len(alts)):
        earlier = [_greedy(a) for a in alts[:k]]
        guard = (C.ASSERT_NOT, (1, [(C.BRANCH, (None, earlier))] if len(earlier) > 1 else earlier[0]))
        out.append([guard] + alts[k])
    return [(C.BRANCH, (None, out))]


def _body(body: list, lo: int, hi: int, rest: list, pattern: str) -> list:
    """A repetition's body rewritten: after an iteration come more iterations, then ``rest``
    (exact while any number of them may follow: an unbounded loop of at most one forced pass)."""
    if not has_lazy(body):
        return body
    if hi != C.MAXREPEAT or lo > 1:
        _refuse(pattern)
    return _seq(body, [(C.MAX_REPEAT, (0, C.MAXREPEAT, _greedy(body)))] + rest, pattern)


def _refuse(pattern: str):
    raise UnsupportedFeature(f"regular expression {pattern!r} has a lazy quantifier inside a counted repetition, "
                             "where the loop stops depends on the iteration count")
