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

Quantisers (:data:`QUANTISER_METHODS`) send every coordinate in fewer bits; their formats are their own
(:data:`QUANTISED_ENCODINGS`), with B elements per fp32 scale or norm ("bucket"), s levels:

| method    | format       | message of d elements                                                 |
|-----------|--------------|-----------------------------------------------------------------------|
| "signsgd" | "sign"       | d + 32 ceil(d / B)   (1 sign bit per element + one fp32 scale)        |
| "qsgd"    | "qsgd_fixed" | 32 ceil(d / B) + d (1 + ceil(log2(s + 1)))   (norm; sign + level bits) |
| "qsgd"    | "qsgd_elias" | 32 ceil(d / B) + w(nnz + 1) + sum over non-zero levels of             |
|           |              | w(gap) + 1 + w(level)   (Elias omega code w, exact for the message)   |

:func:`method_bits_per_element` is the per-element cost the performance model charges for any method:
the sparse encoding's for sparsifiers, the fixed-width format for quantisers (whose density is 1).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from .. import checks as v
from .methods import METHODS, QUANTISER_METHODS, SHARED_INDEX_METHODS

__all__ = [
    "ENCODINGS", "LOSSLESS_ENCODINGS", "METHODS", "QSGD_DEFAULT_BUCKET", "QSGD_DEFAULT_LEVELS",
    "QUANTISED_ENCODINGS", "QUANTISER_METHODS", "binary_entropy_bits", "bits_per_element", "elias_omega_bits",
    "level_bits", "message_bits", "method_bits_per_element", "pull_bits_per_element", "qsgd_elias_bits",
    "qsgd_fixed_bits", "selection_ops_per_element", "sign_bits", "union_density", "update_bits",
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
    "signsgd": 5.0,  # p = g + e (1), |p| summed (1), sign and scale (2), e = p - delta (1)
    "qsgd": 8.0,  # squares summed for the norm (2), s |g| / norm (1), a uniform draw (2),
    #               floor and compare (2), sign and dequantise (1)
}


def selection_ops_per_element(method: str) -> float:
    """Element operations per tensor element that ``method`` spends choosing and bookkeeping a step.

    Charge ``selection_ops_per_element(m) * d`` element-ops per worker per step. Estimates
    (ours) counted from the implementations in :mod:`dnnbench.esgd`.
    """
    v.choice("method", method, METHODS)
    return _SELECTION_OPS_PER_ELEMENT[method]


# -- quantisers ------------------------------------------------------------------------------------

#: The wire formats of each quantiser's messages (the first is the fixed-width one the model charges).
QUANTISED_ENCODINGS: dict[str, tuple[str, ...]] = {"signsgd": ("sign",), "qsgd": ("qsgd_fixed", "qsgd_elias")}

#: QSGD's defaults here (ours): s = 7 levels, so a level and its sign fill 4 bits; one norm per 512 elements.
QSGD_DEFAULT_LEVELS = 7
QSGD_DEFAULT_BUCKET = 512

_SCALE_BITS = 32  # one fp32 scale (signSGD) or norm (QSGD) per bucket


def _buckets(size: int, bucket_size: int | None) -> int:
    """Number of buckets of ``bucket_size`` elements (None: the whole tensor is one bucket)."""
    return 1 if bucket_size is None else -(-size // bucket_size)


def level_bits(levels: int) -> int:
    """Bits of one QSGD level in [0, s] at fixed width: ceil(log2(s + 1))."""
    s = v.integer("levels", levels, low=1)
    return int(s).bit_length()  # = ceil(log2(s + 1)) for s >= 1


def sign_bits(size: int, bucket_size: int | None = None) -> int:
    """Exact bits of a signSGD message: one sign bit per element + one fp32 scale per bucket."""
    d = v.integer("size", size, low=1)
    b = None if bucket_size is None else v.integer("bucket_size", bucket_size, low=1)
    return d + _SCALE_BITS * _buckets(d, b)


def qsgd_fixed_bits(size: int, levels: int, bucket_size: int | None = QSGD_DEFAULT_BUCKET) -> int:
    """Exact bits of a fixed-width QSGD message: an fp32 norm per bucket, a sign bit and a level per element."""
    d = v.integer("size", size, low=1)
    b = None if bucket_size is None else v.integer("bucket_size", bucket_size, low=1)
    return _SCALE_BITS * _buckets(d, b) + d * (1 + level_bits(levels))


def elias_omega_bits(n: int | np.ndarray) -> int | np.ndarray:
    """Length in bits of the Elias omega code of each positive integer ``n`` (1 -> 1 bit, 2 -> 3, 16 -> 11).

    omega(n) writes n in binary, then recursively the length of that minus one, until 1; a final 0
    ends the code: |omega(n)| = 1 + sum of the bit lengths of n, floor(log2 n), ... while > 1.
    """
    x = np.asarray(n, dtype=np.int64)
    if np.any(x < 1):
        raise v.fail("n", x[x < 1][:5].tolist(), "are not positive integers")
    total = np.ones_like(x)
    m = x.copy()
    while np.any(m > 1):
        more = m > 1
        length = np.floor(np.log2(np.maximum(m, 1))).astype(np.int64) + 1  # bit length of m
        total += np.where(more, length, 0)
        m = np.where(more, length - 1, m)
    return int(total) if total.ndim == 0 else total


def qsgd_elias_bits(signed_levels: np.ndarray, bucket_size: int | None = QSGD_DEFAULT_BUCKET) -> int:
    """Exact bits of a QSGD message in the Elias-coded format, for its integer levels (sign included).

    Counted (reconstructed after QSGD's "efficient coding" with Elias integer codes): an fp32 norm per
    bucket, omega(nnz + 1) for the number of non-zero levels, then per non-zero level omega of the gap to
    the previous non-zero position (the first: its position + 1), one sign bit and omega(|level|).
    """
    levels = np.asarray(signed_levels).ravel()
    d = v.integer("size", levels.size, low=1)
    b = None if bucket_size is None else v.integer("bucket_size", bucket_size, low=1)
    where = np.flatnonzero(levels)
    gaps = np.diff(where, prepend=-1)
    body = (np.sum(elias_omega_bits(gaps)) + where.size
            + np.sum(elias_omega_bits(np.abs(levels[where]).astype(np.int64)))) if where.size else 0
    return int(_SCALE_BITS * _buckets(d, b) + elias_omega_bits(where.size + 1) + body)


def method_bits_per_element(method: str, encoding: str, density: float | np.ndarray, *,
                            levels: int = QSGD_DEFAULT_LEVELS,
                            bucket_size: int | None | Literal["default"] = "default") -> float | np.ndarray:
    """Bits per original element that ``method`` puts on the wire (what the performance model charges).

    Sparsifiers: :func:`bits_per_element` of ``encoding`` at ``density``. Quantisers send every element, so
    ``density`` and ``encoding`` do not apply (both are still checked) and the fixed-width format counts:
    signSGD 1 + 32 / B bits, QSGD 1 + ceil(log2(s + 1)) + 32 / B with B = ``bucket_size`` elements per
    fp32 scale or norm. B = None is one per tensor, whose 32 / d is left out; "default" is each class's
    default (signSGD: None, so 1 bit; QSGD: 512 and s = 7, so 4.0625 bits).
    Vectorised over ``density``; a scalar in gives a ``float`` out.
    """
    v.choice("method", method, METHODS)
    if method not in QUANTISER_METHODS:
        return bits_per_element(encoding, density)
    v.choice("encoding", encoding, ENCODINGS)
    rho = _density(density)
    if bucket_size == "default":
        bucket_size = None if method == "signsgd" else QSGD_DEFAULT_BUCKET
    b = None if bucket_size is None else v.integer("bucket_size", bucket_size, low=1)
    scale = 0.0 if b is None else _SCALE_BITS / b
    per = 1.0 + scale if method == "signsgd" else 1.0 + level_bits(levels) + scale
    out = np.full_like(rho, per)
    return float(out) if out.ndim == 0 else out


def pull_bits_per_element(method: str, encoding: str, density: float | np.ndarray,
                          n_workers: int | np.ndarray) -> float | np.ndarray:
    """Bits per element of the PS's download when it serves the union of ``n_workers`` supports.

    Sparsifiers: ``encoding`` at the union density 1 - (1 - rho)^N (shared-seed random-k: rho itself, one
    common support); quantisers: dense fp32 (the average of quantised updates is not quantised). Capped at
    dense fp32 (a sender never does worse than dense). Vectorised over ``density`` and ``n_workers``.
    """
    v.choice("method", method, METHODS)
    v.choice("encoding", encoding, ENCODINGS)
    rho = _density(density)
    n = np.asarray(n_workers, dtype=float)
    if np.any(n < 1):
        raise v.fail("n_workers", n[n < 1][:5].tolist(), "are not at least 1")
    if method in QUANTISER_METHODS:
        out = np.full(np.broadcast(rho, n).shape, float(_VALUE_BITS))
    else:
        shape = np.broadcast(rho, n).shape
        union = np.broadcast_to(rho if method in SHARED_INDEX_METHODS else 1.0 - (1.0 - rho) ** n, shape)
        out = np.minimum(float(_VALUE_BITS), np.asarray(bits_per_element(encoding, union)))
    return float(out) if np.ndim(out) == 0 else out
