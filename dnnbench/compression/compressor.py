"""The compressor interface: GRACE-shaped, plus an explicit loss channel (esgd.md §3).

GRACE's ``compress(tensor, name) -> (payload, ctx)`` and PyTorch DDP hooks pass no loss, but ESGD
decides what to send from the loss. Here a worker calls :meth:`Compressor.observe_loss` once per
step with its mini-batch loss, then :meth:`Compressor.compress` once per tensor. All state
(residuals, credit, momentum) is kept per tensor ``name``.
"""

from __future__ import annotations

import dataclasses
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from .. import checks as v
from . import wire
from .methods import kept_count
from .sparse import SparseUpdate


class Compressor(ABC):
    """Turns each worker's gradient of a named tensor into a :class:`SparseUpdate`."""

    #: The method name, one of :data:`dnnbench.compression.METHODS`.
    method: ClassVar[str]

    def __init__(self) -> None:
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._steps: dict[str, int] = {}
        self._loss: float | None = None

    def observe_loss(self, loss: float) -> None:
        """Tell the compressor this step's mini-batch loss (call before the step's ``compress`` calls)."""
        self._loss = v.number("loss", loss)

    @abstractmethod
    def _compress(self, flat: np.ndarray, name: str, step: int) -> SparseUpdate:
        """Compress the flat float32 gradient ``flat`` of tensor ``name`` at its ``step`` (0, 1, ...)."""

    def compress(self, grad: np.ndarray, name: str) -> SparseUpdate:
        """The update to send for gradient ``grad`` of tensor ``name``; updates this tensor's state."""
        if not isinstance(name, str) or not name:
            raise v.fail("name", name, "is not a non-empty tensor name")
        array = np.asarray(grad)
        if array.size == 0:
            raise v.fail("grad", array.shape, "is empty; expected at least one element")
        known = self._shapes.setdefault(name, array.shape)
        if known != array.shape:
            raise v.fail("grad", array.shape, f"differs from the earlier shape {known} of tensor {name!r}")
        flat = np.ascontiguousarray(array, dtype=np.float32).ravel()
        if not np.all(np.isfinite(flat)):
            raise v.fail("grad", f"<{np.count_nonzero(~np.isfinite(flat))} non-finite values>",
                         f"of tensor {name!r} is not finite")
        step = self._steps.get(name, 0)
        self._steps[name] = step + 1
        update = self._compress(flat, name, step)
        if update.shape != array.shape:  # implementations build flat updates
            update = dataclasses.replace(update, shape=array.shape)
        return update

    def decompress(self, update: SparseUpdate) -> np.ndarray:
        """The dense tensor an update stands for (GRACE's ``decompress``)."""
        return update.densify()

    def bits(self, update: SparseUpdate, encoding: str) -> int:
        """Exact bits of ``update`` on the wire in ``encoding`` (esgd.md §4)."""
        return wire.update_bits(encoding, update.nnz, update.size,
                                shared_indices=update.index_seed is not None)

    @property
    def encodings(self) -> tuple[str, ...]:
        """The encodings this method's updates can travel in."""
        return tuple(e for e in wire.ENCODINGS if e != "values_only")

    def stats(self) -> dict[str, float]:
        """Method-specific counters for reports (empty by default)."""
        return {}

    def reset(self) -> None:
        """Forget all per-tensor state and the last loss (subclasses extend it for their own state)."""
        self._shapes.clear()
        self._steps.clear()
        self._loss = None


def _kth_largest(score: np.ndarray, k: int) -> Any:
    """The k-th largest entry (1 <= k <= d).

    Integers use a histogram, O(d + max); floats a full sort. numpy's introselect
    (``np.partition``) degrades to ~10 ms per 100k elements on gradients with many equal entries
    (dead ReLUs, blank pixels), where the SIMD sort stays near 1 ms.
    """
    d = score.size
    if np.issubdtype(score.dtype, np.integer) and score.min() >= 0:
        counts = np.bincount(score)
        at_or_above = np.cumsum(counts[::-1])  # at_or_above[i]: entries >= max - i
        return score.dtype.type(counts.size - 1 - int(np.searchsorted(at_or_above, k)))
    return np.sort(score)[d - k]


def top_k(score: np.ndarray, k: int) -> np.ndarray:
    """Sorted indices of the ``k`` largest entries of ``score``; among equal entries the lowest indices win."""
    return _top_k(score, k, lambda ties, need: ties[:need])


def top_k_lex(primary: np.ndarray, secondary: np.ndarray, k: int) -> np.ndarray:
    """Sorted indices of the ``k`` largest entries by ``primary``, ties broken by larger ``secondary``.

    The k-th largest primary value splits the entries into a sure part and a tie group; the tie
    group is cut by ``secondary``.
    """
    return _top_k(primary, k, lambda ties, need: ties[top_k(secondary[ties], need)])


def _top_k(score: np.ndarray, k: int, cut_ties: Callable[[np.ndarray, int], np.ndarray]) -> np.ndarray:
    """Entries above the k-th largest value, plus ``cut_ties(tie indices, how many)`` of those equal to it."""
    d = score.size
    if k >= d:
        return np.arange(d, dtype=np.int64)
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    kth = _kth_largest(score, k)
    mask = score > kth
    need = k - int(np.count_nonzero(mask))
    if need:
        mask[cut_ties(np.flatnonzero(score == kth), need)] = True
    return np.flatnonzero(mask)


def kept(drop: float, size: int) -> int:
    """k = ceil((1 - drop) d) (esgd.md §2)."""
    return kept_count(drop, size)


def name_seed(name: str) -> int:
    """A stable 32-bit number for a tensor name (Python's ``hash`` is salted per process)."""
    return zlib.crc32(name.encode("utf-8"))


__all__ = ["Compressor", "kept", "name_seed", "top_k", "top_k_lex"]
