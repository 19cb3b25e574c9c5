"""The tbf bucket, other programs' load and the model-parallel exchange overhead in the validation
mapping (docs/validation.md)."""

from pathlib import Path

import pytest

from dnnbench import presets
from dnnbench.measure import hostload, netns
from dnnbench.measure.calibrate import machine_from_fit, tbf_nic
from dnnbench.measure.fit import ComputeFit
from dnnbench.measure.mapping import (
    BUCKET_CAP,
    bucket_rate_factor,
    exchange_rounds_per_step,
    fit_exchange_overhead,
    message_bytes,
    own_busy_threads,
    predicted_samples_per_s,
    run_cluster,
    scale_compute,
)
from dnnbench.measure.plan import Run
from dnnbench.measure.runs import measured_wait_s


def test_bucket_holds_a_gso_packet() -> None:
    # Buckets below a 64 kB GSO packet never reached 1 Gbit/s here (docs/validation.md).
    assert netns.burst_for(1e9) == 125_000
    assert netns.burst_for(1e8) > 65536


def test_bucket_rate_factor_matches_tbf_arithmetic() -> None:
    net, b = presets.network("lenet5"), 125_000.0
    w_bytes = message_bytes(net, Run("dp", "sync", 1, 1e9), 32)[0]
    assert w_bytes == 4 * 61_706
    # One message of S bytes on a full bucket takes (S - b)·8/(g·R): the model's S·8/(g·R·f).
    f = bucket_rate_factor(net, Run("dp", "sync", 1, 1e9), 32, b)
    assert w_bytes / f == pytest.approx(w_bytes - b)
    # A synchronous round of two workers moves 2S through the PS's port: one bucket for both.
    f2 = bucket_rate_factor(net, Run("dp", "sync", 2, 1e9), 32, b)
    assert 2 * w_bytes / f2 == pytest.approx(2 * w_bytes - b)
    assert bucket_rate_factor(net, Run("dp", "async", 2, 1e9), 32, b) == pytest.approx(f)
    # LeNet's model-parallel messages are all smaller than the bucket: capped.
    assert bucket_rate_factor(net, Run("mp", "sync", 2, 1e9), 32, b) == BUCKET_CAP
    assert bucket_rate_factor(net, Run("dp", "sync", 1, 1e9), 32, 0.0) == 1.0
    # 13 MB messages hardly notice a 125 kB bucket.
    assert bucket_rate_factor(presets.network("mnist-adam"), Run("dp", "sync", 1, 1e9), 32, b) < 1.01


def test_model_parallel_messages_add_up_to_the_model_traffic() -> None:
    from dnnbench.model.arrays import network_arrays
    from dnnbench.model.traffic import choose_spatial, model_parallel_values

    net = presets.network("mnist-adam")
    arr = network_arrays(net)
    per_sample = float(model_parallel_values(arr, 2.0, choose_spatial(arr, "feature-map")))
    assert sum(message_bytes(net, Run("mp", "sync", 2), 8)) == pytest.approx(per_sample * 8 * 4)


def test_other_programs_join_the_models_kappa() -> None:
    # The measured background threads go into SharedHost.background_threads, not into the constants.
    net = presets.network("lenet5")
    fit = ComputeFit(3e-11, 4e-11, 1e-9, 1.0, {}, layer_overhead_s=2e-5)
    machine, nic = machine_from_fit(fit, copy_time_s_per_byte=2e-10), tbf_nic(1e9, 1e-4)
    run = Run("dp", "sync", 2, 1e9)
    quiet = run_cluster(machine, nic, run, 2)
    busy = run_cluster(machine, nic, run, 2, background_threads=1.0)
    assert (quiet.shared_host.background_threads, busy.shared_host.background_threads) == (0.0, 1.0)
    assert run_cluster(machine, nic, run, None, background_threads=1.0).shared_host is None
    _, q = predicted_samples_per_s(net, quiet, run, 32)
    _, b = predicted_samples_per_s(net, busy, run, 32)
    # Sync, 2 workers on 2 cores and 1 other thread: the workers' compute is 1.5x, as (2 + 1)/2.
    fwd = "compute_forward"
    assert b["breakdown_s_per_sample"][fwd] == pytest.approx(1.5 * q["breakdown_s_per_sample"][fwd])
    assert busy.worker == quiet.worker  # the machine constants stay the calibrated ones
    assert own_busy_threads(Run("dp", "sync", 2)) == (2.0, 1.0)
    assert own_busy_threads(Run("dp", "async", 2)) == (3.0, 3.0)
    assert own_busy_threads(Run("mp", "sync", 2))[0] == 2.0


def test_background_sampling_reads_proc() -> None:
    n = hostload.runnable_threads()
    assert n is None or n >= 1  # this reader itself runs
    assert hostload.background_threads(samples=3, interval_s=0.0) >= 0.0
    assert hostload.own_runnable([999_999_999]) == 0


def test_copy_cost_and_load_slow_the_prediction() -> None:
    net = presets.network("mnist-adam")
    fit = ComputeFit(3e-11, 4e-11, 1e-9, 1.0, {}, layer_overhead_s=2e-5)
    run, nic = Run("dp", "sync", 1), tbf_nic(1e12, 1e-4)  # a link much faster than the copies
    plain = machine_from_fit(fit)
    copying = machine_from_fit(fit, copy_time_s_per_byte=2e-10)
    base, _ = predicted_samples_per_s(net, run_cluster(plain, nic, run, 2), run, 32)
    slow, item = predicted_samples_per_s(net, run_cluster(copying, nic, run, 2), run, 32)
    assert slow < base and item["breakdown_s_per_sample"]["compute_messages"] > 0
    # Over a 1 Gbit/s link (8 ns per byte) the copies (0.2 ns per byte) run while the bytes cross
    # the link: a synchronous round's transfers take the longer of the two, so nothing changes.
    gbit = tbf_nic(1e9, 1e-4)
    assert predicted_samples_per_s(net, run_cluster(copying, gbit, run, 2), run, 32)[0] == pytest.approx(
        predicted_samples_per_s(net, run_cluster(plain, gbit, run, 2), run, 32)[0], rel=1e-12)
    assert scale_compute(copying, 2.0).copy_time_s_per_byte == pytest.approx(4e-10)
    # A busier PS machine (other programs' load on its side) only slows the PS's part.
    loaded = run_cluster(copying, nic, run, 2, ps_machine=scale_compute(copying, 3.0))
    assert loaded.ps.copy_time_s_per_byte == pytest.approx(6e-10) and loaded.worker.copy_time_s_per_byte == 2e-10
    assert predicted_samples_per_s(net, loaded, run, 32)[0] < slow


def test_exchange_overhead_fit_reproduces_its_run() -> None:
    net = presets.network("lenet5")
    fit = ComputeFit(3e-11, 4e-11, 1e-9, 1.0, {}, layer_overhead_s=2e-5)
    machine, nic = machine_from_fit(fit), tbf_nic(1e9, 1e-4)
    run, b = Run("mp", "sync", 2), 32
    assert exchange_rounds_per_step(net, run) == 8.0  # 4 exchanging layers, forward and backward
    assert exchange_rounds_per_step(net, Run("mp", "sync", 1)) == 0.0
    cluster = run_cluster(machine, nic, run, 2, background_threads=1.0)
    o_x = 5e-3
    with_x = run_cluster(machine, nic.evolve(exchange_overhead_s=o_x), run, 2, background_threads=1.0)
    step_x = b / predicted_samples_per_s(net, with_x, run, b)[0]
    step_0 = b / predicted_samples_per_s(net, cluster, run, b)[0]
    assert step_x - step_0 == pytest.approx(8 * o_x)  # the model charges exactly 8·o_x per mini-batch more
    # Two ranks; the throughput (and the fit) follows the slower one's elapsed time per step.
    meas = {"background_threads": 1.0,
            "raw": [{"step": {"wall_s": step_0, "cpu_s": 4e-3}, "elapsed_s": 20 * step_0 * 0.9, "iterations": 20},
                    {"step": {"wall_s": step_0, "cpu_s": 4e-3}, "elapsed_s": 20 * step_x, "iterations": 20}]}
    got = fit_exchange_overhead(net, cluster, run, b, meas, 2)
    assert got["exchange_overhead_s"] == pytest.approx(o_x, rel=1e-6)
    assert got["step_s"] == pytest.approx(step_x)
    # A run faster than the model without any exchange overhead: 0, never negative.
    short = {"background_threads": 0.0, "raw": [{"step": {"wall_s": step_0 / 2, "cpu_s": 4e-3}}]}
    assert fit_exchange_overhead(net, cluster, run, b, short, 2)["exchange_overhead_s"] == 0.0
    assert measured_wait_s(short, run, 2) == pytest.approx(step_0 / 2 - 4e-3)


def test_cli_rejects_a_negative_exchange_overhead(capsys: pytest.CaptureFixture[str]) -> None:
    from dnnbench.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["validate", "--network", "lenet5", "--exchange-overhead-s", "-1"])
    assert exc.value.code == 2
    assert "exchange-overhead-s" in capsys.readouterr().err


def test_cli_replay_refuses_what_is_not_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dnnbench.cli import main

    bad = tmp_path / "bad.json"
    bad.write_text('{"network": "lenet5", "rows": []}')
    assert main(["validate", "--replay", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "report" in err and "validation report" in err and "\n" not in err
    assert main(["validate", "--replay", str(tmp_path / "missing.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "list.json").write_text("[1, 2]")
    assert main(["validate", "--replay", str(tmp_path / "list.json")]) == 2
    assert "validation report" in capsys.readouterr().err
    assert main(["validate"]) == 2
    assert "--network" in capsys.readouterr().err


def test_a_recurrent_layer_s_states_and_the_gradient_sums_are_messages_and_rounds_of_their_own() -> None:
    """A batch norm of the input (its two one-value tensors on every process, their gradients summed once
    per mini-batch) and a GRU on the sequence every process holds (its 6 steps' states exchanged each
    way): the messages add up to the model's traffic, and the rounds count each step and each tensor."""
    from dnnbench.model.arrays import network_arrays
    from dnnbench.model.traffic import choose_spatial, gradient_sums, model_parallel_values
    from dnnbench.specs import Network

    net = Network.build({"name": "gru", "layers": [
        {"kind": "input", "shape": [6, 4]}, {"kind": "batchnorm"},
        {"kind": "recurrent", "mode": "gru", "hidden": 5}, {"kind": "flatten"}, {"kind": "fc", "out_features": 3}]})
    arr = network_arrays(net)
    assert (arr.replicated_weights.sum(), arr.replicated_tensors.sum()) == (2, 2)
    per_sample = float(model_parallel_values(arr, 2.0, choose_spatial(arr, "feature-map")))
    sums = float(gradient_sums(arr, 2.0)[0])
    assert sum(message_bytes(net, Run("mp", "sync", 2), 8)) == pytest.approx((per_sample * 8 + sums) * 4)
    # the GRU's 6 steps and the FC layer's input, each way, and one round per summed tensor
    assert exchange_rounds_per_step(net, Run("mp", "sync", 2)) == 2 * (6 + 1) + 2
    assert exchange_rounds_per_step(net, Run("mp", "sync", 1)) == 0.0
