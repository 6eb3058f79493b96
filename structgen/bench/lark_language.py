"""A second reference for Lark grammars: does a text belong to the grammar's *language*?

structgen gives a regex terminal the semantics of its language: any string the regex fully matches
can be a lexeme.  lark's Earley parser is the fuzzer's first reference, but even its
``dynamic_complete`` lexer only tries the regex engine's one (backtracking-preferred) match at a
position and the prefixes of that match, so it misses longer lexemes: ``/(?:[\\w.-]{3,7}){2,}/``
matches 14 of the 16 characters of ``criptionskeyword`` (two groups of 7, then a third group
cannot start), and lark refuses a text that is in the language.  When lark refuses, the fuzzer asks
this recognizer: an Earley chart over characters whose terminals are scanned by ``re.fullmatch``
over every span (so every lexeme of the language is tried), with ``%ignore`` terminals allowed
between lexemes.  It takes the rules and terminals lark compiled, so templates, imports and
inlined rules mean what they mean to lark.  Quadratic in the text's length per terminal: a
checker for short texts, not a parser.
"""
from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

__all__ = ["LanguageRecognizer"]


class LanguageRecognizer:
    """``accepts(text)``: whether ``text`` is in the language of a compiled ``lark.Lark`` grammar."""

    def __init__(self, parser: Any, start: str = "start") -> None:
        self.rules: list[tuple[str, tuple[tuple[str, bool], ...]]] = [
            (str(r.origin.name), tuple((str(s.name), bool(s.is_term)) for s in r.expansion)) for r in parser.rules]
        self.by_lhs: dict[str, list[int]] = defaultdict(list)
        for i, (lhs, _) in enumerate(self.rules):
            self.by_lhs[lhs].append(i)
        self.terminals = {t.name: re.compile(t.pattern.to_regexp()) for t in parser.terminals}
        self.ignore = [self.terminals[n] for n in getattr(parser, "ignore_tokens", ()) if n in self.terminals]
        self.start = start

    def accepts(self, text: str) -> bool:
        n = len(text)
        skip_memo: dict[int, list[int]] = {}
        ends_memo: dict[tuple[str, int], list[int]] = {}

        def skip(i: int) -> list[int]:  # positions reachable from i over ignored lexemes (i included)
            if i not in skip_memo:
                seen, todo = {i}, [i]
                while todo:
                    p = todo.pop()
                    for rx in self.ignore:
                        for j in range(p + 1, n + 1):
                            if j not in seen and rx.fullmatch(text, p, j):
                                seen.add(j)
                                todo.append(j)
                skip_memo[i] = sorted(seen)
            return skip_memo[i]

        def ends(term: str, i: int) -> list[int]:
            key = (term, i)
            if key not in ends_memo:
                rx = self.terminals[term]
                ends_memo[key] = sorted({j for p in skip(i) for j in range(p + 1, n + 1) if rx.fullmatch(text, p, j)})
            return ends_memo[key]

        chart: list[set[tuple[int, int, int]]] = [set() for _ in range(n + 1)]
        for r in self.by_lhs[self.start]:
            chart[0].add((r, 0, 0))
        for i in range(n + 1):
            done: set[tuple[str, int]] = set()  # (lhs, origin) completed at i
            todo = list(chart[i])
            while todo:
                r, dot, origin = todo.pop()
                lhs, rhs = self.rules[r]
                if dot == len(rhs):
                    if (lhs, origin) in done:
                        continue
                    done.add((lhs, origin))
                    for r2, d2, o2 in list(chart[origin]):
                        rhs2 = self.rules[r2][1]
                        if d2 < len(rhs2) and rhs2[d2] == (lhs, False):
                            item = (r2, d2 + 1, o2)
                            if item not in chart[i]:
                                chart[i].add(item)
                                todo.append(item)
                    continue
                sym, is_term = rhs[dot]
                if is_term:
                    for j in ends(sym, i):
                        chart[j].add((r, dot + 1, origin))
                    continue
                new = [(r2, 0, i) for r2 in self.by_lhs[sym]]
                if (sym, i) in done:  # a nullable symbol already completed here
                    new.append((r, dot + 1, origin))
                for item in new:
                    if item not in chart[i]:
                        chart[i].add(item)
                        todo.append(item)
        return any(lhs == self.start and dot == len(rhs) and origin == 0 and n in skip(i)
                   for i in range(n + 1) for (r, dot, origin) in chart[i] for lhs, rhs in [self.rules[r]])
