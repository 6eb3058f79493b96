"""GGUF files parsed once and fast (structgen.tokenizer.gguf_file): the same fields and tensors as gguf's
own reader, one parse for every open inside ``shared_readers`` (transformers' included), and gguf put
back as it was on leaving."""
from __future__ import annotations

import numpy as np
import pytest

from structgen.tokenizer.gguf_file import reader, shared_readers


@pytest.fixture(scope="module")
def smollm2_gguf():
    from structgen.errors import ModelNotFound
    from structgen.tokenizer import smollm2_gguf_path

    try:
        return smollm2_gguf_path()
    except ModelNotFound as e:
        pytest.skip(str(e))


def test_the_fast_parse_reads_what_ggufs_own_reader_reads(smollm2_gguf):
    from gguf import GGUFReader

    mine, theirs = reader(smollm2_gguf), GGUFReader(str(smollm2_gguf))
    assert list(mine.fields) == list(theirs.fields)
    for name, f in theirs.fields.items():
        g = mine.fields[name]
        assert g.types == f.types and g.data == f.data, name
        assert all(np.array_equal(a, b) for a, b in zip(g.parts, f.parts)), name
    assert [t.name for t in mine.tensors] == [t.name for t in theirs.tensors]
    for a, b in zip(mine.tensors, theirs.tensors):
        assert a.tensor_type == b.tensor_type and np.array_equal(a.data, b.data), a.name


def test_inside_shared_readers_every_open_is_one_parse_and_gguf_is_restored(smollm2_gguf):
    import gguf
    import gguf.gguf_reader

    original = gguf.GGUFReader, gguf.gguf_reader.GGUFReader, gguf.get_tensor_name_map
    with shared_readers():
        first = gguf.GGUFReader(str(smollm2_gguf))  # what transformers' GGUF loading calls
        assert gguf.gguf_reader.GGUFReader(str(smollm2_gguf)) is first
        assert reader(smollm2_gguf) is first
        with shared_readers():  # nested (load_model inside load_model's callers)
            assert reader(smollm2_gguf) is first
        assert reader(smollm2_gguf) is first
        arch = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(arch, 30) is gguf.get_tensor_name_map(arch, 30)
    assert (gguf.GGUFReader, gguf.gguf_reader.GGUFReader, gguf.get_tensor_name_map) == original
    assert reader(smollm2_gguf) is not first  # outside: nothing kept
