"""Samplers over canonical tokenizations (runtime/sampling/canonical.py), effective sample size and
log evidence on weighted results, and the sampler entry taking a loaded model."""
from __future__ import annotations

import ast
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from structgen.engine.matcher import Matcher
from structgen.errors import InvalidArgument, LowEffectiveSampleSize
from structgen.runtime.sampling.canonical import CanonicalMatcher
from structgen.runtime.sampling.draw import draw_samples, effective_sample_size
from structgen.runtime.sampling.exact import enumerate_target, total_variation
from structgen.tokenizer.canonical import CanonicalFilter
from toy import LANGUAGE, MAX_TOKENS, toy_grammar, toy_info, toy_lm


def toy_filter() -> CanonicalFilter:
    """The toy vocabulary ("0", "1", "00", "11", EOS) as a BPE with the merges 0+0 then 1+1."""
    tok = {"model": {"type": "BPE", "vocab": {"0": 0, "1": 1, "00": 2, "11": 3}, "merges": ["0 0", "1 1"]},
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}, "normalizer": None}
    return CanonicalFilter.from_tokenizer_json(tok, [b"0", b"1", b"00", b"11", b""], (4,), use_cache=False)


def bpe(s: str) -> tuple:
    """The toy BPE: runs of a digit paired from the left."""
    out, i = [], 0
    while i < len(s):
        if i + 1 < len(s) and s[i] == s[i + 1]:
            out.append(2 if s[i] == "0" else 3)
            i += 2
        else:
            out.append(0 if s[i] == "0" else 1)
            i += 1
    return tuple(out)


@pytest.fixture(scope="module")
def canon():
    filt = toy_filter()
    exact = enumerate_target(toy_lm(), Matcher(toy_grammar()), max_tokens=MAX_TOKENS, canonical=filt)
    return filt, exact


def test_the_exact_target_is_over_canonical_tokenizations(canon):
    filt, exact = canon
    pi = exact.global_target()
    assert set(pi) == {bpe(s) for s in LANGUAGE}  # one tokenization a string: BPE's
    old = enumerate_target(toy_lm(), Matcher(toy_grammar()), max_tokens=MAX_TOKENS, canonical=False)
    assert len(old.global_target()) == 68  # canonical=False: every tokenization, as before
    assert exact.log_pl < old.log_pl
    assert math.isclose(sum(exact.local_target().values()), 1.0)


@pytest.mark.parametrize("method", ["masked", "asap", "awrs", "smc"])
def test_every_sampler_draws_canonical_tokenizations(canon, method):
    filt, exact = canon
    out = draw_samples(toy_lm(), toy_grammar(), toy_info(), n=30 if method != "smc" else 4, method=method,
                       particles=8, max_tokens=MAX_TOKENS, seed=0, canonical=filt, ess_warning=None)
    assert out and all(tuple(s.token_ids) in exact.global_target() for s in out)
    off = draw_samples(toy_lm(), toy_grammar(), toy_info(), n=200, method="masked", max_tokens=MAX_TOKENS, seed=0,
                       canonical=False)
    assert any(tuple(s.token_ids) not in exact.global_target() for s in off)


def test_smc_converges_to_the_canonical_target(canon):
    filt, exact = canon
    pi = exact.global_target()
    out = draw_samples(toy_lm(), toy_grammar(), toy_info(), n=150, method="smc", particles=16,
                       max_tokens=MAX_TOKENS, seed=1, canonical=filt, ess_warning=None)
    f: dict = {}
    for s in out:  # each run weighted by its evidence estimate times the particle's normalised weight
        w = math.exp(s.log_evidence + s.log_weight)
        f[tuple(s.token_ids)] = f.get(tuple(s.token_ids), 0.0) + w
    z = sum(f.values())
    assert total_variation(pi, {k: v / z for k, v in f.items()}) < 0.06
    # the mean of the runs' evidence estimates is unbiased for P(L) over canonical tokenizations
    est = np.mean([math.exp(e) for e in {s.run: s.log_evidence for s in out}.values()])
    assert abs(est / math.exp(exact.log_pl) - 1) < 0.1


def test_canonical_matcher_follows_rollback_and_copy(canon):
    filt, _ = canon
    m = CanonicalMatcher(Matcher(toy_grammar()), filt)
    assert m.accept_token(1) and m.accept_token(0)  # "10"
    assert not m.accept_token(0)  # "1|0|0": BPE writes "1|00"
    assert m.accept_token(1)  # "101"
    c = m.copy()
    m.rollback(2)  # back to "1"
    assert m.accept_token(0) and not m.accept_token(0)
    m.rollback(1)
    assert m.accept_token(2)  # "1|00"
    assert c.state != m.state and len(c._states) == 4
    assert not m.is_accepting()  # "100" is not in the language
    words = CanonicalMatcher(Matcher(toy_grammar()), filt).next_token_mask()
    assert words.dtype == np.uint32 and int(words[0]) == 0b01111  # the four tokens, not EOS (not complete)


def test_awrs_results_carry_ess_and_log_evidence(canon):
    filt, exact = canon
    out = draw_samples(toy_lm(), toy_grammar(), toy_info(), n=400, method="awrs", max_tokens=MAX_TOKENS, seed=2,
                       canonical=filt, ess_warning=None)
    assert 1.0 <= out.ess <= len(out)
    assert out.ess == pytest.approx(effective_sample_size([s.log_weight for s in out]))
    assert all(s.ess == out.ess and s.log_evidence == out.log_evidence for s in out)
    assert abs(math.exp(out.log_evidence) / math.exp(exact.log_pl) - 1) < 0.3  # an unbiased estimate of P(L)
    unweighted = draw_samples(toy_lm(), toy_grammar(), toy_info(), n=5, method="masked", max_tokens=MAX_TOKENS,
                              seed=0, canonical=filt)
    assert unweighted.ess == 5 and unweighted.log_evidence is None


def test_smc_results_carry_ess_per_run(canon):
    filt, _ = canon
    out = draw_samples(toy_lm(), toy_grammar(), toy_info(), n=3, method="smc", particles=8, max_tokens=MAX_TOKENS,
                       seed=0, canonical=filt, ess_warning=None)
    assert out.method == "smc" and 0 <= out.ess <= 8  # the smallest over the runs (0: every particle of a run died)
    assert {s.run for s in out} <= {0, 1, 2} and all(s.ess is not None for s in out)
    assert np.isfinite(out.log_evidence)


def test_low_ess_warns(canon):
    filt, _ = canon
    with pytest.warns(LowEffectiveSampleSize, match="effective sample size"):
        draw_samples(toy_lm(), toy_grammar(), toy_info(), n=50, method="awrs", max_tokens=MAX_TOKENS, seed=0,
                     canonical=filt, ess_warning=1.01)  # any weighted set is below 101% of its size
    with warnings.catch_warnings():
        warnings.simplefilter("error", LowEffectiveSampleSize)
        draw_samples(toy_lm(), toy_grammar(), toy_info(), n=50, method="awrs", max_tokens=MAX_TOKENS, seed=0,
                     canonical=filt, ess_warning=None)
        draw_samples(toy_lm(), toy_grammar(), toy_info(), n=2, method="smc", particles=8, max_tokens=MAX_TOKENS,
                     seed=0, canonical=filt, ess_warning=None)
    with pytest.warns(LowEffectiveSampleSize):
        draw_samples(toy_lm(), toy_grammar(), toy_info(), n=1, method="smc", particles=8, max_tokens=MAX_TOKENS,
                     seed=0, canonical=filt, ess_warning=1.01)


def test_runtime_never_imports_models():
    """The sampler entry takes a loaded model; resolving names and paths is the top level's job."""
    root = Path(__import__("structgen").__file__).parent / "runtime"
    offenders = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                names = {a.name for a in node.names}
                if mod.endswith("models") and (node.level >= 1 or mod == "structgen.models"):
                    offenders.append(f"{path.name}: from {'.' * node.level}{mod}")
                elif node.level >= 2 and not mod and "models" in names:
                    offenders.append(f"{path.name}: models")
            elif isinstance(node, ast.Import) and any(a.name == "structgen.models" for a in node.names):
                offenders.append(path.name)
    assert not offenders


def test_the_runtime_entry_refuses_a_name():
    from structgen.runtime.sampling.draw import sample

    with pytest.raises(InvalidArgument, match="structgen.sample"):
        sample("smollm2", "hi", regex="a")
