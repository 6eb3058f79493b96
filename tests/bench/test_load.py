"""structgen bench load, a few seconds of it: threads stepping matchers and compiling under load
give no mismatch and no exception, and memory is sampled."""
from structgen.bench.load import format_load_table, run_load


def test_a_short_load_run(tmp_path):
    s = run_load(seconds=6, threads=3, schemas=6, output=tmp_path, progress=False)
    assert s["errors"] == 0 and s["mismatches"] == 0, s["problems"]
    assert s["steps"] > 100 and s["walks"] > 3 and s["constraints"] >= 8
    assert (tmp_path / "load.json").exists() and (tmp_path / "load-rss.png").exists()
    assert "| matcher steps |" in format_load_table(s)
