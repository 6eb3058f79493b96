"""The engine's caches are bounded by bytes: a long run over many grammars cannot grow without end."""
import threading

import numpy as np

from structgen.byte_lru import ENTRY_OVERHEAD, ByteLRU, nbytes_of


def test_bound_held_and_least_recent_dropped_first():
    c = ByteLRU(12_000)  # 8 arrays of 1,000 bytes (1,272 with their objects and entries)
    for k in range(8):
        c.put(k, np.zeros(1000, dtype=np.uint8))
    assert c.get(0) is not None  # 0 is now the most recent
    c.put(8, np.zeros(4000, dtype=np.uint8))
    assert c.nbytes <= 12_000 and c.nbytes == sum(nbytes_of(v) + ENTRY_OVERHEAD for v in c.data.values())
    assert 0 in c.data and 8 in c.data and 1 not in c.data  # the oldest went, the touched one stayed


def test_replacing_a_key_and_discarding_keep_the_count_right():
    c = ByteLRU(1 << 20)
    c.put("a", np.zeros(100, dtype=np.uint8))
    c.put("a", np.zeros(300, dtype=np.uint8))
    c.put(("b", 1), (np.zeros(10, dtype=np.int32), np.zeros(10, dtype=np.int32)))
    a, b = 300 + 112, 56 + 2 * 8 + 2 * (40 + 112)  # arrays with their objects, a tuple with its items
    assert c.nbytes == a + b + 2 * ENTRY_OVERHEAD and len(c) == 2
    c.discard_where(lambda k: k == "a")
    assert c.nbytes == b + ENTRY_OVERHEAD and list(c) == [("b", 1)]
    c.clear()
    assert c.nbytes == 0 and not c.data


def test_threads_never_push_it_over():
    c = ByteLRU(50_000)

    def work(t):
        for i in range(2000):
            c.put((t, i), np.zeros(500 + (i % 7) * 100, dtype=np.uint8))
            c.get((t, i - 3))
    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert c.nbytes <= 50_000 and c.nbytes == sum(nbytes_of(v) + ENTRY_OVERHEAD for v in c.data.values())


def test_engine_caches_are_byte_bounded():
    from structgen.engine import compiled, lexer, walks

    for cache in (compiled.MASKS, walks.inside_cache, walks.cont_cache, lexer._cores):
        assert isinstance(cache, ByteLRU) and 0 < cache.max_bytes <= 64 << 20


def test_values_that_grow_are_weighed_again_on_their_next_hit():
    """An automaton gains tables as it is used (depth classes, transition ranges): the cache must
    not go on counting what it weighed when the automaton came in."""
    from structgen.grammar.regex import compile_regex

    c = ByteLRU(1 << 30, version_of=lambda d: d.version)
    d = compile_regex("[a-z]{3,40}@[a-z]+\\.com")
    c.put("d", d)
    before = c.nbytes
    d.depth_classes(8)
    d.range_edges()
    assert c.nbytes == before  # not seen yet
    assert c.get("d") is d
    assert c.nbytes == d.nbytes + ENTRY_OVERHEAD > before + 40 * len(d.range_edges()[0])


def test_an_automaton_counts_its_tables_built_later():
    from structgen.grammar.regex import compile_regex

    d = compile_regex("(ab|cd)*e{2,9}")
    n0 = d.nbytes
    assert n0 >= d.trans.nbytes + d.accept.nbytes + d.classmap.nbytes
    d.dist_to_accept()
    assert d.version == 1 and d.nbytes >= n0 + d.dist_to_accept().nbytes


def test_one_budget_bounds_every_cache_and_is_restored():
    import structgen
    import structgen.compiler  # noqa: F401 - registers every cache
    from structgen.byte_lru import budget_bytes, cache_budget

    default = cache_budget()
    assert 400 << 20 < default < 1 << 30
    stats = structgen.cache_stats()
    assert {"masks", "lexer.cores", "walks.inside", "grammar.json_strings._string_dfa"} <= set(stats)
    masks = stats["masks"]["max_bytes"]
    try:
        structgen.set_cache_budget(default // 4)
        assert abs(cache_budget() - default // 4) < 64
        assert abs(structgen.cache_stats()["masks"]["max_bytes"] - masks // 4) <= 1
        assert budget_bytes("compiler.grammars") == (128 << 20) // 4
    finally:
        structgen.set_cache_budget(None)
    assert cache_budget() == default and structgen.cache_stats()["masks"]["max_bytes"] == masks


def test_a_smaller_bound_evicts_at_once():
    c = ByteLRU(1 << 20)
    for k in range(10):
        c.put(k, np.zeros(10_000, dtype=np.uint8))
    c.set_bound(30_000)
    assert c.nbytes <= 30_000 and 9 in c.data and 0 not in c.data


def test_budget_from_the_environment():
    import os
    import subprocess
    import sys

    code = ("import structgen, structgen.compiler; from structgen.byte_lru import cache_budget; "
            "print(cache_budget() >> 20)")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "STRUCTGEN_CACHE_MB": "150"},
                         capture_output=True, text=True, check=True).stdout
    assert int(out.split()[-1]) == 150
    bad = subprocess.run([sys.executable, "-c", code], env={**os.environ, "STRUCTGEN_CACHE_MB": "lots"},
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "STRUCTGEN_CACHE_MB must be a number of megabytes" in bad.stderr
