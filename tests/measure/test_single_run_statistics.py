"""The single-process run reports the mean step (what a run's throughput measures) and the steps'
jitter (``Machine.step_time_cv``), and the validation calibrates on the mean (docs/validation.md)."""

from __future__ import annotations

import statistics

import pytest

from dnnbench import presets
from dnnbench.measure.runs import calibration_rows
from dnnbench.measure.single import run_single
from dnnbench.measure.timing import coefficient_of_variation


def test_coefficient_of_variation() -> None:
    assert coefficient_of_variation([2.0, 2.0, 2.0]) == 0.0
    assert coefficient_of_variation([1.0]) == 0.0
    assert coefficient_of_variation([1.0, 3.0]) == pytest.approx(statistics.stdev([1.0, 3.0]) / 2.0)


def test_single_run_reports_mean_step_and_jitter() -> None:
    out = run_single(presets.network("lenet5"), batch_size=8, iterations=6, warmup=1, layer_repeats=1)
    walls = out["step_wall_s_all"]
    assert len(walls) == 6
    assert out["step_mean"]["wall_s"] == pytest.approx(statistics.fmean(walls))
    assert out["step_cv"] == pytest.approx(statistics.stdev(walls) / statistics.fmean(walls))
    assert out["step_mean"]["cpu_s"] > 0.0
    # The calibration's whole-step row is the mean step's CPU time.
    step = [r for r in calibration_rows(presets.network("lenet5"), out, 8) if r["group"] == "step"]
    assert step and step[0]["cpu_s"] == out["step_mean"]["cpu_s"]


@pytest.mark.parametrize("spec", [
    [{"kind": "input", "shape": [12]}, {"kind": "embedding", "vocabulary": 50, "dim": 8},
     {"kind": "recurrent", "name": "rnn", "mode": "gru", "hidden": 6, "layers": 2, "bidirectional": True}],
    [{"kind": "input", "shape": [3, 5, 4]}, {"kind": "recurrent", "name": "rnn", "mode": "rnn_tanh", "hidden": 6},
     {"kind": "recurrent", "mode": "lstm", "hidden": 4, "bidirectional": True}],
])
def test_the_compute_fit_counts_each_layer_s_calls_as_the_model_does(spec: list[dict]) -> None:
    """A layer's row in the validation's compute fit and the model price it alike with the same constants:
    a recurrent layer pays the per-call overhead at each of its steps (a GRU, an RNN) or once per stacked
    layer and direction (an LSTM's one oneDNN call), sequences side by side (R, S, D) counted by their S
    steps. (The fit counted two passes per layer, so a GRU tagger's fit put a 1.3 ms overhead on each pass
    and had to be scaled by 0.07 to its step.)"""
    import numpy as np

    from dnnbench.measure.fit import predict_rows
    from dnnbench.measure.runs import layer_rows
    from dnnbench.model.arrays import network_arrays
    from dnnbench.model.compute import layer_parts
    from dnnbench.specs import Machine, Network

    net = Network.build({"name": "rnn", "layers": [*spec, {"kind": "flatten"}, {"kind": "fc", "out_features": 3}]})
    arr = network_arrays(net)
    b, mac, elem, overhead = 16, 2e-10, 3e-9, 1e-4
    machine = Machine.build({"name": "m", "cores": 1, "mac_time_s": {"conv": mac, "fc": mac}, "elem_time_s": elem,
                             "llc_bytes": 1 << 40, "memory_bytes": 1 << 34, "layer_overhead_s": overhead})
    parts = layer_parts(arr, machine, np.asarray(1.0), 1, np.zeros_like(arr.weights), np.zeros_like(arr.is_conv), b)
    modelled = np.asarray(parts.forward_s + parts.backprop_s + parts.weight_grad_s)
    timed = {name: {"forward_cpu_s": 1.0, "backward_cpu_s": 1.0} for name in arr.names}
    rows = layer_rows(net, timed, b)
    fitted = predict_rows([{**r, "weights": 0.0} for r in rows], 1 << 40, mac, mac, elem, 1.0, overhead)
    assert fitted == pytest.approx([modelled[arr.names.index(r["name"])] for r in rows], rel=1e-9)
    # a GRU's 12 steps and its input product, per stacked layer and direction; an RNN's 5 steps of 3 rows
    assert arr.cpu_calls[arr.names.index("rnn")] == (2 * 2 * (12 + 1) if spec[-1]["mode"] == "gru" else 5 + 1)
