"""σ_h measurement (co-run slowdown), the workers' request-reply link mapping and rank pinning
(docs/validation.md §"Shared host", §"Runs", §"Noise")."""

import os

from dnnbench import presets
from dnnbench.measure import corun
from dnnbench.measure.calibrate import machine_from_fit, tbf_nic
from dnnbench.measure.fit import ComputeFit
from dnnbench.measure.mapping import predicted_samples_per_s, run_cluster, worker_link
from dnnbench.measure.plan import Run
from dnnbench.measure.proc import pin


def _machine():
    return machine_from_fit(ComputeFit(3e-11, 4e-11, 1e-9, 1.0, {}, layer_overhead_s=2e-5),
                            copy_time_s_per_byte=2e-10)


def test_corun_slowdown_measures_and_leaves_nothing_behind(monkeypatch) -> None:
    started = []
    real_spin = corun._spin

    def spin(cpus):
        procs = real_spin(cpus)
        started.extend(procs)
        return procs

    monkeypatch.setattr(corun, "_spin", spin)
    before = os.sched_getaffinity(0)
    out = corun.corun_slowdown(presets.network("lenet5"), batch_size=8, steps=2, repeats=1, warmup=1)
    assert os.sched_getaffinity(0) == before  # this process's affinity is restored
    assert out["host_corun_slowdown"] >= 0.0
    if len(before) > 1:
        assert 0.0 <= out["alone_step_cv"] < 10.0  # the steps' jitter (Machine.step_time_cv)
        assert len(out["ratios"]) == 1 and started and all(p.poll() is not None for p in started)
        assert out["host_corun_slowdown"] == max(0.0, out["ratios"][0] - 1.0)
    else:  # nothing can co-run on one CPU
        assert out["ratios"] == [] and not started


def test_corun_slowdown_reaches_the_validation_cluster_only_on_a_shared_host() -> None:
    run = Run("dp", "async", 2, 1e9)
    shared = run_cluster(_machine(), tbf_nic(1e9, 1e-4), run, 2, corun_slowdown=0.1)
    assert shared.shared_host.corun_slowdown == 0.1
    assert run_cluster(_machine(), tbf_nic(1e9, 1e-4), run, None, corun_slowdown=0.1).shared_host is None
    net = presets.network("lenet5")
    plain = run_cluster(_machine(), tbf_nic(1e9, 1e-4), run, 2)
    assert predicted_samples_per_s(net, shared, run, 32)[0] < predicted_samples_per_s(net, plain, run, 32)[0]


def test_ps_workers_use_their_link_one_direction_at_a_time() -> None:
    nic = tbf_nic(1e9, 1e-4)
    assert worker_link(nic, Run("dp", "async", 2)).duplex == "half"
    assert worker_link(nic, Run("mp", ranks=2)).duplex == "full"
    net = presets.network("mnist-adam")  # 15 MB pushes: the link dominates the replica
    from dnnbench.measure.mapping import configuration
    from dnnbench.model import predict

    for mode in ("async", "sync"):
        run = Run("dp", mode, 2, 1e9)
        cl = run_cluster(_machine(), nic, run, 2)
        half_cl = cl.evolve(worker_nic=worker_link(nic, run))
        # The runs are predicted as request-reply (push, wait, pull): serial whatever the duplex,
        # and sync rounds add push and pull anyway.
        assert configuration(run, 32).ps_exchange == "request_reply"
        full = predicted_samples_per_s(net, cl, run, 32)[0]
        half = predicted_samples_per_s(net, half_cl, run, 32)[0]
        assert abs(half / full - 1) < 1e-3  # (only the PS's CPU-share estimate in κ sees the duplex)
    # Adam's overlapped exchange on a half-duplex worker link adds push and pull instead of
    # overlapping them: slower.
    over = configuration(Run("dp", "async", 2, 1e9), 32).evolve(ps_exchange="overlapped")
    ds = presets.default_dataset_for(net)
    assert float(predict(net, half_cl, ds, over).samples_per_s) < 0.9 * float(predict(net, cl, ds, over).samples_per_s)


def test_pin_one_rank_per_cpu_only_when_they_fit() -> None:
    cpus = os.sched_getaffinity(0)
    try:
        assert not pin(0, len(cpus) + 1) and os.sched_getaffinity(0) == cpus
        assert pin(0, len(cpus)) and os.sched_getaffinity(0) == {min(cpus)}
    finally:
        os.sched_setaffinity(0, cpus)
