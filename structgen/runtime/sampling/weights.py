"""Summaries of a weighted sample set in log space, shared by AWRS, SMC, twisted SMC and the bench."""
from __future__ import annotations

import math
from typing import Iterable

import numpy as np

__all__ = ["effective_sample_size", "log_mean_exp"]


def effective_sample_size(log_weights: Iterable[float]) -> float:
    """``(sum w)^2 / sum w^2`` of the weights ``exp(log_weights)`` (0 when every weight is 0)."""
    lw = np.asarray(list(log_weights), dtype=np.float64)
    lw = lw[np.isfinite(lw)]
    if not len(lw):
        return 0.0
    w = np.exp(lw - lw.max())
    return float(w.sum() ** 2 / (w ** 2).sum())


def log_mean_exp(log_weights: Iterable[float], n: int | None = None) -> float:
    """``log(sum exp(log_weights) / n)``, ``n`` the number of weights by default (a larger ``n``
    counts draws of weight 0 that are not listed); ``-inf`` when no weight is positive."""
    lw = np.asarray(list(log_weights), dtype=np.float64)
    count = len(lw) if n is None else n
    lw = lw[np.isfinite(lw)]
    if not len(lw) or count <= 0:
        return float("-inf")
    m = float(lw.max())
    return m + math.log(float(np.exp(lw - m).sum()) / count)
