"""What the process-wide caches leave for the garbage collector.

A full collection rescans every tracked object, and its pause lands in whichever compile
or mask is running: caches of walks, rows and failures must hold plain tuples of arrays and
ints (untracked once seen) and must not keep lexer cores or compile frames alive."""
from __future__ import annotations

import gc
import weakref

import pytest

from structgen.compiler import GrammarCompiler
from structgen.engine import lexer as lexer_mod
from structgen.engine import walks
from structgen.engine.matcher import Matcher
from structgen.errors import StructgenError
from structgen.grammar.regex import _FAILED, compile_regex
from structgen.runtime.masks import allocate_token_bitmask

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}},
        "age": {"type": "integer", "minimum": 0},
    },
    "required": ["name"],
}


@pytest.fixture(scope="module")
def compiler(smol_info):
    return GrammarCompiler(smol_info)


def _drive(grammar, text: bytes) -> None:
    """A mask after every two bytes of ``text`` (fills the walk caches)."""
    m = Matcher(grammar)
    bm = allocate_token_bitmask(1, m.vocab_size)
    m.fill_next_token_bitmask(bm, index=0)
    for i in range(0, len(text), 2):
        assert m.accept_bytes(text[i:i + 2])
        m.fill_next_token_bitmask(bm, index=0)
    assert m.is_accepting()


def test_cached_walks_and_rule_rows_are_untracked(compiler):
    # the walk caches are process-wide: judge the entries this schema's walks make (under xdist an
    # earlier test's entries in the same worker were once found tracked; which test, not yet known)
    walks.inside_cache.clear()
    walks.cont_cache.clear()
    g = compiler.compile_json_schema(SCHEMA, whitespace="compact")
    _drive(g, b'{"name":"ab","tags":["a","c"],"age":41}')
    for _ in range(3):  # a collection untracks a tuple once the tuples inside it are untracked
        gc.collect()
    cached = list(walks.inside_cache.data.values()) + list(walks.cont_cache.data.values())
    tracked = [[type(x).__name__ for x in w if gc.is_tracked(x)] if isinstance(w, tuple) else type(w).__name__
               for w in cached if gc.is_tracked(w)]
    assert cached and not tracked, tracked
    for a in g.parser.autos:
        assert not gc.is_tracked(a.final) and not gc.is_tracked(a.nt_edges) and not gc.is_tracked(a.cost)
        assert not gc.is_tracked(a.terms) and not gc.is_tracked(a.term_next)


def test_a_grammars_parser_tables_and_mask_cache_are_untracked(compiler):
    """A cached grammar's per-configuration tables, lexer maps and masks are dicts of ints, tuples
    of ints and arrays: a full collection untracks them, so 64 cached grammars cost it nothing."""
    g = compiler.compile_json_schema(SCHEMA, whitespace="compact")
    _drive(g, b'{"name":"xy","tags":["b"],"age":7}')
    assert g.cached_masks() and g._lexer_of and g.parser.n_configs > 3
    for _ in range(3):
        gc.collect()
    p = g.parser
    from structgen.engine.compiled import MASKS

    # an array is tracked, but a collection visits only its type there, never its items
    assert gc.get_referents(g._lexer_of) == [type(g._lexer_of)] and len(g._lexer_of) >= g.parser.n_configs
    tables = [MASKS.data, MASKS._sizes, g._lexer_by_allowed, g.lexers._by_set, g.term_names, g.rule_names,
              p.can_end, p.after_ignore, p._index._by_hash, p._scan, p._rets]
    # the per-configuration tuples live in frozen chunks, which a collection untracks
    tables += [*p.stacks._chunks, *p.allowed._chunks, *p._index.keys._chunks]
    assert [gc.is_tracked(t) for t in tables] == [False] * len(tables)


def test_a_cached_walk_keeps_no_lexer_core_alive(compiler):
    before = set(lexer_mod._cores)  # noqa: keys of the byte-bounded core cache  # cores other tests' grammars (still cached elsewhere) may hold
    g = compiler.compile_json_schema({"type": "array", "items": {"type": "string", "pattern": "^q[0-9]+z$"}},
                                     whitespace="compact")
    _drive(g, b'["q12z","q3z"]')
    refs = [weakref.ref(c) for k, c in list(lexer_mod._cores.items()) if k not in before]
    assert refs
    n_walks = len(walks.cont_cache.data) + len(walks.inside_cache.data)
    del g
    compiler.clear_cache()
    lexer_mod._cores.clear()
    gc.collect()
    assert n_walks and all(r() is None for r in refs)


def test_a_remembered_regex_failure_holds_no_frames():
    pattern = "\\bnever-seen-before-[0-9]"
    errors = []
    for _ in range(3):
        with pytest.raises(StructgenError) as info:
            compile_regex(pattern)
        errors.append(info.value)
    kept = _FAILED[(pattern, False, False, 0)]
    assert kept.__traceback__ is None and kept.__context__ is None
    assert all(e is not kept for e in errors) and len({id(e) for e in errors}) == 3
    assert str(errors[2]) == str(errors[0]) and type(errors[2]) is type(errors[0])
