"""Quantising baselines behind the same interface (esgd.md §3): EF-signSGD and QSGD.

Both send every coordinate in fewer bits; their updates are :class:`QuantisedUpdate`\\ s, which carry
the dequantised values (what the receiver reconstructs) and the exact bits of the message in each of
the method's wire formats (:data:`dnnbench.compression.wire.QUANTISED_ENCODINGS`):

- :class:`SignSGD` — scaled sign with error feedback (EF-SignSGD, Karimireddy et al. 2019):
  p = g + e, send (|p|_1 / B) sign(p) per bucket of B elements (default: the whole tensor), e = p - sent.
  On the wire: one sign bit per element and one fp32 scale per bucket.
- :class:`QSGD` — Alistarh et al. 2017: per bucket of B elements (default 512), norm n = |v|_2 and
  level l_i in {0..s} from stochastic rounding of s |v_i| / n, so that E[n sign(v_i) l_i / s] = v_i.
  On the wire: the fp32 norm, then either fixed-width sign + level bits ("qsgd_fixed") or Elias-omega
  coded gaps and levels of the non-zero levels ("qsgd_elias"). Unbiased; error feedback optional.

The per-worker random stream of QSGD is ``default_rng([seed, crc32(name), step])``: seeded, and
independent of the order in which tensors are compressed.
"""

from __future__ import annotations

import numpy as np

from .. import checks as v
from . import wire
from .baselines import _Residuals
from .compressor import name_seed
from .sparse import QuantisedUpdate, SparseUpdate


class _Quantiser(_Residuals):
    """A compressor whose updates carry their own bit counts (every coordinate is sent)."""

    def __init__(self, drop_ratio: float | None, error_feedback: bool, bucket_size: int | None) -> None:
        super().__init__()
        if drop_ratio not in (None, 0, 0.0):
            raise v.fail("drop_ratio", drop_ratio, f"must be None for {type(self).__name__} (it sends every "
                         "coordinate, quantised)")
        if not isinstance(error_feedback, bool):
            raise v.fail("error_feedback", error_feedback, "is not a bool")
        self.error_feedback = error_feedback
        self.bucket_size = None if bucket_size is None else v.integer("bucket_size", bucket_size, low=1)

    def _input(self, flat: np.ndarray, name: str) -> np.ndarray:
        """p = g + e with error feedback, else a copy of g."""
        return self._accumulate(flat, name) if self.error_feedback else flat.copy()

    def _buckets(self, p: np.ndarray) -> np.ndarray:
        """``p`` zero-padded and reshaped to (buckets, B)."""
        b = p.size if self.bucket_size is None else self.bucket_size
        rows = -(-p.size // b)
        padded = np.zeros(rows * b, dtype=np.float64)
        padded[:p.size] = p
        return padded.reshape(rows, b)

    def _finish(self, p: np.ndarray, name: str, values: np.ndarray,
                wire_bits: tuple[tuple[str, int], ...]) -> QuantisedUpdate:
        everything = np.arange(p.size, dtype=np.int64)
        values = values.astype(np.float32)
        if self.error_feedback:
            self._keep(name, p, everything, values)
        return QuantisedUpdate(everything, values, (p.size,), None, wire_bits)

    def bits(self, update: SparseUpdate, encoding: str) -> int:
        """Exact bits of ``update`` in one of :attr:`encodings` (the method's formats, or "dense" fp32)."""
        if not isinstance(update, QuantisedUpdate):
            raise v.fail("update", type(update).__name__, f"is not a QuantisedUpdate of method {self.method!r}")
        return update.bits(encoding)

    @property
    def encodings(self) -> tuple[str, ...]:
        return (*wire.QUANTISED_ENCODINGS[self.method], "dense")


class SignSGD(_Quantiser):
    """Scaled sign of g + e with error feedback (EF-SignSGD, Karimireddy et al. 2019): 1 bit per element.

    The learning rate is applied by the parameter server, so the residual is kept in gradient units
    (EF-SignSGD folds the step size into p; with a constant rate the two agree up to that factor).
    ``error_feedback=False`` gives plain scaled signSGD. sign(0) is sent as +1 (one bit has no zero).
    """

    method = "signsgd"

    def __init__(self, drop_ratio: float | None = None, *, error_feedback: bool = True,
                 bucket_size: int | None = None, seed: int = 0) -> None:
        super().__init__(drop_ratio, error_feedback, bucket_size)

    def _compress(self, flat: np.ndarray, name: str, step: int) -> SparseUpdate:
        p = self._input(flat, name)
        rows = self._buckets(p)
        per_row = np.minimum(rows.shape[1], p.size - rows.shape[1] * np.arange(rows.shape[0]))  # last: shorter
        scale = (np.abs(rows).sum(axis=1) / per_row).astype(np.float32)  # mean |p|, an fp32 on the wire
        signs = np.where(rows >= 0, np.float32(1.0), np.float32(-1.0))
        values = (scale[:, None] * signs).ravel()[:p.size]
        return self._finish(p, name, values, (("sign", wire.sign_bits(p.size, self.bucket_size)),))


class QSGD(_Quantiser):
    """QSGD (Alistarh et al. 2017): s levels per bucket, stochastic rounding, unbiased.

    ``levels`` is s (s = 1: a ternary code); ``bucket_size`` the elements per fp32 norm (None: the
    whole tensor). Defaults (ours): s = 7 (sign + level fill 4 bits), B = 512, no error feedback.
    """

    method = "qsgd"

    def __init__(self, drop_ratio: float | None = None, *, levels: int = wire.QSGD_DEFAULT_LEVELS,
                 bucket_size: int | None = wire.QSGD_DEFAULT_BUCKET, seed: int = 0,
                 error_feedback: bool = False) -> None:
        super().__init__(drop_ratio, error_feedback, bucket_size)
        self.levels = v.integer("levels", levels, low=1, high=2**30)
        self.seed = v.integer("seed", seed, low=0)

    def quantise(self, p: np.ndarray, name: str, step: int) -> tuple[np.ndarray, np.ndarray]:
        """(signed integer levels, fp32 norm per bucket) of the flat vector ``p`` at ``step`` of ``name``."""
        rows = self._buckets(p)
        norms = np.sqrt(np.square(rows).sum(axis=1)).astype(np.float32)  # fp32 on the wire
        safe = np.where(norms > 0, norms, np.float32(1.0)).astype(np.float64)
        ratio = np.abs(rows) / safe[:, None] * self.levels  # in [0, s]
        low = np.floor(ratio)
        rng = np.random.default_rng([self.seed, name_seed(name), step])
        level = low + (rng.random(ratio.shape) < ratio - low)
        level = np.minimum(level, self.levels).astype(np.int64)  # rounding can't pass s; guard fp noise
        signed = np.where(rows < 0, -level, level)
        return signed, norms

    def _compress(self, flat: np.ndarray, name: str, step: int) -> SparseUpdate:
        p = self._input(flat, name)
        signed, norms = self.quantise(p, name, step)
        values = (norms.astype(np.float64)[:, None] * signed / self.levels).ravel()[:p.size]
        levels = signed.ravel()[:p.size]
        wire_bits = (("qsgd_fixed", wire.qsgd_fixed_bits(p.size, self.levels, self.bucket_size)),
                     ("qsgd_elias", wire.qsgd_elias_bits(levels, self.bucket_size)))
        return self._finish(p, name, values, wire_bits)


__all__ = ["QSGD", "SignSGD"]
