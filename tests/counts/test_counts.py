"""Per-layer counts: golden totals with citations, hand-checked layers."""

from __future__ import annotations

import pytest

from dnnbench import presets
from dnnbench.counts import describe, totals
from dnnbench.specs import Network


@pytest.mark.parametrize(
    ("name", "weights"),
    [
        # torchvision model documentation, AlexNet (Krizhevsky 2014 "one weird trick" variant): 61,100,840.
        ("alexnet", 61_100_840),
        # torchvision model documentation, VGG-16 (Simonyan & Zisserman 2015, configuration D): 138,357,544.
        ("vgg16", 138_357_544),
        # LeNet-5 (LeCun et al. 1998) with full C3 connectivity: 156 + 2,416 + 48,120 + 10,164 + 850.
        ("lenet5", 61_706),
    ],
)
def test_published_parameter_counts(name: str, weights: int) -> None:
    assert totals(presets.network(name)).weights == weights


def test_adam_networks_match_their_description() -> None:
    # model.md §8 (reconstructed shapes): about 3.9 M and about 2.1 B weights ("2 billion connections").
    assert totals(presets.network("mnist-adam")).weights == pytest.approx(3.9e6, rel=0.02)
    assert totals(presets.network("imagenet22k-adam")).weights == pytest.approx(2.1e9, rel=0.02)


def test_conv_layer_by_hand() -> None:
    # conv 5x5, 1 -> 6 maps on 32x32: out 28x28; MACs = 6·28·28·1·25 = 117,600; weights 6·25 + 6 = 156.
    net = presets.network("lenet5")
    c1 = net.layer_counts[1]
    assert c1.output_shape == (6, 28, 28)
    assert (c1.weights, c1.macs_forward, c1.macs_backprop, c1.macs_weight_grad) == (156, 117_600, 0, 117_600)
    # tanh on the conv: one element op per output each way; the first layer sends no error down, but
    # its activation's derivative is still needed for the weight gradient.
    assert (c1.elem_ops_forward, c1.elem_ops_backprop) == (4_704, 4_704)
    s2 = net.layer_counts[2]  # avg pool 2x2 on 6x28x28: 6·14·14 outputs, 4 ops each, both ways
    assert (s2.elem_ops_forward, s2.elem_ops_backprop) == (4_704, 4_704)


def test_max_pool_backward_is_one_op_per_output() -> None:
    net = Network.build({"name": "p", "layers": [{"kind": "input", "shape": [2, 8, 8]},
                                                  {"kind": "conv2d", "out_channels": 2, "kernel": 1},
                                                  {"kind": "pool", "mode": "max", "window": 2}]})
    pool = net.layer_counts[2]
    assert pool.output_shape == (2, 4, 4)
    assert (pool.elem_ops_forward, pool.elem_ops_backprop) == (2 * 16 * 4, 2 * 16)


def test_describe_has_stable_unit_bearing_keys() -> None:
    data = describe(presets.network("imagenet22k-adam"))
    row = data["layers"][1]
    for key in ("name", "kind", "output_shape", "weights", "macs_forward", "macs_backprop", "macs_weight_grad"):
        assert key in row
    t = data["totals"]
    assert t["flops_training"] == 2 * t["macs_training"]
    assert t["weights"] == sum(r["weights"] for r in data["layers"])
    assert data["input_shapes"] == {"input": data["input_shape"]}  # one per input layer, by name
