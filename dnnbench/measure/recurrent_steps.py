"""The fixed time of one recurrent step on this machine (``ShapeRate.recurrent_steps``, docs/model.md §12).

PyTorch runs a GRU's and a plain RNN's steps one by one on a CPU: every step dispatches a product by
the state matrix, its gate kernels and their autograd nodes, each with a fixed time that the layer
cases (one call per layer) do not show; an LSTM runs its steps inside one oneDNN call. Calibration
trains a small text classifier of each mode at two sequence lengths; the extra time of the longer,
less what the model prices of its extra products and element operations, divided by the extra steps,
is the mode's time per step (per stacked layer and direction, forward and backward together).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..model.arrays import RECURRENT_MODES, network_arrays
from ..model.shape_compute import phase_calls, with_measured_steps
from ..specs import Network
from ..specs.shape import RecurrentStepTimes, ShapeRate

#: The two sequence lengths timed, the mini-batch, the token width and the hidden width.
STEP_LENGTHS = (4, 36)
BATCH = 4
WIDTH = 16
HIDDEN = 16
#: The spec mode of each RecurrentStepTimes field (plain RNNs timed with tanh).
_SPEC_MODES = {"lstm": "lstm", "gru": "gru", "rnn": "rnn_tanh"}


def recurrent_net(mode: str, steps: int) -> Network:
    """A one-layer text classifier of ``mode`` (lstm, gru, rnn) over ``steps`` tokens."""
    return Network.build({"name": f"{mode}-steps-{steps}", "layers": [
        {"kind": "input", "shape": [steps]},
        {"kind": "embedding", "vocabulary": 100, "dim": WIDTH},
        {"kind": "recurrent", "mode": _SPEC_MODES[mode], "hidden": HIDDEN},
        {"kind": "select_token", "index": steps - 1},
        {"kind": "fc", "out_features": 4}]})


def points() -> list[tuple[str, int]]:
    """(mode, steps) of every network timed."""
    return [(mode, s) for mode in RECURRENT_MODES for s in STEP_LENGTHS]


def time_points(rounds: int = 3) -> list[float]:
    """Seconds per training step (one thread) of each of :func:`points`: the median over interleaved
    rounds."""
    from .chains import plain_step_s

    runs: list[list[float]] = [[] for _ in points()]
    for _ in range(rounds):
        for i, (mode, s) in enumerate(points()):
            runs[i].append(plain_step_s(recurrent_net(mode, s), BATCH, 1))
    return [float(np.median(r)) for r in runs]


def modelled_step_s(rate: ShapeRate, mode: str, steps: int) -> float:
    """The model's seconds per training step of :func:`recurrent_net` on one thread without any time per
    recurrent step: its products, element operations and per-layer fixed times (once per layer)."""
    arr = with_measured_steps(network_arrays(recurrent_net(mode, steps)))
    ones = np.ones_like(arr.weights)
    parts = phase_calls(arr, rate, ones, np.zeros_like(ones, dtype=bool), float(BATCH), np.asarray(1.0),
                        calls=rate.step_call_scale, threads=1.0)
    fixed = rate.layer_step_time_s * float(np.sum(np.where(arr.group >= 0, arr.cpu_calls, 0.0)))
    return float(sum(np.sum(p) for p in parts)) + fixed + rate.step_time_s


def fit_step_times(rate: ShapeRate, measured: Sequence[float]) -> RecurrentStepTimes:
    """Each mode's seconds per step from ``measured`` (seconds per training step of :func:`points`): the
    measured growth from the shorter to the longer sequence less the modelled growth, per extra step
    (never below 0)."""
    found = dict(zip(points(), measured, strict=True))
    extra = STEP_LENGTHS[1] - STEP_LENGTHS[0]
    times: dict[str, float] = {}
    for mode in RECURRENT_MODES:
        grown = found[(mode, STEP_LENGTHS[1])] - found[(mode, STEP_LENGTHS[0])]
        priced = modelled_step_s(rate, mode, STEP_LENGTHS[1]) - modelled_step_s(rate, mode, STEP_LENGTHS[0])
        times[f"{mode}_s"] = min(max((grown - priced) / extra, 0.0), 0.5)
    return RecurrentStepTimes(**times)


__all__ = ["fit_step_times", "modelled_step_s", "points", "recurrent_net", "time_points"]
