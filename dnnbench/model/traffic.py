"""Communication volumes: model-parallel exchange inside a replica and PS push/pull (model.md §5-6).

All volumes are values per sample unless named per update; bits = values x bits per value.
"""

from __future__ import annotations

import numpy as np

from ..specs import Configuration
from .arrays import NetworkArrays


def choose_spatial(arr: NetworkArrays, partitioning: str) -> np.ndarray:
    """Per layer: True where a conv layer is split by rows (halo exchange) instead of by maps.

    'auto' takes, per conv layer, the scheme that moves fewer values (halo < feature-map input).
    """
    if partitioning == "spatial":
        return arr.is_conv.copy()
    if partitioning == "auto":
        return arr.is_conv & (arr.halo_values < arr.fm_values)
    return np.zeros_like(arr.is_conv)


def model_parallel_values(arr: NetworkArrays, w: np.ndarray, spatial: np.ndarray) -> np.ndarray:
    """Values one machine sends (= receives) per sample inside its replica: Σ_l 2·(W-1)/W·V_l."""
    per_layer = np.where(spatial, arr.halo_values, arr.fm_values).sum()
    return np.asarray((np.asarray(w, dtype=float) - 1.0) / np.asarray(w, dtype=float) * per_layer)


def gradient_sums(arr: NetworkArrays, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values one machine sends, messages, rounds) per update of a model-parallel replica summing the
    gradients of the weights every machine holds whole (``replicated_weights``): a ring all-reduce of
    each such tensor, 2·(W−1)/W of its values and 2·(W−1) messages; zeros when W = 1."""
    wf = np.asarray(w, dtype=float)
    tensors = float(np.sum(arr.replicated_tensors))
    values = 2.0 * (wf - 1.0) / wf * float(np.sum(arr.replicated_weights))
    return np.asarray(values), np.asarray(2.0 * (wf - 1.0) * tensors), np.where(wf > 1, tensors, 0.0)


def exchanges(arr: NetworkArrays) -> np.ndarray:
    """Per layer, its exchanges each way per mini-batch: 1 for a layer that exchanges its input (or
    statistics), plus a recurrent layer's one per step and stacked layer (its hidden states)."""
    return np.asarray((arr.fm_values - arr.state_values > 0) + arr.state_rounds)


def model_parallel_messages(arr: NetworkArrays, w: np.ndarray, spatial: np.ndarray) -> np.ndarray:
    """Messages one machine sends per sample: 2·(W-1) per exchange of an FC / feature-map layer (all to
    all, forward and backward; a recurrent layer's every step too), 2·2·(W-1)/W per halo layer (two
    neighbours at most)."""
    wf = np.asarray(w, dtype=float)
    exchanging = arr.fm_values > 0
    n_all = np.sum(np.where(exchanging & ~spatial, exchanges(arr), 0.0))
    n_halo = np.sum(exchanging & spatial & (arr.halo_values > 0))
    return np.asarray(n_all * 2.0 * (wf - 1.0) + n_halo * 4.0 * (wf - 1.0) / wf)


def model_parallel_rounds(arr: NetworkArrays, w: np.ndarray) -> np.ndarray:
    """Exchange rounds per sample: forward and backward of every exchange (0 when W = 1)."""
    n_rounds = float(np.sum(exchanges(arr)))
    return np.where(np.asarray(w, dtype=float) > 1, 2.0 * n_rounds, 0.0)


def fc_offload(arr: NetworkArrays, config: Configuration, k_push: np.ndarray) -> np.ndarray:
    """ω[..., l]: 1 where FC layer l ships activations and errors and the PS computes its update.

    Adam (OSDI'14): FC layers send k·(N_in + N_out) values instead of N_in·N_out deltas; 'auto'
    takes the smaller. Without a PS (a single replica training alone) nothing is offloaded: the
    caller uses zeros there.
    """
    k = np.asarray(k_push, dtype=float)[..., None]
    if config.fc_update == "deltas":
        choose = np.zeros(np.broadcast_shapes(k.shape, arr.is_fc.shape), dtype=bool)
    elif config.fc_update == "activations":
        choose = np.broadcast_to(arr.offloadable, np.broadcast_shapes(k.shape, arr.is_fc.shape))
    else:
        choose = arr.offloadable & (k * (arr.fc_in + arr.fc_out) < arr.fc_in * arr.fc_out)
    return choose.astype(float)


def push_values_per_update(arr: NetworkArrays, w: np.ndarray, k_push: np.ndarray, offload: np.ndarray,
                           spatial: np.ndarray, delta_bits_ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """(dense-equivalent values, wire bits / value_bits) one replica pushes per update.

    Deltas of weight layers (compressed by ``delta_bits_ratio`` = wire bits per element / value bits);
    offloaded FC layers send k·(N_in + N_out) activations and errors uncompressed. A conv layer split
    by rows has its weights on every machine: each of the W machines pushes its own partial deltas.
    Linear in W, so the layer sums are taken once and W multiplies them (no per-layer axis per W).
    """
    keep = 1.0 - offload
    fixed = (arr.weights * np.where(spatial, 0.0, 1.0) * keep).sum(-1)
    per_w = (arr.weights * np.where(spatial, 1.0, 0.0) * keep).sum(-1)
    acts = (offload * (arr.fc_in + arr.fc_out)).sum(-1) * np.asarray(k_push, dtype=float)
    deltas = fixed + np.asarray(w, dtype=float) * per_w
    return deltas + acts, deltas * delta_bits_ratio + acts


def pull_values_per_fetch(arr: NetworkArrays, w: np.ndarray, spatial: np.ndarray) -> np.ndarray:
    """Values one replica fetches per pull: every weight, once per machine holding it."""
    fixed = float(np.sum(np.where(spatial, 0.0, arr.weights)))
    per_w = float(np.sum(np.where(spatial, arr.weights, 0.0)))
    return fixed + np.asarray(w, dtype=float) * per_w


def ps_update_core_s(arr: NetworkArrays, k_push: np.ndarray, offload: np.ndarray, spatial: np.ndarray,
                     w: np.ndarray, ps_mac_fc_s: float, ps_elem_s: float) -> np.ndarray:
    """C_ps: core-seconds of PS work per pushed update of one replica.

    Offloaded FC layers: k·N_in·N_out MACs for the outer products plus |W| element ops to apply them;
    delta layers: |W| element ops to apply (once per pushing machine for row-split conv layers).
    """
    outer = (offload * arr.fc_in * arr.fc_out).sum(-1) * np.asarray(k_push, dtype=float) * ps_mac_fc_s
    fixed = float(np.sum(np.where(spatial, 0.0, arr.weights)))
    per_w = float(np.sum(np.where(spatial, arr.weights, 0.0)))
    return np.asarray(outer + (fixed + np.asarray(w, dtype=float) * per_w) * ps_elem_s)
