"""``structgen bench samplers``: how close each sampler comes to the exact target, at what cost.

Three parts, one run:

1. **Toy** (the exact harness of ``docs/algorithms.md`` section 0): TV to the global target
   ``pi`` against the number of samples for masked, ASAp, AWRS and SMC; time, forward passes
   and constraint checks per sample.
2. **SmolLM2, finite language** (a regex of colour-animal pairs, every tokenization): the exact
   ``pi`` and masking's exact target ``q`` by enumeration, then TV of each sampler's samples.
3. **SmolLM2 on JSONSchemaBench schemas**: one output per schema and method; the model's
   log-likelihood of the outputs (correct samplers should not produce the low-likelihood outputs
   masking does), validity, and AWRS's constraint checks per token against a full mask (one check
   per vocabulary token).
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..runtime.sampling.canonical import resolve_canonical, with_canonical
from ..runtime.sampling.exact import enumerate_target, total_variation
from .tv_curves import _noise_floor, tv_curve

__all__ = ["run_samplers_bench", "toy_problem", "tv_curve"]

TOY_LANGUAGE = ("10111 10001 10010 11001 10011 11110 10101 11111 11101 00000 11100 11010 10110 10000 11011 "
                "10100 11000").split()
REAL_REGEX = r"(red|blue|green|black|white) (cat|dog|fox)"
REAL_PROMPT = "Name a colour and an animal, like 'brown bear'. Answer with the two words only."
METHODS = ("masked", "asap", "awrs", "smc")


def toy_problem():
    """(LM, compiled grammar, tokenizer info) of the harness's toy problem."""
    from ..compiler import GrammarCompiler
    from ..runtime.sampling.lm import HashLM
    from ..tokenizer import TokenizerInfo

    info = TokenizerInfo(token_bytes=[b"0", b"1", b"00", b"11", b""], vocab_size=5, special_ids=frozenset({4}),
                         eos_ids=(4,), name="toy-binary")
    grammar = GrammarCompiler(info).compile_regex("|".join(TOY_LANGUAGE))
    return HashLM(5, (4,), seed=0, scale=1.0, bias={0: 1.0}), grammar, info


def _model_loglik(model, prompt_ids: list[int], ids: list[int]) -> float:
    """log P(output, EOS | prompt) under the model at temperature 1 (one forward pass)."""
    import torch

    eos = model.info.eos_ids[0]
    full = torch.tensor([prompt_ids + ids + [eos]], dtype=torch.long)
    with torch.no_grad():
        logits = model.hf_model(input_ids=full, use_cache=False).logits[0].double()
    lp = torch.log_softmax(logits[:, : model.info.vocab_size], dim=-1)
    n = len(prompt_ids)
    return float(sum(lp[n - 1 + i, t] for i, t in enumerate(ids + [eos])))


def run_samplers_bench(*, toy_samples: int = 20000, real_samples: int = 2000, jsb_schemas: int = 6,
                       particles: int = 16, real_particles: int = 8, seed: int = 0, out_dir: str | Path | None = None,
                       parts: tuple[str, ...] = ("toy", "real", "jsb"), echo: Callable[[str], None] = print,
                       canonical: bool = True, unlikely_count: int = 4, unlikely_samples: int = 4000,
                       unlikely_particles: int = 16, unlikely_seed: int | None = None) -> dict:
    """The three parts; ``canonical`` (SmolLM2 parts): the samplers and the exact target over
    canonical tokenizations (False: every tokenization)."""
    from ..engine.matcher import Matcher

    out: dict[str, Any] = {"settings": {"toy_samples": toy_samples, "real_samples": real_samples,
                                        "jsb_schemas": jsb_schemas, "particles": particles,
                                        "real_particles": real_particles, "seed": seed,
                                        "canonical": canonical}}
    if "toy" in parts:
        lm, grammar, _ = toy_problem()
        m = Matcher(grammar)
        exact = enumerate_target(lm, m, max_tokens=8)
        pi, q = exact.global_target(), exact.local_target()
        rows = [tv_curve(meth, lm, m, pi, n=toy_samples, max_tokens=8, seed=seed, particles=particles,
                         progress=None) for meth in METHODS]
        out["toy"] = {"sequences": len(pi), "p_l": math.exp(exact.log_pl), "tv_q_pi": total_variation(pi, q),
                      "floor": _noise_floor(pi, toy_samples), "rows": rows}
        echo(format_part("Toy (exact harness)", out["toy"]))
    if "real" in parts or "jsb" in parts or "unlikely" in parts:
        from ..compiler import compiler_for
        from ..models import load_model

        model = load_model()
    if "real" in parts:
        from ..runtime.sampling.lm import ModelLM

        grammar = compiler_for(model).compile_regex(REAL_REGEX)
        prompt_ids = model.encode(model.chat_prompt(REAL_PROMPT))
        lm = ModelLM(model, prompt_ids, temperature=1.0)
        m = with_canonical(Matcher(grammar), resolve_canonical(canonical, model=model))
        t0 = time.perf_counter()
        exact = enumerate_target(lm, m, max_tokens=16)
        enum_s = time.perf_counter() - t0
        pi, q = exact.global_target(), exact.local_target()
        # each sampler gets an LM view of its own: the enumeration's remembered prefixes would
        # otherwise make every sampler's forward passes free
        rows = [tv_curve(meth, ModelLM(model, prompt_ids, temperature=1.0), m, pi, n=real_samples, max_tokens=16,
                         seed=seed, particles=real_particles, progress=None) for meth in METHODS]
        strings = {}
        for x, v in pi.items():
            s = model.info.decode_bytes(list(x)).decode()
            strings[s] = strings.get(s, 0.0) + v
        out["real"] = {"regex": REAL_REGEX, "sequences": len(pi), "strings": len(strings), "p_l": math.exp(exact.log_pl),
                       "tv_q_pi": total_variation(pi, q), "enumerate_s": enum_s, "nodes": exact.nodes,
                       "floor": _noise_floor(pi, real_samples), "rows": rows,
                       "top_strings": sorted(strings.items(), key=lambda kv: -kv[1])[:5]}
        echo(format_part(f"SmolLM2, `{REAL_REGEX}`", out["real"]))
    if "jsb" in parts:
        out["jsb"] = _jsb_part(model, jsb_schemas, seed, real_particles, echo, canonical=canonical)
    if "unlikely" in parts:
        from .samplers_unlikely import run_unlikely_part

        echo("### SmolLM2 on unlikely languages (prompts about something else)\n")
        out["unlikely"] = run_unlikely_part(model, seed=seed if unlikely_seed is None else unlikely_seed,
                                            count=unlikely_count, samples=unlikely_samples,
                                            particles=unlikely_particles, canonical=canonical, echo=echo)
    if out_dir is not None:
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        (d / "samplers.json").write_text(json.dumps(out, indent=1, default=str))
        plot_curves(out, d / "samplers-tv.png")
        if out.get("unlikely", {}).get("cases"):
            from .samplers_unlikely import plot_unlikely

            plot_unlikely(out["unlikely"], d / "samplers-unlikely-tv.png")
    return out


def _jsb_part(model, n_schemas: int, seed: int, particles: int, echo, max_tokens: int = 160,
              canonical: bool = True) -> dict:
    import jsonschema

    from ..compiler import compiler_for
    from ..runtime.prompts import schema_prompt
    from ..runtime.sampling.draw import draw_one, draw_samples
    from ..runtime.sampling.lm import ModelLM
    from .jsonschemabench import load_jsonschemabench, sample_cases

    cases = sample_cases(load_jsonschemabench(), per_dataset=1, seed=seed)
    rows = {meth: {"loglik": [], "per_token": [], "valid": 0, "n": 0, "none": 0, "checks": 0, "tokens": 0,
                   "seconds": 0.0} for meth in METHODS}
    used = 0
    for case in cases:
        if used >= n_schemas:
            break
        schema = case["schema"]
        try:
            g = compiler_for(model).compile_json_schema(schema, whitespace="compact")
        except Exception:  # noqa: BLE001 - a schema structgen refuses: skipped here, MaskBench reports it
            continue
        prompt_ids = model.encode(model.chat_prompt(schema_prompt(schema)))
        if len(prompt_ids) > 1024:
            continue
        used += 1
        for meth in METHODS:
            lm = ModelLM(model, prompt_ids, temperature=1.0)
            t0 = time.perf_counter()
            try:
                samples = draw_samples(lm, g, model.info, n=1, method=meth, particles=particles,
                                       max_tokens=max_tokens, seed=seed, canonical=canonical)
                s = draw_one(samples, seed)
            except Exception:  # noqa: BLE001 - no output within the budget (every particle died, dead ends)
                rows[meth]["n"] += 1
                rows[meth]["none"] += 1
                rows[meth]["seconds"] += time.perf_counter() - t0
                continue
            r = rows[meth]
            r["seconds"] += time.perf_counter() - t0
            r["n"] += 1
            r["checks"] += s.checks * (particles if meth == "smc" else 1)
            r["tokens"] += (len(s.token_ids) + 1) * (particles if meth == "smc" else 1)
            try:
                r["valid"] += jsonschema.Draft202012Validator(schema).is_valid(json.loads(s.text))
            except Exception:  # noqa: BLE001
                pass
            ll = _model_loglik(model, prompt_ids, s.token_ids)
            r["loglik"].append(ll)
            r["per_token"].append(ll / (len(s.token_ids) + 1))
        echo(f"  schema {used}/{n_schemas} ({case.get('dataset', '?')}) done")
    vocab = model.info.vocab_size
    res = {"schemas": used, "vocab": vocab, "rows": []}
    for meth, r in rows.items():
        res["rows"].append({"method": meth, "n": r["n"], "valid": r["valid"], "no_output": r["none"],
                            "mean_loglik": float(np.mean(r["loglik"])) if r["loglik"] else None,
                            "mean_loglik_per_token": float(np.mean(r["per_token"])) if r["per_token"] else None,
                            "checks_per_token": r["checks"] / max(1, r["tokens"]) if meth != "asap" else None,
                            "full_mask_checks": vocab, "seconds": r["seconds"]})
    echo(format_jsb(res))
    return res


def format_part(title: str, part: dict) -> str:
    lines = [f"### {title}", "",
             f"{part['sequences']} token sequences, P(L) = {part['p_l']:.4g}, masking's exact bias TV(q, pi) = "
             f"{part['tv_q_pi']:.3f}; noise floor of as many exact draws: {part['floor']:.4f}", "",
             "| method | TV to pi at checkpoints (samples: TV) | final TV | ms/sample | ms/token | LM calls/sample "
             "| checks/token | ESS |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in part["rows"]:
        pts = ", ".join(f"{k}: {v:.3f}" for k, v in r["curve"][:-1])
        final = r["curve"][-1][1]
        extra = f" (next-sample, exact: {r['exact_curve'][-1][1]:.4f})" if r["exact_curve"] else ""
        chk = f"{r['checks_per_token']:.1f}" if r["checks_per_token"] is not None else ""
        ess = r.get("ess")
        ess_s = "" if ess is None else (f"{ess:.1f} of {r['curve'][-1][0]}" if r["method"] == "awrs"
                                        else f"{ess:.1f} of {r.get('particles')} per run")
        lines.append(f"| {r['method']} | {pts} | {final:.4f}{extra} | {r['ms_per_sample']:.2f} | "
                     f"{r['ms_per_token']:.3f} | {r['forward_passes_per_sample']:.2f} | {chk} | {ess_s} |")
    return "\n".join(lines) + "\n"


def format_jsb(res: dict) -> str:
    lines = [f"### SmolLM2 on {res['schemas']} JSONSchemaBench schemas (T = 1, one output per schema and method)",
             "", "| method | valid | no output in budget | mean log P(output) | per token | checks/token (full "
             f"mask: {res['vocab']:,}) | s |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        ll = f"{r['mean_loglik']:.1f}" if r["mean_loglik"] is not None else ""
        pt = f"{r['mean_loglik_per_token']:.2f}" if r["mean_loglik_per_token"] is not None else ""
        chk = f"{r['checks_per_token']:.1f}" if r["checks_per_token"] is not None else ""
        lines.append(f"| {r['method']} | {r['valid']}/{r['n']} | {r['no_output']} | {ll} | {pt} | {chk} | "
                     f"{r['seconds']:.1f} |")
    return "\n".join(lines) + "\n"


def plot_curves(out: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parts = [k for k in ("toy", "real") if k in out]
    if not parts:
        return
    fig, axes = plt.subplots(1, len(parts), figsize=(6 * len(parts), 4.2), squeeze=False)
    for ax, key in zip(axes[0], parts):
        part = out[key]
        for r in part["rows"]:
            xs, ys = zip(*r["curve"])
            ax.plot(xs, ys, marker="o", label=r["method"])
            if r["exact_curve"]:
                xs, ys = zip(*r["exact_curve"])
                ax.plot(xs, ys, linestyle="--", label="asap (next sample, exact)")
        ax.axhline(part["tv_q_pi"], color="grey", linestyle=":", label="masking's exact bias")
        ax.axhline(part["floor"], color="black", linestyle="-.", linewidth=0.8,
                   label=f"noise floor of {part['rows'][0]['curve'][-1][0]} exact draws")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(bottom=1e-4)
        ax.set_xlabel("samples")
        ax.set_ylabel("TV to the exact target")
        ax.set_title("toy harness" if key == "toy" else f"SmolLM2: {part['regex']}")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

