"""Dead ends with rollback off (``structgen bench dead-ends``): how often a walk that takes any token
the mask allows reaches a state where nothing is allowed before the output is complete.

A serving engine (vLLM) cannot take tokens back, so such a state ends the request with an error.
Walks draw uniformly from the Matcher's mask (EOS aside), steer towards the end after
``steer_after`` steps (the allowed token with the shortest completion of a few drawn) and stop at
``max_steps``.  Two corpora:

* ``maskbench``: MaskBench dev schemas whose grammar has checks at value boundaries and whose text
  names ``uniqueItems``, ``oneOf``, ``dependentSchemas``, ``dependencies``, ``not`` or ``contains``;
* ``unique``: arrays of short strings with ``uniqueItems`` (lengths 1-3, alphabets of 2, 3 and 26
  letters), the dead end the mask's lookahead was built for; tokens with a backslash are not drawn
  there (walks keep to one spelling per item).
* ``lengths``: MaskBench dev schemas with a string whose pattern or format is too large an automaton
  beside its length bounds, so that the mask counts the characters (``structgen.engine.char_bounds``);
  each walk runs twice from the same seed, with the counting and without it (the check at the
  closing quote alone, as before it existed), and both counts are reported.

* ``patterns``: the ``structgen bench regex`` family (``[ab]*a[ab]{n}`` ...) as JSON Schema ``pattern``s
  too large for an automaton -- a bare string, a required object member, array items -- whose
  strings the mask follows through a lazy DFA (``structgen.engine.lazy_patterns``); each walk runs
  twice, with the following and without it (the relaxed automaton and the check alone).

With ``sampler="model"`` the walks are the real model's: ``generate_json`` on the embedded SmolLM2
at temperature 1 (one seed per walk, JSON whitespace as a server allows it, 256 tokens) with the
decoding loop's rollback turned off (``structgen.runtime.loop.MAX_BACKTRACKS = 0`` while it runs),
so a dead end ends the request as it would inside vLLM; every output returned is validated again.
A request that stops with no token is replayed: if the Matcher allows tokens there, the budget guard
refused them all (the shortest completion it counts fails a check, the model having rambled until
the budget ran short) and it is counted apart from the dead ends.
"""
from __future__ import annotations

import contextlib
import json
import random
import time
from typing import Any

from .fuzz import mask_ids

__all__ = ["run_dead_ends", "format_dead_ends", "CHECK_KEYWORDS", "check_heavy_rows", "grammar_with_checks"]

CHECK_KEYWORDS = ("uniqueItems", "oneOf", "dependentSchemas", "dependencies", "not", "contains")


def _unique_schemas() -> list[tuple[str, Any]]:
    out = []
    for length in (1, 2, 3):
        for alphabet in ("ab", "abc", "a-z"):
            out.append((f"unique-{length}-[{alphabet}]", {
                "type": "array", "uniqueItems": True, "maxItems": 8,
                "items": {"type": "string", "minLength": length, "maxLength": length, "pattern": f"^[{alphabet}]*$"}}))
    return out


def check_heavy_rows(rng: random.Random, max_schema_chars: int | None = None) -> list[dict]:
    """MaskBench dev rows that name a keyword structgen may check at value boundaries (at most
    ``max_schema_chars`` of JSON when given), shuffled by ``rng``."""
    from .fuzz_cases import load_maskbench_rows
    from .maskbench import default_data_path

    rows = [r for r in load_maskbench_rows(default_data_path())
            if any(k in json.dumps(r["schema"]) for k in CHECK_KEYWORDS)
            and (max_schema_chars is None or len(json.dumps(r["schema"])) <= max_schema_chars)]
    rng.shuffle(rows)
    return rows


def _pattern_schemas() -> list[tuple[str, Any]]:
    from .regex_bench import DEFAULT_PATTERNS

    out = []
    for p in DEFAULT_PATTERNS:
        s = {"type": "string", "pattern": f"^(?:{p})$"}
        out += [(f"string {p}", s),
                (f"member {p}", {"type": "object", "properties": {"code": s, "n": {"type": "integer"}},
                                 "required": ["code"], "additionalProperties": False}),
                (f"items {p}", {"type": "array", "items": s, "minItems": 1, "maxItems": 3})]
    return out


#: corpus -> the grammar table whose use the corpus measures (each walk is replayed with it emptied)
_SWITCHED = {"lengths": "char_bounds", "patterns": "lazy_patterns"}
_WITHOUT = {"lengths": "without counting the characters (the check at the closing quote alone)",
            "patterns": "without following the patterns (their relaxed automata and the checks alone)"}


_OUTCOMES = (("done", "completed"), ("cut", "cut at max steps"), ("budget", "no token within budget"),
             ("refused", "refused"), ("invalid", "invalid"))


@contextlib.contextmanager
def _emptied(g, table: str):
    """``g`` without its ``table`` (``char_bounds``, ``lazy_patterns``) while the block runs."""
    saved = getattr(g, table)
    setattr(g, table, {})
    try:
        yield
    finally:
        setattr(g, table, saved)


def _length_rows(rng: random.Random) -> list[dict]:
    """MaskBench dev rows whose text names a length bound beside a pattern or format (shuffled)."""
    from .fuzz_cases import load_maskbench_rows
    from .maskbench import default_data_path

    rows = []
    for r in load_maskbench_rows(default_data_path()):
        text = json.dumps(r["schema"])
        if ("maxLength" in text or "minLength" in text) and ('"pattern"' in text or '"format"' in text):
            rows.append(r)
    rng.shuffle(rows)
    return rows


def grammar_with_checks(comp, schema):
    """``schema``'s grammar when it compiles (its first lexer too) and keeps checks at value
    boundaries, else None."""
    from ..engine.matcher import Matcher
    from ..errors import StructgenError

    try:
        g = comp.compile_json_schema(schema)
        Matcher(g)  # the first lexer is built here: one too large is refused like a compile
    except StructgenError:
        return None
    return g if g.checks else None


def _walk(m, info, eos: set, rng: random.Random, max_steps: int, steer_after: int, no_backslash: bool) -> str:
    """One walk: 'done' (EOS drawn or nothing but EOS left), 'dead' or 'cut' (max_steps)."""
    for step in range(max_steps):
        ids = [int(t) for t in mask_ids(m, info.vocab_size)]
        if not ids:
            return "dead"
        pool = [t for t in ids if t not in eos and not (no_backslash and b"\\" in info.token_bytes[t])]
        if not pool or len(pool) < len(ids) and rng.random() < 0.2:
            return "done"
        if step >= steer_after:
            best = None
            for t in rng.sample(pool, min(6, len(pool))):
                m.accept_token(t)
                need = m.min_completion_bytes()
                m.rollback(1)
                if best is None or need < best[0]:
                    best = (need, t)
            t = best[1]
        else:
            t = rng.choice(pool)
        if not m.accept_token(t):
            raise AssertionError(f"token {t} allowed by the mask but refused after {m.output_bytes()[-80:]!r}")
    return "cut"


@contextlib.contextmanager
def _rollback_off():
    from ..runtime import loop

    saved = loop.MAX_BACKTRACKS
    loop.MAX_BACKTRACKS = 0
    try:
        yield
    finally:
        loop.MAX_BACKTRACKS = saved


def _generate(model, schema, seed: int, max_tokens: int) -> tuple[str, str]:
    """(outcome, text): one ``generate_json`` at temperature 1 with rollback off."""
    import jsonschema

    from ..api import generate_json
    from ..errors import GenerationError

    try:
        with _rollback_off():
            value = generate_json(model, schema, temperature=1.0, seed=seed, whitespace="flexible",
                                  max_tokens=max_tokens, timeout=120)
    except GenerationError as e:
        how = {"no_token": "dead", "max_tokens": "cut", "budget": "refused", "context": "refused"}.get(e.reason, e.reason)
        if how == "dead" and _tokens_left(model, schema, e.partial or ""):
            how = "budget"  # tokens were allowed, none whose shortest completion fits what is left of max_tokens
        return how, (e.partial or "")[-120:]
    cls = jsonschema.validators.validator_for(schema)
    if not cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(value):
        return "invalid", json.dumps(value)[-120:]
    return "done", ""


def _tokens_left(model, schema, partial: str) -> bool:
    """The Matcher allows a token after ``partial``: the loop found none because the budget guard
    refused them all (a check refuses the shortest completion it counted), not a dead end."""
    from ..api import compiler_for
    from ..engine.matcher import Matcher

    m = Matcher(compiler_for(model).compile_json_schema(schema, whitespace="flexible"))
    return m.accept_string(partial) and bool(m.next_token_mask().any())


def run_dead_ends(*, corpus: str = "maskbench", schemas: int = 40, walks: int = 4, seed: int = 0,
                  max_steps: int = 400, steer_after: int = 60, tokenizer: str = "smollm2",
                  sampler: str = "uniform", max_tokens: int = 256, max_schema_chars: int = 3000) -> dict:
    """Walk ``walks`` times over each of ``schemas`` schemas of ``corpus``; counts and the dead ends.
    ``sampler``: ``"uniform"`` (random walks over the mask) or ``"model"`` (SmolLM2 at temperature 1;
    schemas whose JSON is over ``max_schema_chars`` are skipped there, the prompt carrying the schema)."""
    from tqdm import tqdm

    from ..compiler import GrammarCompiler
    from ..engine.matcher import Matcher
    from ..tokenizer import load_tokenizer_info

    if sampler not in ("uniform", "model"):
        raise ValueError(f"sampler must be 'uniform' or 'model', not {sampler!r}")
    model = None
    if sampler == "model":
        from ..api import compiler_for
        from ..models import load_model

        model = load_model()
    rng = random.Random(seed)
    info = load_tokenizer_info(tokenizer)
    eos = set(info.eos_ids)
    comp = GrammarCompiler(info, cache_size=4, compile_timeout=20)
    if corpus not in ("maskbench", "unique", "lengths", "patterns"):
        raise ValueError(f"corpus must be 'maskbench', 'unique', 'lengths' or 'patterns', not {corpus!r}")
    switched = _SWITCHED.get(corpus)
    if corpus == "unique":
        pool = _unique_schemas()
    elif corpus == "patterns":
        pool = _pattern_schemas()
    else:
        pool = [(r["id"], r["schema"]) for r in (_length_rows(rng) if corpus == "lengths" else check_heavy_rows(rng))]
    counts = {"schemas": 0, "walks": 0, "done": 0, "cut": 0, "budget": 0, "dead": 0, "refused": 0, "invalid": 0,
              "other": 0}
    without: dict[str, int] = {}  # outcomes of the same walks with the switched table emptied
    dead: list[dict] = []
    t0 = time.perf_counter()
    bar = tqdm(total=min(schemas, len(pool)), desc=f"dead-ends {corpus}", unit="schema")
    for sid, schema in pool:
        if counts["schemas"] >= schemas:
            break
        if model is not None and len(json.dumps(schema)) > max_schema_chars:
            continue  # the prompt carries the schema: keep prefills short
        g = grammar_with_checks(comp, schema)
        if g is None or switched and not getattr(g, switched):
            continue
        counts["schemas"] += 1
        bar.update(1)
        for w in range(walks):
            if model is not None:
                if switched:  # the same request without the table first: what it prevents
                    g_served = compiler_for(model).compile_json_schema(schema, whitespace="flexible")
                    with _emptied(g_served, switched):
                        how, _ = _generate(model, schema, seed * 1000 + w, max_tokens)
                    without[how] = without.get(how, 0) + 1
                how, tail = _generate(model, schema, seed * 1000 + w, max_tokens)
            else:
                if switched:  # the same walk without the table first: what it prevents
                    walk_seed = rng.random()
                    with _emptied(g, switched):
                        how = _walk(Matcher(g), info, eos, random.Random(walk_seed), max_steps, steer_after, False)
                    without[how] = without.get(how, 0) + 1
                    walk_rng = random.Random(walk_seed)
                else:
                    walk_rng = rng
                m = Matcher(g)
                how = _walk(m, info, eos, walk_rng, max_steps, steer_after, corpus == "unique")
                tail = m.output_bytes()[-120:].decode("utf-8", "replace")
            counts["walks"] += 1
            counts[how if how in counts else "other"] += 1
            if how in ("dead", "invalid", "other") or how not in counts:
                dead.append({"schema": sid, "outcome": how, "tail": tail})
    bar.close()
    return {"corpus": corpus, "seed": seed, "sampler": sampler, **counts, "seconds": time.perf_counter() - t0,
            "dead_ends": dead, **({"without": without} if switched else {})}


def format_dead_ends(res: dict) -> str:
    lines = ["| corpus | sampler | schemas | walks | completed | cut at max steps | no token within budget | "
             "refused (budget, context) | invalid | other errors | dead ends |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
             f"| {res['corpus']} (seed {res['seed']}) | {res['sampler']} | {res['schemas']} | {res['walks']} | "
             f"{res['done']} | {res['cut']} | {res['budget']} | {res['refused']} | {res['invalid']} | {res['other']} | "
             f"**{res['dead']}** |"]
    if "without" in res:
        w = res["without"]
        lines.append(f"\nThe same walks {_WITHOUT[res['corpus']]}: " + ", ".join(
            f"{w.get(k, 0)} {what}" for k, what in _OUTCOMES) + f", **{w.get('dead', 0)}** dead ends.")
    for d in res["dead_ends"][:12]:
        lines.append(f"- {d['schema']} ({d['outcome']}): ...{d['tail']!r}")
    return "\n".join(lines)
