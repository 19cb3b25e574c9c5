"""The value a compressor puts on the wire: a sparse update of one tensor."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..checks import fail


@dataclass(frozen=True, eq=False)
class SparseUpdate:
    """Coordinates ``indices`` (flat, sorted, unique) of a tensor of ``shape`` carrying ``values``.

    ``index_seed`` is set when the receiver can regenerate ``indices`` from a seed it shares with
    the sender (random-k), so the values alone may travel ("values_only" encoding, esgd.md §4).
    The arrays are copied and made read-only: the value is immutable like the dataclass.
    """

    indices: np.ndarray
    values: np.ndarray
    shape: tuple[int, ...]
    index_seed: int | None = None

    def __post_init__(self) -> None:
        shape = tuple(int(n) for n in self.shape)
        size = math.prod(shape)
        indices = np.array(self.indices, copy=True)  # own copies: freezing must not touch the caller's
        values = np.array(self.values, copy=True)
        if indices.ndim != 1 or not np.issubdtype(indices.dtype, np.integer):
            raise fail("indices", indices.shape, "is not a 1-D integer array")
        if values.shape != indices.shape:
            raise fail("values", values.shape, f"does not match indices shape {indices.shape}")
        if indices.size > size:
            raise fail("indices", indices.size, f"are more than the tensor's {size} elements")
        if indices.size and (indices[0] < 0 or indices[-1] >= size or np.any(np.diff(indices) <= 0)):
            raise fail("indices", indices[:8].tolist(), f"are not sorted, unique and in [0, {size})")
        indices.setflags(write=False)
        values.setflags(write=False)
        object.__setattr__(self, "indices", indices)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "shape", shape)

    @property
    def size(self) -> int:
        """d, the number of elements of the original tensor."""
        return math.prod(self.shape)

    @property
    def nnz(self) -> int:
        """k, the number of coordinates sent."""
        return int(self.indices.size)

    @property
    def density(self) -> float:
        """rho = k / d."""
        return self.nnz / self.size

    def densify(self, dtype: np.dtype | type = np.float32) -> np.ndarray:
        """The dense tensor: ``values`` at ``indices``, zero elsewhere, in the original shape."""
        out = np.zeros(self.size, dtype=dtype)
        out[self.indices] = self.values
        return out.reshape(self.shape)


@dataclass(frozen=True, eq=False)
class QuantisedUpdate(SparseUpdate):
    """A quantiser's update: every coordinate (dequantised values) and the exact bits of its message.

    ``wire_bits`` holds (format, bits) for each of the method's wire formats
    (:data:`dnnbench.compression.wire.QUANTISED_ENCODINGS`), counted from the actual signs and levels.
    """

    wire_bits: tuple[tuple[str, int], ...] = ()

    def bits(self, encoding: str) -> int:
        """Exact bits of this message in ``encoding`` (one of its formats, or "dense" fp32)."""
        formats = dict(self.wire_bits)
        if encoding == "dense":
            return 32 * self.size
        if encoding not in formats:
            raise fail("encoding", encoding, f"is not a format of this quantised update; expected one of "
                       f"{(*formats, 'dense')}")
        return formats[encoding]


def decompress(update: SparseUpdate) -> np.ndarray:
    """GRACE-style ``decompress``: the dense tensor of ``update``."""
    return update.densify()


def average(updates: Sequence[SparseUpdate]) -> tuple[np.ndarray, int]:
    """The mean of the workers' updates of one tensor (dense, flat) and the size of their union support.

    What the parameter server does each synchronous round (esgd.md §2): scatter every sparse
    update into one accumulator and divide by the number of workers.
    """
    if not updates:
        raise fail("updates", [], "is empty; expected one update per worker")
    shape = updates[0].shape
    total = np.zeros(updates[0].size, dtype=np.float32)
    support = np.zeros(updates[0].size, dtype=bool)
    for i, update in enumerate(updates):
        if update.shape != shape:
            raise fail(f"updates[{i}].shape", update.shape, f"differs from updates[0].shape {shape}")
        total[update.indices] += update.values  # indices are unique within one update
        support[update.indices] = True
    total /= len(updates)
    return total, int(np.count_nonzero(support))
