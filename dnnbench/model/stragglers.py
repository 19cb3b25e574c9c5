"""Stragglers in synchronous rounds (docs/model.md §6, reconstructed).

A synchronous round ends when the slowest of its n replicas has computed its k samples. If one
replica's time for a local mini-batch varies with coefficient of variation v (``Machine.step_time_cv``:
the operating system, the allocator and the framework, measured by ``dnnbench validate``), the round's
compute takes the expected maximum of n such times:

    E[max] ≈ μ · (1 + v_k · e_n),   v_k = v / sqrt(max(1, k / b)),   e_n = E[max of n standard normals]

with μ the mean, k / b the mini-batches of b samples in a push interval (independent mini-batches
average their jitter) and e_n the expected maximum of n independent standard normal variables
(e_1 = 0, e_2 = 1/√π = 0.564, e_10 = 1.539, growing like sqrt(2 ln n)), computed by quadrature.
With v = 0 (the presets) rounds are deterministic, as in the published model.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

#: The table's replica counts: log-spaced from 1 to 10⁸ (beyond it, its last value grows like sqrt(2 ln n)).
_TABLE_N = np.geomspace(1.0, 1e8, 801)


@cache
def _table() -> np.ndarray:
    """E[max of n standard normals] at ``_TABLE_N``: ∫₀^∞ (1 − Φⁿ) dx − ∫₋∞^0 Φⁿ dx by the trapezoidal
    rule on each half-line (the integrand jumps at 0), on a grid fine enough for an error < 1e-5."""
    from scipy.special import log_ndtr  # only when a synchronous round first needs it

    half = np.linspace(0.0, 12.0, 6001)
    pos = 1.0 - np.exp(_TABLE_N[:, None] * log_ndtr(half)[None, :])
    neg = np.exp(_TABLE_N[:, None] * log_ndtr(-half)[None, :])
    return np.asarray(np.trapezoid(pos, half, axis=1) - np.trapezoid(neg, half, axis=1))


def expected_max_standard_normal(n: Any) -> np.ndarray:
    """E[max of n independent standard normal variables] for real n ≥ 1 (values below 1 count as 1,
    where it is 0): 1/√π = 0.564 for n = 2, 1.539 for n = 10. Interpolated in log n from a table
    computed once (error < 1e-4), so it costs an optimizer's million configurations one ``np.interp``."""
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    log_n = np.log(n)
    e = np.interp(log_n, np.log(_TABLE_N), _table())
    beyond = log_n > np.log(_TABLE_N[-1])  # the asymptote's growth past the table
    e = np.where(beyond, e + np.sqrt(2.0 * log_n) - np.sqrt(2.0 * np.log(_TABLE_N[-1])), e)
    return np.where(n > 1.0, e, 0.0)


def straggler_factor(replicas: Any, step_time_cv: float, push_interval_samples: Any,
                     local_batch_samples: float) -> np.ndarray:
    """1 + v_k · e_n: the expected slowest of ``replicas`` compute times over their mean (≥ 1)."""
    batches = np.maximum(1.0, np.asarray(push_interval_samples, dtype=float) / float(local_batch_samples))
    return np.asarray(1.0 + step_time_cv / np.sqrt(batches) * expected_max_standard_normal(replicas))
