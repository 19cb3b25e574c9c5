"""Names of the compression methods, in one place (no imports of the implementations)."""

from __future__ import annotations

import math
from typing import Any

from .. import checks

#: One-line description of every method; the keys, in this order, are :data:`METHODS`.
DESCRIPTIONS: dict[str, str] = {
    "dense": "plain SGD: every coordinate, fp32",
    "topk_ef": "top-k by |g + e| with error feedback (Stich et al. 2018; Aji & Heafield 2017)",
    "randk": "random-k from a seed shared by all workers, with error feedback",
    "threshold": "threshold SGD: send +-tau where |g + e| >= tau, keep the rest (Strom 2015)",
    "dgc": "DGC-lite: momentum correction, momentum factor masking, sparsity warm-up (Lin et al. 2018)",
    "esgd": "ESGD, reconstructed: loss-driven hidden-weight credit + discounted momentum residual",
    "esgd_no_residual": "ablation: ESGD's loss-gated selection without the residual",
    "topk_esgd_residual": "ablation: top-k by |g| with ESGD's discounted residual and swap-in",
    "signsgd": "EF-signSGD: sign of g + e scaled by its mean |.|, 1 bit per element (Karimireddy et al. 2019)",
    "qsgd": "QSGD: s levels, stochastic rounding, one fp32 norm per bucket (Alistarh et al. 2017)",
}

#: The method names accepted by :func:`dnnbench.compression.make_compressor` and the cost functions.
METHODS: tuple[str, ...] = tuple(DESCRIPTIONS)

#: Methods whose index set is drawn from a seed shared by all workers: every worker sends the same
#: coordinates, the union support is the support of one worker, and the values may travel alone.
SHARED_INDEX_METHODS: frozenset[str] = frozenset({"randk"})

#: Quantisers: every coordinate travels, in fewer bits; their bits per element come from the method
#: (:func:`dnnbench.compression.wire.method_bits_per_element`), not from a sparse encoding and a density.
QUANTISER_METHODS: frozenset[str] = frozenset({"signsgd", "qsgd"})

#: Methods that take no drop ratio (dense sends all; threshold SGD's density follows tau; quantisers
#: send every coordinate).
NO_DROP_RATIO_METHODS: frozenset[str] = frozenset({"dense", "threshold"}) | QUANTISER_METHODS


def drop_ratio(value: Any, name: str = "drop_ratio") -> float:
    """A drop ratio: the fraction of coordinates *not* sent, in [0, 1)."""
    return checks.number(name, value, low=0.0, high=1.0, high_open=True)


def kept_count(drop: float, size: int) -> int:
    """k = ceil((1 - drop) * d), at least 1 and at most d (esgd.md §2).

    The product is rounded to 9 decimal places before the ceiling so that float noise
    ((1 - 0.7) * 10 = 3.0000000000000004) does not add a coordinate.
    """
    raw = (1.0 - drop) * size
    return max(1, min(size, math.ceil(round(raw, 9))))
