"""Beam search under a constraint: ``beams`` rows of one batched KV cache, each step extended by the
best allowed tokens.

A beam's score is the sum of the model's log-probabilities of its tokens, taken among the tokens the
constraint allows (the filter changes which paths exist, not the probabilities of the tokens on
them).  Scores only fall as a beam grows, so the search stops once the best finished beam beats
every live one."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["beam_search"]


def beam_search(model: Any, prompt_ids: Sequence[int], matcher: Any, *, beams: int,
                max_tokens: int) -> list[tuple[str, float]]:
    """Finished outputs as ``(text, score)``, best first (at most ``beams``)."""
    from ..runtime.sampling.constraint import allowed_ids, limit_to_eos
    from ..runtime.sampling.lm import ModelLM

    lm = ModelLM(model, prompt_ids)
    eos = frozenset(lm.eos_ids)
    rows = lm.particles(beams)
    logp = rows.start()
    live = [(0.0, [], matcher.copy())]  # one live beam at first; its row is row 0
    done: list[tuple[str, float]] = []
    for step in range(max_tokens):
        cands = []
        for r, (score, ids, m) in enumerate(live):
            allowed = allowed_ids(m, eos_only=limit_to_eos(step, max_tokens))
            if len(allowed) == 0:
                continue
            sub = logp[r][allowed]
            top = np.argsort(sub)[-beams:]
            cands += [(score + float(sub[j]), r, int(allowed[j])) for j in top]
        cands.sort(key=lambda c: -c[0])
        nxt = []
        for score, r, t in cands:
            if t in eos:
                if len(done) < beams:
                    done.append((model.info.decode_bytes(live[r][1]).decode("utf-8", "replace"), score))
                continue
            if len(nxt) < beams:
                m = live[r][2].copy()
                m.accept_token(t)
                nxt.append((score, live[r][1] + [t], m, r))
        if not nxt or len(done) >= beams or (done and max(d[1] for d in done) >= nxt[0][0]):
            break
        parents = [n[3] for n in nxt]
        parents += [parents[0]] * (beams - len(parents))  # keep the cache's row count
        rows.reorder(parents)
        logp = rows.advance([n[1][-1] for n in nxt] + [nxt[0][1][-1]] * (beams - len(nxt)))
        live = [(s, ids, m) for s, ids, m, _ in nxt]
    done.sort(key=lambda d: -d[1])
    return done
