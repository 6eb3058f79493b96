"""GGUF files parsed once, and fast.

gguf's ``GGUFReader`` walks every metadata array element by element through numpy memmap slices
(2.3 s for SmolLM2's 49,152-token vocabulary; a memmap slice costs ~3x a plain array's), and a first
``load_model`` opened the same file five times: transformers' GGUF conversion three (config, weights,
tokenizer), structgen's BOS flag and 4-bit packing two more.  :func:`reader` parses a file once per
(path, size, mtime) through plain array views of the same mapping (0.6 s), and
:func:`shared_readers` makes every ``gguf.GGUFReader`` opened inside it, transformers' included, the
one parse (and memoises gguf's tensor-name maps, which transformers rebuilt 397 times: 5.7 s).
The parse is gguf's own code; only how bytes are sliced changes.
"""
from __future__ import annotations

import contextlib
import functools
import os
import threading
from pathlib import Path
from typing import Any, Iterator

import numpy as np

__all__ = ["reader", "shared_readers"]

_LOCK = threading.RLock()
_CACHE: dict[tuple, Any] = {}
_SHARING = 0  # depth of nested shared_readers()
_ORIGINAL: tuple = ()  # gguf's reader and tensor-name map while shared_readers() replaces them


@functools.lru_cache(maxsize=1)
def _reader_class() -> type:
    from gguf import GGUFReader

    class _PlainSliceReader(GGUFReader):
        """gguf's reader, slicing a plain ndarray view of its memmap (same bytes, no memmap per slice)."""

        def _get(self, offset, dtype, count=1, override_order=None):
            buf = self.__dict__.get("_plain")
            if buf is None:
                buf = self._plain = self.data.view(np.ndarray)
            count = int(count)
            arr = buf[offset:offset + np.dtype(dtype).itemsize * count].view(dtype=dtype)[:count]
            return arr.view(arr.dtype.newbyteorder(self.byte_order if override_order is None else override_order))

    return _PlainSliceReader


def _key(path: str | os.PathLike[str]) -> tuple:
    p = Path(path).resolve()
    st = p.stat()
    return (str(p), st.st_size, st.st_mtime_ns)


def reader(path: str | os.PathLike[str]) -> Any:
    """A parsed ``gguf.GGUFReader`` of ``path`` (read-only): the one parse while :func:`shared_readers`
    is open, a fresh one otherwise."""
    key = _key(path)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            return hit
        r = _reader_class()(str(path))
        if _SHARING:
            _CACHE[key] = r
        return r


@contextlib.contextmanager
def shared_readers() -> Iterator[None]:
    """Inside: every GGUF opened (by structgen, or by transformers through ``gguf.GGUFReader``) is parsed
    once; gguf's ``get_tensor_name_map`` is memoised.  The parses are dropped on leaving."""
    import gguf
    import gguf.gguf_reader as gguf_reader_module

    global _SHARING, _ORIGINAL
    _reader_class()  # subclass gguf's own reader before it is replaced below
    with _LOCK:
        if _SHARING == 0:
            _ORIGINAL = original = gguf.GGUFReader, gguf.get_tensor_name_map

            def opened(path, mode="r"):
                return reader(path) if mode == "r" else original[0](path, mode)

            gguf.GGUFReader = opened
            gguf_reader_module.GGUFReader = opened
            gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(original[1])
        _SHARING += 1
    try:
        yield
    finally:
        with _LOCK:
            _SHARING -= 1
            if _SHARING == 0:
                gguf.GGUFReader, gguf.get_tensor_name_map = _ORIGINAL
                gguf_reader_module.GGUFReader = _ORIGINAL[0]
                _CACHE.clear()
