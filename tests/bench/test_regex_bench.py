"""``structgen bench regex``: one pattern of the family, as a regex and as a JSON Schema pattern."""
from __future__ import annotations

import pytest

from structgen.bench.regex_bench import format_regex_table, run_regex_bench


@pytest.mark.parametrize("as_schema", [False, True])
def test_a_large_pattern_is_followed_lazily_and_every_text_is_accepted(as_schema):
    out = run_regex_bench(("[ab]*a[ab]{16}",), texts=1, engines=("structgen",), as_schema=as_schema,
                          echo=lambda _: None)
    row = out["patterns"]["[ab]*a[ab]{16}"]["structgen"]
    assert row["rejected"] == 0
    assert row["automaton"] == ("lazy pattern" if as_schema else "lazy")
    assert row["states"] > 0
    assert "lazy" in format_regex_table(out)
