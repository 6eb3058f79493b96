"""The samplers on the real SmolLM2: a finite language enumerated exactly (every tokenization),
outputs that always satisfy the constraint, and ASAp moving from masking's bias to the target."""
from __future__ import annotations

import math

import jsonschema
import numpy as np
import pytest

import structgen
from structgen.engine.matcher import Matcher
from structgen.runtime.sampling.asap import ASAp
from structgen.runtime.sampling.exact import enumerate_target, total_variation
from structgen.runtime.sampling.lm import ModelLM
from structgen.runtime.sampling.smc import run_smc

pytestmark = pytest.mark.slow
REGEX = r"(red|blue) (cat|owl)"
PROMPT = "Name a colour and an animal, like 'brown bear'. Answer with the two words only."


@pytest.fixture(scope="module")
def problem(smol):
    from structgen.api import compiler_for

    g = compiler_for(smol).compile_regex(REGEX)
    lm = ModelLM(smol, smol.encode(smol.chat_prompt(PROMPT)), temperature=1.0)
    m = Matcher(g)
    return lm, m, enumerate_target(lm, m, max_tokens=12, canonical=False)  # every tokenization, as m samples


@pytest.mark.minutes  # the exact target enumerates every tokenization for 50 s
def test_the_exact_target_covers_every_tokenization(smol, problem):
    lm, m, exact = problem
    strings = {smol.info.decode_bytes(list(x)).decode() for x in exact.log_p}
    assert strings == {f"{c} {a}" for c in ("red", "blue") for a in ("cat", "owl")}
    assert len(exact.log_p) > len(strings)  # several tokenizations of each string
    assert math.isclose(sum(exact.global_target().values()), 1.0)


@pytest.mark.minutes  # the exact target enumerates every tokenization for 50 s
def test_asap_moves_from_masking_to_the_target(problem):
    lm, m, exact = problem
    pi, q = exact.global_target(), exact.local_target()
    asap = ASAp(lm, m, max_tokens=12)
    rng = np.random.default_rng(0)
    first = total_variation(pi, {x: asap.next_sample_probability(x) for x in pi})
    assert math.isclose(first, total_variation(pi, q), abs_tol=1e-9)  # the first sample is masked sampling
    for _ in range(400):
        asap.sample(rng)
    later = total_variation(pi, {x: asap.next_sample_probability(x) for x in pi})
    assert later < 0.5 * first and later < 0.05


@pytest.mark.minutes  # the exact target enumerates every tokenization for 50 s
def test_smc_estimates_the_probability_of_the_language(problem):
    lm, m, exact = problem
    rng = np.random.default_rng(1)
    z = [math.exp(run_smc(lm, m, rng, particles=8, max_tokens=12).log_evidence) for _ in range(16)]
    # unbiased but heavy-tailed (P(L) is about 1e-6 here): 16 runs land within a factor e
    assert abs(math.log(np.mean(z)) - exact.log_pl) < 1.0


@pytest.mark.parametrize("method", ["masked", "asap", "awrs", "smc"])
def test_every_output_satisfies_the_constraint(smol, method):
    import re

    out = structgen.sample(smol, PROMPT, regex=REGEX, n=3, method=method, particles=4, seed=5)
    assert out and all(re.fullmatch(REGEX, s.text) for s in out)
    schema = {"type": "object", "properties": {"pet": {"enum": ["cat", "dog", "owl"]},
                                               "age": {"type": "integer", "minimum": 1, "maximum": 15}},
              "required": ["pet", "age"]}
    value = structgen.generate_json(smol, schema, "Describe a pet.", sampler=method, particles=4, seed=5,
                                    max_tokens=40)
    jsonschema.validate(value, schema)


@pytest.mark.minutes  # distils the twist's HMM once (~20 s)
def test_twisted_smc_through_the_api_holds_the_constraint_and_caches_its_hmm(smol, tmp_path, monkeypatch):
    import re

    from structgen.runtime.sampling import draw

    monkeypatch.setenv("STRUCTGEN_CACHE", str(tmp_path))
    out = structgen.sample(smol, PROMPT, regex=REGEX, n=3, method="twisted-smc", particles=4, seed=5, max_tokens=12)
    assert out and all(re.fullmatch(REGEX, s.text) for s in out)
    assert out.ess is not None and 1 <= out.ess <= 4 and math.isfinite(out.log_evidence)
    assert list((tmp_path / "twist-hmm").glob("*.npz"))  # distilled once, kept on disk
    draw._TWIST_HMMS.clear()
    again = structgen.sample(smol, PROMPT, regex=REGEX, n=3, method="twisted-smc", particles=4, seed=5, max_tokens=12)
    assert [s.text for s in again] == [s.text for s in out]  # the cached HMM gives the same draws
    schema = {"type": "object", "properties": {"pet": {"enum": ["cat", "dog", "owl"]}}, "required": ["pet"]}
    value = structgen.generate_json(smol, schema, "Describe a pet.", sampler="twisted-smc", particles=4, seed=5,
                                    max_tokens=20)
    jsonschema.validate(value, schema)
