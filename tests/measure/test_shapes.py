"""Layer timings across shapes, per-network profiles and the small generalisation check
(docs/model.md §12, docs/validation.md §"Networks the model has not seen")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dnnbench import presets
from dnnbench.cli import main
from dnnbench.measure.chains import random_chain, torch_chain
from dnnbench.measure.shapes import (
    PHASES,
    CasePools,
    RandomPool,
    _case_runner,
    case_arrays,
    merge_profiles,
    profile_and_check,
    profile_network,
    shape_cases,
    time_cases,
    time_in_steps,
)
from dnnbench.model.arrays import layer_signature, network_arrays, network_digest
from dnnbench.model.compute import worker_compute
from dnnbench.model.shape_compute import phase_calls
from dnnbench.specs import Cluster, Network
from dnnbench.specs.shape import ACTIVATION_FUNCTIONS, ProfiledLayer


def test_the_cases_span_the_shapes_the_issue_names() -> None:
    cases = shape_cases(200, seed=0, threads=(1, 2))
    convs = [c for c in cases if c.layer["kind"] == "conv2d"]
    fcs = [c for c in cases if c.layer["kind"] == "fc"]
    assert min(c.input_shape[0] for c in convs) == 1 and max(c.input_shape[0] for c in convs) == 512
    assert {c.layer["kernel"] for c in convs} >= {1, 3, 5, 7, 11}
    assert {c.layer["stride"] for c in convs} >= {1, 2, 4} and any(c.layer.get("groups", 1) > 1 for c in convs)
    widths = [c.input_shape[0] for c in fcs] + [c.layer["out_features"] for c in fcs]
    assert min(widths) == 10 and max(widths) == 8192
    assert {c.batch for c in cases} >= {1, 128} and {c.threads for c in cases} == {1, 2}
    arr = case_arrays(cases)
    working = (arr.in_values + arr.out_values + arr.weights) * 4 * np.array([c.batch for c in cases])
    assert working.min() < 2**20 and working.max() > 2**26  # in and out of cache
    # Every constant the fit sets has cases that charge it: depthwise convs with wide and 3x3 kernels,
    # grouped ones with few and many channels per group (each block the fit tries tells them apart),
    # and every activation function alone and fused.
    assert arr.depthwise_wide.sum() >= 3 and arr.grouped.sum() >= 3
    per_group = arr.group_channels[arr.grouped]
    assert per_group.min() < 4 and per_group.max() >= 16
    assert all(np.any((per_group >= lo) & (per_group < hi)) for lo, hi in ((1, 4), (4, 8), (8, 16)))
    assert (arr.is_conv & ~arr.grouped & ~arr.depthwise_wide & np.array([c.layer.get("groups", 1) > 1
                                                                         for c in cases])).any()
    alone = {c.layer["function"] for c in cases if c.layer["kind"] == "activation"}
    fused = {c.layer["activation"] for c in cases if "activation" in c.layer}
    assert alone == fused == set(ACTIVATION_FUNCTIONS)
    assert shape_cases(20, seed=5) == shape_cases(20, seed=5)  # seeded


def test_time_cases_gives_every_phase_the_layer_has() -> None:
    cases = [c for c in shape_cases(30, seed=1) if c.batch <= 16][:6]
    rows = time_cases(cases, rounds=1, reps=1)
    for c, row in zip(cases, rows, strict=True):
        assert row["forward"] > 0 and row["input_grad"] > 0
        weighted = c.layer["kind"] in ("conv2d", "fc", "batchnorm")
        assert (row["weight_grad"] > 0) == weighted and (row["update"] > 0) == weighted
        assert set(PHASES) <= set(row)


def test_a_random_pool_hands_out_aligned_disjoint_views_of_one_tensor() -> None:
    pool = RandomPool()
    a, b, c = pool.views([(3, 5), (7,), (2, 2, 2)])
    assert (a.shape, b.shape, c.shape) == ((3, 5), (7,), (2, 2, 2))
    assert not (a.requires_grad or b.requires_grad) and a.grad_fn is None
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() == c.untyped_storage().data_ptr()
    starts = [t.data_ptr() for t in (a, b, c)]
    assert all(p % 64 == 0 for p in starts) and starts == sorted(starts)
    assert starts[1] - starts[0] >= 15 * 4 and starts[2] - starts[1] >= 7 * 4  # disjoint
    first = pool.view((4,)).clone()
    big = pool.view((1000,))  # grows: a new tensor; the views handed out before keep theirs
    assert big.numel() == 1000 and a.shape == (3, 5) and np.isfinite(a.numpy()).all()
    assert float(big.std()) > 0.5 and not np.array_equal(first.numpy(), np.zeros(4))


def test_cases_on_shared_pools_never_change_what_another_case_reads() -> None:
    """Every case reads the pools' first values; the optimizer steps write only the weight copies, so
    a case's gradients are the same before and after every other case has run all its phases."""
    import torch

    pools = CasePools()
    cases = [c for c in shape_cases(60, seed=2) if c.layer["kind"] in ("conv2d", "fc") and c.batch <= 8][:4]
    assert len(cases) == 4
    runners = [_case_runner(c, pools) for c in cases]
    before = [(r["input_grad"](), r["weight_grad"]()) for r in runners]
    inputs = [pools.inputs.view((c.batch, *c.input_shape)).clone() for c in cases]
    for run in runners:
        for fn in run.values():
            fn()
        run["update"]()
    for case, run, (gx, gw), x in zip(cases, runners, before, inputs, strict=True):
        assert torch.equal(pools.inputs.view((case.batch, *case.input_shape)), x)
        assert torch.equal(run["input_grad"]()[0], gx[0]) and torch.isfinite(gx[0]).all()
        assert all(torch.equal(g, h) for g, h in zip(run["weight_grad"](), gw, strict=True))
        assert float(gx[0].abs().max()) > 0.0


def test_random_chains_are_seeded_and_built_alike_by_torch() -> None:
    for seed in range(6):
        spec = random_chain(seed)
        assert spec == random_chain(seed)
        net = Network.build(spec)
        model = torch_chain(spec)
        assert sum(p.numel() for p in model.parameters()) == sum(c.weights for c in net.layer_counts)
        import torch

        out = model(torch.zeros((2, *net.input_shape)))
        assert tuple(out.shape) == (2, 10)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_profiles_set_the_level_and_the_cli_writes_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``calibrate --network`` on LeNet-5: one profile per distinct layer; predictions of those layers
    at a profiled batch are the timings (the wiring, not the noise), and the CLI says so."""
    from dnnbench.specs.shape import ShapeRate
    from tests.model.test_model_shape import machine, rate

    net = presets.network("lenet5")
    profiles = profile_network(net, threads=1, batches=(4, 16), launches=1)
    sigs = {layer_signature(layer, c.input_shape) for layer, c in zip(net.layers[1:], net.layer_counts[1:],
                                                                      strict=True)}
    assert {p.signature for p in profiles} == sigs and all(isinstance(p, ProfiledLayer) for p in profiles)
    r: ShapeRate = rate(conv_forward={"mac_time_s": 1e-11}, fc_forward={"mac_time_s": 1e-11},
                        activation={"op_time_s": 1e-10}, pool={"op_time_s": 1e-10})
    m = machine(r).evolve(profiled_layers=profiles)
    arr = network_arrays(net)
    c = worker_compute(arr, m, np.asarray(1.0), 1, np.zeros_like(arr.weights), np.zeros(len(arr.weights), bool), 16.0)
    # At a profiled batch each profiled layer's forward is its timing (layers the model gives no
    # forward time, views, keep none).
    modelled = phase_calls(arr, r, np.ones_like(arr.weights), np.zeros(len(arr.weights), bool), 16.0, 1.0,
                           calls=r.step_call_scale)[0]
    by_sig = {p.signature: p for p in profiles}
    want = sum(by_sig[s].forward_s[1] for s, t in zip(arr.signatures, modelled, strict=True) if t > 0) / 16.0
    assert float(c.forward_s) == pytest.approx(want, rel=1e-9)
    # Merging replaces a layer timed again at the same threads and keeps the rest.
    again = merge_profiles(profiles, profiles[:1])
    assert len(again) == len(profiles) and again[-1] == profiles[0]
    # The CLI: a calibrated cluster (any with a shape rate) gains the profiles, and predict says so.
    cluster = presets.cluster("adam-2014").evolve(worker=m.evolve(profiled_layers=()), ps=m)
    spec, out_spec = tmp_path / "cluster.json", tmp_path / "profiled.json"
    spec.write_text(json.dumps(cluster.to_dict()))
    assert main(["calibrate", "--network", "lenet5", "--cluster", str(spec), "-o", str(out_spec),
                 "--batch", "4,16"]) == 0
    written = Cluster.build(json.loads(out_spec.read_text()))
    assert {p.signature for p in written.worker.profiled_layers} == sigs
    # Each layer carries the whole-step check at b = 8 (between 4 and 16): one error for the network.
    errors = {p.step_error for p in written.worker.profiled_layers}
    assert len(errors) == 1 and 0.0 < errors.pop() < 10.0
    assert all(p.launches == 3 for p in written.worker.profiled_layers)
    out = capsys.readouterr().out
    assert f"distinct layers of {net.name}" in out and "whole steps at b=8, t1: predicted from these timings" in out
    assert "the step's own fixed time set to" in out
    (step,) = written.worker.profiled_steps
    assert (step.network, step.threads, step.batch_samples) == (network_digest(arr.signatures), 1, 8)
    assert main(["predict", "--network", "lenet5", "--cluster", str(out_spec), "--threads", "1"]) == 0
    assert (f"compute of {len(arr.names)} of {len(arr.names)} layers from their timings on this machine and the "
            "step's fixed time from its timed steps") in capsys.readouterr().out


def test_a_profiled_step_makes_the_checked_steps_prediction_their_measurement(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The network's step takes the fixed time that makes its checked steps' prediction equal their
    measurement; other networks keep the calibration's; profiling again replaces it; and a measurement
    below the layers' own time leaves a step time of 0, never less."""
    from dnnbench.measure import chains
    from dnnbench.model.evaluate import single_machine_time_per_sample
    from dnnbench.specs import Configuration
    from tests.model.test_model_shape import machine, rate

    net, other = presets.network("lenet5"), presets.network("mnist-adam")
    r = rate(conv_forward={"mac_time_s": 1e-11}, fc_forward={"mac_time_s": 1e-11}, activation={"op_time_s": 1e-10},
             pool={"op_time_s": 1e-10}).evolve(step_time_s=3e-4)
    cluster = presets.cluster("adam-2014").evolve(worker=machine(r))

    def predicted(c: Cluster, network: Network, b: int = 8) -> float:
        return single_machine_time_per_sample(network, c, Configuration(threads=1, local_batch_samples=b)) * b

    before_other = predicted(cluster, other)
    monkeypatch.setattr(chains, "plain_step_s", lambda *_args: 0.05)
    profile = profile_and_check(net, cluster, threads=1, batches=(4, 16), launches=1)
    worker = profile.merged_into(cluster.worker)
    profiled = cluster.evolve(worker=worker)
    assert profile.step.batch_samples == 8 and profile.step.step_time_s > r.step_time_s
    assert predicted(profiled, net) == pytest.approx(0.05, rel=1e-9)
    assert predicted(profiled, other) == pytest.approx(before_other, rel=1e-12)
    # The step's fixed time is per step: at another batch it is the same seconds per step.
    layers_only = profiled.evolve(worker=worker.evolve(profiled_steps=()))
    for b in (4, 16):
        gap = predicted(profiled, net, b) - predicted(layers_only, net, b)
        assert gap == pytest.approx(profile.step.step_time_s - r.step_time_s, rel=1e-9)
    monkeypatch.setattr(chains, "plain_step_s", lambda *_args: 1e-9)
    again = profile_and_check(net, profiled, threads=1, batches=(4, 16), launches=1)
    worker = again.merged_into(worker)
    assert len(worker.profiled_steps) == 1 and worker.profiled_steps[0].step_time_s == 0.0


def _code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own errors
        return int(exc.code or 0)


def test_calibrate_network_refuses_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.model.test_model_shape import machine, rate

    plain, shaped = tmp_path / "plain.json", tmp_path / "shaped.json"
    base = presets.cluster("adam-2014")
    plain.write_text(json.dumps(base.to_dict()))
    m = machine(rate(fc_forward={"mac_time_s": 1e-11}))
    shaped.write_text(json.dumps(base.evolve(worker=m, ps=m).to_dict()))
    for argv, words in ((["--network", "lenet5"], "--cluster: is required with --network"),
                        (["--network", "lenet5", "--cluster", str(plain)], "has no worker shape_rate"),
                        (["--network", "lenet5", "--cluster", str(shaped), "--batch", "8"], "two different"),
                        (["--network", "lenet5", "--cluster", str(shaped), "--threads", "0"], "1 to 4096"),
                        (["--network", "no-such-net", "--cluster", str(shaped)], "no-such-net")):
        assert _code(["calibrate", *argv, "-o", str(tmp_path / "out.json")]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not (tmp_path / "out.json").exists()


#: A network with a residual add and a concat of maps of different widths (graph layers of several inputs).
BRANCHES = {"name": "branches", "layers": [
    {"kind": "input", "name": "input", "shape": [8, 12, 12]},
    {"kind": "conv2d", "name": "a", "out_channels": 8, "kernel": 3, "padding": 1, "activation": "relu"},
    {"kind": "conv2d", "name": "b", "out_channels": 8, "kernel": 3, "padding": 1},
    {"kind": "add", "name": "res", "inputs": ["b", "input"], "activation": "relu"},
    {"kind": "conv2d", "name": "c", "inputs": ["res"], "out_channels": 4, "kernel": 1},
    {"kind": "concat", "name": "cat", "inputs": ["res", "c"]},
    {"kind": "concat", "name": "cat2", "inputs": ["res", "a"]},
    {"kind": "concat", "name": "both", "inputs": ["cat", "cat2"]},
    {"kind": "flatten", "name": "flat", "inputs": ["both"]},
    {"kind": "fc", "name": "fc", "inputs": ["flat"], "out_features": 10},
]}


def test_layers_of_several_inputs_are_keyed_by_all_their_shapes_and_profiled() -> None:
    from dnnbench.model.arrays import network_signatures
    from tests.model.test_model_shape import machine, rate

    net = Network.build(BRANCHES)
    sigs = network_signatures(net)
    cat, cat2 = sigs[net.layer_names.index("cat")], sigs[net.layer_names.index("cat2")]
    # Both concats take res (8x12x12) first; the second input (4 or 8 channels) tells them apart.
    assert cat.endswith("@8x12x12+4x12x12") and cat2.endswith("@8x12x12+8x12x12") and cat != cat2
    assert sigs[net.layer_names.index("res")].endswith("@8x12x12+8x12x12")
    assert network_arrays(net).signatures == sigs[1:]
    profiles = profile_network(net, threads=1, batches=(4, 16), launches=1)
    assert {p.signature for p in profiles} == set(sigs[1:])
    timed = {p.signature: p for p in profiles}
    for name in ("res", "cat", "cat2", "both"):
        assert min(timed[sigs[net.layer_names.index(name)]].forward_s) > 0  # timed, not skipped
    m = machine(rate(conv_forward={"mac_time_s": 1e-11}, fc_forward={"mac_time_s": 1e-11},
                     activation={"op_time_s": 1e-10}, other={"op_time_s": 1e-10})).evolve(profiled_layers=profiles)
    from dnnbench.model.interval import profiled_layers

    k, n = profiled_layers(net, m)
    assert k == n >= 8  # every costed layer, the adds and concats with them


TWO_INPUTS = {"name": "two-inputs", "layers": [
    {"kind": "input", "name": "left", "shape": [3, 24, 24]},
    {"kind": "input", "name": "right", "shape": [3, 24, 24]},
    {"kind": "conv2d", "name": "a", "inputs": ["left"], "out_channels": 16, "kernel": 3, "padding": 1,
     "activation": "relu"},
    {"kind": "conv2d", "name": "b", "inputs": ["right"], "out_channels": 16, "kernel": 3, "padding": 1,
     "activation": "relu"},
    {"kind": "add", "inputs": ["a", "b"]},
    {"kind": "conv2d", "out_channels": 16, "kernel": 3, "padding": 1},
    {"kind": "flatten"},
    {"kind": "fc", "out_features": 10},
]}


def test_the_first_layers_of_two_inputs_each_end_their_own_backward() -> None:
    """Two layers fed by the inputs alone (their hooks fire before their weight gradients, both when
    the add hands them their errors): each one's backward ends where the next layer's begins, not both
    with the pass. Each then times as the same layer does alone after one input; ending both with the
    pass gave each the other's backward too (twice its time)."""
    net = Network.build(TWO_INPUTS)
    layers = TWO_INPUTS["layers"]
    alone = Network.build({"name": "one-input", "layers": [
        {**layers[0], "name": "input"}, {**layers[2], "inputs": []}, *layers[5:]]})
    a, b, single = [], [], []
    for _ in range(3):  # interleaved
        timed = time_in_steps(net, 32, threads=1, steps=6)
        a.append(timed[net.layer_names.index("a")][1])
        b.append(timed[net.layer_names.index("b")][1])
        single.append(time_in_steps(alone, 32, threads=1, steps=6)[alone.layer_names.index("a")][1])
    ref = float(np.median(single))
    for mine in (a, b):
        assert 0.6 < float(np.median(mine)) / ref < 1.5, (a, b, single)


def test_the_step_band_is_leave_one_chain_out() -> None:
    """Whole steps the model generated give a band of width 0; one chain that runs 1.5 times slower than
    modelled is predicted without itself (measured / predicted − 1 = 0.5) and sets the top of the band."""
    from dnnbench.measure.shapes import STEP_SEEDS, step_band, step_points, step_predictions
    from tests.model.test_model_shape import rate

    base = rate(conv_forward={"mac_time_s": 2e-11, "call_time_s": 1e-5}, conv_input_grad={"mac_time_s": 3e-11},
                conv_weight_grad={"mac_time_s": 3e-11}, fc_forward={"mac_time_s": 1e-11},
                fc_input_grad={"mac_time_s": 1e-11}, fc_weight_grad={"mac_time_s": 1e-11},
                activation={"op_time_s": 5e-10}, pool={"op_time_s": 1e-9}, norm={"op_time_s": 1e-9},
                update_byte_time_s=1e-10)
    truth = base.evolve(step_call_scale=0.5, layer_step_time_s=2e-5, step_time_s=1e-4)
    points = step_points((1,), STEP_SEEDS)
    steps = step_predictions(truth, 1, points)
    band = step_band(base, 1, points, list(steps))
    assert band.cases == len(points) and abs(band.p10) < 1e-3 and band.p90 < 1e-3
    slow = [t * (1.5 if p[0] == STEP_SEEDS[0] else 1.0) for p, t in zip(points, steps, strict=True)]
    band = step_band(base, 1, points, slow)
    # Its 2 points of 12 at +0.5 and the rest at 0: the 90th percentile interpolates to 0.9 · 0.5.
    assert band.p90 == pytest.approx(0.45, abs=0.01)
    # The other chains, fitted with the slow one among them, are predicted slower than they run.
    assert -0.3 < band.p10 < 0.0
