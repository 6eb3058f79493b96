"""``structgen bench startup`` on the real model: a new environment's first output without compiling a
kernel, and the table it prints."""
from __future__ import annotations

import pytest

from structgen.bench.startup import format_startup_table, run_startup


@pytest.mark.minutes
def test_a_new_environment_reaches_its_first_output_without_compiling():
    from structgen.automata.kernel_cache import shipped_kernels_usable

    result = run_startup(warm_repeats=1, baseline=False, echo=lambda _: None)
    rows = {r["run"]: r for r in result["rows"]}
    cold, warm = rows["cold (new environment)"], rows["warm (every later process)"]
    assert cold["value"] and set(cold["value"]) == {"name", "age"} and isinstance(cold["value"]["age"], int)
    if shipped_kernels_usable():
        assert cold["compiles"] == 0 and warm["compiles"] == 0
    assert warm["load_model"] < cold["load_model"]  # the conversion is cached
    assert "transformers alone, warm (same model)" in rows


def test_the_table_has_a_row_per_run_and_dashes_where_a_run_has_no_figure():
    result = {"rows": [{"run": "cold (new environment)", "processes": 1, "import": 1.5, "load_model": 10.3,
                        "first_output": 2.1, "total": 14.0, "compiles": 0},
                       {"run": "transformers alone, warm (same model)", "processes": 3, "import": 2.1,
                        "load_model": 2.3, "first_output": None, "total": 4.4, "compiles": None}]}
    lines = format_startup_table(result).splitlines()
    assert len(lines) == 4
    assert lines[2] == "| cold (new environment) | 1 | 1.5 | 10.3 | 2.1 | 14.0 | 0 |"
    assert lines[3].endswith("| 4.4 | - |") and "| - |" in lines[3]
