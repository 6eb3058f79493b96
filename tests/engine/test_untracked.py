"""Append-only tables the garbage collector does not walk (``structgen.engine.untracked``)."""
from __future__ import annotations

import gc

from structgen.engine.untracked import CHUNK, ChunkedList, InternTable


def test_a_chunked_list_indexes_like_a_list_and_its_full_chunks_are_untracked():
    xs = ChunkedList()
    values = [(i, (i, i + 1)) for i in range(2 * CHUNK + 5)]
    assert [xs.append(v) for v in values] == list(range(len(values)))
    assert len(xs) == len(values) and list(xs) == values
    assert all(xs[i] == values[i] for i in (0, CHUNK - 1, CHUNK, 2 * CHUNK + 4))
    gc.collect()
    gc.collect()  # a chunk is untracked once its items are (nested tuples: the next pass)
    assert len(xs._chunks) == 2 and not any(gc.is_tracked(c) for c in xs._chunks)
    assert len(xs._open) == 5


class _SameHash(tuple):
    def __hash__(self):
        return 7


def test_an_intern_table_numbers_keys_and_survives_hash_collisions():
    t = InternTable()
    a, b = _SameHash((1, 2)), _SameHash((3, 4))
    assert t.get(a) is None and t.add(a) == 0
    assert t.get(b) is None and t.add(b) == 1
    assert t.get(a) == 0 and t.get(_SameHash((3, 4))) == 1 and t.get(_SameHash((5,))) is None
    for i in range(100):
        assert t.add((i, "k")) == i + 2
    assert t.get((42, "k")) == 44 and len(t) == 102
    gc.collect()
    assert not gc.is_tracked(t._by_hash)


def test_the_first_compiler_freezes_the_long_lived_objects_once(smol_info):
    """A full collection walks only what was made after the kernels loaded (the numba and module
    objects made a pass 110-150 ms, inside a mask)."""
    from structgen.compiler import GrammarCompiler
    from structgen.engine.untracked import freeze_long_lived

    GrammarCompiler(smol_info)
    frozen = gc.get_freeze_count()
    assert frozen > 50_000
    assert freeze_long_lived() is False and gc.get_freeze_count() == frozen
