"""The decoding runtime's seams and shared pieces: Decoding (streaming, feed/rollback, optional
constraints, deadlines), the sampler interface, the budget guard and chat prompt rendering."""
from __future__ import annotations

import time

import jsonschema
import pytest
import torch

from structgen.compiler import GrammarCompiler
from structgen.engine.matcher import Matcher
from structgen.errors import GenerationError
from structgen.runtime import BudgetGuard, Decoding, generate_constrained, render_chat, user_prompt
from structgen.runtime.sampling import MaskedSampler, NoTokenAllowed, Sampler, StepContext

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}},
          "required": ["n", "ok"]}


@pytest.fixture(scope="module")
def grammar(smol_info):
    return GrammarCompiler(smol_info).compile_json_schema(SCHEMA, whitespace="compact")


@pytest.fixture()
def prompt(tiny_model):
    return tiny_model.encode(tiny_model.chat_prompt("Give a number."))


def test_decoding_streams_the_tokens_generate_constrained_returns(tiny_model, prompt, grammar):
    m = Matcher(grammar)
    d = Decoding(tiny_model, prompt, m, max_tokens=40, budget_guard=BudgetGuard(m))
    streamed = list(d)
    m2 = Matcher(grammar)
    ref = generate_constrained(tiny_model, prompt, m2, max_tokens=40, budget_guard=BudgetGuard(m2))
    assert streamed == ref.token_ids and d.finish_reason == ref.finish_reason
    jsonschema.validate(__import__("json").loads(d.result().text), SCHEMA)


def test_feed_several_tokens_equals_one_at_a_time(tiny_model, prompt):
    """The speculative seam: one forward pass over k tokens gives the k rows of logits that k
    single-token passes give, and rollback restores the logits of an earlier position."""
    d = Decoding(tiny_model, prompt, None, max_tokens=8)
    steps = d._steps()  # the step generator itself: nothing streamed yet, so anything may be taken back
    for _ in range(3):
        next(steps)
    first = list(d.tokens)
    assert len(first) == 3
    one_by_one = Decoding(tiny_model, prompt, None, max_tokens=8)
    one_by_one._kv.forward(prompt)
    rows = [one_by_one.feed([t])[-1] for t in first]
    batch = Decoding(tiny_model, prompt, None, max_tokens=8)
    batch._kv.forward(prompt)
    together = batch.feed(first)
    assert together.shape[0] == 3
    for a, b in zip(rows, together):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    again = d.rollback(2)  # back to right after the first token
    assert d.tokens == first[:1]
    torch.testing.assert_close(again, rows[0], rtol=1e-4, atol=1e-4)
    streamed = Decoding(tiny_model, prompt, None, max_tokens=8)
    next(iter(streamed))
    with pytest.raises(ValueError, match="already streamed"):
        streamed.rollback(1)  # a token the caller has seen is never taken back


def test_optional_constraint_follows_the_first_token(tiny_model, prompt, grammar):
    """LangChain's auto tool mode: the constraint holds only if the first token enters it."""
    m0 = Matcher(grammar)
    first = generate_constrained(tiny_model, prompt, m0, max_tokens=40, budget_guard=BudgetGuard(m0)).token_ids[0]

    class Forced:
        """Greedy, except that the first token is chosen by the test."""
        needs_mask, log_weight = True, 0.0

        def __init__(self, token):
            self.token, self.inner = token, MaskedSampler()

        def reset(self):
            pass

        def sample(self, logits, context):
            return self.token if context.step == 0 else self.inner.sample(logits, context)

    m = Matcher(grammar)
    entered = Decoding(tiny_model, prompt, m, max_tokens=40, sampler=Forced(first), optional=True,
                       budget_guard=BudgetGuard(m))
    assert list(entered) and entered.matcher is not None and entered.finish_reason in ("eos", "terminated")
    free_token = tiny_model.encode("Hello")[0]
    free = Decoding(tiny_model, prompt, Matcher(grammar), max_tokens=5, sampler=Forced(free_token), optional=True)
    out = list(free)
    assert out[0] == free_token and free.matcher is None and free.finish_reason in ("eos", "length")


def test_a_deadline_raises_a_generation_error_that_says_timeout(tiny_model, prompt, grammar):
    d = Decoding(tiny_model, prompt, Matcher(grammar), max_tokens=40, deadline=time.monotonic() - 1)
    with pytest.raises(GenerationError, match="timeout") as e:
        list(d)
    assert e.value.reason == "timeout"


class CountingSampler(MaskedSampler):
    """Greedy, counting its draws per step (a step starts where the output grows)."""

    def __init__(self):
        super().__init__()
        self.draws: dict[int, int] = {}

    def sample(self, logits, context=None):
        self.draws[context.step] = self.draws.get(context.step, 0) + 1
        return super().sample(logits, context)


def test_a_tight_budget_costs_a_bounded_number_of_draws(tiny_model, prompt, smol_info):
    """At the last tokens of a long string nearly every token is one the budget guard refuses: after
    GUARD_SWEEP_AFTER refusals one pass masks the rest, so a step never draws once per token."""
    from structgen.runtime.loop import GUARD_SWEEP_AFTER

    g = GrammarCompiler(smol_info).compile_json_schema({"type": "string", "minLength": 6})
    m = Matcher(g)
    sampler = CountingSampler()
    d = Decoding(tiny_model, prompt, m, max_tokens=9, sampler=sampler, budget_guard=BudgetGuard(m))
    text = d.run().text
    assert len(__import__("json").loads(text)) >= 6
    assert max(sampler.draws.values()) <= GUARD_SWEEP_AFTER + 2, sampler.draws


def test_timeout_is_checked_as_a_user_input():
    from structgen.deadlines import deadline_after
    from structgen.errors import InvalidArgument

    assert deadline_after(None) is None and deadline_after(1.5) > time.monotonic()
    for bad in (0, -1, "3", True):
        with pytest.raises(InvalidArgument, match="timeout"):
            deadline_after(bad)


def test_an_infeasible_budget_is_refused_at_once_with_the_budget_that_fits(tiny_model, prompt, grammar):
    m = Matcher(grammar)
    with pytest.raises(GenerationError, match=r"max_tokens=3: the shortest needs (\d+) tokens") as ei:
        generate_constrained(tiny_model, prompt, m, max_tokens=3, budget_guard=BudgetGuard(m))
    assert ei.value.reason == "budget"
    needed = int(__import__("re").search(r"needs (\d+) tokens", str(ei.value)).group(1))
    m = Matcher(grammar)
    with pytest.raises(GenerationError, match="budget"):
        generate_constrained(tiny_model, prompt, m, max_tokens=needed - 1, budget_guard=BudgetGuard(m))
    m = Matcher(grammar)
    r = generate_constrained(tiny_model, prompt, m, max_tokens=needed, budget_guard=BudgetGuard(m))
    assert r.num_tokens < needed  # the named budget is enough, and the guard finishes inside it


def test_masked_sampler_is_a_sampler_and_is_reproducible():
    s = MaskedSampler(temperature=1.0, seed=3)
    assert isinstance(s, Sampler)
    logits = torch.zeros(50)
    ctx = StepContext(step=0, remaining=10)
    draws = [s.sample(logits, ctx) for _ in range(20)]
    s.reset()
    assert [s.sample(logits, ctx) for _ in range(20)] == draws
    with pytest.raises(NoTokenAllowed):
        s.sample(torch.full((5,), float("-inf")), ctx)
    with pytest.raises(ValueError):
        MaskedSampler(temperature=-1)


class _NoTemplate:
    chat_template = None


class _RefusesTools:
    chat_template = "{{ messages }}"

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        if any(m["role"] == "tool" for m in messages):
            raise ValueError("no tool role")
        return "|".join(f"{m['role']}={m['content']}" for m in messages) + "|assistant="


def test_render_chat_one_place_for_every_prompt(smol_hf_tokenizer):
    assert user_prompt(_NoTemplate(), "Hi") == "Hi\n"
    assert user_prompt(_NoTemplate(), "Hi", system="Be brief.") == "Be brief.\n\nHi\n"
    turns = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
             {"role": "user", "content": "More"}]
    assert render_chat(_NoTemplate(), turns) == "user: Hi\nassistant: Hello\nuser: More\nassistant:"
    with_tool = [{"role": "user", "content": "Weather?"}, {"role": "tool", "content": "sunny"}]
    assert render_chat(_RefusesTools(), with_tool) == "user=Weather?|user=Tool result: sunny|assistant="
    real = user_prompt(smol_hf_tokenizer, "Name a colour.")
    assert "Name a colour." in real and real.rstrip().endswith("assistant")


@pytest.mark.slow
def test_streaming_never_yields_a_token_a_dead_end_takes_back(smol):
    """With checks at value boundaries, decoding may back out of a dead end; the stream holds tokens back
    until no backtrack can reach them, so what was streamed is exactly the final output.  (The mask
    looks one token ahead, so the dead end here is entered two tokens before it shows: the last
    item's last letter, when only "]" could follow its closing quote and the contains check refuses it.)"""
    from structgen.api import compiler_for, schema_prompt

    model = smol
    schema = {"type": "object", "required": ["words"], "additionalProperties": False,
              "properties": {"words": {"type": "array", "items": {"type": "string", "maxLength": 3},
                                       "minItems": 2, "maxItems": 2,
                                       # a counted contains beside another: left to a check as the
                                       # array completes (alone, the automaton counts it)
                                       "allOf": [{"contains": {"const": "no"}, "maxContains": 2},
                                                 {"contains": {"type": "string"}}]}}}
    g = compiler_for(model).compile_json_schema(schema, whitespace="compact")
    ids = model.encode(model.chat_prompt(schema_prompt(schema, "Write the word 'yes' twice.")))
    m = Matcher(g)
    d = Decoding(model, ids, m, max_tokens=80, budget_guard=BudgetGuard(m))
    streamed = list(d)
    assert d._backtracks > 0, "no dead end was met: the test no longer exercises backtracking"
    assert streamed == d.result().token_ids
    jsonschema.validate(__import__("json").loads(d.result().text), schema)
