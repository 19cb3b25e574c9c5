"""Time of a simulated run over an edge link: when is a target accuracy reached? (esgd.md §4)

A synchronous round costs: the workers' compute, the selection compute of the method
(:func:`dnnbench.compression.wire.selection_ops_per_element`), one upload (the slowest worker, or all
uploads in turn on a shared medium such as one Wi-Fi channel) and one download of the PS's
broadcast, each with its latency (Hockney alpha-beta: time = latency + bits / rate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import checks as v
from ..compression.wire import selection_ops_per_element
from .cluster import TrainingRun


@dataclass(frozen=True)
class EdgeLink:
    """Rates of one worker's link to the edge server, and per-round compute (SI units)."""

    uplink_bits_per_s: float
    downlink_bits_per_s: float
    latency_s: float = 0.0  # per message, each way
    compute_s_per_round: float = 0.0  # forward + backward of one local mini-batch
    device_element_ops_per_s: float = math.inf  # charges the selection compute; inf: free
    shared_uplink: bool = False  # True: the workers' uploads share one medium, one after another

    def __post_init__(self) -> None:
        v.number("uplink_bits_per_s", self.uplink_bits_per_s, low=0.0, low_open=True)
        v.number("downlink_bits_per_s", self.downlink_bits_per_s, low=0.0, low_open=True)
        v.number("latency_s", self.latency_s, low=0.0)
        v.number("compute_s_per_round", self.compute_s_per_round, low=0.0)
        if self.device_element_ops_per_s != math.inf:
            v.number("device_element_ops_per_s", self.device_element_ops_per_s, low=0.0, low_open=True)
        if not isinstance(self.shared_uplink, bool):
            raise v.fail("shared_uplink", self.shared_uplink, "is not a bool")


def round_times_s(run: TrainingRun, link: EdgeLink, encoding: str = "best_lossless") -> np.ndarray:
    """(rounds,) seconds of every round of ``run`` over ``link`` with messages in ``encoding``."""
    up_bits = run.bits_up(encoding)
    up_s = (up_bits.sum(axis=1) if link.shared_uplink else up_bits.max(axis=1)) / link.uplink_bits_per_s
    down_s = run.bits_down(encoding) / link.downlink_bits_per_s
    select_s = selection_ops_per_element(run.config.method) * run.n_params / link.device_element_ops_per_s
    return link.compute_s_per_round + select_s + 2 * link.latency_s + up_s + down_s


def time_to_accuracy_s(run: TrainingRun, target_accuracy: float, link: EdgeLink,
                       encoding: str = "best_lossless") -> float:
    """Seconds until the first evaluation at or above ``target_accuracy``; ``inf`` if never reached."""
    v.number("target_accuracy", target_accuracy, low=0.0, high=1.0)
    elapsed = np.concatenate([[0.0], np.cumsum(round_times_s(run, link, encoding))])
    reached = np.flatnonzero(run.test_accuracy >= target_accuracy)
    return float(elapsed[run.eval_rounds[reached[0]]]) if reached.size else math.inf


def rounds_to_accuracy(run: TrainingRun, target_accuracy: float) -> int | None:
    """Rounds until the first evaluation at or above ``target_accuracy``; None if never reached."""
    reached = np.flatnonzero(run.test_accuracy >= target_accuracy)
    return int(run.eval_rounds[reached[0]]) if reached.size else None


__all__ = ["EdgeLink", "round_times_s", "rounds_to_accuracy", "time_to_accuracy_s"]
