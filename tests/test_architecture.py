"""The layering rules of docs/architecture.md, checked on the source (an AST scan, no imports).

* ``automata/`` (byte automata and their numba kernels) is the bottom layer both sides build on: it
  imports neither the front ends nor the engine (nor anything above them);
* ``engine/`` reads the grammar IR and nothing else of the front ends: of ``structgen.grammar`` it
  may import ``ir`` only (the automata the IR's terminals are made of live in ``automata/``);
* ``grammar/regex.py`` and ``grammar/lookaround.py`` share one parse tree and NFA builder
  (``regex_syntax.py``) and do not import each other in a circle;
* ``engine/`` and ``grammar/`` never import torch (the engine serves any backend), and
  ``grammar/`` never imports ``engine/``, the runtime or the integrations;
* ``runtime/`` and ``kg/`` sit below the entry layer: they never import ``api``, ``cli``, the
  integrations or the benchmarks (the per-model helpers they need live in ``compiler``, ``models``
  and ``runtime.prompts``);
* no module imports a ``_private`` name from another package.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "structgen"
ENGINE_MAY_IMPORT_FROM_GRAMMAR = {"structgen.grammar.ir"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path):
    """(imported module, names imported from it or None, line) for every import in ``path``,
    relative imports resolved -- function-level imports included."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield mod, [a.name for a in node.names], node.lineno


def _sources(sub: str = ""):
    return sorted((PKG / sub).rglob("*.py"))


def _package_of(module: str) -> str:
    return module.rpartition(".")[0]


@pytest.mark.parametrize("path", _sources("engine"), ids=lambda p: p.name)
def test_engine_reads_only_the_ir_of_the_front_ends(path):
    for mod, names, line in _imports(path):
        if mod == "structgen.grammar" and names:
            mods = {f"structgen.grammar.{n}" for n in names}
        else:
            mods = {mod}
        for m in mods:
            if m.startswith("structgen.grammar"):
                assert m in ENGINE_MAY_IMPORT_FROM_GRAMMAR, f"{path.name}:{line} imports {m}"
            for layer in ("structgen.runtime", "structgen.integrations", "structgen.api", "structgen.compiler",
                          "structgen.bench"):
                assert not m.startswith(layer), f"{path.name}:{line} imports {m} (an upper layer)"


@pytest.mark.parametrize("path", _sources("automata"), ids=lambda p: p.name)
def test_automata_sit_at_the_bottom(path):
    for mod, _, line in _imports(path):
        for layer in ("structgen.grammar", "structgen.engine", "structgen.runtime", "structgen.integrations",
                      "structgen.compiler", "structgen.api", "structgen.bench", "structgen.kg", "structgen.models"):
            assert not mod.startswith(layer), f"automata/{path.name}:{line} imports {mod} (a layer above it)"


def test_regex_and_lookaround_import_no_circle():
    """The lookaround construction reads the shared parse tree and NFA builder, never ``regex.py``
    (which dispatches to it): one direction only."""
    mods = {m for m, _, _ in _imports(PKG / "grammar" / "lookaround.py")}
    assert "structgen.grammar.regex" not in mods
    assert "structgen.grammar.regex_syntax" in mods


def test_one_follow_condition():
    """A lookahead at a terminal's end is one type, from the lookaround construction to the engine."""
    defined = [p.relative_to(PKG) for p in _sources() if "class FollowCondition" in p.read_text()]
    assert [str(d) for d in defined] == ["grammar/ir.py"]


@pytest.mark.parametrize("path", _sources("engine") + _sources("grammar") + _sources("automata"),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_engine_and_front_ends_never_import_torch(path):
    for mod, _, line in _imports(path):
        assert mod.split(".")[0] not in ("torch", "transformers", "triton"), f"{path}:{line} imports {mod}"


@pytest.mark.parametrize("path", _sources("grammar"), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_front_ends_never_import_the_engine(path):
    for mod, _, line in _imports(path):
        for layer in ("structgen.engine", "structgen.runtime", "structgen.integrations", "structgen.compiler",
                      "structgen.api", "structgen.bench"):
            assert not mod.startswith(layer), f"{path}:{line} imports {mod}"


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(PKG)))
def test_no_private_name_is_imported_from_another_package(path):
    me = _module_name(path)
    mine = me if path.name == "__init__.py" else _package_of(me)
    for mod, names, line in _imports(path):
        if not names or not mod.startswith("structgen"):
            continue
        theirs = mod if (PKG.parent / mod.replace(".", "/")).is_dir() else _package_of(mod)
        if theirs == mine:
            continue
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        assert not private, f"{path.relative_to(PKG)}:{line} imports {private} from {mod}"


def test_the_scan_sees_the_imports_it_checks():
    """The scan itself: relative imports resolve, function-level imports are seen."""
    found = {(m, tuple(n or ())) for m, n, _ in _imports(PKG / "engine" / "matcher.py")}
    assert ("structgen.engine.checks", ("CheckRun", "can_end_checked")) in found
    found = {m for m, _, _ in _imports(PKG / "api.py")}
    assert "structgen.runtime.loop" in found  # imported inside a function


@pytest.mark.parametrize("name", ["shipped.py", "deadlines.py", "errors.py", "sampler_methods.py"])
def test_the_leaves_import_nothing_of_structgen_but_its_errors(name):
    """Modules every layer may use (the shipped grammars, the generation deadline, the errors) sit
    below them all."""
    for mod, _, line in _imports(PKG / name):
        assert not mod.startswith("structgen") or mod == "structgen.errors", f"{name}:{line} imports {mod}"


def test_decoding_options_sit_on_the_leaves():
    """One options object for every entry point: it may read only the leaves below it."""
    allowed = {"structgen.errors", "structgen.deadlines", "structgen.sampler_methods"}
    for mod, _, line in _imports(PKG / "decoding_options.py"):
        assert not mod.startswith("structgen") or mod in allowed, f"decoding_options.py:{line} imports {mod}"


ENTRY_LAYER = ("structgen.api", "structgen.cli", "structgen.integrations", "structgen.bench")


@pytest.mark.parametrize("path", _sources("runtime") + _sources("kg"), ids=lambda p: str(p.relative_to(PKG)))
def test_runtime_and_kg_never_import_the_entry_layer(path):
    for mod, _, line in _imports(path):
        assert not any(mod == e or mod.startswith(e + ".") for e in ENTRY_LAYER), \
            f"{path.relative_to(PKG)}:{line} imports {mod}, an entry point above it"
