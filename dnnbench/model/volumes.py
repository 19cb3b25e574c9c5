"""Stage 2: how each layer is split and what crosses the network per sample (docs/model.md §5-6).

:func:`layout` decides per layer how it is partitioned over the W machines and where its weight
gradient is computed; :func:`volumes` turns that into the bits and messages of the model-parallel
exchanges and of the PS's pushes and pulls (per-layer sums in :mod:`.traffic`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..specs import Configuration
from .arrays import NetworkArrays
from .knobs import Knobs
from .traffic import (
    choose_spatial,
    fc_offload,
    gradient_sums,
    model_parallel_messages,
    model_parallel_rounds,
    model_parallel_values,
    pull_values_per_fetch,
    push_values_per_update,
)


@dataclass(frozen=True)
class Layout:
    """Per layer: split by image rows (``spatial``), and whether the PS computes its weight gradient
    (``offload``, Adam's FC scheme; ``[..., layer]`` against the knobs)."""

    spatial: np.ndarray
    offload: np.ndarray


def layout(arr: NetworkArrays, config: Configuration, k: Knobs) -> Layout:
    return Layout(spatial=choose_spatial(arr, config.partitioning), offload=fc_offload(arr, config, k.k_push))


@dataclass(frozen=True)
class Volumes:
    """What one replica and one of its machines move (bits; per update, per fetch or per sample)."""

    push_dense_values: np.ndarray  # values of one replica's push before compression, per update
    push_bits: np.ndarray  # on the wire, one replica's push, per update (0 without a PS)
    pull_bits: np.ndarray  # on the wire, one replica's pull, per fetch (0 without a PS)
    push_bits_per_sample: np.ndarray  # one machine's share of the pushes, per sample
    pull_bits_per_sample: np.ndarray  # one machine's share of the pulls, per sample
    model_parallel_bits: np.ndarray  # one machine sends (= receives) per sample
    model_parallel_messages: np.ndarray  # per sample, latencies shared over the samples in flight
    model_parallel_rounds: np.ndarray  # exchange rounds per sample, likewise
    select_ops_per_element: float  # compression's selection work per pushed element


def compression_ratios(config: Configuration, replicas: np.ndarray) -> tuple[float, Any, float]:
    """(push wire bits per value bit, pull wire bits per value bit, selection element ops per element)
    of the configured compression (docs/esgd.md §4, docs/model.md §6)."""
    comp = config.compression
    if comp.method == "none":
        return 1.0, 1.0, 0.0
    from ..compression import wire

    # Sparsifiers: the encoding's bits at the density; quantisers: their own bits per element.
    ratio = float(wire.method_bits_per_element(comp.method, comp.encoding, comp.density)) / config.value_bits
    pull: Any = 1.0
    if comp.compress_pull:  # the union of the replicas' supports (quantised averages travel dense)
        bits = wire.pull_bits_per_element(comp.method, comp.encoding, comp.density, np.maximum(replicas, 1.0))
        pull = np.minimum(1.0, np.asarray(bits) / config.value_bits)
    return ratio, pull, float(wire.selection_ops_per_element(comp.method))


def volumes(arr: NetworkArrays, config: Configuration, k: Knobs, lay: Layout) -> Volumes:
    vb = float(config.value_bits)
    push_ratio, pull_ratio, select_ops = compression_ratios(config, k.r)
    push_dense, push_wire = push_values_per_update(arr, k.w, k.k_push, lay.offload, lay.spatial, push_ratio)
    pull_vals = pull_values_per_fetch(arr, k.w, lay.spatial)
    push_bits = np.where(k.has_ps, push_wire * vb, 0.0)
    pull_bits = np.where(k.has_ps, pull_vals * vb * pull_ratio, 0.0)
    # Each of the T threads has its own sample in flight, so message latencies overlap across threads
    # (reconstructed): latency per sample = messages · latency / (samples per message · T).
    shared = config.samples_per_message * k.in_flight
    # The gradients of the weights every machine of the replica holds whole, summed once per local update
    # (every b samples).
    sum_values, sum_messages, sum_rounds = gradient_sums(arr, k.w)
    b = float(config.local_batch_samples)
    return Volumes(
        push_dense_values=push_dense, push_bits=push_bits, pull_bits=pull_bits,
        push_bits_per_sample=push_bits / k.k_push / k.w, pull_bits_per_sample=pull_bits / k.k_pull / k.w,
        model_parallel_bits=(model_parallel_values(arr, k.w, lay.spatial) + sum_values / b) * vb,
        model_parallel_messages=model_parallel_messages(arr, k.w, lay.spatial) / shared + sum_messages / b,
        model_parallel_rounds=model_parallel_rounds(arr, k.w) / shared + sum_rounds / b,
        select_ops_per_element=select_ops,
    )
