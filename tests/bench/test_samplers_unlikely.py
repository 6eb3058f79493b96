"""``structgen bench samplers --parts unlikely`` (structgen/bench/samplers_unlikely.py): the seeded
languages, and on the real SmolLM2 one unlikely language where ASAp and twisted SMC reach the exact
canonical target and masking does not."""
from __future__ import annotations

import math
import re

import pytest

from structgen.bench.samplers_unlikely import MAX_P_L, UNLIKELY_METHODS, unlikely_cases


def test_the_languages_are_seeded_and_alternate_pairs_and_enums():
    a, b = unlikely_cases(3, 4), unlikely_cases(3, 4)
    assert a == b and unlikely_cases(4, 4) != a
    assert [c.regex is not None for c in a] == [True, False, True, False]
    for c in a:
        if c.regex:
            assert re.fullmatch(r"\(\w+\|\w+\) \(\w+\|\w+\)", c.regex)
        else:
            (values,) = [p["enum"] for p in c.schema["properties"].values()]
            assert len(set(values)) == 3 and c.schema["additionalProperties"] is False


@pytest.mark.slow
@pytest.mark.minutes  # distils the twist's HMM (~20 s) and draws 600 samples a sampler (~90 s)
def test_on_an_unlikely_language_asap_and_twisted_smc_reach_the_target(smol):
    from structgen.bench.samplers_unlikely import run_unlikely_part

    res = run_unlikely_part(smol, seed=12, count=1, samples=600, particles=16,
                            methods=("masked", "asap", "twisted-smc"), echo=lambda s: None)
    (case,) = res["cases"]
    assert case["p_l"] < MAX_P_L and case["sequences"] == 4  # one canonical tokenization a string
    tv = {r["method"]: r["curve"][-1][1] for r in case["rows"]}
    assert tv["masked"] > 0.3 and case["tv_q_pi"] > 0.3  # masking's bias
    assert tv["asap"] < 0.02 and tv["twisted-smc"] < 0.02, tv
    twisted = next(r for r in case["rows"] if r["method"] == "twisted-smc")
    assert twisted["particles"] == 4 and twisted["ess"] > 2  # weights stay even with a quarter of SMC's particles
    assert math.isfinite(twisted["log_evidence"]) and abs(twisted["log_evidence"] - math.log(case["p_l"])) < 2.0
    assert set(UNLIKELY_METHODS) >= {"masked", "asap", "awrs", "smc", "twisted-smc", "decog"}
