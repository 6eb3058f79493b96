"""structgen bench memory on a few schemas: passes are recorded, the table and the plot written,
and the cache budget it was given is the one in force while it runs."""
import gzip
import json

import pytest

from structgen.bench.maskbench import default_data_path
from structgen.bench.memory import format_memory_table, run_memory


@pytest.fixture
def few_records(tmp_path):
    try:
        src = default_data_path()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    out = tmp_path / "few.jsonl"
    with gzip.open(src, "rt") as f, out.open("w") as g:
        for _, line in zip(range(4), f):
            g.write(line)
    return out


def test_two_passes_over_a_few_schemas(tmp_path, few_records):
    import structgen

    try:
        s = run_memory(passes=2, data=few_records, tokenizer="smollm2", cache_mb=100, output=tmp_path / "out",
                       progress=False)
        assert s["cache_budget_mb"] == 100
    finally:
        structgen.set_cache_budget(None)
    assert s["schemas"] == 4 and len(s["per_pass"]) == 2 and sum(s["status"].values()) == 8
    assert s["per_pass"][1]["first_mb"] > 0 and len(s["per_pass"][0]["eighths_mb"]) >= 1
    saved = json.loads((tmp_path / "out" / "memory.json").read_text())
    assert len(saved["rss_mb"]) == 2 and len(saved["rss_mb"][0]) == 4
    assert (tmp_path / "out" / "memory-rss.png").exists()
    assert "growth MB" in format_memory_table(s)
