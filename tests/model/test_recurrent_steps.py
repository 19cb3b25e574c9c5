"""The measured time per recurrent step (``ShapeRate.recurrent_steps``, docs/model.md §12): what it adds to
a prediction, and how calibration finds it from two sequence lengths."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnbench.errors import SpecError
from dnnbench.measure import recurrent_steps
from dnnbench.model import predict
from dnnbench.specs import Configuration, Machine, Network
from dnnbench.specs.shape import RecurrentStepTimes, ShapeRate
from tests.model.test_model_shape import machine, rate
from tests.strategies import shape_rates


def _classifier(mode: str, steps: int, layers: int, bidirectional: bool) -> Network:
    return Network.build({"name": "text", "layers": [
        {"kind": "input", "shape": [steps]}, {"kind": "embedding", "vocabulary": 50, "dim": 8},
        {"kind": "recurrent", "mode": mode, "hidden": 8, "layers": layers, "bidirectional": bidirectional},
        {"kind": "select_token", "index": steps - 1}, {"kind": "fc", "out_features": 3}]})


def _per_sample(net: Network, m: Machine, batch: int) -> float:
    from dnnbench import presets

    cluster = presets.cluster("modern-2025").evolve(worker=m)
    return float(predict(net, cluster, "mnist", Configuration(local_batch_samples=batch)).time_per_sample_s)


@given(st.sampled_from(["lstm", "gru", "rnn_tanh", "rnn_relu"]), st.integers(1, 40), st.integers(1, 3), st.booleans(),
       st.integers(1, 16), shape_rates())
@settings(max_examples=30, deadline=None)
def test_each_step_of_each_layer_and_direction_pays_its_measured_time(mode: str, steps: int, layers: int,
                                                                      bidirectional: bool, batch: int,
                                                                      drawn: dict) -> None:
    base = ShapeRate.build({**drawn, "recurrent_steps": {}})
    step = 3e-5
    timed = base.evolve(recurrent_steps=RecurrentStepTimes(**{f"{mode.split('_')[0]}_s": step}))
    net = _classifier(mode, steps, layers, bidirectional)
    grown = _per_sample(net, machine(timed), batch) - _per_sample(net, machine(base), batch)
    lanes = layers * (2 if bidirectional else 1)
    assert grown == pytest.approx(step * steps * lanes / batch, rel=1e-9)


def test_measured_steps_charge_the_per_layer_fixed_time_once_per_layer_and_direction() -> None:
    """Uncalibrated (None), a GRU pays its per-layer fixed time at each of its S + 1 calls per layer and
    direction; with measured step times, once per layer and direction (its steps' own costs measured)."""
    net = _classifier("gru", 20, 2, True)
    fixed = 1e-4
    busy = {"activation": {"op_time_s": 1e-9}, "fc_forward": {"mac_time_s": 1e-9}}
    none, zero = rate(layer_step_time_s=fixed, **busy), rate(layer_step_time_s=fixed, recurrent_steps={}, **busy)
    bare = rate(**busy)
    batch = 4
    per_call = _per_sample(net, machine(none), batch) - _per_sample(net, machine(bare), batch)
    per_layer = _per_sample(net, machine(zero), batch) - _per_sample(net, machine(bare), batch)
    lanes, layers_elsewhere = 4, 3  # the embedding, the select_token and the fc
    assert per_call == pytest.approx(fixed * (lanes * 21 + layers_elsewhere) / batch, rel=1e-9)
    assert per_layer == pytest.approx(fixed * (lanes + layers_elsewhere) / batch, rel=1e-9)


def test_calibration_recovers_the_time_per_step_from_two_lengths() -> None:
    r = rate(layer_step_time_s=2e-5, step_time_s=1e-4, activation={"op_time_s": 1e-9})
    truth = {"lstm": 1e-6, "gru": 8e-5, "rnn": 3e-5}
    measured = [recurrent_steps.modelled_step_s(r, mode, s) + truth[mode] * s + 5e-4
                for mode, s in recurrent_steps.points()]
    found = recurrent_steps.fit_step_times(r, measured)
    assert found.lstm_s == pytest.approx(1e-6) and found.gru_s == pytest.approx(8e-5)
    assert found.rnn_s == pytest.approx(3e-5)
    # A longer sequence measured faster than the model's own growth (noise): no negative time.
    flat = [recurrent_steps.modelled_step_s(r, mode, 4) for mode, _ in recurrent_steps.points()]
    assert recurrent_steps.fit_step_times(r, flat) == RecurrentStepTimes()


def test_step_times_scale_with_the_machine_and_reject_negatives() -> None:
    r = rate(recurrent_steps={"gru_s": 8e-5})
    assert r.scaled(2.0).recurrent_steps == RecurrentStepTimes(gru_s=1.6e-4)
    with pytest.raises(SpecError, match="rnn_s"):
        rate(recurrent_steps={"rnn_s": -1.0})


def test_the_calibration_networks_time_on_this_machine() -> None:
    """Two short rounds of the six networks: finite, positive, the longer sequence of a GRU slower."""
    measured = dict(zip(recurrent_steps.points(), recurrent_steps.time_points(rounds=1), strict=True))
    assert all(np.isfinite(v) and v > 0 for v in measured.values())
    assert measured[("gru", 36)] > measured[("gru", 4)]


@pytest.mark.parametrize("mode,grows", [("lstm", False), ("gru", True), ("rnn_tanh", True)])
def test_a_cpu_lstm_packs_its_matrices_once_per_call(mode: str, grows: bool) -> None:
    """With measured steps an LSTM (one oneDNN call per layer and direction) prices its weight packing
    once per call, whatever its length; a GRU or RNN, run step by step, packs the state matrix at every
    step (reconstructed)."""
    packing = {p: {"mac_time_s": 0.0, "weight_element_time_s": 1e-9}
               for p in ("fc_forward", "fc_input_grad", "fc_weight_grad")}
    measured = machine(rate(recurrent_steps={}, activation={"op_time_s": 1e-12}, **packing))
    short, long = (_per_sample(_classifier(mode, s, 1, False), measured, 4) for s in (8, 32))
    assert (long - short > 1e-7) == grows
