"""``structgen.sample``: many outputs under a constraint, by the sampler the user picks.

* ``"masked"`` -- renormalise over the allowed tokens at each step (what every engine does; it
  samples the *local* target, biased towards prefixes the model would rarely complete validly);
* ``"asap"`` -- grammar-aligned decoding: one trie shared by the ``n`` samples learns the expected
  future grammaticality, converging to the model's distribution restricted to the constraint;
* ``"awrs"`` -- adaptive weighted rejection sampling: each token tested one at a time (no full
  mask), each sample weighted so that weighted samples estimate the target;
* ``"smc"`` -- sequential Monte Carlo over AWRS proposals: ``n`` runs of ``particles`` particles,
  normalised weights within each run and an estimate of log P(L) per run;
* ``"twisted-smc"`` -- SMC whose particles are proposed and weighted with a twist, the HMM's
  (``hmm=``) probability that the constraint can still be met after each token (``twisted.py``):
  where the constraint is unlikely the weights stay even, so far fewer particles reach the same
  accuracy; a regular constraint, as for Deco-G;
* ``"decog"`` -- Deco-G: an HMM distilled from the model (``hmm=``) looks ahead over the format
  (a regular constraint) and reweights each token by its probability of still finishing it; the
  model's prompt carries only the task.

Every method draws canonical tokenizations by default (``canonical="auto"``: the tokenizer's own
split of the text, ``runtime/sampling/canonical.py``); ``canonical=False`` lets every tokenization
through, the old target.  Weighted results carry their effective sample size (``ess``) and the
estimate of log P(L) (``log_evidence``); an ESS below ``ess_warning`` times the number of weighted
samples raises a :class:`~structgen.errors.LowEffectiveSampleSize` warning.

The entry takes a resolved structgen ``Model``: ``structgen.sample`` (``api.py``) resolves names
and paths; nothing in ``runtime/`` loads a model.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import time
import warnings
import weakref

import numpy as np

from ...errors import InvalidArgument, LowEffectiveSampleSize
from .asap import ASAp
from .awrs import ESTIMATORS, sample_awrs
from .lm import ModelLM
from .sequence import DeadEnd, sample_masked
from ...sampler_methods import METHODS, check_method
from .canonical import resolve_canonical, with_canonical
from .hmm import HMM, HMMError
from .smc import run_smc
from .weights import effective_sample_size, log_mean_exp
from .token_dfa import cached_token_dfa
from .twisted import run_twisted_smc_runs

__all__ = ["Sample", "Samples", "sample", "METHODS", "draw_one", "draw_samples", "generate_with_sampler",
           "effective_sample_size", "DEFAULT_ESS_WARNING"]

#: warn when the effective sample size falls below this share of the weighted samples
DEFAULT_ESS_WARNING = 0.1



@dataclass
class Sample:
    """One output.  ``log_weight``: 0 for ``masked`` and ``asap``; for ``awrs`` the log of the
    sequence's importance weight; for ``smc`` the particle's normalised log weight within its run
    (``run``), whose estimate of log P(L) is ``log_evidence``.  ``checks``: constraint checks made.
    ``ess``: the effective sample size of the weighted set the sample belongs to (all ``n`` AWRS
    samples, or its SMC run's particles); ``log_evidence`` for AWRS: log of the mean weight over
    every draw (dead ones count 0), an unbiased estimate of P(L) in log space.  None for unweighted
    methods."""

    text: str
    token_ids: list[int]
    log_weight: float = 0.0
    run: int = 0
    log_evidence: float | None = None
    checks: int = 0
    ess: float | None = None


class Samples(list):
    """The samples of one call (a list of :class:`Sample`) with the weighted set's summary:
    ``ess`` (for SMC the smallest over its runs), ``log_evidence`` (for SMC the mean over runs of
    each run's estimate, in log space), ``method``.  Unweighted methods: ``ess`` = the number of
    samples, ``log_evidence`` None."""

    ess: float | None = None
    log_evidence: float | None = None
    method: str = ""


def _warn_ess(ess: float, count: int, threshold: float | None, what: str) -> None:
    if threshold is None or count < 2 or ess >= threshold * count:
        return
    warnings.warn(f"{what}: effective sample size {ess:.1f} of {count} weighted samples (below "
                  f"{threshold:.0%}): a few samples carry the estimate; draw more (n=, particles=), "
                  "or the constraint is very unlikely under the model", LowEffectiveSampleSize, stacklevel=4)


def _constraint(model, schema, regex, grammar, start: str, whitespace: str):
    from ...compiler import compiler_for

    given = [x is not None for x in (schema, regex, grammar)]
    if sum(given) != 1:
        raise InvalidArgument("pass exactly one of schema=, regex= or grammar=")
    comp = compiler_for(model)
    if schema is not None:
        from ...grammar.json_schema import normalize_schema_input

        return comp.compile_json_schema(normalize_schema_input(schema), whitespace=whitespace), "json"
    if regex is not None:
        return comp.compile_regex(regex), "regex"
    return comp.compile_lark(grammar if isinstance(grammar, (str, Path)) else str(grammar), start=start), "grammar"


def _check_method(method: str, estimator: str) -> None:
    check_method(method)
    if estimator not in ESTIMATORS:
        raise InvalidArgument(f"unknown AWRS estimator {estimator!r}: one of {ESTIMATORS}")


def sample(model: Any, prompt: str, *, schema: Any = None, regex: str | None = None, grammar: Any = None,
           n: int = 1, method: str = "masked", particles: int = 8, temperature: float = 1.0,
           max_tokens: int = 256, seed: int | None = None, chat: bool = True, system: str | None = None,
           start: str = "start", estimator: str = "two-pass", whitespace: str = "compact", hmm: Any = None,
           prune: int | float | None = None, canonical: Any = "auto",
           ess_warning: float | None = DEFAULT_ESS_WARNING) -> Samples:
    """Draw ``n`` outputs under one constraint (``schema=``, ``regex=`` or ``grammar=``) from a
    structgen ``Model`` (``structgen.sample`` resolves a name or path first).

    For ``method="smc"``, ``n`` is the number of independent runs and each returns its
    ``particles`` samples.  The same ``seed`` gives the same samples.  Every returned output
    satisfies the constraint; an output the budget cannot finish is never returned (a sample
    that meets a dead end is drawn again, at most ``10 n`` times).

    ``canonical`` (default ``"auto"``): only the tokenizer's own tokenization of each text is drawn
    (the target is the model's distribution over canonical tokenizations restricted to the
    constraint; a tokenizer the filter does not cover warns and draws every tokenization); True:
    such a tokenizer is an error; False: every tokenization, as before.  ``ess_warning``: the share of the weighted samples below
    which a low effective sample size warns (None: never).

    ``method="decog"`` needs ``hmm=`` (an ``HMM`` or the path of one saved by ``structgen hmm
    distill``); the prompt is given to the model as it is, without the schema (the HMM carries the
    format); ``prune``: keep the top ``prune`` hidden states each step (an int) or the fewest holding
    that share of their mass (a float below 1)."""
    from ..prompts import schema_prompt

    _check_method(method, estimator)
    if n < 1:
        raise InvalidArgument(f"n must be >= 1, got {n}")
    if model is None or isinstance(model, (str, Path)):
        raise InvalidArgument("runtime.sampling.draw.sample takes a loaded Model: call structgen.sample, "
                              "which resolves names and paths")
    compiled, kind = _constraint(model, schema, regex, grammar, start, whitespace)
    text = schema_prompt(schema, prompt) if kind == "json" and method != "decog" else prompt
    prompt_text = model.chat_prompt(text, system=system) if chat else text
    lm = ModelLM(model, model.encode(prompt_text), temperature=temperature)
    return draw_samples(lm, compiled, model.info, n=n, method=method, particles=particles,
                        max_tokens=max_tokens, seed=seed, estimator=estimator, hmm=hmm, prune=prune,
                        canonical=canonical, ess_warning=ess_warning)


_TWIST_HMMS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # compiled grammar -> {(prompt, budget): HMM}


def twist_hmm_for(lm, compiled, matcher, info, max_tokens: int, seed: int | None):
    """The twist's HMM when ``twisted-smc`` is given none: distilled from the model's continuations
    of the constraint's prefixes after this prompt (``distill_twist_hmm``, its size chosen by
    held-out likelihood), once per (grammar, prompt, budget) in this process."""
    from .hmm_distill import distill_twist_hmm

    if getattr(lm, "model", None) is None:
        raise InvalidArgument("method='twisted-smc' needs hmm= (an HMM, or the path of one saved by `structgen hmm "
                              "distill`) for an LM without a model to distill one from")
    per = _TWIST_HMMS.setdefault(compiled, {})
    key = (tuple(lm.prompt), max_tokens, lm.temperature, type(matcher).__name__)
    hmm = per.get(key)
    if hmm is None:
        path = _twist_cache_path(lm, compiled, key)
        if path is not None and path.is_file():
            try:
                hmm = HMM.load(path)
            except HMMError:
                hmm = None
        if hmm is None:
            hmm = distill_twist_hmm(lm, matcher, info.vocab_size, max_tokens=max_tokens,
                                    seed=0 if seed is None else seed, tokenizer=info.name)
            if path is not None:
                try:
                    hmm.save(path)
                except OSError:  # a read-only cache: the HMM is kept in this process only
                    pass
        per[key] = hmm
    return hmm


def _twist_cache_path(lm, compiled, key: tuple) -> "Path | None":
    """Where a twist HMM is kept on disk (``$STRUCTGEN_CACHE/twist-hmm``): keyed by the model, the
    prompt, the budget, the constraint's token automaton (its content, not the object) and the
    distilling code, so a later process with the same request reads it instead of distilling."""
    import hashlib

    from ..._cache import cache_root, code_fingerprint

    try:
        dfa = cached_token_dfa(compiled)
        m = lm.model
        fp = f"{m.info.fingerprint()}|{m.name}|{m.source}|{m.quantized}|{m.dtype}"
    except Exception:  # noqa: BLE001 - no automaton (decog_sampler then says why) or no fingerprint: no disk cache
        return None
    h = hashlib.sha256(f"{fp}|{key}|{code_fingerprint(__name__.rsplit('.', 1)[0] + '.hmm_distill')}".encode())
    for toks, ds in zip(dfa.tokens, dfa.dests):
        h.update(toks.tobytes())
        h.update(ds.tobytes())
    return cache_root() / "twist-hmm" / f"{h.hexdigest()[:24]}.npz"


def decog_sampler(compiled, hmm: Any, vocab_size: int, max_tokens: int, prune: int | float | None = None):
    """The Deco-G sampler for a compiled constraint: its token automaton (built once per grammar)
    and the HMM's backward table over ``max_tokens``."""
    from .decog import DecoG, resolve_hmm

    hmm = resolve_hmm(hmm, vocab_size)
    dfa = cached_token_dfa(compiled)
    if prune is None:
        return DecoG(hmm, dfa, max_tokens)
    if isinstance(prune, float):  # a share of the forward vector's mass (1.0: no pruning)
        return DecoG(hmm, dfa, max_tokens, mass=prune if prune < 1.0 else None)
    return DecoG(hmm, dfa, max_tokens, top_k=int(prune))


def draw_samples(lm, compiled, info, *, n: int, method: str, particles: int = 8, max_tokens: int = 256,
                 seed: int | None = None, estimator: str = "two-pass", budget_aware: bool = True,
                 hmm: Any = None, prune: int | float | None = None, canonical: Any = "auto",
                 ess_warning: float | None = DEFAULT_ESS_WARNING, ess_threshold: float = 0.5) -> Samples:
    """:func:`sample` on an already built LM view and compiled constraint (tests, benchmarks).

    ``budget_aware`` (AWRS and SMC): a token is viable only if the output can still finish within
    ``max_tokens`` (the budget guard's test), so a particle steers towards ending instead of dying
    at the budget; the target is then the outputs that stay finishable at every step.
    ``canonical``: ``"auto"``, True (the filter of the LM's model; none for a toy LM without a
    tokenizer), False, or a ``CanonicalFilter`` (see ``canonical.resolve_canonical``).  ``ess_threshold``: SMC resamples when its ESS falls below
    this share of the particles."""
    from ...engine.matcher import Matcher

    _check_method(method, estimator)
    rng = np.random.default_rng(seed)
    filt = resolve_canonical(canonical, lm)
    matcher = with_canonical(Matcher(compiled), filt)
    out = Samples()
    out.method = method

    def text(ids) -> str:
        return info.decode_bytes(ids).decode("utf-8", errors="replace")

    if method in ("smc", "twisted-smc"):
        evidences, worst = [], None
        twist = None
        if method == "twisted-smc":
            if hmm is None:
                hmm = twist_hmm_for(lm, compiled, matcher, info, max_tokens, seed)
            twist = decog_sampler(compiled, hmm, info.vocab_size, max_tokens, prune)
        twisted = (run_twisted_smc_runs(lm, matcher, rng, twist=twist, particles=particles, max_tokens=max_tokens,
                                        runs=n, ess_threshold=ess_threshold) if twist is not None else None)
        for r in range(n):
            if twisted is None:
                run = run_smc(lm, matcher, rng, particles=particles, max_tokens=max_tokens, estimator=estimator,
                              budget_aware=budget_aware, ess_threshold=ess_threshold)
            else:
                run = twisted[r]
            ess = effective_sample_size(p.log_weight for p in run.particles)
            _warn_ess(ess, particles, ess_warning, f"{method} run {r}")
            evidences.append(run.log_evidence)
            worst = ess if worst is None else min(worst, ess)
            for p in run.particles:
                if not np.isfinite(p.log_weight):
                    continue  # a particle that died is no output (its normalised weight is 0)
                out.append(Sample(text(p.token_ids), p.token_ids, p.log_weight, r, run.log_evidence,
                                  run.checks // max(1, particles), ess))
        out.ess = worst
        out.log_evidence = log_mean_exp(evidences, len(evidences))
        return out
    trie = ASAp(lm, matcher, max_tokens=max_tokens) if method == "asap" else None
    decog = decog_sampler(compiled, hmm, info.vocab_size, max_tokens, prune) if method == "decog" else None
    failures = dead = 0
    while len(out) < n:
        try:
            if method == "masked":
                s = sample_masked(lm, matcher, rng, max_tokens=max_tokens)
            elif method == "asap":
                s = trie.sample(rng)
            elif method == "decog":
                s = decog.sample(lm, rng, matcher=matcher if filt is not None else None)
            else:
                s = sample_awrs(lm, matcher, rng, max_tokens=max_tokens, estimator=estimator,
                                budget_aware=budget_aware)
                if not np.isfinite(s.log_weight):
                    dead += 1  # a draw of weight 0: it counts in the evidence estimate
                    raise DeadEnd("the AWRS sample died")
        except DeadEnd:
            failures += 1
            if failures > 10 * n:
                raise
            continue
        out.append(Sample(text(s.token_ids), s.token_ids, s.log_weight, len(out), None, s.checks))
    if method == "awrs":
        out.ess = effective_sample_size(x.log_weight for x in out)
        out.log_evidence = log_mean_exp([x.log_weight for x in out], len(out) + dead)
        for x in out:
            x.ess, x.log_evidence = out.ess, out.log_evidence
        _warn_ess(out.ess, len(out), ess_warning, "awrs")
    else:
        out.ess = float(len(out))
    return out


def draw_one(samples: list[Sample], seed: int | None) -> Sample:
    """One output from a sampler's approximation of the target: a particle by its normalised
    weight for ``smc``, else the first sample."""
    method = getattr(samples, "method", "")
    smc = method in ("smc", "twisted-smc") if method else samples[0].log_evidence is not None
    if len(samples) == 1 or not smc:
        return samples[0]
    lw = np.array([s.log_weight for s in samples])
    if not np.isfinite(lw).any():
        from ...errors import GenerationError

        raise GenerationError("every particle died: no output satisfies the constraint within max_tokens")
    w = np.exp(lw - lw.max())
    return samples[int(np.random.default_rng(seed).choice(len(samples), p=w / w.sum()))]


def generate_with_sampler(model: Any, grammar: Any, ids: list[int], *, max_tokens: int, temperature: float | None,
                          top_p: float, top_k: int, seed: int | None, sampler: str, particles: int,
                          hmm: Any = None, deadline: float | None = None, canonical: Any = "auto",
                          ess_warning: float | None = DEFAULT_ESS_WARNING):
    """One output for ``generate_*(sampler=...)`` and the LangChain model: a draw from the
    sampler's approximation of the target, as a ``GenerationResult`` (``log_weight`` and, in
    ``extra``, forward passes, constraint checks and the run's log P(L) estimate; ``ess`` and
    ``log_evidence`` of the weighted set it was drawn from on the result itself)."""
    from ...errors import GenerationError
    from ..loop import GenerationResult

    if top_p != 1.0 or top_k:
        raise InvalidArgument(f"sampler={sampler!r} targets the model's own distribution: top_p/top_k would truncate it")
    if temperature is not None and temperature <= 0:
        raise InvalidArgument(f"sampler={sampler!r} samples: temperature must be > 0 (or None for 1.0)")
    t0 = time.perf_counter()
    from ..loop import check_context

    check_context(model, len(ids), max_tokens)
    lm = ModelLM(model, ids, temperature=temperature or 1.0, deadline=deadline)
    try:
        samples = draw_samples(lm, grammar, model.info, n=1, method=sampler, particles=particles,
                               max_tokens=max_tokens, seed=seed, hmm=hmm, canonical=canonical,
                               ess_warning=ess_warning)
    except DeadEnd as e:
        raise GenerationError(f"sampler={sampler!r} found no output within max_tokens={max_tokens}: {e}") from None
    if not samples:
        raise GenerationError(f"sampler={sampler!r}: every particle died within max_tokens={max_tokens}")
    s = draw_one(samples, seed)
    seconds = time.perf_counter() - t0
    raw = model.info.decode_bytes(s.token_ids)
    return GenerationResult(token_ids=s.token_ids, text=raw.decode("utf-8", errors="replace"),
                            num_tokens=len(s.token_ids), seconds=seconds,
                            tokens_per_second=len(s.token_ids) / seconds if seconds > 0 else 0.0,
                            finish_reason="eos", text_bytes=raw, prompt_tokens=len(ids), steps=len(s.token_ids) + 1,
                            log_weight=s.log_weight, ess=samples.ess, log_evidence=samples.log_evidence,
                            extra={"sampler": sampler, "forward_passes": lm.forward_passes, "checks": s.checks,
                                   "log_evidence": s.log_evidence, "ess": samples.ess})
