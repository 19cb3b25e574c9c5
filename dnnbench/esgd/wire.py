"""Cost on the wire of sparse updates, and the selection compute of each method (esgd.md §4).

Pure and vectorised, for the performance model: :func:`bits_per_element` gives the bits per
*original* element at density rho = k / d, :func:`update_bits` the exact bits of one message.

| encoding       | bits per element | message of k of d elements            |
|----------------|------------------|---------------------------------------|
| "pairs32"      | 64 rho           | 64 k   (32-bit index, fp32 value)     |
| "fp16_index32" | 48 rho           | 48 k   (32-bit index, fp16 value)     |
| "bitmap"       | 1 + 32 rho       | d + 32 k                              |
| "entropy"      | H(rho) + 32 rho  | ceil(d H(k/d)) + 32 k  (a lower bound)|
| "values_only"  | 32 rho           | 32 k   (indices from a shared seed)   |
| "dense"        | 32               | 32 d                                  |

H is the binary entropy in bits. "entropy" is the information-theoretic bound of coding the index
set, not a codec; "fp16_index32" counts bits only (the simulation does not round values to fp16).
"""

from __future__ import annotations

import numpy as np

from . import _validate as v
from .methods import METHODS

__all__ = [
    "ENCODINGS", "LOSSLESS_ENCODINGS", "METHODS", "binary_entropy_bits", "bits_per_element",
    "message_bits", "selection_ops_per_element", "union_density", "update_bits",
]

ENCODINGS: tuple[str, ...] = ("pairs32", "fp16_index32", "bitmap", "entropy", "values_only", "dense")

#: Encodings a real sender can use without changing the fp32 values ("entropy" is a bound,
#: "fp16_index32" rounds values). A sender that picks the cheapest per message uses these.
LOSSLESS_ENCODINGS: tuple[str, ...] = ("pairs32", "bitmap", "values_only", "dense")

_VALUE_BITS = 32  # fp32 value
_HALF_BITS = 16  # fp16 value
_INDEX_BITS = 32  # uint32 index


def binary_entropy_bits(density: float | np.ndarray) -> float | np.ndarray:
    """H(rho) = -rho log2 rho - (1 - rho) log2 (1 - rho), with H(0) = H(1) = 0."""
    rho = np.asarray(density, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -(rho * np.log2(rho) + (1.0 - rho) * np.log2(1.0 - rho))
    h = np.where((rho <= 0.0) | (rho >= 1.0), 0.0, h)
    return float(h) if h.ndim == 0 else h


def _density(density: float | np.ndarray, name: str = "density") -> np.ndarray:
    try:
        rho = np.asarray(density, dtype=float)
    except (TypeError, ValueError):
        raise v.fail(name, density, "is not a number or an array of numbers in [0, 1]") from None
    if not np.all(np.isfinite(rho)) or np.any(rho < 0.0) or np.any(rho > 1.0):
        bad = rho if rho.ndim == 0 else rho[~((rho >= 0.0) & (rho <= 1.0))][:3]
        raise v.fail(name, bad.tolist(), "is not in [0, 1] (k / d, the fraction of coordinates sent)")
    return rho


def bits_per_element(encoding: str, density: float | np.ndarray) -> float | np.ndarray:
    """Bits on the wire per original element for density rho = k / d (esgd.md §4 table).

    Vectorised over ``density``; a scalar in gives a ``float`` out.
    """
    v.choice("encoding", encoding, ENCODINGS)
    rho = _density(density)
    if encoding == "pairs32":
        out = (_INDEX_BITS + _VALUE_BITS) * rho
    elif encoding == "fp16_index32":
        out = (_INDEX_BITS + _HALF_BITS) * rho
    elif encoding == "bitmap":
        out = 1.0 + _VALUE_BITS * rho  # one presence bit per element + the values
    elif encoding == "entropy":
        out = np.asarray(binary_entropy_bits(rho)) + _VALUE_BITS * rho
    elif encoding == "values_only":
        out = _VALUE_BITS * rho  # the receiver regenerates the indices from the shared seed
    else:  # dense
        out = np.full_like(rho, float(_VALUE_BITS))
    return float(out) if np.ndim(out) == 0 else out


def update_bits(encoding: str, nnz: int, size: int, *, shared_indices: bool = False) -> int:
    """Exact bits of one message carrying ``nnz`` of ``size`` coordinates in ``encoding``.

    "values_only" needs ``shared_indices`` (the indices come from a seed the receiver knows);
    asking for it otherwise raises ``ValueError``, since the receiver could not place the values.
    """
    d = v.integer("size", size, low=1)
    k = v.integer("nnz", nnz, low=0, high=d)
    return int(message_bits(encoding, np.int64(k), np.int64(d), shared_indices=shared_indices))


def message_bits(encoding: str, nnz: np.ndarray, size: np.ndarray, *,
                 shared_indices: bool = False) -> np.ndarray:
    """:func:`update_bits` over arrays of message sizes (broadcast), as int64; no range checks."""
    v.choice("encoding", encoding, ENCODINGS)
    k = np.asarray(nnz, dtype=np.int64)
    d = np.asarray(size, dtype=np.int64)
    if encoding == "pairs32":
        return (_INDEX_BITS + _VALUE_BITS) * k
    if encoding == "fp16_index32":
        return (_INDEX_BITS + _HALF_BITS) * k
    if encoding == "bitmap":
        return d + _VALUE_BITS * k  # one presence bit per element + the values
    if encoding == "entropy":  # ceil(d H(k/d)); the 1e-9 keeps exact integers (d H = 10) from rounding up
        index_bits = np.ceil(d * np.asarray(binary_entropy_bits(k / d)) - 1e-9).astype(np.int64)
        return index_bits + _VALUE_BITS * k
    if encoding == "values_only":
        if not shared_indices:
            raise v.fail("encoding", encoding, "needs indices drawn from a shared seed (method 'randk')")
        return _VALUE_BITS * k
    return _VALUE_BITS * d + 0 * k


def union_density(density: float | np.ndarray, n_workers: int) -> float | np.ndarray:
    """Expected density of the union of ``n_workers`` independent supports: 1 - (1 - rho)^N.

    What the parameter server sends down when it serves the union of the workers' updates
    (esgd.md §4). Shared-seed random-k has one common support: its union density is rho itself.
    """
    n = v.integer("n_workers", n_workers, low=1)
    rho = _density(density)
    out = 1.0 - (1.0 - rho) ** n
    return float(out) if out.ndim == 0 else out


# Element operations per tensor element for the selection and state updates of each method.
# Our estimates from the operations in the implementations (not measured on a device); one "op"
# is one read-modify-write of a float. Selection by introselect (np.argpartition) costs about 3
# comparisons per element on average.
_SELECTION_OPS_PER_ELEMENT: dict[str, float] = {
    "dense": 0.0,  # nothing to select
    "topk_ef": 6.0,  # e + g (1), |.| (1), introselect (3), residual write-back (1)
    "randk": 2.0,  # e + g (1), residual write-back (1); drawing k indices is O(k), not O(d)
    "threshold": 4.0,  # e + g (1), |.| and compare (2), residual write-back (1)
    "dgc": 9.0,  # u = m u + g (2), v += u (1), |v| (1), introselect (3), masking of u and v (2)
    "esgd": 12.0,  # g + r (1), beta r + g (2), |g| (1), select top-k of h, ties by |g| (4),
    #               credit h[C] += c (1), |r| > tau scan (2), r[C] = 0 (1)
    "esgd_no_residual": 7.0,  # |g| (1), select top-k of h, ties by |g| (4), credit (1), gather (1)
    "topk_esgd_residual": 11.0,  # |g| (1), introselect (3), g + r (1), beta r + g (2),
    #                             |r| > tau scan (2), r[C] = 0 (1), gather (1)
}


def selection_ops_per_element(method: str) -> float:
    """Element operations per tensor element that ``method`` spends choosing and bookkeeping a step.

    Charge ``selection_ops_per_element(m) * d`` element-ops per worker per step. Estimates
    (ours) counted from the implementations in :mod:`dnnbench.esgd`.
    """
    v.choice("method", method, METHODS)
    return _SELECTION_OPS_PER_ELEMENT[method]
