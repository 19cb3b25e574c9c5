"""The PyTorch model built from a spec has the spec's shapes, weights and MACs (docs/model.md §3)."""

import pytest
from torch.utils.flop_counter import FlopCounterMode

from dnnbench import counts, presets
from dnnbench.measure.torchnet import batch, build_layers, build_model, slice_bounds


@pytest.mark.parametrize("name", ["lenet5", "mnist-adam"])
def test_model_matches_spec(name: str) -> None:
    net = presets.network(name)
    model = build_model(net)
    x, y = batch(net, 4)
    out = model(x)
    assert tuple(out.shape[1:]) == net.shapes[-1]
    assert sum(p.numel() for p in model.parameters()) == counts.totals(net).weights
    with FlopCounterMode(display=False) as fc:
        model(x)
    # torch counts FLOPs = 2 x MACs of conv and linear layers.
    assert fc.get_total_flops() == 2 * 4 * counts.totals(net).macs_forward


@pytest.mark.parametrize("units,w", [(10, 2), (7, 2), (5, 3), (1, 2)])
def test_slices_cover_units(units: int, w: int) -> None:
    spans = [slice_bounds(units, (p, w)) for p in range(w)]
    assert spans[0][0] == 0 and spans[-1][1] == units
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_partitions_hold_the_weights_once() -> None:
    net = presets.network("mnist-adam")
    total = 0
    for p in range(2):
        for _, mod, _ in build_layers(net, part=(p, 2)):
            total += sum(q.numel() for q in mod.parameters())
    assert total == counts.totals(net).weights
