"""The Lark grammars shipped as package data (``structgen/grammars/*.lark``): each is Lark that lark
itself reads, and lark and structgen agree on sample texts of each; the checkout's ``grammars/``
is the package's folder."""
from __future__ import annotations

from pathlib import Path

import pytest

import structgen
from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.shipped import shipped_grammar, shipped_grammar_names

lark = pytest.importorskip("lark")

FOLDER = Path(structgen.__file__).resolve().parent / "grammars"

#: per shipped grammar: texts in its language, and texts outside it
SAMPLES = {
    "json": (['{"a": [1, 2.5e3, true, null], "b": {"c": "d\\n"}}', "[]", '"x"'],
             ['{"a": }', "[1, 2,]", "{'a': 1}"]),
    "arithmetic": (["1 + 2 * (3 - x) ^ 2", "-f(1, y) / 4", "max(1, 2, 3)"],
                   ["1 + * 2", "(1 + 2", "f(,)"]),
    "sql": (["SELECT a, COUNT(*) FROM t WHERE b = 1 ORDER BY a LIMIT 3;",
             "SELECT * FROM users AS u JOIN orders AS o ON u.id = o.user_id WHERE o.total > 10"],
            ["SELECT FROM t", "SELECT a t", "SELECT a FROM t WHERE"]),
    "sparql": (["SELECT ?x WHERE { ?x ?p ?o . }",
                "PREFIX c: <http://example.org/c/>\nASK { c:France c:capital ?x . }",
                "SELECT DISTINCT ?x WHERE { ?x ?p 3 . FILTER(?x != ?p) } LIMIT 5"],
               ["SELECT ?x WHERE { ?x ?p }", "SELECT ?x { ?x ?p ?o . }", "ASK"]),
}


def test_every_file_is_a_shipped_grammar_with_samples():
    files = sorted(p.stem for p in FOLDER.glob("*.lark"))
    assert files and set(files) <= set(shipped_grammar_names())
    assert sorted(SAMPLES) == files, "give a new grammar its samples here"
    for name in files:
        assert shipped_grammar(name).path.resolve() == (FOLDER / f"{name}.lark").resolve()


def test_the_checkout_folder_is_the_package_folder():
    link = Path(__file__).resolve().parents[2] / "grammars"
    if not link.exists():
        pytest.skip("not a checkout")
    assert link.resolve() == FOLDER


@pytest.fixture(scope="module")
def compiler(smol_info):
    return GrammarCompiler(smol_info)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_lark_and_structgen_agree_on_the_samples(name, compiler):
    grammar = shipped_grammar(name)
    parser = lark.Lark(grammar.path.read_text(), start=grammar.start or "start")
    compiled = compiler.compile_lark(name)
    good, bad = SAMPLES[name]
    for text, expected in [(t, True) for t in good] + [(t, False) for t in bad]:
        try:
            parser.parse(text)
            lark_reads = True
        except lark.exceptions.LarkError:
            lark_reads = False
        m = Matcher(compiled)
        structgen_reads = m.accept_string(text) and m.is_accepting()
        assert (lark_reads, structgen_reads) == (expected, expected), (name, text)
