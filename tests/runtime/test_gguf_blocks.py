"""GGUF block formats read for torch's int4 kernel: every type decodes to the integers and scales whose
product is, bit for bit, what the ``gguf`` package dequantizes, and its base-16 planes add up to it."""
import numpy as np
import pytest
import torch

from structgen.runtime import gguf_blocks


class _Tensor:  # what GGUFReader gives: the type, (K, N) shape and the raw blocks
    def __init__(self, kind, k, n, data):
        from gguf import GGMLQuantizationType

        self.tensor_type = GGMLQuantizationType[kind]
        self.shape = (k, n)
        self.data = data


_HALVES = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "Q4_K": [0, 2],
           "Q5_K": [0, 2], "Q6_K": [208]}


def _random_blocks(kind: str, n: int, k: int, seed: int) -> np.ndarray:
    """Random raw blocks of ``kind`` whose fp16 fields (scales, mins) are finite: every bit pattern
    of the quantized values and packed sub-scales occurs."""
    from gguf import GGMLQuantizationType
    from gguf.quants import GGML_QUANT_SIZES

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[kind]]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(n * k // block, size), dtype=np.uint8)
    for at in _HALVES[kind]:
        raw[:, at:at + 2] = rng.uniform(1e-4, 2e-2, size=raw.shape[0]).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return raw.reshape(n, -1)


def _weights(form):
    v, scale, offset = form
    n, k = v.shape
    w = v.reshape(n, -1, 32) * scale[..., None] + (offset[..., None] if offset is not None else 0)
    return w.reshape(n, k).astype(np.float32)


@pytest.mark.parametrize("kind", gguf_blocks.TYPES)
@pytest.mark.parametrize("seed", [0, 1])
def test_every_type_decodes_bit_for_bit_to_what_gguf_dequantizes(kind, seed):
    n, k = 32, 512
    tensor = _Tensor(kind, k, n, _random_blocks(kind, n, k, seed))
    form = gguf_blocks.integer_form(tensor)
    np.testing.assert_array_equal(_weights(form), gguf_blocks.dequantized(tensor))


@pytest.mark.parametrize("kind,count", [("Q4_0", 1), ("Q4_1", 1), ("Q4_K", 1), ("Q5_0", 2), ("Q5_1", 2),
                                        ("Q5_K", 2), ("Q8_0", 2), ("Q6_K", 4)])
def test_planes_are_4bit_digits_that_add_up_to_the_integers_exactly(kind, count):
    n, k = 32, 512
    v, scale, offset = gguf_blocks.integer_form(_Tensor(kind, k, n, _random_blocks(kind, n, k, 3)))
    digits, scales, zeros = gguf_blocks.planes(v, scale, offset)
    assert digits.shape == (n, count * k) and digits.min() >= 0 and digits.max() <= 15
    exact = v.reshape(n, -1, 32).astype(np.float64) * scale[..., None] + (offset[..., None] if offset is not None else 0)
    # exact but for float32's rounding of 8*S + Z (the offset types), which bfloat16 rounds again anyway
    np.testing.assert_allclose(gguf_blocks.planes_dequantized(digits, scales, zeros, k), exact.reshape(n, k),
                               rtol=1e-6, atol=1e-6 * np.abs(exact).max() if offset is not None else 0)
    # a plane's scale is the first's times a power of 16: bfloat16 rounds them all alike
    as_bf16 = torch.from_numpy(scales).to(torch.bfloat16).float().numpy().reshape(n, count, -1)
    np.testing.assert_array_equal(as_bf16, as_bf16[:, :1] * (16.0 ** np.arange(count)).reshape(1, -1, 1))


@pytest.mark.parametrize("kind", gguf_blocks.TYPES)
def test_the_kernel_multiplies_the_planes_as_the_dequantized_matrix(kind):
    if not hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu"):
        pytest.skip("this torch has no int4 CPU kernel")
    n, k = 32, 512
    tensor = _Tensor(kind, k, n, _random_blocks(kind, n, k, 2))
    digits, scales, zeros = gguf_blocks.planes(*gguf_blocks.integer_form(tensor))
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(torch.from_numpy(digits), 2)
    sz = torch.from_numpy(np.stack([scales, zeros], -1)).transpose(0, 1).contiguous().to(torch.bfloat16)
    x = torch.randn(3, k)
    got = torch.ops.aten._weight_int4pack_mm_for_cpu(x.bfloat16().repeat(1, digits.shape[1] // k), packed, 32, sz).float()
    ref = x @ torch.from_numpy(gguf_blocks.dequantized(tensor)).t()
    assert torch.allclose(got, ref, rtol=0.02, atol=0.02 * ref.abs().max().item())


def test_float_tensors_have_no_integer_form():
    assert gguf_blocks.integer_form(_Tensor("F32", 4, 4, np.zeros((4, 4), np.float32))) is None
    assert gguf_blocks.integer_form(_Tensor("F16", 4, 4, np.zeros((4, 4), np.float16))) is None
