"""``structgen bench dead-ends``: walks with rollback off on uniqueItems arrays of short strings
never meet a dead end (the mask looks one token ahead), and the MaskBench corpus runs."""
from __future__ import annotations

from structgen.bench.dead_ends import format_dead_ends, run_dead_ends


def test_unique_short_strings_meet_no_dead_end():
    res = run_dead_ends(corpus="unique", schemas=9, walks=6, seed=1)
    assert res["schemas"] == 9 and res["walks"] == 54
    assert res["dead"] == 0, res["dead_ends"]
    assert "| unique (seed 1) | uniform | 9 | 54 |" in format_dead_ends(res)


def test_the_maskbench_corpus_walks_check_heavy_schemas():
    res = run_dead_ends(corpus="maskbench", schemas=2, walks=1, seed=0, max_steps=60, steer_after=20)
    assert res["schemas"] == 2 and res["walks"] == 2
    assert res["done"] + res["cut"] + res["dead"] == 2


def test_the_lengths_corpus_runs_each_walk_with_and_without_counting():
    res = run_dead_ends(corpus="lengths", schemas=2, walks=2, seed=0, max_steps=80, steer_after=40)
    assert res["schemas"] == 2 and res["walks"] == 4
    assert res["dead"] == 0, res["dead_ends"]
    assert sum(res["without"].values()) == 4 and "without counting" in format_dead_ends(res)


def test_the_patterns_corpus_runs_each_walk_with_and_without_following():
    res = run_dead_ends(corpus="patterns", schemas=3, walks=2, seed=0, max_steps=80, steer_after=40)
    assert res["schemas"] == 3 and res["walks"] == 6
    assert res["dead"] == 0, res["dead_ends"]
    assert sum(res["without"].values()) == 6 and "without following" in format_dead_ends(res)
