"""The vLLM serving benchmark's scoring and report (the servers themselves run in tests_vllm/ and
in ``structgen bench vllm``, from vLLM's own virtualenv)."""
from __future__ import annotations

import json

import pytest

from structgen.bench.vllm_serving import _decode_speed, _pct, report


def _backend(name, served, valid, speed):
    return {"backend": name, "n": 4, "served": served, "refused": 4 - served, "errors": 0, "valid": valid, "finished": served, "finished_valid": valid,
            "req_per_s": 0.5 * served, "out_tok_per_s": 40.0, "ttft_p50_s": 0.3, "ttft_p90_s": 0.9,
            "common": 2, "common_valid": 2, "common_decode_tok_s_p50": speed, "common_latency_s_p50": 3.0}


def test_decode_speed_counts_tokens_after_the_first():
    assert _decode_speed({"tokens": 11, "ttft_s": 1.0, "latency_s": 3.0}) == 5.0
    assert _decode_speed({"tokens": 0, "ttft_s": None, "latency_s": 1.0}) is None
    assert _pct([3.0, 1.0, 2.0], 0.5) == 2.0 and _pct([], 0.5) is None


def test_report_gives_ratios_against_each_peer():
    text = report({"cases": 4, "concurrency": 16, "max_tokens": 256,
                   "backends": [_backend("structgen", 4, 4, 20.0), _backend("xgrammar", 3, 2, 25.0)]})
    assert "| structgen | 4/4 | 0 |" in text and "| xgrammar | 3/4 | 1 |" in text
    assert "decode tok/s 0.80x" in text and "valid outputs 4 vs 2" in text


def test_check_heavy_cases_repeat_each_schema_with_its_own_seed():
    from structgen.bench.vllm_serving import check_cases

    cases = check_cases(3, 2, seed=0)
    assert len(cases) == 6 and [c["seed"] for c in cases] == [0, 0, 0, 1, 1, 1]
    assert cases[0]["schema"] == cases[3]["schema"] and len({c["id"] for c in cases}) == 6
    text = report({"cases": 6, "concurrency": 16, "max_tokens": 256, "cases_from": "checks", "temperature": 1.0,
                   "backends": [_backend("structgen", 4, 4, 20.0)]})
    assert text.startswith("vLLM serving: 6 check-heavy MaskBench requests, 16 concurrent, max_tokens 256, temperature 1.0")


def test_an_earlier_runs_requests_are_sent_again(tmp_path):
    from structgen.bench.vllm_serving import cases_like, check_cases

    first = check_cases(2, 2, seed=1)
    (tmp_path / "vllm.json").write_text(json.dumps({"ids": [c["id"] for c in first]}))
    again = cases_like(tmp_path / "vllm.json")
    assert [(c["id"], c["seed"], c["schema"]) for c in again] == [(c["id"], c["seed"], c["schema"]) for c in first]
    (tmp_path / "bad.json").write_text(json.dumps({"ids": ["no-such-schema#0"]}))
    with pytest.raises(ValueError, match="not a MaskBench dev schema"):
        cases_like(tmp_path / "bad.json")
