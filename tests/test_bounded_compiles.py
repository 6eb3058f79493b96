"""Bounded compiles: past its time or memory bound a compile stops with CompileLimitExceeded and
the process is left healthy (no thread leaked, the next compile works, nothing half-built cached)."""
from __future__ import annotations

import json
import threading
import time

import pytest

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.errors import CompileLimitExceeded, StructgenError


def _big(n: int, tag: str = "v") -> dict:
    """An object schema with ``n`` patterned properties: compiling it takes ~0.8 ms a property
    (``tag`` keeps each test's patterns out of the automata other tests cached)."""
    return {"type": "object", "properties": {f"key_{i}_{i * 7}": {"type": "string",
                                                                  "pattern": f"^{tag}{i}[a-z]{{2,{5 + i % 20}}}$"}
                                             for i in range(n)}}


@pytest.fixture(scope="module")
def compiler(smol_info):
    return GrammarCompiler(smol_info)


def test_a_compile_past_its_time_bound_stops_and_the_next_one_works(compiler):
    threads = threading.active_count()
    t0 = time.monotonic()
    with pytest.raises(CompileLimitExceeded, match="time bound of 0.3 s") as e:
        compiler.compile_json_schema(_big(20_000), timeout=0.3)
    assert e.value.limit == "timeout" and isinstance(e.value, StructgenError)
    assert time.monotonic() - t0 < 5  # stopped, not run to its end (~16 s)
    assert threading.active_count() == threads
    g = compiler.compile_json_schema({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    m = Matcher(g)
    assert m.accept_string('{"a":12}') and m.is_accepting()


def test_a_stopped_compile_leaves_nothing_half_built(compiler):
    schema = _big(1500, tag="half")
    with pytest.raises(CompileLimitExceeded):
        compiler.compile_json_schema(schema, timeout=0.05)
    g = compiler.compile_json_schema(schema, timeout=120)  # the same schema, given time: complete and exact
    m = Matcher(g)
    assert m.accept_string(json.dumps({"key_3_21": "half3abc"}, separators=(",", ":"))) and m.is_accepting()
    m = Matcher(g)
    assert not m.accept_string('{"key_3_21":"half4abc"}')


def test_a_compile_past_its_memory_bound_stops(compiler):
    with pytest.raises(CompileLimitExceeded, match="grew by more than 20 MiB") as e:
        compiler.compile_json_schema(_big(20_000, tag="mem"), max_memory=20 << 20, timeout=60)
    assert e.value.limit == "memory"


def test_the_compilers_own_bounds_apply_to_every_kind(smol_info):
    c = GrammarCompiler(smol_info, compile_timeout=0.05)
    with pytest.raises(CompileLimitExceeded):
        c.compile_json_schema(_big(3000, tag="own"))
    lark = "start: " + " | ".join(f'"w{i}" /[a-z]{{1,{1 + i % 30}}}q{i}/ "{i}"' for i in range(6000))
    with pytest.raises(CompileLimitExceeded):
        c.compile_lark(lark)
    assert c.compile_regex(r"[a-z]{1,5}", timeout=30) is not None  # a call's own bound overrides


def test_a_cancellation_swallowed_once_is_sent_again():
    """Code that catches every exception (a gc callback of another library) may eat the first
    cancellation: the compile is still stopped, within a second of its bound."""
    from structgen.compiler import run_deep

    def job():
        swallowed = 0
        while True:
            try:
                while True:
                    time.sleep(0.001)
            except BaseException:
                swallowed += 1
                if swallowed > 1:
                    raise

    t0 = time.monotonic()
    with pytest.raises(CompileLimitExceeded, match="time bound of 0.2 s"):
        run_deep(job, timeout=0.2)
    assert time.monotonic() - t0 < 3
