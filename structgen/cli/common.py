"""What several commands share: the command line a run records, and model loads kept offline."""
from __future__ import annotations

import argparse
import os
import shlex

__all__ = ["command_line", "offline"]


def command_line(args: argparse.Namespace) -> str:
    """The ``structgen ...`` command that produced ``args`` (``main`` keeps the argv as ``args._argv``),
    quoted for a shell: what a benchmark's results record as their command."""
    return "structgen " + " ".join(shlex.quote(a) for a in args._argv)


def offline() -> None:
    """Models and tokenizers come from the local caches only (``HF_HUB_OFFLINE=1`` unless set)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
