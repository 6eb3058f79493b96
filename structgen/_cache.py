"""Where structgen keeps derived data (tokenizer tables, converted models).

One root, ``$STRUCTGEN_CACHE`` or ``~/.cache/structgen``, so a user can find
and delete everything structgen wrote in one place.
"""
from __future__ import annotations

import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["cache_root", "atomic_pickle_dump", "pickle_load_or_none", "use_cold_regex_cache"]


def cache_root() -> Path:
    """The cache folder (not created here): ``$STRUCTGEN_CACHE`` or ``~/.cache/structgen``."""
    env = os.environ.get("STRUCTGEN_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "structgen"


def atomic_pickle_dump(obj: Any, path: Path) -> None:
    """Write ``obj`` to ``path`` via a temp file + rename, so a reader never sees half a file.

    Failures (read-only home, full disk) are swallowed: the cache is an
    optimisation, never a requirement.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        pass


def pickle_load_or_none(path: Path) -> Any:
    """Load a pickle written by ``atomic_pickle_dump``; ``None`` if absent or unreadable."""
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError):
        return None


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
