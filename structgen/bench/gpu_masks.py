"""``structgen bench gpu-masks``: applying token bitmasks to logits on a CUDA GPU.

Times :func:`structgen.runtime.masks.apply_token_bitmask_inplace` (``triton``, ``compile``,
``torch``) against XGrammar's kernels (``cuda``, ``triton``) on the same tensors, at several batch
sizes and one vocabulary, with CUDA events (median and p90 of many launches after a warm-up).
Every kernel's output is first checked equal to ``masked_fill`` on a copy, so a fast wrong kernel
cannot win.  Without a CUDA device it says so and returns nothing (``make bench-gpu`` skips).
"""
from __future__ import annotations

import statistics
from typing import Callable

__all__ = ["run_gpu_masks_bench", "cuda_ready"]


def cuda_ready() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _kernels() -> dict[str, Callable]:
    """name -> apply(logits, bitmask): structgen's backends, then XGrammar's where it is installed."""
    from ..runtime.masks import apply_token_bitmask_inplace

    kernels: dict[str, Callable] = {
        f"structgen/{b}": (lambda b: lambda lg, bm, vs: apply_token_bitmask_inplace(lg, bm, vocab_size=vs, backend=b))(b)
        for b in ("triton", "compile", "torch")
    }
    try:
        import xgrammar
    except ImportError:
        return kernels
    for b in ("cuda", "triton"):
        kernels[f"xgrammar/{b}"] = (
            lambda b: lambda lg, bm, vs: xgrammar.apply_token_bitmask_inplace(lg, bm, vocab_size=vs, backend=b))(b)
    return kernels


def _tensors(batch: int, vocab: int, density: float, dtype, seed: int):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    words = (vocab + 31) // 32
    logits = torch.randn(batch, vocab, device="cuda", generator=g).to(dtype)
    allowed = torch.rand(batch, words * 32, device="cuda", generator=g) < density
    weights = (1 << torch.arange(32, device="cuda", dtype=torch.int64))
    packed = (allowed.view(batch, words, 32).to(torch.int64) * weights).sum(-1)
    bitmask = torch.where(packed >= 2 ** 31, packed - 2 ** 32, packed).to(torch.int32)
    return logits, bitmask, allowed[:, :vocab]


def _time_us(fn, logits, bitmask, vocab: int, reps: int) -> list[float]:
    import torch

    work = logits.clone()
    for _ in range(5):  # warm-up: compiles, autotunes, JIT builds
        fn(work, bitmask, vocab)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(work, bitmask, vocab)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return times


def run_gpu_masks_bench(*, batches: tuple[int, ...] = (1, 64, 512, 4096), vocab: int = 128_000,
                        dtypes: tuple[str, ...] = ("float32", "bfloat16"), density: float = 0.5, reps: int = 100,
                        seed: int = 0, echo: Callable[[str], None] = print) -> list[dict]:
    """Rows of ``{kernel, batch, dtype, p50_us, p90_us, gbps, ratio_to_xgrammar}``; [] without CUDA."""
    if not cuda_ready():
        echo("no CUDA device: the GPU mask benchmark is skipped")
        return []
    import torch

    kernels = _kernels()
    echo(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  vocab {vocab:,}  "
         f"density {density}  kernels: {', '.join(kernels)}")
    rows: list[dict] = []
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        for batch in batches:
            logits, bitmask, allowed = _tensors(batch, vocab, density, dtype, seed)
            expected = logits.masked_fill(~allowed, float("-inf"))
            found: dict[str, dict] = {}
            for name, fn in kernels.items():
                out = logits.clone()
                try:
                    fn(out, bitmask, vocab)
                except Exception as e:  # a peer's kernel that cannot run here is reported, not fatal
                    echo(f"  {name} batch {batch} {dtype_name}: failed ({type(e).__name__}: {str(e)[:120]})")
                    continue
                if not torch.equal(out, expected):
                    echo(f"  {name} batch {batch} {dtype_name}: WRONG OUTPUT (not timed)")
                    continue
                t = _time_us(fn, logits, bitmask, vocab, reps)
                p50 = statistics.median(t)
                p90 = sorted(t)[int(0.9 * (len(t) - 1))]
                moved = batch * vocab * logits.element_size() + bitmask.numel() * 4  # bytes at least touched
                found[name] = {"kernel": name, "batch": batch, "dtype": dtype_name, "p50_us": p50, "p90_us": p90,
                               "gbps": moved / (p50 * 1e-6) / 1e9}
            best_peer = min((r["p50_us"] for n, r in found.items() if n.startswith("xgrammar/")), default=None)
            for r in found.values():
                r["ratio_to_xgrammar"] = r["p50_us"] / best_peer if best_peer else None
                rows.append(r)
    _print_table(rows, echo)
    return rows


def _print_table(rows: list[dict], echo) -> None:
    echo(f"{'kernel':<20} {'dtype':<9} {'batch':>6} {'p50 µs':>10} {'p90 µs':>10} {'GB/s':>8} {'/ best xgrammar':>16}")
    for r in rows:
        ratio = f"{r['ratio_to_xgrammar']:.2f}x" if r["ratio_to_xgrammar"] else "-"
        echo(f"{r['kernel']:<20} {r['dtype']:<9} {r['batch']:>6} {r['p50_us']:>10.1f} {r['p90_us']:>10.1f} "
             f"{r['gbps']:>8.0f} {ratio:>16}")
