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

import numpy as np

from ..errors import GrammarError, UnsupportedFeature
from ..automata.fsa import DFA, difference_literals, literal_dfa, minimize, trim
from .indenter import resolve_indenter, split_by_column
from .ir import EPSILON, FollowCondition, GrammarIR, Repeat, Sym, Terminal, alt, seq
from .regex import compile_regex, has_anchor, parse as parse_regex


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


def needs_terminal_semantics(pattern: str, flags: int = 0) -> bool:
    """Whether a terminal's regex has a lookaround or a lazy quantifier: then what it matches
    depends on where ``re.match`` stops, not only on its language (``compile_terminal``)."""
    from .lookaround import has_lazy, has_lookaround

    tree = parse_regex(pattern, flags)
    return has_lookaround(tree) or has_lazy(tree)


def _flags_int(flags) -> int:
    out = 0
    for f in flags:
        out |= {"i": re.IGNORECASE, "s": re.DOTALL, "m": re.MULTILINE, "x": re.VERBOSE, "u": 0, "l": 0}.get(f, 0)
    return out


def load_lark_text(text_or_path: str | Path) -> tuple[str, str]:
    """Return (grammar text, a label for error messages: the file's path when it came from one,
    so relative ``%import`` statements resolve beside it).  One line with no rule (no ``:``) is a
    file's path or a misspelt shipped name, never grammar text: a GrammarError lists the names."""
    text = str(text_or_path)
    p = Path(text)
    if "\n" not in text and p.suffix == ".lark":
        if not p.exists():
            from ..shipped import unknown_grammar_name

            raise unknown_grammar_name(text.strip())
        return p.read_text(), str(p)
    if text.strip() and "\n" not in text and ":" not in text and not text.lstrip().startswith("%"):
        # one line and no rule: a file's path, or a name that is no shipped grammar's (a misspelling),
        # never grammar text (lark would only say "missing colon")
        try:
            if p.is_file():
                return p.read_text(), str(p)
        except (OSError, ValueError):  # no file can be named so (too long, a NUL)
            pass
        from ..shipped import unknown_grammar_name

        raise unknown_grammar_name(text.strip())
    return text, "<grammar>"


def _load(text: str, start: list[str], source: str):
    """Lark's own loader (imports, templates, ``%override`` / ``%extend``, EBNF, flags): our
    errors, naming the terminal or the position."""
    try:
        from lark import Lark
        from lark.exceptions import LarkError
    except ImportError as e:  # pragma: no cover
        raise GrammarError("the 'lark' package is required for Lark grammars") from e
    import lark.lexer as _lark_lexer

    # Lark checks terminal collisions with interegular while building its own
    # meta-grammar lexer (about 2 s, once per process). The check only emits
    # warnings, and structgen's lexer resolves overlaps itself, so skip it.
    saved = getattr(_lark_lexer, "has_interegular", False)
    _lark_lexer.has_interegular = False
    kw = {"source_path": source} if source != "<grammar>" else {}
    try:
        return Lark(text, start=start, parser="earley", lexer="dynamic", **kw)
    except _REGEX_ERRORS as e:  # lark compiles terminal regexes with re / regex: name the terminal
        raise GrammarError(f"invalid regular expression in {_bad_terminal(text)} of {source}: {e}") from None
    except OSError as e:  # a %import of a file that cannot be read
        missing = getattr(e, "filename", None) or e
        raise GrammarError(f"cannot read {missing}, imported by {source} (relative imports resolve beside the "
                           "grammar file; give compile_lark a path, not text, to use them)") from None
    except LarkError as e:
        msg = str(e).strip().splitlines()
        pos = None
        m = re.search(r"line (\d+), column (\d+)", str(e)) or re.search(r"at line (\d+) column (\d+)", str(e))
        if m:
            line, col = int(m.group(1)), int(m.group(2))
            pos = sum(len(x) + 1 for x in text.splitlines()[: line - 1]) + col - 1
        raise GrammarError(f"invalid Lark grammar {source}: {msg[0] if msg else e}", position=pos) from None
    except RecursionError:
        raise GrammarError(f"Lark grammar {source} is nested too deeply to load") from None
    finally:
        _lark_lexer.has_interegular = saved


def _terminal_automaton(name: str, pat, source: str):
    """(DFA, {state: FollowCondition}) of one Lark terminal.  Plain regexes take the regex front
    end as they always did; lookarounds and lazy quantifiers take ``compile_terminal``, whose
    lookaheads at the lexeme's end become conditions on the byte that follows it (lazy loops are
    first rewritten as tempered greedy ones: :mod:`structgen.grammar.lazy`)."""
    flags = _flags_int(pat.flags)
    regex = re.escape(pat.value) if pat.type == "str" else pat.value
    try:
        if pat.type != "str" and has_anchor(regex, flags):
            raise UnsupportedFeature(f"regular expression {regex!r} uses an anchor (^, $, \\A or \\Z): in a Lark "
                                     "terminal it ties the terminal to the start or end of the whole input, which "
                                     "structgen does not model")
        if pat.type != "str" and needs_terminal_semantics(regex, flags):
            from .lazy import eager_equivalent
            from .regex import compile_terminal

            term = compile_terminal(eager_equivalent(regex, flags), flags=flags)
            return term.dfa, {int(s): c for s, c in term.follow.items()}
        return compile_regex(regex, flags=flags), {}
    except (GrammarError, UnsupportedFeature) as e:
        raise GrammarError(f"terminal {name} of {source}: {e}") from None


def _reserved_strings(terminals, soft: frozenset[str] = frozenset()
                      ) -> tuple[dict[str, list[bytes]], dict[str, list[tuple[str, bytes]]]]:
    """Regex terminal -> the string terminals of its priority it matches whole (what lark's basic
    lexer retypes: ``NAME`` never reads ``as``), and string terminal -> (regex terminal, text).
    Case-insensitive strings reserve every casing.  ``soft`` words are not reserved: such a word
    is read both ways, and the parser keeps whichever reading fits (Python's ``match``, ``case``,
    ``_``, ``type`` are names except where a statement makes them keywords)."""
    by_regex: dict[str, list[bytes]] = {}
    by_string: dict[str, list[tuple[str, bytes]]] = {}
    strings = [t for t in terminals if t.pattern.type == "str" and t.pattern.value not in soft]
    for r in terminals:
        if r.pattern.type != "re":
            continue
        rx = re.compile(r.pattern.value, _flags_int(r.pattern.flags))
        for s in strings:
            if s.priority != r.priority:
                continue
            variants = _casings(s.pattern.value) if "i" in s.pattern.flags else [s.pattern.value]
            for v in variants:
                if rx.fullmatch(v):
                    by_regex.setdefault(r.name, []).append(v.encode())
                    by_string.setdefault(s.name, []).append((r.name, v.encode()))
    return by_regex, by_string


def _keyword_follow(dfa: DFA, uses: list[tuple[str, bytes]], regex_dfas: dict[str, DFA]) -> dict:
    """A reserved keyword's lexeme ends only before a byte the regex that would read it could not
    take next (``is`` then ``n`` is the name ``isn...``, as in lark's basic lexer and Python's
    tokenizer): a follow condition on its accepting states."""
    blocked: set[int] = set()
    for name, text in uses:
        r = regex_dfas[name]
        st = r.start
        for b in text:
            st = r.step(st, b)
        blocked.update(b for b in range(256) if r.step(st, b) >= 0)
    cond = FollowCondition(frozenset(range(256)) - frozenset(blocked), True)
    return {int(a): cond for a in np.nonzero(dfa.accept)[0].tolist()}


def _casings(word: str, limit: int = 4096) -> list[str]:
    """Every upper/lower casing of ``word`` (bounded: a keyword is short)."""
    out = [""]
    for ch in word:
        forms = {ch.lower(), ch.upper()}
        out = [o + f for o in out for f in forms][:limit]
    return out


def _split_by_follow(dfa: DFA, follow: dict[int, FollowCondition]) -> list[tuple[FollowCondition | None, DFA]]:
    """One DFA per follow condition (None: the unconditional accepting states)."""
    groups: dict = {}
    for s in np.nonzero(dfa.accept)[0].tolist():
        groups.setdefault(follow.get(s), []).append(s)
    out = []
    for cond, states in sorted(groups.items(), key=lambda kv: (kv[0] is not None, repr(kv[0]))):
        accept = np.zeros_like(dfa.accept)
        accept[states] = True
        part = trim(DFA(dfa.trans.copy(), accept, dfa.classmap.copy(), dfa.start))
        if not part.is_empty():
            out.append((cond, minimize(part)))
    return out


def lark_to_ir(text: str, *, start: str | list[str] | tuple[str, ...] = "start", source: str = "<grammar>",
               indenter=None, reserve_keywords: bool = False, soft_keywords=()) -> GrammarIR:
    """A Lark grammar as IR.  ``start``: one rule, or a list (the output may be any of them).
    ``indenter``: ``"python"`` / an :class:`~structgen.grammar.indenter.IndenterConfig` for
    grammars whose ``%declare``-d indent / dedent terminals come from lark's ``Indenter``.
    ``reserve_keywords``: lark's basic lexer's rule that a string terminal wins over a regex
    terminal of the same priority matching the same text (``"as"`` is never a ``NAME``), where
    the Earley and contextual lexers let the regex take it when the string does not fit.
    ``soft_keywords``: words kept out of that rule (read both ways, as lark's contextual lexer does)."""
    starts = [start] if isinstance(start, str) else list(start)
    if not starts or not all(isinstance(s, str) and s for s in starts):
        raise GrammarError(f"start must be a rule name or a non-empty list of them, got {start!r}")
    cfg = resolve_indenter(indenter)
    parser = _load(text, starts, source)
    top = starts[0] if len(starts) == 1 else "__start"
    ir = GrammarIR(rules={}, terminals={}, start=top, source=source, ignore_repeats=True)
    ignore = set(parser.ignore_tokens)
    defined = set()
    reserved, keywords = _reserved_strings(parser.terminals, frozenset(soft_keywords)) if reserve_keywords else ({}, {})
    automata = {t.name: _terminal_automaton(t.name, t.pattern, source) for t in parser.terminals}
    for t in parser.terminals:
        defined.add(t.name)
        dfa, follow = automata[t.name]
        if t.name in reserved:
            if follow:
                raise GrammarError(f"terminal {t.name} of {source}: keywords cannot be reserved from a terminal "
                                   "with a lookahead at its end")
            dfa = difference_literals(dfa, reserved[t.name])
        if t.name in keywords:
            follow = _keyword_follow(dfa, keywords[t.name], {n: automata[n][0] for n, _ in keywords[t.name]})
        if dfa.is_empty():
            raise GrammarError(f"terminal {t.name} of {source} matches nothing")
        if dfa.accepts_empty():
            raise GrammarError(f"terminal {t.name} of {source} matches the empty string (zero-width terminals are "
                               "not allowed)")
        is_ignored = t.name in ignore
        if cfg is not None and t.name == cfg.newline:
            if follow:
                raise GrammarError(f"terminal {t.name} of {source}: the indenter's newline terminal may not "
                                   "use a lookahead at its end")
            ir.terminals[t.name] = Terminal(t.name, dfa, is_ignored, lexable=False)
            for col, part in split_by_column(dfa, cfg.tab_len, cfg.max_column).items():
                name = f"{t.name}@col{col}"
                ir.terminals[name] = Terminal(name, part, is_ignored, lexeme_of=t.name, column=col)
            # the newline at any column: where the parser can use only a few columns (inside
            # brackets none matters), the lexer holds those and this one, which keeps the lexemes
            # where they end without the product of every column's automaton
            name = f"{t.name}@any"
            ir.terminals[name] = Terminal(name, dfa, is_ignored, lexeme_of=t.name, column=-1)
        elif follow:
            ir.terminals[t.name] = Terminal(t.name, dfa, is_ignored, lexable=False)
            for i, (cond, part) in enumerate(_split_by_follow(dfa, follow)):
                name = f"{t.name}@follow{i}"
                ir.terminals[name] = Terminal(name, part, is_ignored, lexeme_of=t.name, follow=cond)
        else:
            ir.add_terminal(t.name, dfa, ignore=is_ignored)

    by_origin: dict[str, list[list[str]]] = {}
    used: set[str] = set()
    for r in parser.rules:
        by_origin.setdefault(r.origin.name, []).append([s.name for s in r.expansion])
        used.update(s.name for s in r.expansion if s.is_term)
    for name in sorted(used - defined):  # %declare'd: only a post-lexer produces them
        if cfg is not None and name in (cfg.indent, cfg.dedent):
            ir.terminals[name] = Terminal(name, literal_dfa(b"\0"), lexable=False)
        else:
            hint = (f"; the indenter declares {cfg.indent!r} and {cfg.dedent!r}" if cfg is not None else
                    " (pass indenter='python' or an IndenterConfig if an Indenter produces it)")
            raise GrammarError(f"terminal {name} of {source} is %declare'd: it is produced by a post-lexer, and the "
                               f"only post-lexer structgen models is lark's Indenter{hint}")
    if cfg is not None:
        for role, name in (("newline", cfg.newline), ("indent", cfg.indent), ("dedent", cfg.dedent)):
            if name not in ir.terminals:
                raise GrammarError(f"indenter's {role} terminal {name!r} is not a terminal of {source}")
        ir.indenter = cfg
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
    for s in starts:
        if s not in ir.rules:
            raise GrammarError(f"start rule {s!r} not found in {source}")
    if top == "__start":
        ir.rules[top] = alt(*[Sym(s) for s in starts])
    return ir
