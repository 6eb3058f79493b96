"""``structgen bench decog``: Deco-G checked exactly, against masking on SmolLM2, on a task, and timed.

Four parts, one run (``docs/algorithms.md`` section 3):

1. **exact** -- the verification experiment: the "LM" is an HMM (H=3, V=4, T=4) and the same HMM
   guides, format "token 2 appears and is never directly followed by 3": the sampler's probability
   of every sequence (the product of its step probabilities) against P_HMM(x | format); sum of
   gamma * beta against P_HMM(format) by enumeration; a uniform LM instead: TV and satisfaction.
2. **finite** -- SmolLM2 on a finite language (colour-animal pairs, every tokenization): an HMM
   distilled from the model's own samples for the prompt; the exact target pi, masking's exact
   distribution q and Deco-G's exact distribution (products of step probabilities over every
   sequence of the language), TV of each to pi; sampled outputs' satisfaction.
3. **task** -- short answers in a fixed format, the prompt holding only the question: the format
   asked for in words (unconstrained), masking, and Deco-G with an HMM distilled on the questions:
   format compliance, answers containing the gold answer, model log-likelihood per token.
4. **speed** -- the Deco-G step against a forward pass for H = 32..256, with and without pruning;
   emission memory; EM time per iteration; the backward table's build time.
"""
from __future__ import annotations

import itertools
import json
import math
import re
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["run_decog_bench", "exact_experiment", "format_decog_report", "TASK_FORMAT", "TASK_QUESTIONS"]

FINITE_REGEX = r"(red|blue|green|black|white) (cat|dog|fox)"
FINITE_PROMPT = "Name a colour and an animal, like 'brown bear'. Answer with the two words only."
TASK_FORMAT = r"Answer: [A-Za-z0-9 ,'-]{1,30}\."
TASK_IN_WORDS = " Reply in exactly this form: Answer: <a few words>."
# (question, gold answer) -- simple facts a 135M model may know; the prompt is the question alone
TASK_QUESTIONS = [
    ("What is the capital of France?", "paris"), ("What is the capital of Japan?", "tokyo"),
    ("What is the capital of Italy?", "rome"), ("What is the capital of Germany?", "berlin"),
    ("What is the capital of Spain?", "madrid"), ("What is the capital of England?", "london"),
    ("What colour is the sky on a clear day?", "blue"), ("What colour is grass?", "green"),
    ("How many legs does a spider have?", "eight"), ("How many days are in a week?", "seven"),
    ("What is the largest planet in our solar system?", "jupiter"), ("What do bees make?", "honey"),
    ("What is frozen water called?", "ice"), ("Which animal is known as the king of the jungle?", "lion"),
    ("What is the opposite of hot?", "cold"), ("Which planet is known as the red planet?", "mars"),
]


def _toy_dfa():
    from ..runtime.sampling.token_dfa import dfa_from_function

    def delta(s: int, t: int):
        if s == 1 and t == 3:
            return None  # a 2 directly followed by a 3
        if t == 2:
            return 1
        return 0 if s == 0 else 2

    return dfa_from_function(3, 4, delta, 0, [1, 2])


class HMMAsLM:
    """An HMM used as the language model (the verification experiment)."""

    def __init__(self, hmm) -> None:
        self.hmm, self.vocab_size, self.eos_ids, self.forward_passes = hmm, hmm.vocab_size, (), 0

    def logprobs(self, prefix):
        self.forward_passes += 1
        return self.hmm.next_token_logprobs(prefix)


class UniformLM:
    def __init__(self, vocab_size: int) -> None:
        self.vocab_size, self.eos_ids, self.forward_passes = vocab_size, (), 0

    def logprobs(self, prefix):
        return np.full(self.vocab_size, -math.log(self.vocab_size))


def random_hmm(hidden: int, vocab: int, seed: int, *, concentration: float = 1.0):
    """An HMM with Dirichlet rows (every entry > 0)."""
    from ..runtime.sampling.hmm import HMM

    rng = np.random.default_rng(seed)
    def rows(n, m):
        x = rng.gamma(concentration, size=(n, m)) + 1e-12
        return x / x.sum(1, keepdims=True)
    return HMM(rows(1, hidden)[0], rows(hidden, hidden), rows(hidden, vocab))


def exact_experiment(seed: int = 0, samples: int = 2000) -> dict:
    """Part 1: the exact verification of ``docs/algorithms.md`` section 3."""
    from ..runtime.sampling.decog import DecoG

    hmm = random_hmm(3, 4, seed)
    dfa = _toy_dfa()
    dg = DecoG(hmm, dfa, 4, exact_length=True)
    seqs = list(itertools.product(range(4), repeat=4))
    p_alpha = sum(math.exp(hmm.log_prob(x)) for x in seqs if dfa.accepts(x))
    p_table = math.exp(dg.table.log_prob(dfa.start, 4, hmm.gamma))
    lm = HMMAsLM(hmm)
    err = tv_uniform = 0.0
    uni = UniformLM(4)
    for x in seqs:
        want = math.exp(hmm.log_prob(x)) / p_alpha if dfa.accepts(x) else 0.0
        err = max(err, abs(math.exp(dg.sequence_log_prob(lm, x)) - want))
        tv_uniform += 0.5 * abs(math.exp(dg.sequence_log_prob(uni, x)) - want)
    rng = np.random.default_rng(seed)
    sat = sum(dfa.accepts(dg.sample(uni, rng).token_ids) for _ in range(samples))
    return {"p_alpha_enumerated": p_alpha, "p_alpha_table": p_table, "max_abs_error": err,
            "tv_uniform_lm": tv_uniform, "uniform_satisfied": sat, "uniform_samples": samples,
            "accepted_sequences": sum(dfa.accepts(x) for x in seqs)}


def _decog_distribution(dg, lm, seqs) -> dict:
    return {x: math.exp(dg.sequence_log_prob(lm, x)) for x in seqs}


def _by_string(model, dist: dict) -> dict:
    out: dict[str, float] = {}
    for x, v in dist.items():
        k = model.info.decode_bytes(list(x)).decode("utf-8", "replace")
        out[k] = out.get(k, 0.0) + v
    return out


def _finite_part(model, *, hidden_sizes: Sequence[int], samples: int, seed: int, draw: int, echo,
                 regex: str = FINITE_REGEX) -> dict:
    """One enumeration, one set of model samples, an HMM per size in ``hidden_sizes``.  Besides
    TV over token sequences: TV over strings (tokenizations summed) and the mass on each string's
    most likely tokenization under pi, which separate masking's two biases."""
    from ..compiler import compiler_for
    from ..engine.matcher import Matcher
    from ..runtime.sampling.decog import DecoG
    from ..runtime.sampling.exact import enumerate_target, total_variation
    from ..runtime.sampling.hmm import fit_hmm
    from ..runtime.sampling.hmm_distill import sample_continuations
    from ..runtime.sampling.lm import ModelLM
    from ..runtime.sampling.token_dfa import token_dfa

    grammar = compiler_for(model).compile_regex(regex)
    prompt_ids = model.encode(model.chat_prompt(FINITE_PROMPT))
    # every prefix of the language is asked again by Deco-G's exact distribution: keep them all
    lm = ModelLM(model, prompt_ids, temperature=1.0, cache_bytes=2 << 30)
    exact = enumerate_target(lm, Matcher(grammar), max_tokens=16, canonical=False)  # every tokenization
    pi, q = exact.global_target(), exact.local_target()
    canon: dict[str, tuple] = {}
    for x, v in pi.items():
        k = model.info.decode_bytes(list(x)).decode("utf-8", "replace")
        if k not in canon or v > pi[canon[k]]:
            canon[k] = x
    pi_s = _by_string(model, pi)

    def scores(d: dict) -> dict:
        return {"tv": total_variation(pi, d), "tv_strings": total_variation(pi_s, _by_string(model, d)),
                "canonical_mass": sum(d.get(x, 0.0) for x in canon.values())}

    t0 = time.perf_counter()
    seqs = sample_continuations(model, [FINITE_PROMPT], samples_per_prompt=samples, max_tokens=16, seed=seed)
    sample_s = time.perf_counter() - t0
    dfa = token_dfa(grammar)
    rows = [{"method": "masked", **scores(q)}]
    for h in hidden_sizes:
        hmm = fit_hmm(seqs, hidden=h, vocab_size=model.info.vocab_size, eos_ids=model.info.eos_ids, seed=seed)
        echo(f"finite: H={h} fitted in {hmm.meta['seconds']:.0f} s ({hmm.meta['iterations']} EM iterations)")
        variants = [(f"decog H={h}", {}), (f"decog H={h}, 99% mass", {"mass": 0.99})]
        if h > 8:
            variants.insert(1, (f"decog H={h}, top-8 states", {"top_k": 8}))
        for label, kw in variants:
            dg = DecoG(hmm, dfa, 16, **kw)
            d = _decog_distribution(dg, lm, list(pi))
            rng = np.random.default_rng(seed)
            t1 = time.perf_counter()
            outs = [dg.sample(lm, rng).token_ids for _ in range(draw)]
            sec = time.perf_counter() - t1
            sat = sum(re.fullmatch(regex, model.info.decode_bytes(o).decode("utf-8", "replace")) is not None
                      for o in outs)
            rows.append({"method": label, **scores(d), "mass_in_language": sum(d.values()), "satisfied": sat,
                         "samples": draw, "ms_per_sample": 1000 * sec / draw, "redos": dg.stats.redos,
                         "em_s": hmm.meta["seconds"]})
    return {"regex": regex, "sequences": len(pi), "strings": len(pi_s), "p_l": math.exp(exact.log_pl),
            "tv_masked": total_variation(pi, q), "samples": len(seqs), "tokens": sum(map(len, seqs)),
            "sample_seconds": sample_s, "rows": rows,
            "top_strings": sorted(pi_s.items(), key=lambda kv: -kv[1])[:5]}


def _loglik_per_token(lm, ids: list[int], eos: int) -> float:
    seq = list(ids) + [eos]
    return sum(float(lm.logprobs(seq[:i])[t]) for i, t in enumerate(seq)) / len(seq)


def _task_part(model, *, hidden: int, samples: int, seed: int, echo) -> dict:
    from ..compiler import compiler_for
    from ..engine.matcher import Matcher
    from ..runtime.sampling.decog import DecoG
    from ..runtime.sampling.hmm_distill import distill_hmm, sample_continuations
    from ..runtime.sampling.lm import ModelLM
    from ..runtime.sampling.sequence import sample_masked
    from ..runtime.sampling.token_dfa import token_dfa

    questions = [q for q, _ in TASK_QUESTIONS]
    t0 = time.perf_counter()
    hmm = distill_hmm(model, questions, hidden=hidden, samples_per_prompt=samples, max_tokens=32, seed=seed,
                      show_progress=False)
    echo(f"task: distilled H={hidden} on {len(questions)} questions x {samples} samples in "
         f"{time.perf_counter() - t0:.0f} s")
    grammar = compiler_for(model).compile_regex(TASK_FORMAT)
    t0 = time.perf_counter()
    dfa = token_dfa(grammar)
    dfa_s = time.perf_counter() - t0
    dg = DecoG(hmm, dfa, 40)
    eos = model.info.eos_ids[0]
    rng = np.random.default_rng(seed)
    res: dict[str, dict] = {m: {"compliant": 0, "correct": 0, "loglik": [], "seconds": 0.0, "examples": []}
                            for m in ("format in words", "masked", "decog")}
    for i, (question, gold) in enumerate(TASK_QUESTIONS):
        task_ids = model.encode(model.chat_prompt(question))
        lm = ModelLM(model, task_ids, temperature=1.0)
        t0 = time.perf_counter()
        words = sample_continuations(model, [question + TASK_IN_WORDS], samples_per_prompt=1, max_tokens=40,
                                     seed=seed + i)[0]
        words = [t for t in words if t != eos]
        res["format in words"]["seconds"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        masked = sample_masked(lm, Matcher(grammar), rng, max_tokens=40).token_ids
        res["masked"]["seconds"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        guided = dg.sample(lm, rng).token_ids
        res["decog"]["seconds"] += time.perf_counter() - t0
        for m, ids in (("format in words", words), ("masked", masked), ("decog", guided)):
            text = model.info.decode_bytes(ids).decode("utf-8", "replace")
            r = res[m]
            r["compliant"] += re.fullmatch(TASK_FORMAT, text) is not None
            r["correct"] += gold in text.lower()
            r["loglik"].append(_loglik_per_token(lm, ids, eos))
            if len(r["examples"]) < 4:
                r["examples"].append(text)
    n = len(TASK_QUESTIONS)
    rows = [{"method": m, "compliant": r["compliant"], "correct": r["correct"], "n": n,
             "loglik_per_token": float(np.mean(r["loglik"])), "s_per_output": r["seconds"] / n,
             "examples": r["examples"]} for m, r in res.items()]
    return {"format": TASK_FORMAT, "hidden": hidden, "dfa_states": dfa.n_states, "dfa_edges": dfa.n_edges,
            "dfa_seconds": dfa_s, "table_seconds": dg.table.seconds, "rows": rows}


def _speed_part(model, *, hidden_sizes, seed: int, echo, repeats: int = 20) -> dict:
    from ..compiler import compiler_for
    from ..runtime.sampling.decog import DecoG
    from ..runtime.sampling.hmm import fit_hmm
    from ..runtime.sampling.hmm_distill import sample_continuations
    from ..runtime.sampling.lm import ModelLM
    from ..runtime.sampling.token_dfa import token_dfa

    dfa = token_dfa(compiler_for(model).compile_regex(TASK_FORMAT))
    vocab = model.info.vocab_size
    # the state after "Answer: x": the free-text state with the most allowed tokens
    state = max(range(dfa.n_states), key=lambda s: len(dfa.tokens[s]))
    prompt = model.encode(model.chat_prompt(TASK_QUESTIONS[0][0]))
    lm = ModelLM(model, prompt)
    lm.logprobs([])
    t0 = time.perf_counter()
    for i in range(repeats):
        lm.logprobs([int(dfa.tokens[state][i])])  # a new prefix each time: one forward pass of one token
    forward_ms = 1000 * (time.perf_counter() - t0) / repeats
    lp = lm.logprobs([])
    seqs = sample_continuations(model, [q for q, _ in TASK_QUESTIONS[:4]], samples_per_prompt=32, max_tokens=24,
                                seed=seed)
    rows = []
    for h in hidden_sizes:
        hmm = random_hmm(h, vocab, seed, concentration=0.1)
        hmm.B = hmm.B.astype(np.float32)
        row: dict[str, Any] = {"hidden": h, "emission_mib": hmm.B.nbytes / 2**20, "forward_ms": forward_ms}
        a = hmm.forward_start()
        for label, kw in (("full", {}), ("top-16", {"top_k": 16}), ("top-4", {"top_k": 4})):
            if kw.get("top_k", 0) >= h:
                continue
            dg = DecoG(hmm, dfa, 40, **kw)
            row.setdefault("table_s", dg.table.seconds)
            dg.step_logprobs(a, state, 30, lp)
            t0 = time.perf_counter()
            for _ in range(repeats):
                dg.step_logprobs(a, state, 30, lp)
            row[f"step_ms_{label}"] = 1000 * (time.perf_counter() - t0) / repeats
        t0 = time.perf_counter()
        fit = fit_hmm(seqs, hidden=h, vocab_size=vocab, iterations=2, seed=seed, tol=0.0)
        row["em_s_per_iteration"] = (time.perf_counter() - t0) / max(1, fit.meta["iterations"])
        rows.append(row)
        echo(f"speed: H={h} {row}")
    return {"format": TASK_FORMAT, "state_tokens": int(len(dfa.tokens[state])), "em_tokens": sum(map(len, seqs)),
            "rows": rows}


def run_decog_bench(*, parts=("exact", "finite", "task", "speed"), hidden: int = 64, samples: int = 1024,
                    finite_hidden: Sequence[int] = (16, 64),
                    task_samples: int = 64, hidden_sizes=(32, 64, 128, 256), draw: int = 200, seed: int = 0,
                    out_dir: str | Path | None = None, echo: Callable[[str], None] = print) -> dict:
    out: dict[str, Any] = {"settings": {"hidden": hidden, "samples": samples, "task_samples": task_samples,
                                        "finite_hidden": list(finite_hidden),
                                        "hidden_sizes": list(hidden_sizes), "seed": seed}}
    if "exact" in parts:
        out["exact"] = exact_experiment(seed)
    if any(p in parts for p in ("finite", "task", "speed")):
        from ..models import load_model

        model = load_model()
        if "finite" in parts:
            out["finite"] = _finite_part(model, hidden_sizes=finite_hidden, samples=samples, seed=seed, draw=draw,
                                         echo=echo)
        if "task" in parts:
            out["task"] = _task_part(model, hidden=hidden, samples=task_samples, seed=seed, echo=echo)
        if "speed" in parts:
            out["speed"] = _speed_part(model, hidden_sizes=hidden_sizes, seed=seed, echo=echo)
    echo(format_decog_report(out))
    if out_dir is not None:
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        (d / "decog.json").write_text(json.dumps(out, indent=1, default=str))
        if "finite" in out:
            plot_finite(out["finite"], d / "decog-tv.png")
    return out


def plot_finite(part: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = part["rows"]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(6.5, 1.1 * len(rows)), 3.8))
    ax.bar(x - 0.2, [r["tv"] for r in rows], 0.4, label="TV over token sequences")
    ax.bar(x + 0.2, [r["tv_strings"] for r in rows], 0.4, label="TV over strings")
    ax.set_xticks(x, [r["method"] for r in rows], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("exact TV to pi = P(x | x in L)")
    ax.set_title(f"SmolLM2, {part['regex']}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def format_decog_report(out: dict) -> str:
    lines: list[str] = []
    if "exact" in out:
        e = out["exact"]
        lines += ["### Exact verification (H=3, V=4, T=4; the LM is the guiding HMM)", "",
                  f"- max |P_sampler(x) - P_HMM(x | format)| over 256 sequences: {e['max_abs_error']:.2e}",
                  f"- P_HMM(format): enumeration {e['p_alpha_enumerated']:.15f}, sum gamma*beta "
                  f"{e['p_alpha_table']:.15f}",
                  f"- uniform LM instead: TV {e['tv_uniform_lm']:.3f}, format satisfied by "
                  f"{e['uniform_satisfied']}/{e['uniform_samples']} samples", ""]
    if "finite" in out:
        f = out["finite"]
        lines += [f"### SmolLM2, `{f['regex']}` ({f['sequences']} token sequences of {f['strings']} strings, "
                  f"P(L) = {f['p_l']:.3g})", "",
                  f"HMMs fitted on {f['samples']} model samples ({f['tokens']} tokens, sampled in "
                  f"{f['sample_seconds']:.0f} s); every figure below is exact (products of step probabilities "
                  "over every sequence of L), sampled outputs only check the format.", "",
                  "| method | TV to pi (token sequences) | TV over strings | mass on pi's tokenization | in L "
                  "(sampled) | ms/sample (LM cached) |", "|---|---:|---:|---:|---:|---:|"]
        for r in f["rows"]:
            sat = f"{r['satisfied']}/{r['samples']}" if "satisfied" in r else ""
            ms = f"{r['ms_per_sample']:.1f}" if "ms_per_sample" in r else ""
            lines.append(f"| {r['method']} | {r['tv']:.4f} | {r['tv_strings']:.4f} | {r['canonical_mass']:.4f} | "
                         f"{sat} | {ms} |")
        lines.append("")
    if "task" in out:
        t = out["task"]
        lines += [f"### Task: short answers, format `{t['format']}` (token DFA: {t['dfa_states']} states, "
                  f"{t['dfa_edges']} edges, {t['dfa_seconds']:.1f} s; table {t['table_seconds']:.2f} s)", "",
                  "| method | format compliance | answer correct | log p/token | s/output | example |",
                  "|---|---:|---:|---:|---:|---|"]
        for r in t["rows"]:
            ex = r["examples"][0].replace("|", "\\|").replace("\n", " ")[:60] if r["examples"] else ""
            lines.append(f"| {r['method']} | {r['compliant']}/{r['n']} | {r['correct']}/{r['n']} | "
                         f"{r['loglik_per_token']:.2f} | {r['s_per_output']:.2f} | {ex} |")
        lines.append("")
    if "speed" in out:
        s = out["speed"]
        lines += [f"### Step cost (free-text state of `{s['format']}`: {s['state_tokens']:,} allowed tokens)", "",
                  "| H | emissions MiB | step ms, full | top-16 | top-4 | forward pass ms | table s | "
                  f"EM s/iteration ({s['em_tokens']:,} tokens) |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in s["rows"]:
            def g(k):
                return f"{r[k]:.2f}" if k in r else ""
            lines.append(f"| {r['hidden']} | {r['emission_mib']:.1f} | {g('step_ms_full')} | {g('step_ms_top-16')} | "
                         f"{g('step_ms_top-4')} | {r['forward_ms']:.1f} | {r['table_s']:.2f} | "
                         f"{r['em_s_per_iteration']:.2f} |")
        lines.append("")
    return "\n".join(lines)
