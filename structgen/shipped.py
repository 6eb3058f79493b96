"""Grammars and example schemas that ship inside the package, found by name.

They are package data (``structgen/grammars/*.lark``, ``structgen/schemas/*.json``), read through
``importlib.resources`` so an installed wheel finds them wherever it lives; ``python`` and ``lark``
are the grammars lark itself ships (with the Python indenter and start rule they need).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .errors import GrammarError, SchemaError

__all__ = ["ShippedGrammar", "shipped_grammar", "shipped_grammar_names", "grammar_file", "schema_file",
           "shipped_schema", "shipped_schema_names", "unknown_grammar_name", "unknown_schema_name"]


@dataclass(frozen=True)
class ShippedGrammar:
    """A grammar file and how to compile it: its start rule(s) and indenter (None: none)."""

    name: str
    path: Path
    start: str = "start"
    indenter: str | None = None


def _package_dir(folder: str) -> Path:
    return Path(str(resources.files("structgen").joinpath(folder)))


def grammar_file(name: str) -> Path:
    """``structgen/grammars/<name>.lark`` (or another file there, named with its suffix)."""
    p = _package_dir("grammars") / (name if name.endswith(".lark") else f"{name}.lark")
    if not p.is_file():
        raise GrammarError(f"no shipped grammar file {p.name}; shipped: {', '.join(shipped_grammar_names())}")
    return p


def _lark_grammar(file: str) -> Path:
    import lark

    return Path(lark.__file__).resolve().parent / "grammars" / file


def shipped_grammar_names() -> list[str]:
    own = sorted(p.stem for p in _package_dir("grammars").glob("*.lark"))
    return own + ["lark", "python"]


def shipped_grammar(name: str) -> ShippedGrammar | None:
    """The shipped grammar called ``name`` (``json``, ``sql``, ``sparql``, ``arithmetic``, and lark's
    ``python`` and ``lark``), or None when ``name`` is not one."""
    if name == "python":
        return ShippedGrammar("python", _lark_grammar("python.lark"), start="file_input", indenter="python")
    if name == "lark":
        return ShippedGrammar("lark", _lark_grammar("lark.lark"))
    if not name.isidentifier() or len(name) > 200:
        return None
    p = _package_dir("grammars") / f"{name}.lark"
    return ShippedGrammar(name, p) if p.is_file() else None


def shipped_schema_names() -> list[str]:
    return sorted(p.stem for p in _package_dir("schemas").glob("*.json"))


def shipped_schema(name: str) -> Path | None:
    """The shipped schema a bare name calls (``person`` or ``person.json``), or None when ``name`` is
    not one: how ``--schema person`` finds it outside a checkout."""
    stem = name[:-len(".json")] if name.endswith(".json") else name
    if not stem.isidentifier() or len(stem) > 200:  # longer: no file name, is_file() would raise
        return None
    p = _package_dir("schemas") / f"{stem}.json"
    return p if p.is_file() else None


def _did_you_mean(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(Path(name).stem, names, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _unknown_name(name: str, kind: str, suffix: str, names: list[str], alternatives: str) -> str:
    """The message for a ``kind`` ("grammar", "schema") argument that reads as a name but names nothing."""
    what = (f"{kind} file {name} not found, and no shipped {kind} has that name" if name.endswith(suffix)
            else f"no shipped {kind} or file named {name!r}")
    return f"{what}{_did_you_mean(name, names)}; shipped {kind}s: {', '.join(names)}; or give {alternatives}"


def unknown_grammar_name(name: str) -> GrammarError:
    """The error for a grammar argument that reads as a name but names nothing (``"jsonn"``), instead
    of lark's "missing colon" on it as grammar text."""
    return GrammarError(_unknown_name(name, "grammar", ".lark", shipped_grammar_names(),
                                      "Lark grammar text (rules such as start: ...) or a .lark file's path"))


def unknown_schema_name(name: str) -> SchemaError:
    """The error for a schema argument that reads as a file or schema name but names neither."""
    return SchemaError(_unknown_name(name, "schema", ".json", shipped_schema_names(),
                                     "a schema file's path, JSON text or a dict"))


def schema_file(name: str) -> Path:
    """``structgen/schemas/<name>.json``: the example schemas (``person``, ``invoice``, ...)."""
    p = _package_dir("schemas") / (name if name.endswith(".json") else f"{name}.json")
    if not p.is_file():
        raise SchemaError(f"no shipped schema {p.name}; shipped: {', '.join(shipped_schema_names())}")
    return p
