"""Regular expressions (Python / JSON Schema ``pattern`` syntax) to byte DFAs.

The parse tree and the Thompson NFA come from :mod:`structgen.grammar.regex_syntax`; this module
determinizes the NFA (a whole-string counted class as a chain of copies), sends patterns with
lookarounds to the exact construction of :mod:`structgen.grammar.lookaround`, and keeps the
automata it built in memory and on disk.
"""
from __future__ import annotations

import functools
import io
import re
import time

from ..automata import charclass as cc
from ..automata.fsa import DFA, determinize, dfa_cache, minimize, trim
from ..errors import GrammarError, UnsupportedFeature
from . import lookaround
from .regex_syntax import (COUNTED_REPEAT_MIN, MAX_REPEAT_EXPANSION, add_alternatives, any_node, build_nfa,
                           counted_class_dfa, has_anchor, parse, python_regex)

__all__ = ["COUNTED_REPEAT_MIN", "MAX_REPEAT_EXPANSION", "add_alternatives", "any_node", "build_nfa",
           "compile_regex", "compile_terminal", "counted_class_dfa", "has_anchor", "literal_pattern", "parse",
           "python_regex"]


DISK_CACHE_VERSION = 1
#: Automata that took less than this to build are not saved to disk (loading one costs about as much).
DISK_CACHE_MIN_SECONDS = 0.005


@dfa_cache(128 << 20)
def _compile_cached(pattern: str, search: bool, json_string: bool, flags: int) -> DFA:
    """Compile once per process, and keep the DFA on disk: a grammar's lexers are
    precomputed automata, so a later process loads them instead of rebuilding."""
    import hashlib

    import numpy as np

    from .._cache import cache_root, code_fingerprint, write_verified
    from . import unicode_props

    code = code_fingerprint(*_DFA_BUILDERS)
    # an automaton of \p{...} holds the Unicode tables of this Python (and of the regex package)
    data = unicode_props.data_version() if ("\\p" in pattern or "\\P" in pattern) else ""
    key = hashlib.sha256(repr((DISK_CACHE_VERSION, code, pattern, search, json_string,
                               flags) + ((data,) if data else ())).encode()).hexdigest()[:32]
    path = cache_root() / "regex" / f"{key}.npz"
    cached = _load_dfa(path)
    if cached is not None:
        return cached
    enc = cc.JSON_STRING if json_string else cc.UTF8
    t0 = time.perf_counter()
    if lookaround.has_lookaround(parse(pattern, flags)):
        dfa = lookaround.compile_lookaround(pattern, encoder=enc, search=search, flags=flags)
    else:
        dfa = counted_class_dfa(pattern, encoder=enc, search=search, flags=flags)
        if dfa is None:
            dfa = determinize(build_nfa(pattern, encoder=enc, search=search, flags=flags))
    if time.perf_counter() - t0 < DISK_CACHE_MIN_SECONDS:
        return dfa  # rebuilding is cheaper than a file: only slow automata are worth saving
    buf = io.BytesIO()
    np.savez(buf, trans=dfa.trans, accept=dfa.accept, classmap=dfa.classmap, start=dfa.start)
    write_verified(path, buf.getvalue())
    return dfa


#: The modules whose code decides what a cached DFA is: a change to any of them retires old entries.
_DFA_BUILDERS = ("structgen.grammar.regex", "structgen.grammar.regex_syntax", "structgen.automata.fsa", "structgen.automata.search_kernels",
                 "structgen.automata.subset_kernels", "structgen.automata.minimize_kernels",
                 "structgen.automata.product_kernels", "structgen.automata.table_kernels",
                 "structgen.automata.charclass", "structgen.grammar.lookaround",
                 "structgen.grammar.lookaround_construction", "structgen.grammar.unicode_props")


def _load_dfa(path) -> DFA | None:
    """A cached DFA, or None when absent or damaged (checksum, then shapes and ranges checked)."""
    import numpy as np

    from .._cache import read_verified

    data = read_verified(path)
    if data is None:
        return None
    try:
        with np.load(io.BytesIO(data)) as z:
            trans, accept, classmap, start = z["trans"], z["accept"], z["classmap"], int(z["start"])
    except Exception:  # noqa: BLE001 - a verified file of another layout: rebuild
        return None
    n = trans.shape[0] if trans.ndim == 2 else -1
    if n < 1 or accept.shape != (n,) or classmap.shape != (256,) or not 0 <= start < n \
            or (classmap.size and (classmap.min() < 0 or classmap.max() >= trans.shape[1])) \
            or (trans.size and (trans.min() < -1 or trans.max() >= n)):
        return None
    return DFA(trans, accept, classmap, start)


def compile_regex(pattern: str, *, search: bool = False, json_string: bool = False, flags: int = 0) -> DFA:
    """Compile ``pattern`` to a trimmed byte DFA (cached).

    ``json_string=True`` accepts the characters as they appear inside a JSON
    string literal (escapes allowed), without the surrounding quotes.
    """
    key = (pattern, search, json_string, flags)
    failed = _FAILED.get(key)
    if failed is not None:  # a pattern over the limits fails once, not on every retry
        raise _detached(failed)
    try:
        return _compile_cached(pattern, search, json_string, flags)
    except (GrammarError, UnsupportedFeature) as e:
        if len(_FAILED) < 1024:
            _FAILED[key] = _detached(e)
        raise


_FAILED: dict[tuple, Exception] = {}


def _detached(e: Exception) -> Exception:
    """A copy of ``e`` without traceback or context: a remembered failure must not keep the
    frames it was raised in (and the whole compile they hold) alive, nor collect a new
    traceback entry on every re-raise."""
    out = e.__class__.__new__(e.__class__)
    out.__dict__.update(e.__dict__)
    out.args = e.args
    return out


@functools.lru_cache(maxsize=256)
def compile_terminal(pattern: str, flags: int = 0) -> lookaround.Terminal:
    """A Lark terminal's lexeme DFA (UTF-8) and its follow conditions: the conditions a lookahead at
    its end puts on the next byte, lazy quantifiers as the shortest match (see
    :mod:`structgen.grammar.lookaround`).  A pattern without lookarounds or anchors is the plain
    (cached) automaton, cut at its first accepting states when it has a lazy quantifier."""
    tree = parse(pattern, flags)
    if not lookaround.has_lookaround(tree) and not has_anchor(pattern, flags):
        dfa = compile_regex(pattern, flags=flags)
        if lookaround.has_lazy(tree) and dfa.accept.any():
            trans = dfa.trans.copy()
            trans[dfa.accept] = -1  # the shortest match ends at the first accepting state
            dfa = minimize(trim(DFA(trans, dfa.accept.copy(), dfa.classmap.copy(), dfa.start)))
        return lookaround.Terminal(dfa, {})
    return lookaround.compile_terminal(pattern, flags)


def literal_pattern(text: str) -> str:
    return re.escape(text)
