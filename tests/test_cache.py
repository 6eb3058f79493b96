"""The on-disk cache cannot rot: damaged files are detected and rebuilt, concurrent writers never
interleave, and entries built by other code are not used."""
from __future__ import annotations

import multiprocessing as mp
import os
from pathlib import Path

import numpy as np
import pytest

from structgen import _cache
from structgen._cache import atomic_pickle_dump, pickle_load_or_none, read_verified, write_verified


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTGEN_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_damaged_file_reads_as_absent_and_is_removed(tmp_path):
    path = tmp_path / "entry.bin"
    payload = os.urandom(5000)
    write_verified(path, payload)
    assert read_verified(path) == payload
    raw = path.read_bytes()
    for damaged in (raw[:-1], raw[:10], b"", raw[:100] + bytes([raw[100] ^ 1]) + raw[101:], b"PK\x03\x04" + raw[4:]):
        path.write_bytes(damaged)
        assert read_verified(path) is None
        assert not path.exists()  # removed, so the rebuilt entry takes its place
    assert read_verified(tmp_path / "absent") is None


def test_pickles_round_trip_and_damaged_ones_are_none(tmp_path):
    path = tmp_path / "x.pkl"
    atomic_pickle_dump({"a": (1, 2)}, path)
    assert pickle_load_or_none(path) == {"a": (1, 2)}
    path.write_bytes(path.read_bytes()[:-3])
    assert pickle_load_or_none(path) is None


def _writer(path: str, seed: int, rounds: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(rounds):
        size = int(rng.integers(1, 400_000))
        write_verified(Path(path), bytes([seed]) * size)


def test_concurrent_writers_never_leave_a_mixed_file(tmp_path):
    """Two processes write the same entry over and over while this one reads it: every read is
    absent or one writer's whole payload, never a mix."""
    path = tmp_path / "shared.bin"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), s, 60)) for s in (1, 2)]
    for p in procs:
        p.start()
    seen = set()
    while any(p.is_alive() for p in procs):
        data = read_verified(path)
        if data is not None:
            assert len(set(data)) == 1  # one writer's bytes only
            seen.add(data[0])
    for p in procs:
        p.join()
        assert p.exitcode == 0
    final = read_verified(path)
    assert final is not None and len(set(final)) == 1
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]  # no temporary file left behind


def _compile(pattern: str):
    from structgen.grammar import regex

    regex._compile_cached.cache_clear()
    return regex._compile_cached(pattern, False, False, 0)


def test_a_corrupted_regex_automaton_is_rebuilt_not_used(cache_dir, monkeypatch):
    from structgen.grammar import regex

    monkeypatch.setattr(regex, "DISK_CACHE_MIN_SECONDS", 0.0)  # save even quick automata
    pattern = r"[a-c]{2,9}@(x|yy|zzz)\.[0-9]{1,3}"
    fresh = _compile(pattern)
    files = list((cache_dir / "regex").glob("*.npz"))
    assert len(files) == 1
    good = files[0].read_bytes()
    # a flipped byte inside the transition table's data: the checksum catches it
    for damaged in (good[:-7], good[:len(good) // 2] + bytes([good[len(good) // 2] ^ 0x40]) + good[len(good) // 2 + 1:]):
        files[0].write_bytes(damaged)
        again = _compile(pattern)
        assert np.array_equal(again.trans, fresh.trans) and np.array_equal(again.accept, fresh.accept)
        assert read_verified(files[0]) is not None  # rebuilt and rewritten
    # a verified file whose content is not a consistent automaton is not used either
    import io

    buf = io.BytesIO()
    np.savez(buf, trans=np.full((2, 3), 7, np.int32), accept=np.zeros(2, bool), classmap=np.zeros(256, np.int32),
             start=0)
    write_verified(files[0], buf.getvalue())
    again = _compile(pattern)
    assert np.array_equal(again.trans, fresh.trans)


def test_entries_built_by_other_code_are_not_used(cache_dir, monkeypatch):
    from structgen.grammar import regex

    real = _cache.code_fingerprint
    assert real("structgen.grammar.regex") != real("structgen.automata.fsa") == real("structgen.automata.fsa")
    monkeypatch.setattr(regex, "DISK_CACHE_MIN_SECONDS", 0.0)
    _compile(r"(ab|cd){2,5}")
    monkeypatch.setattr(_cache, "code_fingerprint", lambda *mods: "an-upgraded-version")
    _compile(r"(ab|cd){2,5}")
    assert len(list((cache_dir / "regex").glob("*.npz"))) == 2  # a new key: the old entry is not read


def test_a_damaged_tokenizer_table_is_rebuilt(cache_dir, smol_info):
    from structgen.tokenizer import load_tokenizer_info

    first = load_tokenizer_info("smollm2")
    [entry] = list((cache_dir / "tokenizers").glob("*.pkl"))
    entry.write_bytes(entry.read_bytes()[: len(entry.read_bytes()) // 3])
    again = load_tokenizer_info("smollm2")
    assert again.token_bytes == first.token_bytes == smol_info.token_bytes
    assert pickle_load_or_none(entry) is not None
