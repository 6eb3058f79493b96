"""Grammars lark ships and real texts in their languages (what ``structgen bench grammar`` and the
differential tests step through).

* ``python``: lark's ``python.lark`` (start ``file_input``, lark's ``PythonIndenter``, keywords
  reserved as lark's basic lexer does) over this project's modules and a seeded sample of the
  standard library's;
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
        """lark's own LALR parser of the grammar (with lark's ``PythonIndenter`` for Python)."""
        from lark import Lark
        from lark.indenter import PythonIndenter

        post = PythonIndenter() if self.indenter == "python" else None
        # compile_lark reserves keywords with the Python indenter: lark's basic lexer does too
        lexer = "basic" if self.indenter == "python" else "contextual"
        return Lark.open(str(self.grammar), parser="lalr", lexer=lexer, postlex=post, start=self.start)

    def parsed_texts(self, n: int, seed: int = 0) -> list[str]:
        """Up to ``n`` texts lark parses."""
        parser = self.lark_parser()
        return [t for t in self.texts(n * 2, seed) if lark_parses(parser, t)][:n]


def lark_parses(parser, text: str) -> bool:
    from lark.exceptions import LarkError

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
