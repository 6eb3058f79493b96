"""Kernels compiled once for every x86-64-v3 CPU and shipped with structgen, so that a fresh install
does not spend ~40 s in numba before its first output.

numba keeps a kernel's machine code per CPU: its cache index is keyed by the host CPU's name and
features, so a cache made on one machine is a miss on the next.  Every structgen kernel is declared
with :func:`kernel` (``numba.njit(cache=True, ...)`` plus this cache), and ``structgen kernels
build`` (run by ``make setup`` and before a wheel is built)
compiles them for the x86-64-v3 baseline (AVX2, FMA, BMI2: Intel since Haswell, AMD since Zen) into
``structgen/_kernels``, a folder laid out like numba's own cache and shipped in the wheel.  At run
time a kernel looks in numba's cache first (code compiled on this machine, for its own CPU), then in
the shipped folder when this CPU has every v3 feature; a miss in both compiles as before, into
numba's cache.  Code compiled here never lands in the shipped folder, and the shipped index is read
only when numba's version, the kernel's source (numba hashes it) and its bytecode match the build.

Not used under ``NUMBA_BOUNDSCHECK`` (the bounds-checked builds compile their own), nor with
``STRUCTGEN_SHIPPED_KERNELS=0``.
"""
from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numba
from numba.core import config
from numba.core.caching import FunctionCache, IndexDataCacheFile

__all__ = ["kernel", "SHIPPED", "BASELINE_CPU", "shipped_kernels_usable", "build_environment", "write_target",
           "shipped_files", "count_compiles"]

#: where the shipped kernels live: one folder per kernel module, numba's file names inside
SHIPPED = Path(__file__).resolve().parent.parent / "_kernels"
_PACKAGE = Path(__file__).resolve().parent.parent
_TARGET_FILE = "target.json"
BASELINE_CPU = "x86-64-v3"
#: what LLVM's x86-64-v3 assumes of a CPU (llvmlite's feature names)
_V3_FEATURES = ("cx16", "sahf", "popcnt", "sse3", "sse4.1", "sse4.2", "ssse3", "avx", "avx2", "bmi", "bmi2",
                "f16c", "fma", "lzcnt", "movbe", "xsave")
#: set (to the shipped folder) in the process that builds the shipped kernels
_BUILD_ENV = "STRUCTGEN_BUILD_KERNELS"


def _building() -> bool:
    return bool(os.environ.get(_BUILD_ENV))


@functools.lru_cache(maxsize=1)
def _shipped_target() -> tuple | None:
    """The magic tuple (triple, CPU, features) the shipped kernels were compiled for, or None when they
    cannot run here."""
    if config.BOUNDSCHECK or config.DISABLE_JIT or os.environ.get("STRUCTGEN_SHIPPED_KERNELS", "1") == "0":
        return None
    try:
        meta = json.loads((SHIPPED / _TARGET_FILE).read_text())
    except (OSError, ValueError):
        return None
    if meta.get("numba") != numba.__version__ or meta.get("python") != list(sys.version_info[:2]):
        return None
    import llvmlite.binding as ll

    if meta.get("triple") != ll.get_process_triple() and meta.get("triple") != ll.get_default_triple():
        return None
    try:
        have = ll.get_host_cpu_features()
    except RuntimeError:  # LLVM cannot tell on this host
        return None
    if not all(have.get(f, False) for f in _V3_FEATURES):
        return None
    return (meta["triple"], meta["cpu"], meta["features"])


def shipped_kernels_usable() -> bool:
    """Will kernels missing from numba's cache be loaded from the shipped folder on this machine?"""
    return _shipped_target() is not None


def _shipped_folder(py_file: str) -> Path | None:
    """The shipped folder of the kernels defined in ``py_file`` (None: not a structgen module)."""
    try:
        rel = Path(py_file).resolve().relative_to(_PACKAGE)
    except ValueError:
        return None
    return SHIPPED / rel.with_suffix("")


class ShippedKernelCache(FunctionCache):
    """numba's cache for one kernel, falling back to (or, in the build, writing) the shipped folder."""

    def __init__(self, py_func: Callable) -> None:
        super().__init__(py_func)
        folder = _shipped_folder(py_func.__code__.co_filename)
        self._shipped = None if folder is None else IndexDataCacheFile(
            cache_path=str(folder), filename_base=self._impl.filename_base,
            source_stamp=self._impl.locator.get_source_stamp())
        self._shipped_folder = folder

    def _load_overload(self, sig, target_context):
        if not self._enabled:
            return None
        if self._shipped is not None and _building():  # the build reads and writes the shipped folder only
            data = self._shipped.load(self._index_key(sig, target_context.codegen()))
            return None if data is None else self._impl.rebuild(target_context, data)
        data = super()._load_overload(sig, target_context)
        target = _shipped_target()
        if data is None and self._shipped is not None and target is not None:
            key = self._index_key(sig, target_context.codegen())
            data = self._shipped.load((key[0], target, *key[2:]))
            if data is not None:
                data = self._impl.rebuild(target_context, data)
        return data

    def _save_overload(self, sig, data):
        if not (self._shipped is not None and _building()):
            return super()._save_overload(sig, data)
        if not self._enabled or not self._impl.check_cachable(data):
            return None
        self._shipped_folder.mkdir(parents=True, exist_ok=True)
        self._shipped.save(self._index_key(sig, data.codegen), self._impl.reduce(data))
        return None


def kernel(**options: Any) -> Callable:
    """``numba.njit(cache=True, **options)``, its cache falling back to the shipped kernels."""
    def wrap(fn: Callable):
        disp = numba.njit(cache=True, **options)(fn)
        try:
            disp._cache = ShippedKernelCache(disp.py_func)
        except Exception:  # noqa: BLE001 - no usable cache location: numba's own (or none) as before
            pass
        return disp
    return wrap


def count_compiles() -> list[str]:
    """From now on, every numba compile in this process appends its function's name to the returned
    list (a load from a cache is no compile): what the shipped kernels save, made visible."""
    from numba.core import event

    compiled: list[str] = []

    class _Counter(event.Listener):
        def on_start(self, ev):
            compiled.append(ev.data["dispatcher"].py_func.__qualname__)

        def on_end(self, ev):
            pass

    event.register("numba:compile", _Counter())
    return compiled


# ------------------------------------------------------------------------------------------ build
def build_environment(cache: Path, folder: Path = SHIPPED) -> dict[str, str]:
    """The environment of a process that compiles the kernels for the shipped folder: numba reads its
    CPU settings once, so the build runs in a child process of its own.  ``cache``: an empty structgen
    cache for it, so that it runs what a first request runs (a token trie read from the disk cache
    instead of built reaches fewer kernels); the converted models are shared with the user's cache."""
    from .._cache import cache_root

    cache.mkdir(parents=True, exist_ok=True)
    models = cache_root() / "models"
    if models.is_dir() and not (cache / "models").exists():
        (cache / "models").symlink_to(models, target_is_directory=True)
    env = dict(os.environ, NUMBA_CPU_NAME=BASELINE_CPU, NUMBA_CPU_FEATURES="", HF_HUB_OFFLINE="1",
               STRUCTGEN_CACHE=str(cache))
    env[_BUILD_ENV] = str(folder)
    env.pop("NUMBA_BOUNDSCHECK", None)
    return env


def write_target(folder: Path = SHIPPED) -> dict:
    """In the build process, after its workload: record what the shipped kernels were compiled for."""
    from numba.core.registry import cpu_target

    triple, cpu, features = cpu_target.target_context.codegen().magic_tuple()
    if cpu != BASELINE_CPU or not _building():
        raise RuntimeError(f"the shipped kernels are built with NUMBA_CPU_NAME={BASELINE_CPU} in a process "
                           f"started with build_environment(), not for {cpu}")
    meta = {"triple": triple, "cpu": cpu, "features": features, "numba": numba.__version__,
            "python": list(sys.version_info[:2])}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / _TARGET_FILE).write_text(json.dumps(meta))
    return meta


def shipped_files(folder: Path = SHIPPED) -> list[Path]:
    """The shipped index and code files."""
    return sorted(p for p in folder.rglob("*") if p.suffix in (".nbi", ".nbc"))
