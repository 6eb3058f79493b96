"""numba kernels behind rule automata: trimming (the subset construction is
:func:`structgen.automata.subset_kernels.subset_construction`, shared with byte automata).

Every rule body of a grammar becomes a symbol NFA (``structgen.engine.rules``);
determinising and trimming them one Python set at a time was a third of a
median JSON Schema compile.
"""
from __future__ import annotations

import numpy as np

from ..automata.table_kernels import csr
from ..automata.kernel_cache import kernel

__all__ = ["trim_rules"]


@kernel(nogil=True)
def trim_rules(dfa_ptr, is_final, o_src, o_sym, o_dst):
    """Which edges survive trimming: nonterminal edges into rules that derive no string are
    dropped (productive rules by fixpoint), then edges into states that can no longer reach a
    final state of their rule.  Returns ``(productive per rule, keep per edge)``."""
    n_rules = len(dfa_ptr) - 1
    n = len(is_final)
    ptr, order = csr(n, o_src)
    productive = np.zeros(n_rules, dtype=np.bool_)
    seen = np.zeros(n, dtype=np.int64)
    stamp = 0
    stack = np.empty(max(n, 1), dtype=np.int64)
    changed = True
    while changed:
        changed = False
        for r in range(n_rules):
            if productive[r]:
                continue
            stamp += 1
            top = 1
            stack[0] = dfa_ptr[r]
            seen[dfa_ptr[r]] = stamp
            while top > 0:
                top -= 1
                s = stack[top]
                if is_final[s]:
                    productive[r] = True
                    changed = True
                    break
                for k in range(ptr[s], ptr[s + 1]):
                    e = order[k]
                    sym = o_sym[e]
                    if sym & 1 and not productive[sym >> 1]:
                        continue
                    t = o_dst[e]
                    if seen[t] != stamp:
                        seen[t] = stamp
                        stack[top] = t
                        top += 1
    keep = np.ones(len(o_src), dtype=np.bool_)
    for e in range(len(o_src)):
        if o_sym[e] & 1 and not productive[o_sym[e] >> 1]:
            keep[e] = False
    # co-reachability of final states over the kept edges (backwards)
    rptr, rorder = csr(n, o_dst)
    live = is_final.copy()
    top = 0
    for s in range(n):
        if live[s]:
            stack[top] = s
            top += 1
    while top > 0:
        top -= 1
        t = stack[top]
        for k in range(rptr[t], rptr[t + 1]):
            e = rorder[k]
            if keep[e] and not live[o_src[e]]:
                live[o_src[e]] = True
                stack[top] = o_src[e]
                top += 1
    for e in range(len(o_src)):
        if not live[o_dst[e]]:
            keep[e] = False
    return productive, keep
