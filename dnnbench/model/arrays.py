"""Per-layer numpy arrays of a network, the form the vectorised model computes with.

Layers are the last axis everywhere in the model; configurations broadcast over the leading axes.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..specs import Network
from ..specs.layers import Conv2d, FullyConnected, InputLayer, Pool, _pair

#: Layer-kind groups used in the time breakdown.
KIND_GROUPS = ("conv", "fc", "pool", "elementwise")


@dataclass(frozen=True)
class NetworkArrays:
    names: tuple[str, ...]
    group: np.ndarray  # index into KIND_GROUPS
    is_conv: np.ndarray
    is_fc: np.ndarray
    weights: np.ndarray
    activations: np.ndarray
    macs_forward: np.ndarray
    macs_backprop: np.ndarray
    macs_weight_grad: np.ndarray
    elem_forward: np.ndarray
    elem_backprop: np.ndarray
    units_feature_map: np.ndarray  # output maps / neurons split over W (feature-map partitioning)
    units_spatial: np.ndarray  # output rows for map layers, neurons for FC (spatial partitioning)
    fm_values: np.ndarray  # per-direction values per sample at W -> inf, feature-map/FC exchange
    halo_values: np.ndarray  # per-direction values per sample per (W-1)/W, spatial halo exchange
    fc_in: np.ndarray  # N_in of FC layers (0 elsewhere)
    fc_out: np.ndarray  # N_out of FC layers (0 elsewhere)


_CACHE: OrderedDict[int, tuple[Network, NetworkArrays]] = OrderedDict()


def network_arrays(net: Network) -> NetworkArrays:
    """The arrays of ``net`` (cached per network object; specs are immutable)."""
    hit = _CACHE.get(id(net))
    if hit is not None and hit[0] is net:
        return hit[1]
    arrays = _build(net)
    _CACHE[id(net)] = (net, arrays)
    while len(_CACHE) > 64:
        _CACHE.popitem(last=False)
    return arrays


def _build(net: Network) -> NetworkArrays:
    rows = []
    # Layers are kept except the input (it has no cost and exchanges nothing).
    after_input = True  # the layer right after the input receives its data from the data server
    for name, layer, c in zip(net.layer_names, net.layers, net.layer_counts, strict=True):
        if isinstance(layer, InputLayer):
            continue
        in_elems = int(np.prod(c.input_shape))
        maps_out = len(c.output_shape) == 3
        group = 0 if isinstance(layer, Conv2d) else 1 if isinstance(layer, FullyConnected) else (
            2 if isinstance(layer, Pool) else 3)
        fm = 0.0
        halo = 0.0
        if isinstance(layer, (Conv2d, FullyConnected)) and not after_input:
            # model.md §5: each machine receives (W-1)/W of the layer input forward and sends as many
            # partial error sums backward; per NIC direction 2·(W-1)/W·N_in values (2·in_elems here,
            # times (W-1)/W at evaluation).
            fm = 2.0 * in_elems
            if isinstance(layer, Conv2d):
                kh = _pair(layer.kernel)[0]
                c_in, _, w_in = c.input_shape
                halo = 2.0 * (kh - 1) * w_in * c_in  # halo rows, forward and backward (model.md §5)
            else:
                halo = fm  # an FC layer has no spatial scheme: it always exchanges its input
        rows.append((
            name, group, c.weights, c.activations, c.macs_forward, c.macs_backprop, c.macs_weight_grad,
            c.elem_ops_forward, c.elem_ops_backprop, c.partition_units,
            c.output_shape[1] if maps_out else c.partition_units, fm, halo,
            in_elems if group == 1 else 0, c.output_shape[0] if group == 1 else 0,
        ))
        after_input = False
    cols = list(zip(*rows, strict=True))
    def f(i: int) -> np.ndarray:
        return np.asarray(cols[i], dtype=float)

    groups: np.ndarray = np.asarray(cols[1], dtype=np.int64)
    return NetworkArrays(
        names=tuple(cols[0]), group=groups, is_conv=groups == 0, is_fc=groups == 1,
        weights=f(2), activations=f(3), macs_forward=f(4), macs_backprop=f(5), macs_weight_grad=f(6),
        elem_forward=f(7), elem_backprop=f(8), units_feature_map=f(9), units_spatial=f(10),
        fm_values=f(11), halo_values=f(12), fc_in=f(13), fc_out=f(14),
    )
