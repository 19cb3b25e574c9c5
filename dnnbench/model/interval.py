"""Prediction intervals (docs/model.md §12): p10–p90 of the compute model's error on this machine.

A calibrated machine carries ``Machine.compute_error``, the 10th and 90th percentiles of measured /
predicted − 1 over held-out calibration cases. Layers profiled on the machine (``profiled_layers``)
replace that error with their own timings' spread: with a fraction f of a network's costed layers
profiled and s their median spread, the band is

    p10 = (1 − f)·p10_cal − f·s/2,    p90 = (1 − f)·p90_cal + f·s/2.

The model is evaluated again with every machine's compute at (1 + p10) and (1 + p90) times its
value: the interval of time per sample, epoch time, samples/s and speed-up. Communication is taken
as predicted (its links' fits are far tighter than compute's); the interval says so by its name.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..specs import Machine, Network
from .arrays import network_arrays
from .prediction import Prediction

#: The quantities an interval is given for.
INTERVAL_KEYS = ("time_per_sample_s", "epoch_time_s", "samples_per_s", "speedup")


def compute_band(network: Network, machine: Machine) -> tuple[float, float] | None:
    """(p10, p90) of measured / predicted − 1 of ``network``'s compute on ``machine``; None without a band."""
    band = machine.compute_error
    if band is None:
        return None
    lo, hi = band.p10, band.p90
    if machine.profiled_layers:
        arr = network_arrays(network)
        table = {p.signature: p for p in machine.profiled_layers}
        costed = arr.group >= 0
        hits = [table.get(s) for s, c in zip(arr.signatures, costed, strict=True) if c]
        f = sum(h is not None for h in hits) / max(len(hits), 1)
        spreads = [h.spread for h in hits if h is not None]
        s = float(np.median(spreads)) if spreads else 0.0
        lo, hi = (1.0 - f) * lo - f * s / 2.0, (1.0 - f) * hi + f * s / 2.0
    return max(lo, -0.99), hi


def with_interval(pred: Prediction, low: Prediction, high: Prediction) -> Prediction:
    """``pred`` with the interval spanned by its evaluations at the two ends of the band."""
    out = {}
    for key in INTERVAL_KEYS:
        a, b = np.asarray(getattr(low, key)), np.asarray(getattr(high, key))
        out[key] = (np.minimum(a, b), np.maximum(a, b))
    return dataclasses.replace(pred, interval=out)


def profiled_layers(network: Network, machine: Machine) -> tuple[int, int]:
    """(layers priced from their profile on ``machine``, layers that cost compute) of ``network``."""
    arr = network_arrays(network)
    if machine.shape_rate is None or machine.accelerator is not None:
        return 0, int(np.sum(arr.group >= 0))
    table = {p.signature for p in machine.profiled_layers}
    costed = [s for s, g in zip(arr.signatures, arr.group, strict=True) if g >= 0]
    return sum(s in table for s in costed), len(costed)
