"""Python-style indentation as lark's ``Indenter`` post-lexer defines it, for the engine.

Lark turns each newline lexeme (outside brackets) into the newline itself followed by one
``INDENT`` or by as many ``DEDENT`` as the indentation stack pops; inside brackets newlines are
dropped.  The indentation of a newline lexeme is read from its last line: spaces count one, tabs
``tab_len``.  Here the newline terminal is split by that column (one terminal per column up to
``max_column``, and one that matches any column: ``structgen.grammar.lark`` adds it so a lexer
needs only the columns its context can use), so the lexer's accept sets say the column, and the parser
(:class:`structgen.engine.parser.Parser`) keeps the bracket depth and the indentation stack in its
configurations: masks stay cached per state, and the post-lexer is exact.  Lines indented past
``max_column`` are refused outside brackets (a documented bound; inside brackets indentation
does not matter and any depth is taken).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..errors import GrammarError
from ..automata.fsa import DFA, minimize, trim


@dataclass(frozen=True)
class IndenterConfig:
    """What lark's ``Indenter`` subclasses declare; the defaults are lark's ``PythonIndenter``."""

    newline: str = "_NEWLINE"
    open_paren: tuple[str, ...] = ("LPAR", "LSQB", "LBRACE")
    close_paren: tuple[str, ...] = ("RPAR", "RSQB", "RBRACE")
    indent: str = "_INDENT"
    dedent: str = "_DEDENT"
    tab_len: int = 8
    max_column: int = 64


PYTHON = IndenterConfig()

_LARK_ATTRS = {"newline": "NL_type", "open_paren": "OPEN_PAREN_types", "close_paren": "CLOSE_PAREN_types",
               "indent": "INDENT_type", "dedent": "DEDENT_type", "tab_len": "tab_len"}


def resolve_indenter(spec) -> IndenterConfig | None:
    """``None``, ``"python"``, an :class:`IndenterConfig`, a dict of its fields, or a lark
    ``Indenter`` (class or instance: its ``NL_type``, ``OPEN_PAREN_types``, ... are read)."""
    if spec is None or isinstance(spec, IndenterConfig):
        return spec
    if isinstance(spec, str):
        if spec.lower() == "python":
            return PYTHON
        raise GrammarError(f"unknown indenter {spec!r}: use 'python', an IndenterConfig or a dict of its fields")
    if isinstance(spec, dict):
        known = {f.name for f in fields(IndenterConfig)}
        bad = set(spec) - known
        if bad:
            raise GrammarError(f"unknown indenter setting(s) {sorted(bad)}; known: {sorted(known)}")
        cfg = {k: tuple(v) if k in ("open_paren", "close_paren") else v for k, v in spec.items()}
        out = IndenterConfig(**cfg)
    elif all(hasattr(spec, a) for a in _LARK_ATTRS.values()):
        out = IndenterConfig(**{k: (tuple(getattr(spec, a)) if k.endswith("paren") else getattr(spec, a))
                                for k, a in _LARK_ATTRS.items()})
    else:
        raise GrammarError(f"cannot read an indenter from {spec!r}")
    if not (isinstance(out.tab_len, int) and out.tab_len > 0 and isinstance(out.max_column, int)
            and 0 < out.max_column <= 512):
        raise GrammarError(f"indenter needs tab_len > 0 and 0 < max_column <= 512, got {out}")
    return out


def split_by_column(dfa: DFA, tab_len: int, max_column: int) -> dict[int, DFA]:
    """The newline terminal's lexemes by the column of their last line (column -> DFA of those
    lexemes), counting as lark does: after the last ``\\n``, each space 1 and each tab ``tab_len``
    (every space and tab of that line, comments included).  Columns past ``max_column`` get no
    part: the newline at any column (``structgen.grammar.lark``) lexes them, dropped inside
    brackets as any other and refused by the parser at the top level."""
    over = max_column + 1
    n_cls = dfa.trans.shape[1]
    cm = dfa.classmap
    # product (state, column); column classes: newline, space, tab, other -- refine the byte classes
    kinds = np.zeros(256, dtype=np.int64)
    kinds[ord("\n")], kinds[ord(" ")], kinds[ord("\t")] = 1, 2, 3
    joint = cm.astype(np.int64) * 4 + kinds
    uniq, classmap = np.unique(joint, return_inverse=True)
    classmap = classmap.astype(np.int32)
    index: dict[tuple[int, int], int] = {}
    order: list[tuple[int, int]] = []

    def sid(s: int, c: int) -> int:
        k = (s, c)
        i = index.get(k)
        if i is None:
            i = index[k] = len(order)
            order.append(k)
        return i

    sid(dfa.start, 0)
    rows = []
    i = 0
    while i < len(order):
        s, c = order[i]
        row = np.full(len(uniq), -1, dtype=np.int32)
        for j, u in enumerate(uniq.tolist()):
            t = int(dfa.trans[s, u // 4]) if u // 4 < n_cls else -1
            if t < 0:
                continue
            k = u % 4
            nc = 0 if k == 1 else min(over, c + 1) if k == 2 else min(over, c + tab_len) if k == 3 else c
            row[j] = sid(t, nc)
        rows.append(row)
        i += 1
    trans = np.stack(rows)
    acc_states = np.array([bool(dfa.accept[s]) for s, _ in order])
    cols = np.array([c for _, c in order])
    out = {}
    for col in sorted(set(cols[acc_states].tolist()) - {over}):
        part = trim(DFA(trans.copy(), acc_states & (cols == col), classmap.copy(), 0))
        if not part.is_empty():
            out[col] = minimize(part)
    return out
