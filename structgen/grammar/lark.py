"""Lark grammar text to IR.

Lark's own loader resolves ``%import``, templates, EBNF operators and string
flags, so users get exactly Lark's grammar language; we take its flattened
rules and terminal patterns.  Lark expands ``x*`` into left-recursive helper
rules; direct left recursion ``A: A a | b`` is rewritten to ``A: b a*`` (same
language), so the engine's predictive parser never loops.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import GrammarError, UnsupportedFeature
from .ir import Alt, EPSILON, Expr, GrammarIR, Repeat, Sym, alt, seq
from .regex import compile_regex, has_anchor


try:  # lark uses the ``regex`` module when it is installed
    import regex as _regex_module

    _REGEX_ERRORS: tuple = (re.error, _regex_module.error)
except ImportError:  # pragma: no cover - regex is optional
    _REGEX_ERRORS = (re.error,)

_TERMINAL_LINE = re.compile(r"^\s*([A-Z_][A-Z_0-9]*)(?:\.-?\d+)?\s*:(.*)$", re.M)
_REGEX_LITERAL = re.compile(r"/((?:[^/\\\n]|\\.)*)/([imslux]*)")


def _bad_terminal(text: str) -> str:
    """'terminal NAME' for the first terminal whose regex Python cannot compile (or 'a terminal')."""
    for m in _TERMINAL_LINE.finditer(text):
        for rx in _REGEX_LITERAL.finditer(m.group(2)):
            try:
                re.compile(rx.group(1))
            except re.error:
                return f"terminal {m.group(1)}"
    return "a terminal"


def _flags_int(flags) -> int:
    out = 0
    for f in flags:
        out |= {"i": re.IGNORECASE, "s": re.DOTALL, "m": re.MULTILINE, "x": re.VERBOSE, "u": 0, "l": 0}.get(f, 0)
    return out


def load_lark_text(text_or_path: str | Path) -> tuple[str, str]:
    """Return (grammar text, a label for error messages)."""
    p = Path(str(text_or_path))
    if "\n" not in str(text_or_path) and p.suffix == ".lark":
        if not p.exists():
            from ..errors import GrammarError as GE

            raise GE(f"grammar file {p} not found")
        return p.read_text(), str(p)
    return str(text_or_path), "<grammar>"


def lark_to_ir(text: str, *, start: str = "start", source: str = "<grammar>") -> GrammarIR:
    try:
        from lark import Lark
        from lark.exceptions import GrammarError as LarkGrammarError, LarkError
    except ImportError as e:  # pragma: no cover
        raise GrammarError("the 'lark' package is required for Lark grammars") from e
    import lark.lexer as _lark_lexer

    # Lark checks terminal collisions with interegular while building its own
    # meta-grammar lexer (about 2 s, once per process). The check only emits
    # warnings, and structgen's lexer resolves overlaps itself, so skip it.
    saved = getattr(_lark_lexer, "has_interegular", False)
    _lark_lexer.has_interegular = False
    try:
        parser = Lark(text, start=start, parser="earley", lexer="dynamic")
    except _REGEX_ERRORS as e:  # lark compiles terminal regexes with re / regex: name the terminal
        raise GrammarError(f"invalid regular expression in {_bad_terminal(text)} of {source}: {e}") from None
    except OSError as e:  # a %import of a file that cannot be read
        raise GrammarError(f"cannot read a file imported by {source}: {e}") from None
    except LarkError as e:
        msg = str(e).strip().splitlines()
        pos = None
        m = re.search(r"line (\d+), column (\d+)", str(e)) or re.search(r"at line (\d+) column (\d+)", str(e))
        if m:
            line, col = int(m.group(1)), int(m.group(2))
            pos = sum(len(x) + 1 for x in text.splitlines()[: line - 1]) + col - 1
        raise GrammarError(f"invalid Lark grammar {source}: {msg[0] if msg else e}", position=pos) from None
    finally:
        _lark_lexer.has_interegular = saved

    ir = GrammarIR(rules={}, terminals={}, start=start, source=source)
    ignore = set(parser.ignore_tokens)
    for t in parser.terminals:
        pat = t.pattern
        flags = _flags_int(pat.flags)
        regex = re.escape(pat.value) if pat.type == "str" else pat.value
        try:
            if pat.type != "str" and has_anchor(regex, flags):
                raise UnsupportedFeature(f"regular expression {regex!r} uses an anchor (^, $, \\A or \\Z): in a Lark "
                                         "terminal it ties the terminal to the start or end of the whole input, which "
                                         "structgen does not model")
            dfa = compile_regex(regex, flags=flags)
        except (GrammarError, UnsupportedFeature) as e:
            raise GrammarError(f"terminal {t.name} of {source}: {e}") from None
        if dfa.is_empty():
            raise GrammarError(f"terminal {t.name} of {source} matches nothing")
        if dfa.accepts_empty():
            raise GrammarError(f"terminal {t.name} of {source} matches the empty string (zero-width terminals are not allowed)")
        ir.add_terminal(t.name, dfa, ignore=t.name in ignore)

    by_origin: dict[str, list[list[str]]] = {}
    for r in parser.rules:
        by_origin.setdefault(r.origin.name, []).append([s.name for s in r.expansion])
    for name, expansions in by_origin.items():
        recursive = [e[1:] for e in expansions if e and e[0] == name]
        base = [e for e in expansions if not (e and e[0] == name)]
        body = alt(*[seq(*[Sym(s) for s in e]) if e else EPSILON for e in base]) if base else None
        if body is None:
            raise GrammarError(f"rule {name} of {source} is left-recursive with no base case")
        if recursive:
            tail = alt(*[seq(*[Sym(s) for s in e]) if e else EPSILON for e in recursive])
            body = seq(body, Repeat(tail, 0, None))
        ir.rules[name] = body
    if start not in ir.rules:
        raise GrammarError(f"start rule {start!r} not found in {source}")
    return ir
