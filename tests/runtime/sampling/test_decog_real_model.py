"""Deco-G on the real SmolLM2: an HMM distilled from its own samples, the format always held, the
prompt carrying only the task, and the command line that distils one."""
from __future__ import annotations

import math
import re

import pytest

import structgen
from structgen.engine.matcher import Matcher
from structgen.runtime.sampling.decog import DecoG
from structgen.runtime.sampling.exact import enumerate_target, total_variation
from structgen.runtime.sampling.hmm_distill import distill_hmm, sample_continuations
from structgen.runtime.sampling.lm import ModelLM
from structgen.runtime.sampling.token_dfa import token_dfa

pytestmark = pytest.mark.slow
REGEX = r"(red|blue) (cat|owl)"
PROMPT = "Name a colour and an animal, like 'brown bear'. Answer with the two words only."


@pytest.fixture(scope="module")
def hmm(smol):
    # small H for a thousand-odd tokens: larger HMMs overfit so few samples (BENCHMARKS.md, Deco-G)
    return distill_hmm(smol, [PROMPT], hidden=8, samples_per_prompt=256, max_tokens=12, seed=0, show_progress=False)


def test_distilled_samples_are_the_models_and_end_with_eos(smol):
    seqs = sample_continuations(smol, [PROMPT], samples_per_prompt=8, max_tokens=10, seed=1)
    assert len(seqs) == 8 and all(1 <= len(s) <= 10 for s in seqs)
    eos = set(smol.info.eos_ids)
    specials = set(smol.info.special_ids) - eos
    assert not any(t in specials for s in seqs for t in s)
    assert all(t not in eos for s in seqs for t in s[:-1])  # EOS only last, where the output ended


@pytest.mark.minutes
def test_decog_comes_closer_to_the_target_than_masking(smol, hmm):
    from structgen.api import compiler_for

    g = compiler_for(smol).compile_regex(REGEX)
    lm = ModelLM(smol, smol.encode(smol.chat_prompt(PROMPT)), temperature=1.0)
    exact = enumerate_target(lm, Matcher(g), max_tokens=10, canonical=False)  # Deco-G below has no filter
    pi, q = exact.global_target(), exact.local_target()
    dg = DecoG(hmm, token_dfa(g), 10)
    d = {x: math.exp(dg.sequence_log_prob(lm, x)) for x in pi}
    assert math.isclose(sum(d.values()), 1.0, rel_tol=1e-9)  # all of Deco-G's mass is inside the language
    # masking's main bias here is tokenization: it spends much of its mass on spellings the model
    # almost never uses; the HMM's look-ahead does not
    best: dict[str, tuple] = {}
    for x, v in pi.items():
        k = smol.info.decode_bytes(list(x)).decode()
        if k not in best or v > pi[best[k]]:
            best[k] = x
    assert sum(pi[x] for x in best.values()) > 0.99
    assert sum(d[x] for x in best.values()) > 0.99 > 0.8 > sum(q[x] for x in best.values())
    assert total_variation(pi, d) < total_variation(pi, q)


@pytest.mark.minutes  # the HMM fixture distils for 45 s
def test_generate_with_decog_holds_the_format_with_a_task_only_prompt(smol, hmm, tmp_path):
    path = hmm.save(tmp_path / "colour.npz")
    for seed in range(3):
        out = structgen.generate_regex(smol, REGEX, "Name a colour and an animal.", sampler="decog", hmm=path,
                                       seed=seed, max_tokens=10)
        assert re.fullmatch(REGEX, out)
    outs = structgen.sample(smol, "Name a colour and an animal.", regex=REGEX, method="decog", hmm=hmm, n=5,
                            prune=4, max_tokens=10, seed=0)
    assert all(re.fullmatch(REGEX, o.text) for o in outs)


@pytest.mark.minutes  # the HMM fixture distils for 45 s
def test_a_closed_schema_with_decog(smol, hmm):
    schema = {"type": "object", "properties": {"colour": {"enum": ["red", "blue"]},
                                               "animal": {"enum": ["cat", "owl"]}},
              "required": ["colour", "animal"], "additionalProperties": False}
    value = structgen.generate_json(smol, schema, "Name a colour and an animal.", sampler="decog", hmm=hmm, seed=0,
                                    max_tokens=24)
    assert value["colour"] in ("red", "blue") and value["animal"] in ("cat", "owl")
    with pytest.raises(structgen.UnsupportedFeature, match="recursive"):
        structgen.generate_json(smol, {"type": "object"}, "x", sampler="decog", hmm=hmm)


def test_the_distill_command(tmp_path, capsys):
    from structgen.cli import main
    from structgen.runtime.sampling.hmm import HMM

    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Name a colour.\n\nName an animal.\n")
    out = tmp_path / "h.npz"
    rc = main(["hmm", "distill", "--prompts", str(prompts), "--hidden", "4", "--samples", "4", "--max-tokens", "6",
               "--iterations", "2", "--output", str(out)])
    assert rc == 0 and "saved" in capsys.readouterr().out
    h = HMM.load(out)
    assert h.hidden == 4 and h.meta["prompts"] == 2 and h.meta["sequences"] == 8  # too few to hold any out
    assert main(["hmm", "distill", "--prompts", str(tmp_path / "none.txt"), "--output", str(out)]) == 1
