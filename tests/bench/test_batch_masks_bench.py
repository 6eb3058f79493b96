"""``structgen bench batch-masks``: every engine fills the same schemas' rows at each thread count, in one
run, and the table gives each fill's ratio to llguidance's parallel fill."""
from __future__ import annotations

import pytest

pytest.importorskip("llguidance")
pytest.importorskip("xgrammar")


@pytest.mark.minutes
def test_the_batch_bench_times_structgen_and_its_peers_on_the_same_rows():
    from structgen.bench.batch_masks import run_batch_masks_bench

    lines: list[str] = []
    out = run_batch_masks_bench(rows=[6], threads=[1, 2], repeats=1, echo=lines.append)
    res = out["rows"][6]
    assert set(res) == {"structgen", "llguidance", "xgrammar"}
    assert all(set(per) == {1, 2} and all(f["cold_ms"] > 0 and f["warm_ms"] > 0 for f in per.values())
               for per in res.values())
    assert 0 <= res["llguidance"][1]["whole"] <= 6
    table = lines[0]
    assert "| 6 | llguidance | 2 |" in table and "1.00x | 1.00x |" in table  # llguidance against itself
    assert "| 6 | structgen | 2 |" in table
