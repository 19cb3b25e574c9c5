"""Baselines behind the same interface as ESGD (esgd.md §3).

All keep their state per tensor name and ignore the loss. "Error feedback" (Seide et al. 2014,
Stich et al. 2018) keeps what was not sent in a residual e and adds it to the next gradient.
"""

from __future__ import annotations

import numpy as np

from .. import checks as v
from . import wire
from .compressor import Compressor, kept, name_seed, top_k
from .methods import drop_ratio as checked_drop_ratio
from .sparse import SparseUpdate


class DenseSGD(Compressor):
    """Plain SGD: every coordinate, unchanged."""

    method = "dense"

    def __init__(self, drop_ratio: float | None = None, *, seed: int = 0) -> None:
        super().__init__()
        if drop_ratio not in (None, 0, 0.0):
            raise v.fail("drop_ratio", drop_ratio, "must be 0 or None for dense SGD")

    def _compress(self, flat: np.ndarray, name: str, step: int) -> SparseUpdate:
        return SparseUpdate(np.arange(flat.size, dtype=np.int64), flat, (flat.size,))


class _Residuals(Compressor):
    """A compressor with an error-feedback residual per tensor."""

    def __init__(self) -> None:
        super().__init__()
        self._residual: dict[str, np.ndarray] = {}

    def _accumulate(self, flat: np.ndarray, name: str) -> np.ndarray:
        """e + g, the error-feedback accumulator (a new array; stored as the residual by ``_keep``)."""
        residual = self._residual.get(name)
        return flat.copy() if residual is None else residual + flat

    def _keep(self, name: str, acc: np.ndarray, sent_indices: np.ndarray, sent_values: np.ndarray) -> None:
        acc[sent_indices] -= sent_values  # what was not sent stays for the next step
        self._residual[name] = acc

    def reset(self) -> None:
        super().reset()
        self._residual.clear()

    def residual_of(self, name: str) -> np.ndarray:
        """A read-only view of the residual of tensor ``name``."""
        view = self._residual[name].view()
        view.setflags(write=False)
        return view


class TopKEF(_Residuals):
    """Top-k by |g + e| with error feedback (Stich et al. 2018; Aji & Heafield 2017)."""

    method = "topk_ef"

    def __init__(self, drop_ratio: float, *, seed: int = 0) -> None:
        super().__init__()
        self.drop_ratio = checked_drop_ratio(drop_ratio)

    def _compress(self, flat: np.ndarray, name: str, step: int) -> SparseUpdate:
        acc = self._accumulate(flat, name)
        chosen = top_k(np.abs(acc), kept(self.drop_ratio, flat.size))
        values = acc[chosen]
        self._keep(name, acc, chosen, values)
        return SparseUpdate(chosen, values, (flat.size,))


class RandomK(_Residuals):
    """Random-k coordinates drawn from a seed shared by all workers, with error feedback.

    The indices of step t of tensor ``name`` come from ``default_rng([seed, crc32(name), t])``: every
    worker holding the same ``seed`` sends the same coordinates, so only the values travel
    ("values_only") and the union support equals one worker's. Without error feedback the values
    are scaled by d / k to stay unbiased.
    """

    method = "randk"

    def __init__(self, drop_ratio: float, *, seed: int = 0, error_feedback: bool = True) -> None:
        super().__init__()
        self.drop_ratio = checked_drop_ratio(drop_ratio)
        self.seed = v.integer("seed", seed, low=0)
        if not isinstance(error_feedback, bool):
            raise v.fail("error_feedback", error_feedback, "is not a bool")
        self.error_feedback = error_feedback

    def indices(self, name: str, step: int, size: int) -> np.ndarray:
        """The sorted indices of step ``step`` of tensor ``name``: a pure function of the shared seed."""
        rng = np.random.default_rng([self.seed, name_seed(name), step])
        return np.sort(rng.choice(size, kept(self.drop_ratio, size), replace=False))

    def _compress(self, flat: np.ndarray, name: str, step: int) -> SparseUpdate:
        chosen = self.indices(name, step, flat.size)
        if not self.error_feedback:
            values = flat[chosen] * np.float32(flat.size / chosen.size)
            return SparseUpdate(chosen, values, (flat.size,), self.seed)
        acc = self._accumulate(flat, name)
        values = acc[chosen]
        self._keep(name, acc, chosen, values)
        return SparseUpdate(chosen, values, (flat.size,), self.seed)

    @property
    def encodings(self) -> tuple[str, ...]:
        return wire.ENCODINGS


class ThresholdSGD(_Residuals):
    """Threshold SGD (Strom 2015): send +-tau where |g + e| >= tau; the rest stays in e.

    The density follows from ``tau`` and the gradients, not from a drop ratio. Strom packs the sign
    and a 31-bit index into one 32-bit word; here the fixed +-tau values are counted like any other
    value by the encodings of esgd.md §4 (a conservative count).
    """

    method = "threshold"

    def __init__(self, drop_ratio: float | None = None, *, tau: float = 0.01, seed: int = 0) -> None:
        super().__init__()
        if drop_ratio is not None:
            raise v.fail("drop_ratio", drop_ratio, "must be None for threshold SGD (its density follows tau)")
        self.tau = v.number("tau", tau, low=0.0, low_open=True)

    def _compress(self, flat: np.ndarray, name: str, step: int) -> SparseUpdate:
        acc = self._accumulate(flat, name)
        chosen = np.flatnonzero(np.abs(acc) >= self.tau)
        values = np.where(acc[chosen] > 0, np.float32(self.tau), np.float32(-self.tau))
        self._keep(name, acc, chosen, values)
        return SparseUpdate(chosen, values, (flat.size,))


__all__ = ["DenseSGD", "RandomK", "ThresholdSGD", "TopKEF"]
