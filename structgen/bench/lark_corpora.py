"""Grammars lark ships and real texts in their languages (what ``structgen bench grammar`` and the
differential tests step through).

* ``python``: lark's ``python.lark`` (start ``file_input``, lark's ``PythonIndenter``; Python's
  hard keywords reserved, its soft keywords ``_``, ``match``, ``case``, ``type`` names wherever a
  name fits) over this project's modules and a seeded sample of the standard library's;
* ``lark``: lark's ``lark.lark`` over lark's own ``.lark`` files and this project's ``grammars/``.

Only texts lark itself parses (LALR, with the indenter where the grammar needs it) are kept, so a
text the engine refuses is a disagreement with lark.
"""
from __future__ import annotations

import glob
import os
import random
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]


def lark_grammars_dir() -> Path:
    import lark

    return Path(lark.__file__).resolve().parent / "grammars"


@dataclass(frozen=True)
class LarkCorpus:
    name: str
    grammar: Path
    start: str
    indenter: str | None
    texts: Callable[[int, int], list[str]]  # (how many, seed) -> texts

    def lark_parser(self):
        """lark's own LALR parser of the grammar (with lark's ``PythonIndenter`` for Python).

        For Python, compile_lark reserves the hard keywords (``as`` is never a name, ``isnot`` is
        not ``is not``, as in lark's basic lexer) but not the soft ones (``_``, ``match``, ``case``,
        ``type``), which lark's contextual lexer reads as names where the parser wants a name;
        lexer callbacks refuse the rest (a hard keyword read as a name, a keyword run into a name)."""
        from lark import Lark
        from lark.indenter import PythonIndenter

        if self.indenter != "python":
            return Lark.open(str(self.grammar), parser="lalr", lexer="contextual", start=self.start)
        words = _HardKeywords()
        probe = Lark.open(str(self.grammar), parser="lalr", lexer="contextual", postlex=PythonIndenter(),
                          start=self.start)
        callbacks = {t.name: words.keyword for t in probe.terminals
                     if t.pattern.type == "str" and t.pattern.value in words.hard}
        callbacks["NAME"] = words.name
        parser = Lark.open(str(self.grammar), parser="lalr", lexer="contextual", postlex=PythonIndenter(),
                           start=self.start, lexer_callbacks=callbacks)
        parser.structgen_keywords = words
        return parser

    def parsed_texts(self, n: int, seed: int = 0) -> list[str]:
        """Up to ``n`` texts lark parses."""
        parser = self.lark_parser()
        return [t for t in self.texts(n * 2, seed) if lark_parses(parser, t)][:n]


class _HardKeywords:
    """Lexer callbacks over the text being parsed: Python's hard keywords are never names and never
    end where a name character follows."""

    def __init__(self) -> None:
        import keyword

        self.hard = frozenset(keyword.kwlist)
        self.text = ""

    def name(self, tok):
        from lark.exceptions import LexError

        if tok.value in self.hard:
            raise LexError(f"the keyword {tok.value!r} used as a name")
        return tok

    def keyword(self, tok):
        from lark.exceptions import LexError

        end = tok.end_pos
        if end is not None and end < len(self.text) and (self.text[end].isalnum() or self.text[end] == "_"):
            raise LexError(f"the keyword {tok.value!r} runs into a name")
        return tok


def lark_parses(parser, text: str) -> bool:
    from lark.exceptions import LarkError

    words = getattr(parser, "structgen_keywords", None)
    if words is not None:
        words.text = text
    try:
        parser.parse(text)
        return True
    except (LarkError, AssertionError):  # lark's Indenter asserts on a stray closing bracket
        return False


def _read(paths, n: int, max_bytes: int) -> list[str]:
    out = []
    for p in paths:
        if len(out) >= n:
            break
        text = Path(p).read_text(encoding="utf-8", errors="replace")
        if len(text.encode()) <= max_bytes:
            out.append(text)
    return out


def python_files(n: int, seed: int = 0, max_bytes: int = 12_000) -> list[str]:
    """Half this project's modules, half the standard library's (seeded samples)."""
    ours = sorted(glob.glob(str(ROOT / "structgen" / "**" / "*.py"), recursive=True))
    std = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))
    rng = random.Random(seed)
    rng.shuffle(ours)
    rng.shuffle(std)
    return _read(ours, n - n // 2, max_bytes) + _read(std, n // 2, max_bytes)


def lark_files(n: int, seed: int = 0) -> list[str]:
    files = sorted(lark_grammars_dir().glob("*.lark")) + sorted((ROOT / "grammars").glob("*.lark"))
    return _read(files, n, 1 << 20)


CORPORA = {
    "python": LarkCorpus("python", lark_grammars_dir() / "python.lark", "file_input", "python", python_files),
    "lark": LarkCorpus("lark", lark_grammars_dir() / "lark.lark", "start", None, lark_files),
}
