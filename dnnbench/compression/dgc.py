"""DGC-lite: Deep Gradient Compression's three core techniques (Lin et al., ICLR 2018).

- momentum correction: the worker keeps the momentum, u = m u + g, and accumulates v = v + u;
  it sends the top-k of |v| (so the parameter server must apply plain SGD, without momentum);
- momentum factor masking: u and v are zeroed where sent, so stale momentum does not push twice;
- sparsity warm-up: the density falls geometrically from ``warmup_start_density`` to the target
  over the first ``warmup_steps`` steps (DGC: 25 % -> 6.25 % -> ... -> 0.1 % over four epochs).

Left out ("lite"): local gradient clipping and the sampled-threshold top-k.
"""

from __future__ import annotations

import numpy as np

from .. import checks as v
from .compressor import Compressor, kept, top_k
from .methods import drop_ratio as checked_drop_ratio
from .sparse import SparseUpdate


class DGCLite(Compressor):
    """Top-k of the momentum-corrected accumulator, with masking and a sparsity warm-up."""

    method = "dgc"

    def __init__(self, drop_ratio: float, *, momentum: float = 0.9, warmup_steps: int = 0,
                 warmup_start_density: float = 0.25, seed: int = 0) -> None:
        super().__init__()
        self.drop_ratio = checked_drop_ratio(drop_ratio)
        self.momentum = v.number("momentum", momentum, low=0.0, high=1.0, high_open=True)
        self.warmup_steps = v.integer("warmup_steps", warmup_steps, low=0)
        self.warmup_start_density = v.number("warmup_start_density", warmup_start_density,
                                             low=0.0, high=1.0, low_open=True)
        self._velocity: dict[str, np.ndarray] = {}  # u
        self._accumulated: dict[str, np.ndarray] = {}  # v

    def density_at(self, step: int) -> float:
        """Target density of step ``step``: geometric warm-up, then 1 - drop_ratio."""
        final = 1.0 - self.drop_ratio
        start = self.warmup_start_density
        if step >= self.warmup_steps or final >= start:
            return final
        t = step / self.warmup_steps
        return float(start ** (1.0 - t) * final ** t)

    def _compress(self, flat: np.ndarray, name: str, step: int) -> SparseUpdate:
        u = self._velocity.get(name)
        u = flat.copy() if u is None else self.momentum * u + flat
        acc = self._accumulated.get(name)
        acc = u.copy() if acc is None else acc + u
        chosen = top_k(np.abs(acc), kept(1.0 - self.density_at(step), flat.size))
        values = acc[chosen]
        acc[chosen] = 0.0  # momentum factor masking
        u[chosen] = 0.0
        self._velocity[name] = u.astype(np.float32, copy=False)
        self._accumulated[name] = acc.astype(np.float32, copy=False)
        return SparseUpdate(chosen, values, (flat.size,))

    def reset(self) -> None:
        super().reset()
        self._velocity.clear()
        self._accumulated.clear()


__all__ = ["DGCLite"]
