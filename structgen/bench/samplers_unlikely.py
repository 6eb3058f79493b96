"""``structgen bench samplers --parts unlikely``: the samplers where the constraint is unlikely.

A seeded generator draws small languages the model, given a prompt about something else, would
rarely write: pairs of uncommon colour and animal words (``(amber|cobalt) (otter|heron)``) and a
JSON object with one enum member (``{"mineral":"basalt"}``).  For each, the exact target (the
model's distribution over canonical tokenizations restricted to the language, by enumeration) and
``P(L)``; a language the model finds likelier than ``MAX_P_L`` is skipped and counted, never
tuned.  Then TV to the target against samples and seconds for masking, ASAp, AWRS, SMC, twisted
SMC (with a quarter of SMC's particles; its twist an HMM distilled from the model's continuations
of the language's prefixes, ``distill_twist_hmm``) and Deco-G (the same HMM as its guide).
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

__all__ = ["UnlikelyCase", "unlikely_cases", "run_unlikely_part", "plot_unlikely", "UNLIKELY_METHODS", "MAX_P_L"]

MAX_P_L = 1e-3
UNLIKELY_METHODS = ("masked", "asap", "awrs", "smc", "twisted-smc", "decog")
PROMPTS = ("Write a haiku about the sea.", "What is the capital of France?", "Explain photosynthesis in one sentence.",
           "List three prime numbers.", "Translate 'good morning' into Spanish.", "How many legs does a spider have?",
           "Give me one tip for learning to cook.", "Who wrote Romeo and Juliet?", "What year did World War II end?",
           "Describe the taste of lemon.")
ADJECTIVES = ("amber", "cobalt", "crimson", "ivory", "olive", "silver", "violet", "scarlet", "golden", "azure",
              "copper", "jade", "maroon", "teal", "ochre")
ANIMALS = ("otter", "falcon", "badger", "heron", "lynx", "walrus", "gecko", "bison", "raven", "moose", "squid",
           "yak", "ferret", "lemur", "newt")
ENUM_KEYS = ("mineral", "rock", "stone")
MINERALS = ("quartz", "basalt", "granite", "marble", "slate", "obsidian", "pumice", "shale", "jasper", "flint")


@dataclass
class UnlikelyCase:
    """One language: a regex or a JSON Schema, the unrelated prompt, the token budget."""

    name: str
    prompt: str
    max_tokens: int
    regex: str | None = None
    schema: dict | None = None

    def compile(self, model):
        from ..compiler import compiler_for

        c = compiler_for(model)
        if self.regex is not None:
            return c.compile_regex(self.regex)
        return c.compile_json_schema(self.schema, whitespace="compact")


def unlikely_cases(seed: int, count: int) -> list[UnlikelyCase]:
    """``count`` languages drawn from ``seed`` (pairs and enums alternating)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        prompt = rng.choice(PROMPTS)
        if i % 2 == 0:
            a, b = rng.sample(ADJECTIVES, 2), rng.sample(ANIMALS, 2)
            out.append(UnlikelyCase(f"pair-{seed}-{i}", prompt, 8, regex=f"({a[0]}|{a[1]}) ({b[0]}|{b[1]})"))
        else:
            key, values = rng.choice(ENUM_KEYS), rng.sample(MINERALS, 3)
            schema = {"type": "object", "properties": {key: {"enum": values}}, "required": [key],
                      "additionalProperties": False}
            out.append(UnlikelyCase(f"enum-{seed}-{i}", prompt, 12, schema=schema))
    return out


def run_unlikely_part(model, *, seed: int, count: int, samples: int, particles: int, canonical: bool = True,
                      methods: tuple[str, ...] = UNLIKELY_METHODS, echo: Callable[[str], None] = print) -> dict:
    """Every case of ``unlikely_cases(seed, count)`` with ``P(L) < MAX_P_L``: exact target, then the
    samplers' TV curves (``samples`` each; SMC ``particles``, twisted SMC a quarter of them)."""
    from ..engine.matcher import Matcher
    from ..runtime.sampling.canonical import resolve_canonical, with_canonical
    from ..runtime.sampling.decog import DecoG
    from ..runtime.sampling.exact import enumerate_target, total_variation
    from ..runtime.sampling.hmm_distill import distill_twist_hmm
    from ..runtime.sampling.lm import ModelLM
    from ..runtime.sampling.token_dfa import token_dfa
    from .tv_curves import _noise_floor, tv_curve

    filt = resolve_canonical(canonical, model=model)
    res: dict[str, Any] = {"seed": seed, "count": count, "samples": samples, "particles": particles,
                           "max_p_l": MAX_P_L, "cases": [], "skipped": []}
    for case in unlikely_cases(seed, count):
        grammar = case.compile(model)
        prompt_ids = model.encode(model.chat_prompt(case.prompt))
        m = with_canonical(Matcher(grammar), filt)
        t0 = time.perf_counter()
        exact = enumerate_target(ModelLM(model, prompt_ids, temperature=1.0), m, max_tokens=case.max_tokens)
        enum_s = time.perf_counter() - t0
        p_l = math.exp(exact.log_pl)
        if p_l >= MAX_P_L:
            res["skipped"].append({"case": case.name, "p_l": p_l})
            echo(f"  {case.name}: P(L) = {p_l:.2g} >= {MAX_P_L:g}, skipped")
            continue
        pi = exact.global_target()
        t0 = time.perf_counter()
        hmm = distill_twist_hmm(ModelLM(model, prompt_ids, temperature=1.0), m, model.info.vocab_size,
                                max_tokens=case.max_tokens, seed=seed, tokenizer=model.info.name)
        twist = DecoG(hmm, token_dfa(grammar), case.max_tokens)
        hmm_s = time.perf_counter() - t0
        rows = []
        for meth in methods:
            k = max(1, particles // 4) if meth == "twisted-smc" else particles
            echo(f"  {case.name}: {meth} ...")
            rows.append(tv_curve(meth, ModelLM(model, prompt_ids, temperature=1.0), m, pi, n=samples,
                                 max_tokens=case.max_tokens, seed=seed, particles=k, twist=twist))
        strings: dict[str, float] = {}
        for x, v in pi.items():
            s = model.info.decode_bytes(list(x)).decode("utf-8", errors="replace")
            strings[s] = strings.get(s, 0.0) + v
        q = exact.local_target()
        # the effective sample share any sampler with masking's proposal (AWRS) can reach: 1 / E_q[(pi/q)^2]
        chi = sum(v * v / q[x] for x, v in pi.items() if q.get(x, 0.0) > 0)
        item = {"local_proposal_ess_share": (1.0 / chi) if chi > 0 and all(q.get(x, 0.0) > 0 for x in pi) else 0.0,
                "case": case.name, "prompt": case.prompt, "constraint": case.regex or case.schema,
                "max_tokens": case.max_tokens, "sequences": len(pi), "p_l": p_l, "enumerate_s": enum_s,
                "tv_q_pi": total_variation(pi, exact.local_target()), "floor": _noise_floor(pi, samples),
                "hmm_hidden": hmm.hidden, "hmm_heldout": hmm.meta.get("heldout_by_hidden"), "hmm_s": hmm_s,
                "strings": sorted(strings.items(), key=lambda kv: -kv[1]), "rows": rows}
        res["cases"].append(item)
        echo(format_unlikely_case(item))
    return res


def format_unlikely_case(item: dict) -> str:
    c = item["constraint"]
    shown = c if isinstance(c, str) else f"enum {list(c['properties'].values())[0]['enum']}"
    lines = [f"#### `{shown}` after \"{item['prompt']}\"", "",
             f"P(L) = {item['p_l']:.3g}, {item['sequences']} canonical sequences; masking's exact bias TV(q, pi) = "
             f"{item['tv_q_pi']:.3f}; noise floor of {item['rows'][0]['curve'][-1][0]} exact draws "
             f"{item['floor']:.4f}; twist HMM H = {item['hmm_hidden']} (held-out best), distilled in "
             f"{item['hmm_s']:.1f} s; the ESS share a local proposal (AWRS) can reach, 1 / E_q[(pi/q)^2]: "
             f"{item['local_proposal_ess_share']:.1%}", "",
             "| method | particles | final TV | seconds | ESS |", "|---|---:|---:|---:|---:|"]
    for r in item["rows"]:
        ess = r.get("ess")
        if ess is None:
            ess_s = ""
        elif r["method"] == "awrs":
            ess_s = f"{ess:.0f} of {r['curve'][-1][0]} ({ess / max(1, r['curve'][-1][0]):.0%})"
        else:
            ess_s = f"{ess:.1f} of {r['particles']} per run"
        lines.append(f"| {r['method']} | {r.get('particles') or ''} | {r['curve'][-1][1]:.4f} | {r['seconds']:.1f} | "
                     f"{ess_s} |")
    return "\n".join(lines) + "\n"


def plot_unlikely(part: dict, path: Path) -> None:
    """TV to the exact target against seconds, one panel per unlikely language."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = part["cases"]
    fig, axes = plt.subplots(1, len(cases), figsize=(5 * len(cases), 4.2), squeeze=False)
    for ax, item in zip(axes[0], cases):
        for r in item["rows"]:
            xs, ys = tv_at_seconds(r)
            label = r["method"] + (f" ({r['particles']} particles)" if r.get("particles") else "")
            ax.plot(np.maximum(xs, 1e-3), np.maximum(ys, 1e-4), marker="o", label=label)
        ax.axhline(item["tv_q_pi"], color="grey", linestyle=":", label="masking's exact bias")
        ax.axhline(0.02, color="red", linestyle="--", linewidth=0.8, label="TV 0.02")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("seconds")
        ax.set_ylabel("TV to the exact target")
        ax.set_title(f"{item['case']}: P(L) = {item['p_l']:.2g}", fontsize=9)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def tv_at_seconds(row: dict) -> tuple[np.ndarray, np.ndarray]:
    """(seconds, TV) at the row's checkpoints, for the TV-against-time plot."""
    return np.asarray(row["curve_seconds"]), np.asarray([v for _, v in row["curve"]])
