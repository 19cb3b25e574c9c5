"""The tbf bucket and other programs' load in the validation mapping (docs/validation.md)."""

import pytest

from dnnbench import presets
from dnnbench.measure import hostload, netns
from dnnbench.measure.calibrate import machine_from_fit, tbf_nic
from dnnbench.measure.fit import ComputeFit
from dnnbench.measure.validate import (
    BUCKET_CAP,
    Run,
    bucket_rate_factor,
    message_bytes,
    own_busy_threads,
    predicted_samples_per_s,
    run_cluster,
    scale_compute,
)


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


def test_other_programs_stretch() -> None:
    assert hostload.stretch(2, 0.0, 2) == 1.0
    assert hostload.stretch(2, 1.0, 2) == pytest.approx(1.5)
    assert hostload.stretch(4, 2.0, 2) == pytest.approx(1.5)  # κ = 2 is the model's, the rest is load
    assert hostload.stretch(1, 0.5, 2) == 1.0
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
    run, nic = Run("dp", "sync", 1, 1e9), tbf_nic(1e9, 1e-4)
    plain = machine_from_fit(fit)
    copying = machine_from_fit(fit, copy_time_s_per_byte=2e-10)
    base, _ = predicted_samples_per_s(net, run_cluster(plain, nic, run, 2), run, 32)
    slow, item = predicted_samples_per_s(net, run_cluster(copying, nic, run, 2), run, 32)
    assert slow < base and item["breakdown_s_per_sample"]["compute_messages"] > 0
    assert scale_compute(copying, 2.0).copy_time_s_per_byte == pytest.approx(4e-10)
    # A busier PS machine (other programs' load on its side) only slows the PS's part.
    loaded = run_cluster(copying, nic, run, 2, ps_machine=scale_compute(copying, 3.0))
    assert loaded.ps.copy_time_s_per_byte == pytest.approx(6e-10) and loaded.worker.copy_time_s_per_byte == 2e-10
    assert predicted_samples_per_s(net, loaded, run, 32)[0] < slow
