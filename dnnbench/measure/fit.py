"""Fit the model's constants to measurements with scipy (docs/validation.md §"Calibration").

Compute (docs/model.md §4, one thread): per sample

    t = Σ_kind MACs_kind · t_mac(kind) · [(1 - φ) + φ / c]  +  (elem ops + |W| / b) · t_elem  +  n_pass · o / b
    φ = min(1, LLC / (4 · |W|))

where n_pass is the number of layer passes per mini-batch (2 per layer: forward and backward) and o
the framework's fixed cost per pass (``Machine.layer_overhead_s``). Fitted by ``scipy.optimize.nnls``
(o is the intercept per layer pass; rows at two batch sizes separate it from the per-sample terms)
for t_mac(conv), t_mac(fc), t_elem and o, with c = cache_speedup chosen on a grid.

Transfers: one-way time of S bytes t = L + 8·S / B + 2·c·S, where c (``copy_time_s_per_byte``) is
the CPU per byte of a message end, fitted from the ranks' CPU time per round trip, and L and B by
non-negative least squares on relative residuals.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..units import FP32_BYTES


@dataclass(frozen=True)
class ComputeFit:
    mac_time_conv_s: float
    mac_time_fc_s: float
    elem_time_s: float
    cache_speedup: float
    residuals: dict[str, float]  # case name -> predicted / measured - 1
    layer_overhead_s: float = 0.0  # fixed seconds per layer pass (forward or backward of a mini-batch)
    step_scale: float = 1.0  # the factor the fitted times were scaled by to reproduce a step (``scaled``)

    def scaled(self, factor: float) -> ComputeFit:
        """Every fitted time (MACs, element ops, the per-layer overhead) times ``factor``; the
        residuals stay those of the fit."""
        return replace(self, mac_time_conv_s=self.mac_time_conv_s * factor, mac_time_fc_s=self.mac_time_fc_s * factor,
                       elem_time_s=self.elem_time_s * factor, layer_overhead_s=self.layer_overhead_s * factor,
                       step_scale=self.step_scale * factor)

    def to_dict(self) -> dict[str, Any]:
        r = np.abs(np.asarray(list(self.residuals.values())))
        return {"mac_time_s": {"conv": self.mac_time_conv_s, "fc": self.mac_time_fc_s},
                "elem_time_s": self.elem_time_s, "cache_speedup": self.cache_speedup,
                "layer_overhead_s": self.layer_overhead_s, "step_scale": self.step_scale, "residuals": self.residuals,
                "median_abs_residual": float(np.median(r)) if r.size else None,
                "max_abs_residual": float(np.max(r)) if r.size else None}


def _features(rows: list[dict[str, Any]], llc_bytes: int, cache_speedup: float) -> np.ndarray:
    """Columns (conv MACs·g, FC MACs·g, elem ops, layer passes / b) per row and sample; a row with
    ``parts`` sums its parts (a whole training step = its layers plus the update). A part's
    ``passes`` (default 2: forward and backward) counts its layer runs per mini-batch."""
    out = np.zeros((len(rows), 4))
    for i, r in enumerate(rows):
        for part in r.get("parts", [r]):
            out[i, 3] += float(part.get("passes", 2.0)) / r["batch_size"]
            w = float(part.get("weights", 0.0))
            phi = min(1.0, llc_bytes / max(w * FP32_BYTES, 1.0))
            g = (1.0 - phi) + phi / cache_speedup
            col = {"conv": 0, "fc": 1}.get(part.get("group", ""), None)
            if col is not None:
                out[i, col] += part["macs"] * g
            # Local SGD update: |W| element ops per mini-batch (docs/model.md §4), unless excluded.
            out[i, 2] += part.get("elem_ops", 0.0) + part.get("update_elem_ops", w / r["batch_size"])
    return out


def predict_rows(rows: list[dict[str, Any]], llc_bytes: int, t_conv: float, t_fc: float, t_elem: float,
                 cache_speedup: float, layer_overhead_s: float = 0.0) -> np.ndarray:
    """The model's seconds per sample of each row (the equation in the module docstring)."""
    return _features(rows, llc_bytes, cache_speedup) @ np.array([t_conv, t_fc, t_elem, layer_overhead_s])


#: Cache speed-ups tried (the model is linear in the times for a fixed speed-up: NNLS on each).
CACHE_GRID = (1.0, 1.1, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0)


def fit_compute(rows: list[dict[str, Any]], llc_bytes: int, time_key: str = "cpu_s",
                relative_to: str = "each", overhead: bool = True) -> ComputeFit:
    """Fit of the compute constants to ``rows`` (seconds per mini-batch in ``time_key``).

    For each cache speed-up c on a grid, non-negative least squares gives t_mac(conv), t_mac(fc),
    t_elem and (``overhead``) the per-layer-pass overhead o; the c with the smallest residual wins.
    ``relative_to="each"`` weighs every row by 1/measured (relative residuals: micro-benchmarks);
    ``"total"`` by 1/Σ measured over the rows of the same batch size (the layers of a network by their
    share of its step at that batch size). A row's optional ``weight`` multiplies its residual.
    """
    meas = np.array([r[time_key] / r["batch_size"] for r in rows], dtype=float)
    if relative_to == "each":
        scale = 1.0 / meas
    else:
        sizes = np.array([r["batch_size"] for r in rows])
        scale = np.array([1.0 / meas[sizes == b].sum() for b in sizes])
    scale = scale * np.array([float(r.get("weight", 1.0)) for r in rows])
    grid = CACHE_GRID if any(_out_of_cache(r, llc_bytes) for r in rows) else (1.0,)
    coef, c = _nnls_on_grid(rows, llc_bytes, meas, scale, grid, overhead, tie=False)
    shown = _features(rows, llc_bytes, 1.0)[:, :2].sum(axis=0) > 0
    if shown.all() and (coef[:2] == 0).any():
        # NNLS zeroed a kind the data show (its layers are overhead-dominated): one shared MAC time,
        # so that the fitted rows are predicted with the constants the model will use.
        coef, c = _nnls_on_grid(rows, llc_bytes, meas, scale, grid, overhead, tie=True)
    t_conv, t_fc, t_elem, o = (float(v) for v in coef)
    # A kind the data do not show borrows the other kind's time.
    t_conv = t_conv or t_fc or 1e-11
    t_fc = t_fc or t_conv
    t_elem = t_elem or 1e-10
    pred = predict_rows(rows, llc_bytes, t_conv, t_fc, t_elem, c, o)
    residuals = {r["name"]: float(p / m - 1.0) for r, p, m in zip(rows, pred, meas, strict=False)}
    return ComputeFit(t_conv, t_fc, t_elem, float(c), residuals, layer_overhead_s=min(o, 0.5))


def _nnls_on_grid(rows: list[dict[str, Any]], llc_bytes: int, meas: np.ndarray, scale: np.ndarray,
                  grid: tuple[float, ...], overhead: bool, tie: bool) -> tuple[np.ndarray, float]:
    """(t_conv, t_fc, t_elem, o) and the cache speed-up of the smallest NNLS residual over ``grid``;
    ``tie`` fits one MAC time for conv and FC."""
    from scipy.optimize import nnls

    best: tuple[float, np.ndarray, float] | None = None
    for c in grid:
        a = _features(rows, llc_bytes, c)
        if not overhead:
            a[:, 3] = 0.0
        if tie:
            a = np.column_stack([a[:, 0] + a[:, 1], a[:, 2], a[:, 3]])
        coef, norm = nnls(a * scale[:, None], meas * scale)
        if tie:
            coef = np.array([coef[0], coef[0], coef[1], coef[2]])
        if best is None or norm < best[0] - 1e-12:
            best = (norm, coef, c)
    if best is None:  # unreachable: the grid is never empty
        raise ValueError("no cache speed-up tried")
    return best[1], float(best[2])


def _out_of_cache(row: dict[str, Any], llc_bytes: int) -> bool:
    return any(p.get("group") in ("conv", "fc") and p.get("weights", 0) * FP32_BYTES > llc_bytes
               for p in row.get("parts", [row]))


#: Loopback bandwidth when the copies explain the whole transfer time (no link term left).
LOOPBACK_CAP_BITS_PER_S = 1e12


@dataclass(frozen=True)
class TransferFit:
    latency_s: float
    bits_per_s: float  # the link term left once both ends' copies are charged
    residuals: dict[str, float]
    copy_time_s_per_byte: float = 0.0  # CPU per byte sent or received (``Machine.copy_time_s_per_byte``)

    def to_dict(self) -> dict[str, Any]:
        r = np.abs(np.asarray(list(self.residuals.values())))
        return {"latency_s": self.latency_s, "bits_per_s": self.bits_per_s,
                "copy_time_s_per_byte": self.copy_time_s_per_byte, "residuals": self.residuals,
                "median_abs_residual": float(np.median(r)) if r.size else None,
                "max_abs_residual": float(np.max(r)) if r.size else None}


def fit_copy_time(sizes_bytes: list[int], cpu_s_per_round_trip: list[float]) -> float:
    """CPU seconds per byte of a message end: in a ping-pong round trip each rank sends S bytes and
    receives S bytes, so its CPU time is a + 2·c·S (NNLS, absolute residuals: the large messages
    carry the slope; docs/model.md §4 "Message copies")."""
    from scipy.optimize import nnls

    s = np.asarray(sizes_bytes, dtype=float)
    t = np.asarray(cpu_s_per_round_trip, dtype=float)
    coef, _ = nnls(np.stack([np.ones_like(s), 2.0 * s], axis=1), t)
    return float(coef[1])


def fit_transfer(sizes_bytes: list[int], one_way_s: list[float], copy_time_s_per_byte: float = 0.0) -> TransferFit:
    """Latency and bandwidth from one-way transfer times (relative NNLS). The model charges both
    ends' copies (2·c·S) as CPU besides the link, so the link keeps what is left of the fitted time
    per byte (a loopback transfer is mostly copies: then the link is ``LOOPBACK_CAP_BITS_PER_S``)."""
    from scipy.optimize import nnls

    s = np.asarray(sizes_bytes, dtype=float) * 8.0
    t = np.asarray(one_way_s, dtype=float)
    a = np.stack([np.ones_like(s), s], axis=1) / t[:, None]
    coef, _ = nnls(a, np.ones_like(t))
    latency, per_bit = float(coef[0]), float(coef[1])
    link_per_bit = max(per_bit - 2.0 * copy_time_s_per_byte / 8.0, 1.0 / LOOPBACK_CAP_BITS_PER_S)
    pred = latency + s * link_per_bit + 2.0 * copy_time_s_per_byte * s / 8.0
    residuals = {f"{int(n)}B": float(p / m - 1.0) for n, p, m in zip(sizes_bytes, pred, t, strict=False)}
    return TransferFit(latency, 1.0 / link_per_bit, residuals, copy_time_s_per_byte)
