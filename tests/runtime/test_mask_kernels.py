"""The mask kernels against a masked_fill reference (``algorithms.md`` section 6's property test).

The Triton kernel runs under Triton's interpreter on CPU tensors (``TRITON_INTERPRET=1``), so its
indexing, bit order and padding are checked here without a GPU; on a CUDA machine the same test
runs it for real."""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from structgen.runtime.mask_kernels import triton_available  # noqa: E402
from structgen.runtime.masks import apply_token_bitmask_inplace  # noqa: E402

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
needs_triton = pytest.mark.skipif(not triton_available(), reason="triton is not installed (the gpu extra)")


def _reference(logits: torch.Tensor, allowed: np.ndarray, rows) -> torch.Tensor:
    """masked_fill from a bool [B, V] table; rows not listed stay as they were; columns past V are closed."""
    out = logits.clone()
    full = np.zeros((allowed.shape[0], logits.shape[1]), dtype=bool)
    full[:, :allowed.shape[1]] = allowed[:, :logits.shape[1]]
    banned = torch.from_numpy(~full)
    for r in rows:
        out[r].masked_fill_(banned[r].to(out.device), float("-inf"))
    return out


def _case(rng, vocab: int, batch: int, pad: int, dtype, special: str = "random"):
    allowed = rng.random((batch, vocab)) < rng.choice([0.02, 0.5, 0.98])
    if special == "edges":  # bit order: one allowed token at 0, 31, 32, V-1
        allowed[:] = False
        for j, t in enumerate([0, 31, 32, vocab - 1]):
            allowed[j % batch, t] = True
    allowed[0] = True if batch > 2 and special == "random" else allowed[0]  # an all-allowed row
    if batch > 3 and special == "random":
        allowed[1] = False  # an all-banned row
    words = (vocab + 31) // 32
    padded = np.zeros((batch, words * 32), dtype=bool)
    padded[:, :vocab] = allowed
    bitmask = torch.from_numpy(np.packbits(padded, axis=1, bitorder="little").view("<i4").copy())
    logits = torch.randn(batch, vocab + pad, generator=torch.Generator().manual_seed(int(rng.integers(1 << 30))))
    return logits.to(dtype), bitmask, allowed


VOCABS = [49_152, 50_257, 128_000, 129_280]


@needs_triton
@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_triton_kernel_equals_masked_fill(vocab, dtype):
    rng = np.random.default_rng(vocab + int(str(dtype)[-2:]))
    logits, bitmask, allowed = _case(rng, vocab, 3, pad=64 if vocab % 64 else 0, dtype=dtype)
    expect = _reference(logits, allowed, range(3))
    got = logits.to(DEVICE)
    apply_token_bitmask_inplace(got, bitmask.to(DEVICE), vocab_size=vocab, backend="triton")
    assert torch.equal(got.cpu(), expect)


@needs_triton
@pytest.mark.parametrize("batch", [1, 7, 64])
def test_triton_kernel_with_indices_and_bit_order(batch):
    rng = np.random.default_rng(batch)
    vocab = 50_257
    logits, bitmask, allowed = _case(rng, vocab, batch, pad=47, dtype=torch.float32,
                                     special="edges" if batch == 7 else "random")
    rows = sorted(rng.choice(batch, size=max(1, batch // 2), replace=False).tolist())
    expect = _reference(logits, allowed, rows)
    got = logits.to(DEVICE)
    apply_token_bitmask_inplace(got, bitmask.to(DEVICE), torch.tensor(rows), vocab_size=vocab, backend="triton")
    assert torch.equal(got.cpu(), expect)


@pytest.mark.parametrize("backend", ["torch", "auto"])
@pytest.mark.parametrize("vocab", VOCABS)
def test_torch_backend_equals_masked_fill(backend, vocab):
    rng = np.random.default_rng(vocab)
    logits, bitmask, allowed = _case(rng, vocab, 5, pad=128, dtype=torch.bfloat16)
    rows = [0, 3, 4]
    expect = _reference(logits, allowed, rows)
    apply_token_bitmask_inplace(logits, bitmask, rows, vocab_size=vocab, backend=backend)
    assert torch.equal(logits, expect)


def test_compile_backend_equals_masked_fill():
    rng = np.random.default_rng(1)
    logits, bitmask, allowed = _case(rng, 4_000, 4, pad=96, dtype=torch.float32)
    expect = _reference(logits, allowed, range(4))
    apply_token_bitmask_inplace(logits, bitmask, vocab_size=4_000, backend="compile")
    assert torch.equal(logits, expect)


def test_bad_backend_and_triton_on_a_cpu_tensor_without_the_interpreter(monkeypatch):
    logits, bitmask = torch.zeros(1, 64), torch.zeros(1, 2, dtype=torch.int32)
    with pytest.raises(ValueError, match="backend must be"):
        apply_token_bitmask_inplace(logits, bitmask, backend="cuda")
    if triton_available() and not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "0")
        with pytest.raises(ValueError, match="CUDA tensors"):
            apply_token_bitmask_inplace(logits, bitmask, backend="triton")


def test_cpu_masks_never_import_triton():
    """Importing triton (its CUDA bindings) ends the process with nanobind's leak report: a process that
    only masks CPU tensors must not import it, asking whether it is installed included."""
    import subprocess
    import sys

    code = ("import sys, torch, structgen, structgen.runtime.masks as m\n"
            "from structgen.runtime.mask_kernels import triton_available\n"
            "triton_available()\n"
            "logits = torch.zeros(2, 100)\n"
            "m.apply_token_bitmask_inplace(logits, torch.zeros(2, 4, dtype=torch.int32))\n"
            "assert bool(torch.isinf(logits).all())\n"
            "print('triton' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
    assert "leaked" not in out.stderr, out.stderr
