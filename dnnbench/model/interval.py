"""Prediction intervals (docs/model.md §12): p10–p90 of the compute model's error on this machine.

A calibrated machine carries ``Machine.compute_error``, the 10th and 90th percentiles of measured /
predicted − 1 of the calibration's whole training steps, each chain held out of the step fit.
Layers profiled on the machine (``profiled_layers``) replace that error with their own: with a
fraction f of a network's costed layers profiled, the band is

    p10 = (1 − f)·p10_cal − f·e,    p90 = (1 − f)·p90_cal + f·e,    e = sqrt((k_n·s)² + c²)

where s is the profiled layers' median spread (max / min − 1 over n launches) and k_n·s the half-width
of the p10–p90 interval of one new measurement around the median of n normal ones, estimated from
their range (σ ≈ range / d2(n), k_n = z_0.9·sqrt(1 + π / 2n) / d2(n): 0.94 for n = 3); c is the median
``step_error``, how far whole training steps of the profiled network, timed at a mini-batch between the
profiled ones, fell from the profiles' prediction.

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
        found = [h for h in hits if h is not None]
        f = len(found) / max(len(hits), 1)
        if found:
            s = float(np.median([h.spread for h in found]))
            k = range_half_width(int(np.median([h.launches for h in found])))
            c = float(np.median([h.step_error for h in found]))
            e = float(np.hypot(k * s, c))
            lo, hi = (1.0 - f) * lo - f * e, (1.0 - f) * hi + f * e
    return max(lo, -0.99), hi


#: d2(n): the expected range of n standard normal samples (n = 2..10), for σ ≈ range / d2(n).
_D2 = (0.0, 0.0, 1.128, 1.693, 2.059, 2.326, 2.534, 2.704, 2.847, 2.970, 3.078)


def range_half_width(launches: int) -> float:
    """k_n: the p10–p90 half-width of one new measurement around the median of ``launches`` normal
    ones, per unit of their relative range (0 for one launch, which has no range)."""
    if launches < 2:
        return 0.0
    n = min(launches, len(_D2) - 1)
    return float(1.2816 * np.sqrt(1.0 + np.pi / (2.0 * launches)) / _D2[n])


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


def profiled_step(network: Network, machine: Machine) -> bool:
    """Whether ``machine`` holds ``network``'s own step time (:class:`~dnnbench.specs.ProfiledStep`)."""
    from .arrays import network_digest

    if machine.shape_rate is None or machine.accelerator is not None or not machine.profiled_steps:
        return False
    digest = network_digest(network_arrays(network).signatures)
    return any(p.network == digest for p in machine.profiled_steps)
