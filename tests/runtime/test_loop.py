"""The decoding loop on a tiny random Llama with SmolLM2's real tokenizer."""
from __future__ import annotations

import pytest
import torch

from fixed_string_matcher import FixedStringMatcher
from structgen.runtime.loop import KVCacheModel, generate_constrained, generate_unconstrained
from structgen.errors import GenerationError
from structgen.runtime.masks import bitmask_to_bool

TARGETS = [
    '{"name": "Ada", "age": 36}',
    "Crème brûlée à la française",
    "数据结构 🤖 👍🏽 ok",
]


@pytest.fixture()
def prompt(tiny_model):
    return tiny_model.encode(tiny_model.chat_prompt("Say something."))


@pytest.mark.parametrize("target", TARGETS)
def test_constrained_greedy_produces_target(tiny_model, prompt, target):
    m = FixedStringMatcher(tiny_model.info, target)
    r = generate_constrained(tiny_model, prompt, m, max_tokens=200)
    assert r.finish_reason == "eos"
    assert r.text == target
    assert r.text_bytes == target.encode()
    assert tiny_model.info.decode_bytes(r.token_ids) == target.encode()
    assert r.num_tokens == len(r.token_ids) and r.steps == r.num_tokens + 1
    assert r.seconds > 0 and r.tokens_per_second > 0 and r.mask_seconds > 0


@pytest.mark.parametrize("seed", [0, 1])
def test_constrained_sampling_produces_target_and_is_reproducible(tiny_model, prompt, seed):
    target = "数据 🤖 ok"  # multi-byte characters: several tokenizations are possible
    runs = [
        generate_constrained(tiny_model, prompt, FixedStringMatcher(tiny_model.info, target),
                             max_tokens=200, temperature=1.5, top_p=0.95, seed=seed)
        for _ in range(2)
    ]
    assert runs[0].text == target
    assert runs[0].token_ids == runs[1].token_ids


@pytest.fixture()
def eos_loving_model(tiny_model):
    """The tiny model with EOS pushed far above everything: it wants to stop at once."""
    eos = tiny_model.info.eos_ids[0]
    lm_head = tiny_model.hf_model.get_output_embeddings()

    def boost(_module, _inp, out):
        out = out.clone()
        out[..., eos] += 1000.0
        return out

    handle = lm_head.register_forward_hook(boost)
    yield tiny_model
    handle.remove()


def test_eos_only_once_complete(eos_loving_model, prompt):
    model = eos_loving_model
    assert generate_unconstrained(model, prompt, max_tokens=5).finish_reason == "eos"
    target = "no early stop"
    m = FixedStringMatcher(model.info, target)
    r = generate_constrained(model, prompt, m, max_tokens=100)
    assert r.text == target and r.finish_reason == "eos"
    eos = model.info.eos_ids[0]
    eos_bits = [bool(bitmask_to_bool(row, model.info.vocab_size)[eos]) for row in m.masks_filled]
    assert eos_bits == [False] * (len(eos_bits) - 1) + [True]


def test_terminated_matcher_stops_without_eos(tiny_model, prompt):
    m = FixedStringMatcher(tiny_model.info, "abc", terminate_at_end=True)
    r = generate_constrained(tiny_model, prompt, m, max_tokens=10)
    assert r.finish_reason == "terminated" and r.text == "abc"
    assert r.steps == r.num_tokens


def test_max_tokens_error_carries_partial_text(tiny_model, prompt):
    target = "The quick brown fox jumps over the lazy dog"
    m = FixedStringMatcher(tiny_model.info, target)
    with pytest.raises(GenerationError) as ei:
        generate_constrained(tiny_model, prompt, m, max_tokens=3)
    partial = ei.value.partial
    assert partial and target.startswith(partial) and partial != target
    assert m.pos == len(partial.encode())
    assert ei.value.reason == "max_tokens" and ei.value.num_tokens == 3
    # Exactly enough tokens: succeeds, because the EOS step still needs one step of budget.
    full = generate_constrained(tiny_model, prompt, FixedStringMatcher(tiny_model.info, target), max_tokens=200)
    n = full.num_tokens
    with pytest.raises(GenerationError):
        generate_constrained(tiny_model, prompt, FixedStringMatcher(tiny_model.info, target), max_tokens=n)
    ok = generate_constrained(tiny_model, prompt, FixedStringMatcher(tiny_model.info, target), max_tokens=n + 1)
    assert ok.text == target


def test_no_allowed_token_raises(tiny_model, prompt, smol_info):
    # No SmolLM2 token starts with byte 0xFF, so this constraint cannot even begin.
    assert 0xFF not in smol_info.first_bytes()
    m = FixedStringMatcher(tiny_model.info, b"ok\xff")
    with pytest.raises(GenerationError, match="no token is allowed") as ei:
        generate_constrained(tiny_model, prompt, m, max_tokens=10)
    assert ei.value.partial == "ok"
    assert ei.value.reason == "no_token"


def test_budget_guard_is_asked_with_remaining(tiny_model, prompt):
    seen: list[int] = []

    class RecordingGuard:  # the BudgetGuard interface: tokens_needed(max_tokens), allows(token, remaining)
        def tokens_needed(self, max_tokens):
            return 0

        def allows(self, token_id, remaining):
            seen.append(remaining)
            return True

    r = generate_constrained(tiny_model, prompt, FixedStringMatcher(tiny_model.info, "hi there"),
                             max_tokens=50, budget_guard=RecordingGuard())
    assert seen == list(range(50, 50 - r.steps, -1))


def _greedy_full_recompute(hf_model, prompt: list[int], n: int) -> list[int]:
    ids = list(prompt)
    out = []
    with torch.inference_mode():
        for _ in range(n):
            logits = hf_model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1]
            t = int(torch.argmax(logits))
            out.append(t)
            ids.append(t)
    return out


def test_kv_cache_greedy_matches_full_recompute(tiny_model, prompt):
    n = 24
    r = generate_unconstrained(tiny_model, prompt, max_tokens=n, stop_at_eos=False)
    assert r.finish_reason == "length" and r.num_tokens == n
    assert r.token_ids == _greedy_full_recompute(tiny_model.hf_model, prompt, n)


def test_kv_model_multi_token_forward_and_crop(tiny_model, prompt):
    kv = KVCacheModel(tiny_model.hf_model)
    extra = [100, 200, 300, 400]
    all_rows = kv.forward(prompt + extra)
    assert all_rows.shape == (len(prompt) + len(extra), tiny_model.info.vocab_size)
    assert all_rows.dtype == torch.float32

    kv2 = KVCacheModel(tiny_model.hf_model)
    last = kv2.forward(prompt, logits_to_keep=1)
    assert last.shape == (1, tiny_model.info.vocab_size)
    torch.testing.assert_close(last[0], all_rows[len(prompt) - 1], rtol=1e-4, atol=1e-4)
    step_rows = [kv2.forward([t])[0] for t in extra]
    for i, row in enumerate(step_rows):
        torch.testing.assert_close(row, all_rows[len(prompt) + i], rtol=1e-4, atol=1e-4)

    # Roll back two tokens, feed different ones, then the original ones again.
    kv2.crop(len(prompt) + 2)
    assert len(kv2) == len(prompt) + 2 and kv2.cache.get_seq_length() == len(prompt) + 2
    kv2.forward([999, 998])
    kv2.crop(len(prompt) + 2)
    again = kv2.forward(extra[2:])
    torch.testing.assert_close(again, all_rows[len(prompt) + 2:], rtol=1e-4, atol=1e-4)
    kv2.crop(0)
    assert len(kv2) == 0 and kv2.cache is None


def test_unconstrained_sampling_seeded(tiny_model, prompt):
    a = generate_unconstrained(tiny_model, prompt, max_tokens=10, temperature=1.0, seed=3, stop_at_eos=False)
    b = generate_unconstrained(tiny_model, prompt, max_tokens=10, temperature=1.0, seed=3, stop_at_eos=False)
    assert a.token_ids == b.token_ids and len(a.token_ids) == 10


@pytest.mark.slow
def test_real_smollm2_unconstrained_chat():
    from structgen.models import load_model

    model = load_model()
    assert model.info.vocab_size == model.hf_model.get_output_embeddings().weight.shape[0] == 49152
    ids = model.encode(model.chat_prompt("What is the capital of France? Answer in one word."))
    r = generate_unconstrained(model, ids, max_tokens=24)
    assert r.num_tokens > 0
    assert "Paris" in r.text
    # Constrained on the real model: the fixed-string matcher forces an exact answer.
    m = FixedStringMatcher(model.info, '{"capital": "Paris"}')
    c = generate_constrained(model, ids, m, max_tokens=40)
    assert c.text == '{"capital": "Paris"}' and c.finish_reason == "eos"


@pytest.fixture()
def repeating_model(tiny_model, smol_info):
    """The tiny model made to love ``a`` and ``"``: it writes the item ``"a"`` again and again if let."""
    toks = [smol_info.token_bytes.index(b) for b in (b"a", b'"')]
    lm_head = tiny_model.hf_model.get_output_embeddings()
    saved = None if lm_head.bias is None else lm_head.bias.detach().clone()
    with torch.no_grad():
        if lm_head.bias is None:
            lm_head.bias = torch.nn.Parameter(torch.zeros(lm_head.weight.shape[0]))
        lm_head.bias[toks] += 50.0
    yield tiny_model, toks[1]
    with torch.no_grad():
        if saved is None:
            lm_head.bias = None
        else:
            lm_head.bias.copy_(saved)


def test_unique_items_duplicates_are_masked_out(repeating_model, smol_info):
    """A uniqueItems array of strings is checked as items complete: the token closing a duplicate
    is cleared from the mask (the automaton alone would allow it), so the output stays valid
    however much the model wants the same item, and no drawn token is ever refused."""
    import json

    import jsonschema

    from structgen.compiler import GrammarCompiler
    from structgen.engine.matcher import Matcher

    model, tok = repeating_model
    schema = {"type": "array", "items": {"type": "string", "maxLength": 4}, "uniqueItems": True,
              "minItems": 3, "maxItems": 3}
    g = GrammarCompiler(smol_info).compile_json_schema(schema, whitespace="compact")
    m = Matcher(g)
    assert m.may_dead_end
    masked_out = []  # steps where a check cleared the model's favourite token from the mask
    mask = m.next_token_mask

    def recording_mask():
        words = mask()
        if (g.mask(*m._state)[tok >> 5] >> (tok & 31)) & 1 and not (words[tok >> 5] >> (tok & 31)) & 1:
            masked_out.append(len(m.output_bytes()))
        return words

    m.next_token_mask = recording_mask
    prompt = model.encode(model.chat_prompt("Three words."))
    try:
        r = generate_constrained(model, prompt, m, max_tokens=40)
    except GenerationError as e:
        raise AssertionError(e.partial) from e
    value = json.loads(smol_info.decode_bytes(r.token_ids))
    jsonschema.validate(value, schema)
    assert masked_out  # the quote closing a second "a" was cleared from the mask
