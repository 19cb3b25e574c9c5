"""Per-layer counts and totals of a network, per sample (docs/model.md §3).

MACs are multiply-adds (one multiply and one add). FLOPs = 2 x MACs: torch's FlopCounterMode counts
FLOPs; fvcore, thop and ptflops count MACs. Every name here says which it is.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .specs import Network
from .specs.layers import LayerCounts

COUNT_FIELDS = ("weights", "activations", "macs_forward", "macs_backprop", "macs_weight_grad",
                "elem_ops_forward", "elem_ops_backprop")


@dataclass(frozen=True)
class Totals:
    weights: int
    activations: int
    macs_forward: int
    macs_backprop: int
    macs_weight_grad: int
    elem_ops_forward: int
    elem_ops_backprop: int

    @property
    def macs_training(self) -> int:
        """MACs of one training step per sample: forward + back-prop + weight gradient."""
        return self.macs_forward + self.macs_backprop + self.macs_weight_grad

    @property
    def flops_training(self) -> int:
        return 2 * self.macs_training


def _network(network: Any) -> Network:
    if isinstance(network, Network):
        return network
    from . import presets

    return presets.network(network)


def totals(network: Network) -> Totals:
    """Sums of the per-layer counts (``network``: a Network, a preset name, a spec file or a mapping)."""
    rows = _network(network).layer_counts
    return Totals(**{f: sum(getattr(c, f) for c in rows) for f in COUNT_FIELDS})


def describe(network: Network) -> dict[str, object]:
    """The per-layer table and totals as plain data with stable, unit-bearing keys (``--json``)."""
    network = _network(network)
    layers = []
    for name, layer, c in zip(network.layer_names, network.layers, network.layer_counts, strict=True):
        row: dict[str, object] = {"name": name, "kind": layer.kind, "output_shape": list(c.output_shape)}
        row.update({f: getattr(c, f) for f in COUNT_FIELDS})
        layers.append(row)
    t = totals(network)
    return {
        "network": network.name,
        "source": network.source,
        "reconstructed": network.reconstructed,
        "input_shape": list(network.input_shape),
        "input_shapes": {network.layer_names[i]: list(network.shapes[i]) for i in network.input_layers},
        "layers": layers,
        "totals": {**asdict(t), "macs_training": t.macs_training, "flops_training": t.flops_training},
        "units": {"weights": "values", "macs_*": "multiply-adds per sample (FLOPs = 2 x MACs)",
                  "elem_ops_*": "element operations per sample", "activations": "values per sample"},
    }


__all__ = ["COUNT_FIELDS", "LayerCounts", "Totals", "describe", "totals"]
