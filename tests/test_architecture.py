"""The layering rules of docs/architecture.md, checked on the source (an AST scan, no imports).

* the package's units (subpackages and top-level modules) sit in the layers of
  ``architecture_graph.LAYERS``, bottom first: no module imports a layer above its own, and no
  modules import each other in a circle (function-level imports count: they are circles a later
  refactor trips on); the two checks are shown failing on a planted fake package;
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
* no module imports a ``_private`` name from another package;
* the diagram of the layers in docs/architecture.md is the one the imports make
  (``.venv/bin/python tests/architecture_graph.py --write`` regenerates it).
"""
from __future__ import annotations

from pathlib import Path

import pytest

import architecture_graph as ag

PKG = ag.PKG
ENGINE_MAY_IMPORT_FROM_GRAMMAR = {"structgen.grammar.ir"}


def _module_name(path: Path) -> str:
    return ag.module_name(path, PKG)


def _imports(path: Path):
    """(imported module, names imported from it or None, line) for every import in ``path``,
    relative imports resolved -- function-level imports included."""
    return ag.imports(path, PKG)


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


# --------------------------------------------------------------------------- layers and circles


def _units(pkg: Path) -> set[str]:
    return {ag.unit_of(m) for m in ag.sources(pkg)}


def test_every_unit_sits_in_one_layer():
    placed = [u for _, units in ag.LAYERS for u in units]
    assert len(placed) == len(set(placed)), "a unit is in two layers"
    missing = sorted(_units(PKG) - set(placed))
    assert not missing, f"add {missing} to architecture_graph.LAYERS (and docs/architecture.md)"
    gone = sorted(set(placed) - _units(PKG))
    assert not gone, f"architecture_graph.LAYERS names units that no longer exist: {gone}"


def test_no_import_circle_between_modules():
    graph = ag.module_graph(PKG)
    circles = [" -> ".join(ag.cycle_path(graph, c)) for c in ag.import_cycles(graph)]
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_no_import_goes_up_a_layer():
    problems = ag.upward_imports(ag.module_graph(PKG), ag.LAYERS, allowed=ag.ALLOWED_UPWARD)
    assert not problems, "upward imports:\n" + "\n".join(problems)


def test_no_import_circle_between_units():
    """Units of one layer do not import each other in a circle either (the allow-listed debts aside)."""
    graph = ag.module_graph(PKG)
    for a, b in ag.ALLOWED_UPWARD:
        graph[a].pop(b, None)
    units = {u: dict.fromkeys(ts, 0) for u, ts in ag.unit_graph(graph).items()}
    assert ag.import_cycles(units) == []


def test_the_allow_list_names_imports_that_exist():
    """An entry whose import is gone is removed with it, so the list stays the list of debts."""
    graph = ag.module_graph(PKG)
    stale = [edge for edge in ag.ALLOWED_UPWARD if edge[1] not in graph.get(edge[0], {})]
    assert not stale, f"remove {stale} from architecture_graph.ALLOWED_UPWARD"
    # each entry is an import the checker would report without it
    reported = ag.upward_imports(graph, ag.LAYERS)
    for importer, target in ag.ALLOWED_UPWARD:
        assert any(r.startswith(importer + ":") and f" imports {target} " in r for r in reported)


def _fake_package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "fakepkg"
    for name, text in files.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for d in [pkg, *[p for p in pkg.rglob("*") if p.is_dir()]]:
        (d / "__init__.py").touch()
    return pkg


FAKE_LAYERS = (("leaves", ("errors",)), ("low", ("low",)), ("high", ("high",)))


def test_the_checker_finds_a_planted_circle(tmp_path):
    """A circle closed by a function-level, relative import is found, and named in order."""
    pkg = _fake_package(tmp_path, {
        "low/a.py": "from . import b\n",
        "low/b.py": "import fakepkg.low.c\n",
        "low/c.py": "def late():\n    from .a import thing\n    return thing\n",
        "low/d.py": "from .a import x\n",  # imports into the circle, not part of it
    })
    graph = ag.module_graph(pkg)
    assert ag.import_cycles(graph) == [["fakepkg.low.a", "fakepkg.low.b", "fakepkg.low.c"]]
    assert ag.cycle_path(graph, ["fakepkg.low.a", "fakepkg.low.b", "fakepkg.low.c"]) == \
        ["fakepkg.low.a", "fakepkg.low.b", "fakepkg.low.c", "fakepkg.low.a"]
    assert ag.upward_imports(graph, FAKE_LAYERS) == []


def test_the_checker_finds_a_planted_upward_import(tmp_path):
    pkg = _fake_package(tmp_path, {
        "errors.py": "class Oops(Exception):\n    pass\n",
        "high/top.py": "from ..low.base import f\nfrom ..errors import Oops\n",
        "low/base.py": "def f():\n    from fakepkg.high import top  # the arrow back up\n    return top\n",
        "stray.py": "",
    })
    graph = ag.module_graph(pkg)
    problems = ag.upward_imports(graph, FAKE_LAYERS)
    assert "fakepkg.low.base:2 imports fakepkg.high.top (low -> high, a layer above)" in problems
    assert ag.import_cycles(graph) == [["fakepkg.high.top", "fakepkg.low.base"]]
    allowed = ag.upward_imports(graph, FAKE_LAYERS, allowed={("fakepkg.low.base", "fakepkg.high.top")})
    assert allowed == []


def test_a_unit_in_no_layer_is_reported(tmp_path):
    pkg = _fake_package(tmp_path, {"low/a.py": "from ..stray import x\n", "stray.py": "x = 1\n"})
    assert ag.upward_imports(ag.module_graph(pkg), FAKE_LAYERS) == \
        ["fakepkg.low.a:1 imports fakepkg.stray: unit 'stray' is in no layer"]


# --------------------------------------------------------------------------- the diagram


def test_the_embedded_diagram_is_the_one_the_imports_make():
    embedded = ag.embedded(ag.DOC)
    assert embedded is not None, f"docs/architecture.md lacks the markers {ag.BEGIN} ... {ag.END}"
    assert embedded == ag.diagram(), (
        "docs/architecture.md's import diagram is out of date: run "
        "`.venv/bin/python tests/architecture_graph.py --write`")


def test_the_diagram_follows_the_imports(tmp_path):
    pkg = _fake_package(tmp_path, {"errors.py": "", "low/a.py": "from ..errors import x\n",
                                   "high/b.py": "from ..low import a\nfrom .. import errors\n"})
    text = ag.diagram(pkg, FAKE_LAYERS, allowed=())
    assert "  high --> low" in text and "errors" in text and "--> leaves" not in text
    assert text.startswith("```mermaid\nflowchart BT") and text.endswith("```")


# --------------------------------------------------------------------------- the tests mirror the package

TESTS = Path(__file__).resolve().parent

#: subpackages whose tests/X/ folder is still being made, each with the reason (remove when done)
MIRROR_PENDING = {
    # tests/test_tokenizer.py moves into tests/tokenizer/ with the tokenizer work in progress (issue 59)
    "tokenizer": "the tokenizer's tests move with the work on structgen/tokenizer/",
}


#: build output inside the package, not code: the shipped numba kernels (structgen kernels build)
_BUILT = {"__pycache__", "_kernels"}


def _folders(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir() and not _BUILT.intersection(p.parts)}


def test_every_subpackage_has_its_tests_folder():
    """``structgen/X/`` (data folders included) has ``tests/X/`` with tests of it; top-level modules keep
    their tests in ``tests/`` itself."""
    missing = []
    for sub in sorted(_folders(PKG)):
        if sub in MIRROR_PENDING:
            continue
        if not sorted((TESTS / sub).glob("test_*.py")):
            missing.append(f"tests/{sub}/ (for structgen/{sub}/)")
    assert not missing, f"subpackages without tests of their own: {missing}"


def test_every_tests_folder_mirrors_a_subpackage():
    stray = [sub for sub in sorted(_folders(TESTS))
             if sorted((TESTS / sub).glob("test_*.py")) and not (PKG / sub).is_dir()]
    assert not stray, f"test folders that mirror no subpackage of structgen/: {stray}"
