"""Property-based tests of graph networks (Hypothesis, tests/strategies.py ``graph_network_dicts``): every
graph kind and option, valid and broken, through counts, JSON, the model, PyTorch and back."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import graph_network_dicts, inputs_needing_gradient

import dnnbench
from dnnbench import presets
from dnnbench.counts import COUNT_FIELDS, totals
from dnnbench.errors import SpecError
from dnnbench.measure.torchnet import batch, build_model, loss_fn
from dnnbench.model import evaluate
from dnnbench.specs import Configuration, Network


@given(graph_network_dicts())
def test_graph_counts_are_non_negative_and_json_round_trips(data: dict[str, Any]) -> None:
    net = Network.build(data)
    t = totals(net)
    for field in COUNT_FIELDS:
        values = [getattr(c, field) for c in net.layer_counts]
        assert all(v >= 0 for v in values) and sum(values) == getattr(t, field)
    text = json.dumps(net.to_dict())
    assert Network.build(json.loads(text)) == net
    # Only kinds that may hold parameters hold any (the workbench offers ``shares`` on those alone).
    assert all(layer.may_hold_parameters for layer, c in zip(net.layers, net.call_counts, strict=True) if c.weights)


@given(graph_network_dicts())
def test_layers_backward_does_not_reach_do_no_backward_work(data: dict[str, Any]) -> None:
    """A layer whose every path to the loss passes a layer that blocks the gradient (a stopped branch, a
    mask, a constant) computes no gradient: none of its input's, none of its weights'; a layer the loss
    reaches through a layer that passes it is reached."""
    net = Network.build(data)
    reached = net.reaches_loss
    assert reached[-1]
    for i, (layer, c, ids) in enumerate(zip(net.layers, net.layer_counts, net.input_indices, strict=True)):
        if not reached[i]:
            assert (c.macs_backprop, c.macs_weight_grad, c.elem_ops_backprop) == (0, 0, 0)
            assert not net.needs_gradient[i]
        elif not layer.blocks_gradient:
            assert all(reached[k] for k in ids)
    readers = [sum(k in ids for ids in net.input_indices) for k in range(len(net.layers))]
    for i, layer in enumerate(net.layers):  # what only a stopped branch reads trains nothing
        if layer.kind == "stop_gradient":
            assert not any(reached[k] for k in net.input_indices[i] if readers[k] == 1)


@given(graph_network_dicts())
def test_an_input_that_needs_its_gradient_adds_backward_work_only(data: dict[str, Any]) -> None:
    """Backward computing the inputs' own gradients adds the error sent down by the layers before the
    first parameters, nothing else; the layers after them send it either way."""
    plain = totals(Network.build(inputs_needing_gradient(data, False)))
    both = Network.build(inputs_needing_gradient(data, True))
    # every layer needs its gradient but a constant (zeros), a mask (compare) and one whose every path to the
    # loss is stopped (x + f(x).detach())
    assert all(need or layer.blocks_gradient or not reached
               for need, layer, reached in zip(both.needs_gradient, both.layers, both.reaches_loss, strict=True))
    grad = totals(both)
    assert grad.macs_backprop >= plain.macs_backprop and grad.elem_ops_backprop >= plain.elem_ops_backprop
    assert (grad.macs_forward, grad.macs_weight_grad, grad.weights) == (plain.macs_forward, plain.macs_weight_grad,
                                                                         plain.weights)


@given(graph_network_dicts())
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_spec_runs_in_pytorch_and_imports_back_to_the_same_counts(data: dict[str, Any]) -> None:
    """Spec -> torch module (what measured runs train) -> torch.fx import -> the same totals; the module's
    parameters are the spec's weights, one training step runs and its output has the spec's shape."""
    net = Network.build(data)
    model = build_model(net)
    assert sum(p.numel() for p in model.parameters()) == totals(net).weights
    x, y = batch(net, 2)
    out = model(x)
    assert tuple(out.shape[1:]) == net.shapes[-1]
    loss_fn(net)(out, y).backward()
    shapes = [net.layers[i].shape for i in net.input_layers]  # type: ignore[attr-defined]
    back = dnnbench.from_torch(model, shapes[0] if len(shapes) == 1 else [list(s) for s in shapes])
    trained = Network.build(inputs_needing_gradient(data, False))
    assert totals(back) == totals(trained)  # a module's inputs need no gradient in training


@given(graph_network_dicts(), st.sampled_from(["adam-2014", "modern-2025"]))
@settings(max_examples=40, deadline=None)
def test_the_model_is_finite_and_one_machine_matches_the_vectorised_grid(data: dict[str, Any], cluster: str) -> None:
    net = Network.build(data)
    cl, ds = presets.cluster(cluster), presets.dataset("mnist")
    w = np.array([1.0, 2.0, 4.0, 8.0])
    pred = evaluate(net, cl, ds, Configuration(), workers_per_replica=w, replicas=np.ones(4), ps_machines=np.ones(4))
    assert np.all(np.isfinite(pred.epoch_time_s)) and np.all(pred.epoch_time_s > 0)
    one = evaluate(net, cl, ds, Configuration(workers_per_replica=4, replicas=1, ps_machines=1))
    assert float(one.epoch_time_s) == float(pred.epoch_time_s[2])


def _break(draw: Any, data: dict[str, Any]) -> dict[str, Any]:
    layers = [dict(layer) for layer in data["layers"]]
    names = [layer.get("name") for layer in layers]
    i = draw(st.integers(1, len(layers) - 1))
    how = draw(st.sampled_from(["dangling", "later", "self", "drop-input", "input-inputs"]))
    if how == "dangling":
        layers[i]["inputs"] = ["no-such-layer"]
    elif how == "later" and i + 1 < len(layers):
        layers[i]["inputs"] = [f"later{i}"]
        layers[i + 1]["name"] = f"later{i}"
    elif how == "self":
        layers[i]["name"] = layers[i].get("name") or f"me{i}"
        layers[i]["inputs"] = [layers[i]["name"]]
    elif how == "drop-input" and layers[i].get("inputs") and len(layers[i]["inputs"]) > 1:
        layers[i]["inputs"] = layers[i]["inputs"][:1]
    else:
        layers[0]["inputs"] = [n for n in names if n][:1] or ["x"]
    return {**data, "layers": layers}


@given(st.data())
def test_broken_graphs_are_one_line_errors_naming_a_layer(data: Any) -> None:
    spec = _break(data.draw, data.draw(graph_network_dicts()))
    try:
        Network.build(spec)
    except SpecError as err:
        assert err.field.startswith("layers[") and "\n" not in str(err)




def test_a_gate_counts_by_hand_and_wrong_shapes_are_one_line_errors() -> None:
    base: list[dict[str, Any]] = [
        {"kind": "input", "shape": [4, 6, 6]},
        {"kind": "conv2d", "name": "x", "out_channels": 8, "kernel": 1},
        {"kind": "adaptive_pool", "name": "p", "mode": "avg", "output_size": 1},
        {"kind": "conv2d", "name": "s", "out_channels": 8, "kernel": 1, "activation": "sigmoid"},
        {"kind": "mul", "name": "g", "inputs": ["s", "x"]},
    ]
    net = Network.build({"name": "gate", "layers": base})
    c = net.layer_counts[-1]
    n = 8 * 6 * 6
    assert net.shapes[-1] == (8, 6, 6) and c.weights == 0
    assert (c.elem_ops_forward, c.elem_ops_backprop, c.activations) == (n, 2 * n, n)
    wrong = [dict(layer) for layer in base]
    wrong[3]["out_channels"] = 4  # a (4, 1, 1) gate on an (8, 6, 6) map
    with pytest.raises(SpecError, match=r"^layers\[4\]\.inputs: \[\[4, 1, 1\], \[8, 6, 6\]\] ") as info:
        Network.build({"name": "gate", "layers": wrong})
    assert "\n" not in str(info.value)
    with pytest.raises(SpecError, match=r"^layers\[4\]"):
        Network.build({"name": "gate", "layers": [*base[:4], {"kind": "mul", "name": "g", "inputs": ["s"]}]})
