"""``timeout=`` bounds the whole call, the prompt's prefill included (run in chunks of
``PREFILL_CHUNK`` tokens, the deadline checked between them), and ``tokens_per_second`` is the
decoding speed alone.  Time is a fake clock that the forward passes advance: deterministic."""
from __future__ import annotations

import pytest
import torch

from structgen.errors import GenerationError
from structgen.runtime import loop
from structgen.runtime.loop import Decoding, KVCacheModel
from structgen.runtime.sampling import MaskedSampler


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    perf_counter = monotonic


class TimedKV(KVCacheModel):
    """A KV cache whose forward passes take fake time: ``prompt_s`` for a pass holding prompt
    tokens (more than one token), ``step_s`` for a decoding step."""

    def __init__(self, hf_model, clock: FakeClock, prompt_s: float, step_s: float) -> None:
        super().__init__(hf_model)
        self.clock, self.prompt_s, self.step_s = clock, prompt_s, step_s

    def forward(self, tokens, *, logits_to_keep: int = 0):
        self.clock.now += self.prompt_s if len(tokens) > 1 else self.step_s
        return super().forward(tokens, logits_to_keep=logits_to_keep)


def long_prompt(n: int) -> list[int]:
    return [1000 + (i * 7919) % 20000 for i in range(n)]


@pytest.fixture()
def clock(monkeypatch):
    c = FakeClock()
    monkeypatch.setattr(loop, "time", c)
    return c


def test_a_deadline_inside_the_prefill_stops_it_between_chunks_and_names_it(tiny_model, clock, monkeypatch):
    monkeypatch.setattr(loop, "PREFILL_CHUNK", 64)
    prompt = long_prompt(600)  # 10 chunks of 10 s each
    kv = TimedKV(tiny_model.hf_model, clock, prompt_s=10.0, step_s=0.1)
    start = clock.now
    d = Decoding(tiny_model, prompt, None, max_tokens=5, deadline=start + 25.0, kv=kv)
    with pytest.raises(GenerationError) as e:
        d.run()
    err = e.value
    assert err.reason == "timeout" and err.num_tokens == 0 and d.tokens == []
    assert clock.now - start <= 25.0 + 10.0  # one chunk past the deadline, not the whole prefill (100 s)
    assert kv.forward_passes == 3 and d._prefilled == 192
    msg = str(err)
    assert "30.0 s in the prompt's prefill (192 of 600 prompt tokens run)" in msg
    assert "0.0 s in forward passes while decoding" in msg and "0.0 s in masks" in msg
    assert "running the prompt" in msg


def test_a_deadline_after_the_prefill_says_it_took_the_time(tiny_model, clock, monkeypatch):
    monkeypatch.setattr(loop, "PREFILL_CHUNK", 64)
    prompt = long_prompt(600)
    kv = TimedKV(tiny_model.hf_model, clock, prompt_s=10.0, step_s=1.0)
    d = Decoding(tiny_model, prompt, None, max_tokens=50, deadline=clock.now + 103.5, stop_at_eos=False, kv=kv)
    with pytest.raises(GenerationError) as e:
        d.run()
    msg = str(e.value)
    assert e.value.reason == "timeout" and e.value.num_tokens == 4
    assert "100.0 s in the prompt's prefill (600 prompt tokens)" in msg
    assert "4.0 s in forward passes while decoding" in msg


def test_tokens_per_second_leaves_out_the_prefill(tiny_model, clock):
    kv = TimedKV(tiny_model.hf_model, clock, prompt_s=100.0, step_s=0.5)
    r = Decoding(tiny_model, long_prompt(40), None, max_tokens=11, stop_at_eos=False, kv=kv).run()
    assert r.num_tokens == 11 and r.finish_reason == "length"
    assert r.prefill_seconds == pytest.approx(100.0)
    assert r.decode_seconds == pytest.approx(5.0)  # 10 steps after the prefill's first token
    assert r.seconds == pytest.approx(105.0)
    assert r.tokens_per_second == pytest.approx(10 / 5.0)
    assert r.overall_tokens_per_second == pytest.approx(11 / 105.0)


def _prefill_and_tokens(model, prompt, chunk, monkeypatch, n=12):
    monkeypatch.setattr(loop, "PREFILL_CHUNK", chunk)
    d = Decoding(model, prompt, None, max_tokens=n, stop_at_eos=False, sampler=MaskedSampler())
    first = d._prefill().clone()
    passes = d._kv.forward_passes
    d = Decoding(model, prompt, None, max_tokens=n, stop_at_eos=False, sampler=MaskedSampler())
    return first, passes, d.run().token_ids


def test_a_chunked_prefill_gives_the_logits_and_tokens_of_one_pass(tiny_model, monkeypatch):
    prompt = long_prompt(900)
    one, passes1, tokens1 = _prefill_and_tokens(tiny_model, prompt, 10**6, monkeypatch)
    chunked, passes2, tokens2 = _prefill_and_tokens(tiny_model, prompt, 512, monkeypatch)
    assert (passes1, passes2) == (1, 2)
    assert torch.equal(one, chunked) and tokens1 == tokens2


@pytest.mark.slow
@pytest.mark.parametrize("which", ["smol", "smol_dense"])
def test_a_chunked_prefill_is_exact_on_the_real_model(which, request, monkeypatch):
    """On the 4-bit default model and the dense one: 512-token chunks (torch's CPU attention key
    block) give the very logits and greedy tokens of one pass over a 1,100-token prompt."""
    model = request.getfixturevalue(which)
    text = open(__file__, encoding="utf-8").read() * 3
    prompt = model.encode(text)[:1100]
    one, _, tokens1 = _prefill_and_tokens(model, prompt, 10**6, monkeypatch, n=6)
    chunked, passes, tokens2 = _prefill_and_tokens(model, prompt, 512, monkeypatch, n=6)
    assert passes == 3 and torch.equal(one, chunked) and tokens1 == tokens2
