"""load_model() (quantized="auto", and quantized=True): the GGUF's 4-bit blocks run on torch's int4 kernel, exactly the GGUF's
weights, and speculative decoding stays token-identical to plain decoding on that path."""
import numpy as np
import pytest
import torch

from structgen.errors import StructgenError
from structgen.runtime import gguf_q4

pytestmark = pytest.mark.skipif(not gguf_q4.available(), reason="this torch has no int4 CPU kernel")


def test_row_order_finds_a_permutation_and_refuses_other_rows():
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    order = gguf_q4._row_order(a[[2, 0, 3, 1]], a)
    np.testing.assert_array_equal(a[order], a[[2, 0, 3, 1]])
    assert gguf_q4._row_order(a + 1, a) is None


def test_a_model_not_from_a_gguf_is_refused(tiny_model):
    from structgen.models import quantized_copy

    with pytest.raises(StructgenError, match="GGUF"):
        quantized_copy(tiny_model)


@pytest.fixture(scope="module")
def smol_q4(smol):
    assert smol.quantized  # load_model()'s default for a GGUF with 4-bit tensors
    return smol


def test_the_default_runs_4bit_and_quantized_false_the_dense_weights(smol, smol_dense):
    from structgen.errors import InvalidArgument
    from structgen.models import load_model

    assert smol.quantized and gguf_q4.is_installed(smol.hf_model)
    assert not smol_dense.quantized and not gguf_q4.is_installed(smol_dense.hf_model)
    with pytest.raises(InvalidArgument, match="quantized"):
        load_model(quantized="yes")


def test_packed_layers_are_cached_and_read_back(smol_dense, tmp_path):
    import copy

    from structgen.models import smollm2_gguf_path

    cache = tmp_path / "q4.pkl"
    first, second = copy.deepcopy(smol_dense.hf_model), copy.deepcopy(smol_dense.hf_model)
    assert gguf_q4.install(first, smollm2_gguf_path(), cache) == 30 * 7 and cache.exists()
    assert gguf_q4.install(second, smollm2_gguf_path(), cache) == 30 * 7
    for a, b in zip(first.modules(), second.modules()):
        if getattr(a, "_structgen_q4", False):
            assert all(torch.equal(x, y) for x, y in zip(a._structgen_q4_weights, b._structgen_q4_weights))


def test_every_block_layer_switched_and_rows_invariant(smol_q4):
    from structgen.runtime.kv_cache import KVCacheModel

    layers = [m for m in smol_q4.hf_model.modules() if getattr(m, "_structgen_q4", False)]
    assert len(layers) == 30 * 7 and smol_q4.quantized
    prompt = list(range(1000, 1100))
    for n in (2, 4, 5):
        new = [2000 + j for j in range(n)]
        kv = KVCacheModel(smol_q4.hf_model)
        kv.forward(prompt)
        together = kv.forward(new).reshape(n, -1)
        kv.crop(len(prompt))
        one_by_one = torch.cat([kv.forward([t]).reshape(1, -1) for t in new])
        assert torch.equal(together, one_by_one), n  # bit for bit: what keeps speculation lossless


# Logits close to fp32 under every instruction set: test_accuracy_per_instruction_set.py


def test_speculative_output_identical_and_valid(smol_q4):
    import jsonschema

    from structgen import generate_json

    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                               "population": {"type": "integer", "minimum": 0}},
              "required": ["city", "population"], "additionalProperties": False}
    prompt = "Give the largest city of Japan and its population as JSON."
    plain = generate_json(smol_q4, schema, prompt, max_tokens=40, speculative=False, return_result=True)
    spec = generate_json(smol_q4, schema, prompt, max_tokens=40, speculative=True, return_result=True)
    assert spec[1].token_ids == plain[1].token_ids
    jsonschema.validate(spec[0], schema)


def test_a_prompt_is_one_block_and_drafts_after_it_rows_as_plain_decoding_computes_them(smol_q4):
    """A pass over an empty cache runs its prompt as one causal attention block (row by row, a long
    prompt took minutes); the drafts fed behind it in the same pass (``prompt_rows``) come out bit for
    bit as when fed one at a time after the prompt's own pass -- what keeps speculation lossless."""
    from structgen.runtime.kv_cache import KVCacheModel
    from structgen.runtime.row_invariant import prompt_rows

    prompt = list(range(3000, 3200))
    drafts = [4000 + j for j in range(5)]
    kv = KVCacheModel(smol_q4.hf_model)
    alone = kv.forward(prompt, logits_to_keep=1)
    one_by_one = torch.cat([kv.forward([t]) for t in drafts])
    kv.reset()
    with prompt_rows(len(prompt)):
        together = kv.forward(prompt + drafts, logits_to_keep=len(drafts) + 1)
    assert torch.equal(together[:1], alone) and torch.equal(together[1:], one_by_one)


def test_a_cache_packed_for_another_layout_is_packed_again(smol_dense, tmp_path):
    """The int4 packing's layout depends on the CPU capability (AVX2 and AVX-512 differ): a cache read
    back in the wrong layout is noticed by multiplying one layer, and packed again."""
    import copy

    from structgen.models import smollm2_gguf_path

    cache = tmp_path / "q4.pkl"
    first = copy.deepcopy(smol_dense.hf_model)
    gguf_q4.install(first, smollm2_gguf_path(), cache)
    from structgen._cache import atomic_pickle_dump, pickle_load_or_none

    data = pickle_load_or_none(cache)
    name = next(iter(data["layers"]))
    packed, scale_zero = data["layers"][name]
    data["layers"][name] = (packed[::-1].copy(), scale_zero)  # rows of another layout
    atomic_pickle_dump(data, cache)
    assert gguf_q4._cached_layers(cache, copy.deepcopy(smol_dense.hf_model)) is None
    second = copy.deepcopy(smol_dense.hf_model)
    gguf_q4.install(second, smollm2_gguf_path(), cache)
    ids = torch.tensor([list(range(1000, 1010))])
    with torch.no_grad():
        assert torch.equal(first(ids).logits, second(ids).logits)


@pytest.mark.minutes
@pytest.mark.parametrize("kind", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"])
def test_each_type_runs_as_close_to_its_dense_model_as_q4_1(smol_dense, kind):
    """SmolLM2's layers quantized to ``kind`` by the ``gguf`` package (the K types it cannot write are
    checked on Gemma's Q4_K_M in tests/test_second_model_family.py): the int4 path's logits against the
    dense model of the same weights.  Measured KL 0.00010-0.00031, top-1 agreement 0.99-1.0."""
    import copy
    import types

    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    from structgen.runtime import gguf_blocks

    class _Tensor:
        def __init__(self, n, k, raw):
            self.tensor_type, self.shape, self.data = GGMLQuantizationType[kind], (k, n), raw

    dense, fast = copy.deepcopy(smol_dense.hf_model), copy.deepcopy(smol_dense.hf_model)
    fast_modules = dict(fast.named_modules())
    for name, module in dense.named_modules():
        if not gguf_q4._MODULES.search(name) or not isinstance(module, torch.nn.Linear):
            continue
        tensor = _Tensor(*module.weight.shape, quantize(module.weight.detach().float().numpy(), GGMLQuantizationType[kind]))
        weight = gguf_blocks.dequantized(tensor)
        module.weight.data = torch.from_numpy(weight.copy())
        twin = fast_modules[name]
        twin.weight.data = torch.from_numpy(weight.copy())
        twin._structgen_q4_weights = gguf_q4._packed_layer(tensor, weight)
        twin.forward = types.MethodType(gguf_q4._q4_forward, twin)
    ids = torch.tensor([smol_dense.encode("The committee met on Tuesday to discuss the budget. "
                                          '{"name": "Alice", "age": 31} In 1998 the river flooded the town. ' * 4)[:200]])
    with torch.no_grad():
        a, b = dense(ids).logits[0].float().log_softmax(-1), fast(ids).logits[0].float().log_softmax(-1)
    kl = float((a.exp() * (a - b)).sum(-1).mean())
    assert kl < 0.0006 and float((a.argmax(-1) == b.argmax(-1)).float().mean()) >= 0.98
