"""Hand-computed golden cases for lenet5 on a simple two-machine cluster (docs/model.md §4-5)."""

from __future__ import annotations

import pytest

from dnnbench import presets
from dnnbench.model import predict
from dnnbench.specs import Cluster, Configuration

# A deliberately simple cluster: one core, 1 ns per MAC and per element op, no cache effect,
# 1 Gbit/s full-duplex links with no protocol overhead.
SIMPLE = {
    "name": "simple",
    "worker": {"cores": 1, "mac_time_s": {"conv": 1e-9, "fc": 1e-9}, "elem_time_s": 1e-9, "cache_speedup": 1.0,
               "llc_bytes": 1, "memory_bytes": 2**34},
    "worker_nic": {"upload_bits_per_s": 1e9, "download_bits_per_s": 1e9, "latency_s": 0.0, "goodput_factor": 1.0},
    "ps": {"cores": 1, "mac_time_s": {"conv": 1e-9, "fc": 1e-9}, "elem_time_s": 1e-9, "llc_bytes": 1,
           "memory_bytes": 2**34},
    "ps_nic": {"upload_bits_per_s": 1e9, "download_bits_per_s": 1e9, "latency_s": 0.0, "goodput_factor": 1.0},
    "machines": 2,
}

# lenet5 per sample (tests/counts/test_counts.py): MACs fwd 416,520, back-prop 298,920 (no error below c1),
# weight-grad 416,520; element ops 12,822 forward and 12,822 backward; 61,706 weights applied every
# 16 samples (local_batch_samples): 3,856.625 element ops per sample.
T_ONE_S = (416_520 + 298_920 + 416_520 + 12_822 + 12_822 + 61_706 / 16) * 1e-9  # 1.161460625 ms
MNIST_SAMPLES = 60_000


def test_one_machine() -> None:
    pred = predict(presets.network("lenet5"), Cluster.build(SIMPLE), presets.dataset("mnist"), Configuration())
    assert float(pred.time_per_sample_s) == pytest.approx(T_ONE_S, rel=1e-12)
    assert float(pred.epoch_time_s) == pytest.approx(MNIST_SAMPLES * T_ONE_S, rel=1e-12)  # 69.6876375 s
    assert float(pred.speedup) == pytest.approx(1.0)
    assert pred.item()["bottleneck"] == "worker compute"


def test_two_machines_model_parallel() -> None:
    # Every partitioned unit count (6, 16, 400, 120, 84, 10) is even: no imbalance, compute halves.
    # Exchanged inputs (feature-map scheme; c1 reads the data server): c3 6·14·14 = 1,176, f5 400,
    # f6 120, output 84 -> 1,780 values; each direction carries 2·(W-1)/W·1,780 = 1,780 values
    # = 56,960 bits -> 56.96 µs at 1 Gbit/s.
    network_s = 1_780 * 32 / 1e9
    pred = predict(presets.network("lenet5"), Cluster.build(SIMPLE), presets.dataset("mnist"),
                   Configuration(workers_per_replica=2))
    parts = pred.item()["breakdown_s_per_sample"]
    assert parts["model_parallel_network"] == pytest.approx(network_s, rel=1e-12)
    assert float(pred.time_per_sample_s) == pytest.approx(T_ONE_S / 2 + network_s, rel=1e-12)  # 637.69 µs
    full = predict(presets.network("lenet5"), Cluster.build(SIMPLE), presets.dataset("mnist"),
                   Configuration(workers_per_replica=2, overlap=1.0))
    assert float(full.time_per_sample_s) == pytest.approx(T_ONE_S / 2, rel=1e-12)  # max(580.7, 57.0) µs


def test_latency_per_message() -> None:
    # 4 exchanging layers x 2 phases x (W-1) peers = 8 messages per sample, 10 µs each, one thread.
    cluster = Cluster.build({**SIMPLE, "worker_nic": {**SIMPLE["worker_nic"], "latency_s": 10e-6}})
    pred = predict(presets.network("lenet5"), cluster, presets.dataset("mnist"),
                   Configuration(workers_per_replica=2, threads=1))
    assert pred.item()["breakdown_s_per_sample"]["model_parallel_network"] == pytest.approx(
        1_780 * 32 / 1e9 + 8 * 10e-6, rel=1e-12)


def test_layer_overhead_is_per_mini_batch() -> None:
    # lenet5 has 9 layers after the input; each runs forward and backward once per local mini-batch.
    cluster = Cluster.build(SIMPLE)
    slow = cluster.evolve(worker=cluster.worker.evolve(layer_overhead_s=1e-4))
    net, ds = presets.network("lenet5"), presets.dataset("mnist")
    for b in (1, 16, 64):
        cfg = Configuration(local_batch_samples=b)
        extra = float(predict(net, slow, ds, cfg).time_per_sample_s - predict(net, cluster, ds, cfg).time_per_sample_s)
        assert extra == pytest.approx(2 * 9 * 1e-4 / b, rel=1e-9)


FAST_NICS = {k: {**SIMPLE[k], "upload_bits_per_s": 1e15, "download_bits_per_s": 1e15}
             for k in ("worker_nic", "ps_nic")}


def _async_kappa(alone: dict[str, float], workers: float, cores: float) -> float:
    """κ of an asynchronous run on a shared host whose links are (practically) free: a first pass
    with the PS taking no core gives x0 = R / (κ0·T_worker); the PS then counts as x0·c_PS/k busy
    threads (its CPU seconds per sample at x0, at most one core), docs/model.md §4."""
    t_worker = sum(v for k, v in alone.items() if k.startswith("compute_"))
    x0 = workers / (max(1.0, workers / cores) * t_worker)
    return max(1.0, (workers + min(1.0, x0 * alone["ps_compute"])) / cores)


def test_host_contention_stretches_compute() -> None:
    # Four one-core worker processes and one PS process, asynchronous, on a two-core host: the
    # workers alone are 4 busy threads; the PS adds its CPU share at their throughput.
    cluster = Cluster.build({**SIMPLE, **FAST_NICS, "shared_host": {"cores": 2}, "machines": 5})
    free = Cluster.build({**SIMPLE, **FAST_NICS, "machines": 5})
    net, ds = presets.network("lenet5"), presets.dataset("mnist")
    cfg = Configuration(replicas=4, ps_machines=1, mode="async", push_interval_samples=32)
    shared = predict(net, cluster, ds, cfg).item()["breakdown_s_per_sample"]
    alone = predict(net, free, ds, cfg).item()["breakdown_s_per_sample"]
    kappa = _async_kappa(alone, 4.0, 2.0)
    assert 2.0 < kappa < 2.5  # more than the workers alone, less than a whole busy PS thread
    assert shared["compute_forward"] == pytest.approx(kappa * alone["compute_forward"], rel=1e-12)
    assert shared["ps_compute"] == pytest.approx(kappa * alone["ps_compute"], rel=1e-12)
    one = predict(net, cluster, ds, Configuration())  # one process on two cores: no contention
    assert float(one.time_per_sample_s) == pytest.approx(T_ONE_S, rel=1e-12)


def test_sync_rounds_do_not_count_an_idle_ps_as_busy() -> None:
    # Two one-core workers and one PS on two cores: asynchronous, the workers fill both cores and the
    # PS adds its CPU share (κ between 1 and 3/2); synchronous, the PS applies while the workers wait
    # (κ = 1 for both).
    cluster = Cluster.build({**SIMPLE, **FAST_NICS, "shared_host": {"cores": 2}, "machines": 3})
    free = Cluster.build({**SIMPLE, **FAST_NICS, "machines": 3})
    net, ds = presets.network("lenet5"), presets.dataset("mnist")
    for mode in ("async", "sync"):
        cfg = Configuration(replicas=2, ps_machines=1, mode=mode, push_interval_samples=32)
        shared = predict(net, cluster, ds, cfg).item()["breakdown_s_per_sample"]
        alone = predict(net, free, ds, cfg).item()["breakdown_s_per_sample"]
        kappa = _async_kappa(alone, 2.0, 2.0) if mode == "async" else 1.0
        if mode == "async":
            assert 1.0 < kappa < 1.5
        assert shared["compute_forward"] == pytest.approx(kappa * alone["compute_forward"], rel=1e-12)



def test_message_copies_cost_cpu_on_both_ends() -> None:
    # lenet5 on two machines: 1,780 values = 7,120 bytes each way per sample (test above) -> copies
    # of 2 x 7,120 bytes at 1 ns per byte on one core.
    cluster = Cluster.build(SIMPLE)
    copying = cluster.evolve(worker=cluster.worker.evolve(copy_time_s_per_byte=1e-9))
    net, ds = presets.network("lenet5"), presets.dataset("mnist")
    cfg = Configuration(workers_per_replica=2)
    part = predict(net, copying, ds, cfg).item()["breakdown_s_per_sample"]["compute_messages"]
    assert part == pytest.approx(2 * 1_780 * 4 * 1e-9, rel=1e-12)
    assert predict(net, cluster, ds, cfg).item()["breakdown_s_per_sample"]["compute_messages"] == 0.0


def test_exchange_overhead_per_round() -> None:
    # lenet5 W=2: 4 exchanging layers x 2 phases = 8 rounds per sample, shared by 32 samples per message
    # and the one thread; W=1 exchanges nothing.
    cluster = Cluster.build(SIMPLE)
    slow = cluster.evolve(worker_nic=cluster.worker_nic.evolve(exchange_overhead_s=4e-3))
    net, ds = presets.network("lenet5"), presets.dataset("mnist")
    cfg = Configuration(workers_per_replica=2, samples_per_message=32, threads=1)
    extra = (predict(net, slow, ds, cfg).item()["breakdown_s_per_sample"]["model_parallel_network"]
             - predict(net, cluster, ds, cfg).item()["breakdown_s_per_sample"]["model_parallel_network"])
    assert extra == pytest.approx(8 * 4e-3 / 32, rel=1e-9)
    one = Configuration(threads=1)
    t_slow, t_base = (float(predict(net, c, ds, one).time_per_sample_s) for c in (slow, cluster))
    assert t_slow == t_base


def test_background_threads_on_a_shared_host() -> None:
    # Two synchronous workers on two cores, plus one runnable thread of another program: κ = 3/2.
    quiet = Cluster.build({**SIMPLE, "shared_host": {"cores": 2}, "machines": 3})
    busy = quiet.evolve(shared_host={"cores": 2, "background_threads": 1.0})
    net, ds = presets.network("lenet5"), presets.dataset("mnist")
    cfg = Configuration(replicas=2, ps_machines=1, mode="sync", threads=1)
    a = predict(net, busy, ds, cfg).item()["breakdown_s_per_sample"]["compute_forward"]
    b = predict(net, quiet, ds, cfg).item()["breakdown_s_per_sample"]["compute_forward"]
    assert a == pytest.approx(1.5 * b, rel=1e-12)


def test_corun_slowdown_on_a_shared_host() -> None:
    # Two workers on two cores (synchronous, PS idle meanwhile): no time-sharing, but each computes
    # σ_h = 8 % slower beside the other; one worker alone is not slowed.
    base = Cluster.build({**SIMPLE, "shared_host": {"cores": 2}, "machines": 3})
    slowed = base.evolve(shared_host={"cores": 2, "corun_slowdown": 0.08})
    net, ds = presets.network("lenet5"), presets.dataset("mnist")
    two = Configuration(replicas=2, ps_machines=1, mode="sync", threads=1)
    part = "compute_forward"
    a, b = (predict(net, c, ds, two).item()["breakdown_s_per_sample"][part] for c in (slowed, base))
    assert a == pytest.approx(1.08 * b, rel=1e-12)
    one = Configuration(threads=1)
    a1, b1 = (predict(net, c, ds, one).item()["breakdown_s_per_sample"][part] for c in (slowed, base))
    assert a1 == pytest.approx(b1, rel=1e-12)


def _request_reply_parts(replicas: int) -> tuple[float, float, float, float, float]:
    """(samples/s request–reply, then per-sample Z, D_in, D_out, D_cpu from the overlapped prediction's
    breakdown) for lenet5 on SIMPLE with one PS machine: the worker link and the PS ports are equally
    fast, so a replica's own cycle Z is its compute alone (no latency, no copies)."""
    net, ds = presets.network("lenet5"), presets.dataset("mnist")
    cluster = Cluster.build({**SIMPLE, "machines": replicas + 1})
    base = {"replicas": replicas, "ps_machines": 1, "push_interval_samples": 32, "pull_interval_samples": 32,
            "fc_update": "deltas"}
    over = predict(net, cluster, ds, Configuration(**base)).item()["breakdown_s_per_sample"]
    rr = predict(net, cluster, ds, Configuration(**base, ps_exchange="request_reply")).item()
    z = sum(v for k, v in over.items() if k.startswith("compute_"))
    return rr["samples_per_s"], z, over["ps_push"], over["ps_pull"], over["ps_compute"] * 1.0


def test_request_reply_one_replica_is_the_serial_cycle() -> None:
    # One replica: compute, push through the PS's port, the PS's CPU, pull — one after the other.
    x, z, d_in, d_out, d_cpu = _request_reply_parts(1)
    assert x == pytest.approx(1.0 / (z + d_in + d_out + d_cpu), rel=1e-12)


def test_request_reply_replicas_share_the_ps_as_queues() -> None:
    # Two replicas: Schweitzer's equation X·(Z + Σ D_k / (1 − D_k·X/2)) = 2, solved here by bisection.
    from scipy.optimize import brentq

    x, z, d_in, d_out, d_cpu = _request_reply_parts(2)
    d = [d_in, d_out, d_cpu]
    hi = 2.0 / max(d) * (1 - 1e-12)
    root = brentq(lambda v: v * (z + sum(dk / (1 - dk * v / 2) for dk in d)) - 2.0, 0.0, hi, xtol=1e-14)
    assert x == pytest.approx(root, rel=1e-9)
    # Between the serial cycle of two independent replicas and the overlapped model's bounds.
    assert 1.0 / (z + sum(d)) < x < min(2.0 / (z + sum(d)), 1.0 / max(d))
    # Many replicas saturate the busiest PS station: the overlapped model's PS bound.
    x_many, *_ = _request_reply_parts(4096)
    assert x_many == pytest.approx(1.0 / max(d), rel=0.01) and x_many < 1.0 / max(d)
