"""Where structgen keeps derived data (tokenizer tables, regex automata, converted models).

One root, ``$STRUCTGEN_CACHE`` or ``~/.cache/structgen``, so a user can find
and delete everything structgen wrote in one place.

A cache file cannot rot: every entry is written whole (a temporary file of its own, then an atomic
rename, so concurrent writers -- threads or processes -- never interleave and a reader never sees half
a file) and starts with a magic tag and the SHA-256 of its payload, checked on every read.  A
truncated, bit-flipped or foreign file reads as absent (and is removed), so the caller rebuilds it:
never a crash, never a wrong automaton.  Keys that depend on code carry :func:`code_fingerprint`, so an
upgrade that changes how an entry is built stops using the old entries.
"""
from __future__ import annotations

import functools
import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["cache_root", "atomic_pickle_dump", "pickle_load_or_none", "use_cold_regex_cache", "write_verified",
           "read_verified", "code_fingerprint"]

_MAGIC = b"SGC1"
_DIGEST = 32


def cache_root() -> Path:
    """The cache folder (not created here): ``$STRUCTGEN_CACHE`` or ``~/.cache/structgen``."""
    env = os.environ.get("STRUCTGEN_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "structgen"


def write_verified(path: Path, payload: bytes) -> None:
    """Write ``payload`` to ``path`` with its checksum, atomically (a temporary file of this writer's
    own, then a rename).  Failures (read-only home, full disk) are swallowed: the cache is an
    optimisation, never a requirement."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + hashlib.sha256(payload).digest() + payload)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        pass


def read_verified(path: Path) -> bytes | None:
    """The payload written by :func:`write_verified`, or None when the file is absent, truncated,
    corrupted or not ours (a damaged file is removed, so the rebuilt entry replaces it)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    head = len(_MAGIC) + _DIGEST
    if len(data) >= head and data[:len(_MAGIC)] == _MAGIC and \
            hashlib.sha256(data[head:]).digest() == data[len(_MAGIC):head]:
        return data[head:]
    try:
        os.unlink(path)
    except OSError:
        pass
    return None


def atomic_pickle_dump(obj: Any, path: Path) -> None:
    """Pickle ``obj`` to ``path`` through :func:`write_verified`."""
    write_verified(path, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def pickle_load_or_none(path: Path) -> Any:
    """Load a pickle written by :func:`atomic_pickle_dump`; ``None`` if absent, damaged or unreadable
    (e.g. written by a version whose classes are gone)."""
    data = read_verified(path)
    if data is None:
        return None
    try:
        return pickle.loads(data)
    except Exception:  # noqa: BLE001 - any unreadable entry is simply rebuilt
        return None


@functools.lru_cache(maxsize=None)
def code_fingerprint(*modules: str) -> str:
    """A short hash of the source of ``modules`` (dotted names): part of a cache key, so entries
    built by other code -- an upgrade, a local edit -- are not used."""
    import importlib.util

    h = hashlib.sha256()
    for name in modules:
        spec = importlib.util.find_spec(name)
        origin = getattr(spec, "origin", None) if spec else None
        try:
            h.update(Path(origin).read_bytes() if origin else name.encode())
        except OSError:
            h.update(name.encode())
    return h.hexdigest()[:16]


def use_cold_regex_cache() -> None:
    """Point ``$STRUCTGEN_CACHE`` (for this process and its children) at a temporary folder
    that links every cache entry except ``regex/``: benchmark compile times are then cold
    (no DFA saved by an earlier run), while converted models and tokenizer tables are reused."""
    import atexit
    import shutil

    real = cache_root()
    tmp = Path(tempfile.mkdtemp(prefix="structgen-cold-cache-"))
    if real.is_dir():
        for entry in real.iterdir():
            if entry.name != "regex":
                try:
                    (tmp / entry.name).symlink_to(entry)
                except OSError:
                    pass
    os.environ["STRUCTGEN_CACHE"] = str(tmp)
    atexit.register(shutil.rmtree, tmp, True)
