"""Data parallelism by all-reduce (docs/model.md §10): the α–β costs by hand, overlap with backward,
buckets, the spec's rules, and invariants over generated clusters."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnbench import presets
from dnnbench.errors import SpecError
from dnnbench.model import evaluate, predict
from dnnbench.model.allreduce import bucket_plan, collective_s
from dnnbench.specs import Configuration, Network

#: One FC layer of 1000 x 1000 (+1000 biases) weights: 1,001,000 values, 4,004,000 bytes at 32 bits.
NET = Network.build({"name": "fc", "layers": [{"kind": "input", "shape": [1000]},
                                              {"kind": "fc", "out_features": 1000}]})
GRAD_BYTES = 1_001_000 * 4
#: Three FC layers, 1000 -> 1000 -> 100 -> 10: their gradients' bytes at 32 bits.
DEEP = Network.build({"name": "fc3", "layers": [{"kind": "input", "shape": [1000]},
                                                {"kind": "fc", "out_features": 1000},
                                                {"kind": "fc", "out_features": 100},
                                                {"kind": "fc", "out_features": 10}]})
DEEP_LAYER_BYTES = (1_001_000 * 4, 100_100 * 4, 1_010 * 4)


def _cluster(latency_s: float = 1e-5, bits_per_s: float = 1e9, duplex: str = "full") -> object:
    base = presets.cluster("modern-2025")
    nic = base.worker_nic.evolve(upload_bits_per_s=bits_per_s, download_bits_per_s=bits_per_s, latency_s=latency_s,
                                 goodput_factor=1.0, duplex=duplex)
    return base.evolve(worker=base.worker.evolve(step_time_cv=0.0, copy_time_s_per_byte=0.0), worker_nic=nic)


def _config(**allreduce: object) -> Configuration:
    return Configuration.build({"data_parallel": "allreduce", "replicas": 8, "push_interval_samples": 32,
                                "allreduce": {"overlap_backward": False, **allreduce}})


def _reduce_s(cl: object, p: int, n: float) -> float:
    cores = min(cl.worker.cores, cl.worker.cores)  # one thread per core by default, no contention
    eta = cores / (1 + cl.worker.thread_contention * (cores - 1))
    return (p - 1) / p * (n / 4) * cl.worker.elem_time_s / eta


def _ddp_s(cl: object, n: float) -> float:
    """DDP's own work per step (docs/model.md §10, T_copy): two copies (0 on these clusters) and the
    division by R, one pass over the gradient's n/4 values."""
    cores = cl.worker.cores
    eta = cores / (1 + cl.worker.thread_contention * (cores - 1))
    return 2 * n * cl.worker.copy_time_s_per_byte / eta + n / 4 * cl.worker.elem_time_s / eta


def test_ring_by_hand() -> None:
    """2(p−1)·α·buckets + 2(p−1)/p·n/B + the reduction, per step of k samples (Thakur et al. 2005). A
    bucket takes whole layers (DDP never splits a tensor): one FC layer of 4 MB is one bucket of 1 MiB or more."""
    cl, p, n = _cluster(), 8, GRAD_BYTES
    expected = 2 * (p - 1) * 1e-5 * 1 + 2 * (p - 1) / p * n / (1e9 / 8) + _reduce_s(cl, p, n) + _ddp_s(cl, n)
    item = predict(NET, cl, None, _config(bucket_bytes=2**20)).item()
    assert item["breakdown_s_per_sample"]["allreduce"] * 32 == pytest.approx(expected, rel=1e-12)
    # Three layers at 256 KiB buckets: (100->10 and 1000->100: 404,440 bytes) then (1000->1000): two buckets.
    two = predict(DEEP, cl, None, _config(bucket_bytes=2**18)).item()
    n3 = float(sum(DEEP_LAYER_BYTES))
    expected = 2 * (p - 1) * 1e-5 * 2 + 2 * (p - 1) / p * n3 / (1e9 / 8) + _reduce_s(cl, p, n3) + _ddp_s(cl, n3)
    assert two["breakdown_s_per_sample"]["allreduce"] * 32 == pytest.approx(expected, rel=1e-12)


def test_bucket_plan_by_hand() -> None:
    """Whole tensors in backward order until a bucket holds the cap or more; ready when backward has passed
    the bucket's earliest layer (fractions of the layers' backward times)."""
    plan = bucket_plan([(), (100.0,), (), (300.0,), (50.0,)], np.array([0.0, 1.0, 1.0, 2.0, 1.0]), 120)
    assert plan.bytes.tolist() == [350.0, 100.0]
    assert plan.ready_fraction.tolist() == pytest.approx([3 / 5, 1.0])  # layers 3-4 done; then all of it
    one = bucket_plan([(10.0,), (20.0,)], np.zeros(2), 2**20)
    assert one.bytes.tolist() == [30.0] and one.ready_fraction.tolist() == [1.0]
    # A bias that fills a bucket closes it before its own weight: (40 + 90), then (200), then (10 + 5).
    split = bucket_plan([(5.0, 10.0), (200.0, 90.0), (0.0, 40.0)], np.ones(3), 100)
    assert split.bytes.tolist() == [130.0, 200.0, 15.0]
    assert split.ready_fraction.tolist() == pytest.approx([2 / 3, 2 / 3, 1.0])


@settings(max_examples=80, deadline=None)
@given(layers=st.lists(st.tuples(st.lists(st.floats(0, 1e8), max_size=4), st.floats(0, 1.0)), min_size=1,
                      max_size=30), cap=st.floats(1.0, 1e8))
def test_bucket_plans_hold_every_byte_and_become_ready_in_order(layers: list[tuple[list[float], float]],
                                                                cap: float) -> None:
    tensors = [t for t, _ in layers]
    back = np.array([b for _, b in layers])
    plan = bucket_plan(tensors, back, cap)
    assert plan.bytes.sum() == pytest.approx(sum(sum(t) for t in tensors), rel=1e-12, abs=1e-9)
    assert np.all(plan.bytes[:-1] >= cap)  # every bucket but the last is full
    assert np.all(np.diff(plan.ready_fraction) >= -1e-12)
    assert np.all((plan.ready_fraction >= 0) & (plan.ready_fraction <= 1))


def test_tree_by_hand_and_half_duplex_doubles_the_transfer() -> None:
    cl, p, n = _cluster(), 8, GRAD_BYTES
    expected = 2 * math.ceil(math.log2(p)) * 1e-5 + 2 * n / (1e9 / 8) + _reduce_s(cl, p, n) + _ddp_s(cl, n)
    item = predict(NET, cl, None, _config(algorithm="tree")).item()
    assert item["breakdown_s_per_sample"]["allreduce"] * 32 == pytest.approx(expected, rel=1e-12)
    half = predict(NET, _cluster(duplex="half"), None, _config()).item()["breakdown_s_per_sample"]["allreduce"]
    full = predict(NET, cl, None, _config()).item()["breakdown_s_per_sample"]["allreduce"]
    wire = 2 * (p - 1) / p * n / (1e9 / 8) / 32
    assert half - full == pytest.approx(wire, rel=1e-9)


def test_one_replica_reduces_nothing_and_matches_a_lone_replica() -> None:
    cl = _cluster()
    alone = predict(NET, cl, None, Configuration(push_interval_samples=32)).item()
    one = predict(NET, cl, None, _config().evolve(replicas=1)).item()
    assert one["breakdown_s_per_sample"]["allreduce"] == 0.0
    assert collective_s("ring", 1e6, 1, 1e-5, 1e8, 1e-9, 4.0) == 0.0
    # A lone PS-less replica is the same machine doing the same work (asynchronous or not: no exchange).
    assert one["samples_per_s"] == pytest.approx(alone["samples_per_s"], rel=1e-12)


@pytest.mark.parametrize("bits_per_s", [1e8, 1e11])
def test_overlap_follows_the_buckets_through_backward_by_hand(bits_per_s: float) -> None:
    """Bucket 1 (the last two layers) is ready once their backward is done and reduced while the first
    layer's weight gradient runs; bucket 2 (the first layer) waits for the end of backward:
    F1 = f1·t_b + c1, F2 = max(F1, t_b) + c2, exposed = F2 − t_b."""
    from dnnbench.model.arrays import network_arrays
    from dnnbench.model.compute import layer_parts

    cl, k, p = _cluster(bits_per_s=bits_per_s), 32, 8
    cfg = _config(overlap_backward=True, bucket_bytes=2**18)
    hidden = predict(DEEP, cl, None, cfg).item()
    serial = predict(DEEP, cl, None, _config(overlap_backward=False, bucket_bytes=2**18)).item()
    parts = serial["breakdown_s_per_sample"]
    t_b = (parts["compute_backprop"] + parts["compute_weight_grad"]) * k
    arr = network_arrays(DEEP)
    zeros = np.zeros_like(arr.weights)
    lp = layer_parts(arr, cl.worker, np.asarray(1.0), None, zeros, zeros.astype(bool), 16.0)
    back = lp.backprop_s + lp.weight_grad_s
    f1 = back[1:].sum() / back.sum()  # the layers 1000->100 and 100->10 done
    gamma = cl.worker.elem_time_s / (cl.worker.cores / (1 + cl.worker.thread_contention * (cl.worker.cores - 1)))
    c1, c2 = (collective_s("ring", n, p, 1e-5, bits_per_s / 8, gamma, 4.0)
              for n in (DEEP_LAYER_BYTES[2] + DEEP_LAYER_BYTES[1], DEEP_LAYER_BYTES[0]))
    f_end = max(f1 * t_b + c1, t_b) + c2
    ddp = _ddp_s(cl, sum(DEEP_LAYER_BYTES))
    assert hidden["breakdown_s_per_sample"]["allreduce"] * k == pytest.approx(f_end - t_b + ddp, rel=1e-9)
    assert parts["allreduce"] * k == pytest.approx(c1 + c2 + ddp, rel=1e-9)
    assert hidden["samples_per_s"] >= serial["samples_per_s"]


@settings(max_examples=40, deadline=None)
@given(bits=st.floats(1e7, 1e11), replicas=st.integers(2, 64), bucket=st.sampled_from([4096, 2**20, 25 * 2**20]),
       name=st.sampled_from(["lenet5", "mnist-adam", "resnet50", "gpt2-small:seq_len=64"]))
def test_overlap_exposes_between_the_last_bucket_and_the_whole_all_reduce(bits: float, replicas: int, bucket: int,
                                                                          name: str) -> None:
    net = presets.network(name)
    cl = _cluster(bits_per_s=bits)
    cfg = _config(overlap_backward=True, bucket_bytes=bucket).evolve(replicas=replicas)
    hidden = predict(net, cl, None, cfg).item()["breakdown_s_per_sample"]["allreduce"]
    serial = predict(net, cl, None, cfg.evolve(allreduce=cfg.allreduce.evolve(overlap_backward=False))).item()
    assert hidden <= serial["breakdown_s_per_sample"]["allreduce"] * (1 + 1e-12)
    assert hidden > 0


def test_on_a_shared_host_with_every_core_busy_nothing_hides_behind_backward() -> None:
    """Emulation layer (docs/model.md §9): loopback collectives need a CPU, and none is spare."""
    from dnnbench.specs import SharedHost

    cl = _cluster(bits_per_s=1e9)
    cfg = _config(overlap_backward=True, bucket_bytes=2**18).evolve(threads=1)
    serial = predict(DEEP, cl.evolve(shared_host=None), None, cfg.evolve(allreduce={"overlap_backward": False,
                                                                                      "bucket_bytes": 2**18})).item()
    busy = predict(DEEP, cl.evolve(shared_host=SharedHost(cores=8)), None, cfg).item()  # 8 ranks, 8 cores
    spare = predict(DEEP, cl.evolve(shared_host=SharedHost(cores=9)), None, cfg).item()
    assert busy["breakdown_s_per_sample"]["allreduce"] == pytest.approx(serial["breakdown_s_per_sample"]["allreduce"],
                                                                        rel=1e-12)
    assert spare["breakdown_s_per_sample"]["allreduce"] < busy["breakdown_s_per_sample"]["allreduce"]


def test_spec_rules() -> None:
    with pytest.raises(SpecError, match="ps_machines: 2 must be 0 when data_parallel is 'allreduce'"):
        Configuration.build({"data_parallel": "allreduce", "replicas": 4, "ps_machines": 2})
    assert Configuration.build({"data_parallel": "allreduce", "replicas": 4}).ps_machines == 0
    with pytest.raises(SpecError, match="allreduce.bucket_bytes"):
        Configuration.build({"data_parallel": "allreduce", "allreduce": {"bucket_bytes": 0}})
    with pytest.raises(SpecError, match="ps_machines"):
        evaluate(NET, _cluster(), None, _config(), ps_machines=np.array([0, 1]))


@settings(max_examples=60, deadline=None)
@given(bits=st.floats(1e7, 1e11), latency=st.one_of(st.just(0.0), st.floats(1e-7, 1e-3)), replicas=st.integers(2, 64),
       algorithm=st.sampled_from(["ring", "tree"]), overlap=st.booleans(),
       bucket=st.sampled_from([4096, 2**20, 25 * 2**20]), name=st.sampled_from(["lenet5", "resnet50", "vit-b16"]))
def test_a_faster_link_or_fewer_latencies_are_never_slower(bits: float, latency: float, replicas: int, algorithm: str,
                                                           overlap: bool, bucket: int, name: str) -> None:
    net = presets.network(name)
    cfg = Configuration.build({"data_parallel": "allreduce", "replicas": replicas,
                               "allreduce": {"algorithm": algorithm, "overlap_backward": overlap,
                                             "bucket_bytes": bucket}})
    x = predict(net, _cluster(latency, bits), None, cfg).item()
    faster = predict(net, _cluster(latency, bits * 2), None, cfg).item()
    quicker = predict(net, _cluster(latency / 2, bits), None, cfg).item()
    bigger = predict(net, _cluster(latency, bits), None, cfg.evolve(
        allreduce=cfg.allreduce.evolve(bucket_bytes=bucket * 4))).item()
    for other in (faster, quicker):
        assert other["samples_per_s"] >= x["samples_per_s"] * (1 - 1e-12)
    if not overlap:  # fewer buckets: fewer latencies (with overlap a bigger last bucket may show more)
        assert bigger["samples_per_s"] >= x["samples_per_s"] * (1 - 1e-12)
    assert 0 < x["speedup"] <= replicas * (1 + 1e-9)  # no cache effect at W = 1: at most linear


@settings(max_examples=25, deadline=None)
@given(bits=st.floats(1e7, 1e11), latency=st.floats(1e-6, 1e-3), budget=st.integers(1, 40),
       name=st.sampled_from(["lenet5", "resnet50", "gpt2-small:seq_len=64"]))
def test_the_optimizer_picks_the_faster_algorithm_exactly(bits: float, latency: float, budget: int, name: str) -> None:
    from dnnbench.optimizer import optimize
    from dnnbench.optimizer.brute import brute_force

    net, cl = presets.network(name), _cluster(latency, bits)
    base = Configuration(data_parallel="allreduce")
    best = optimize(net, cl, None, budget, base, data_parallels=["allreduce"], allreduce_algorithms=["ring", "tree"])
    brute = min(brute_force(net, cl, presets.default_dataset_for(net), budget,
                            base.evolve(allreduce=base.allreduce.evolve(algorithm=a)))[0] for a in ("ring", "tree"))
    assert best.best.epoch_time_s == pytest.approx(brute, rel=1e-12)
    config = best.configuration(base)
    assert config.allreduce.algorithm == best.best.allreduce_algorithm
    assert predict(net, cl, None, config).item()["epoch_time_s"] == pytest.approx(best.best.epoch_time_s, rel=1e-12)


def test_compressed_gradients_are_all_gathered_by_hand() -> None:
    from dnnbench.compression import wire
    from dnnbench.model.arrays import network_arrays

    cl = _cluster(bits_per_s=1e9, latency_s=1e-5)
    comp = {"method": "topk_ef", "density": 0.01, "encoding": "pairs32"}
    cfg = _config(bucket_bytes=2**40).evolve(compression=comp)
    item = predict(NET, cl, None, cfg).item()
    elems = float(network_arrays(NET).weights.sum())
    n = elems * 4.0
    ratio = float(wire.method_bits_per_element("topk_ef", "pairs32", 0.01)) / 32.0
    p = 8
    cores = cl.worker.cores  # one thread per core: T_eff = cores·η
    gamma = cl.worker.elem_time_s / (cores / (1 + cl.worker.thread_contention * (cores - 1)))
    want = ((p - 1) * 1e-5 + (p - 1) * n * ratio / (1e9 / 8)
            + (wire.selection_ops_per_element("topk_ef") + (p - 1) * 0.01) * elems * gamma + _ddp_s(cl, n))
    assert item["breakdown_s_per_sample"]["allreduce"] * 32 == pytest.approx(want, rel=1e-9)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([0.001, 0.01, 0.1]), st.sampled_from([0.01, 0.1, 0.5]), st.integers(2, 64),
       st.sampled_from(["topk_ef", "randk", "esgd"]))
def test_a_sparser_all_gather_is_never_slower(lo: float, hi: float, replicas: int, method: str) -> None:
    cl = _cluster(bits_per_s=1e9)
    lo, hi = min(lo, hi), max(lo, hi)
    enc = "values_only" if method == "randk" else "pairs32"
    cfg = _config(bucket_bytes=2**20).evolve(replicas=replicas)
    sparse = predict(NET, cl, None, cfg.evolve(compression={"method": method, "density": lo, "encoding": enc}))
    dense = predict(NET, cl, None, cfg.evolve(compression={"method": method, "density": hi, "encoding": enc}))
    assert float(sparse.samples_per_s) >= float(dense.samples_per_s) * (1 - 1e-12)


def test_ddp_copies_each_gradient_into_its_bucket_and_back() -> None:
    """T_copy = 2·n·t_copy / T_eff + (n/4)·γ on a CPU, in the training thread: added whole, with or without
    overlap, and only when there is more than one replica."""
    base = _cluster()
    copy = 1e-10
    cl = base.evolve(worker=base.worker.evolve(copy_time_s_per_byte=copy))
    cores = cl.worker.cores / (1 + cl.worker.thread_contention * (cl.worker.cores - 1))
    for overlap in (False, True):
        cfg = _config(overlap_backward=overlap, bucket_bytes=2**18)
        with_copy = predict(DEEP, cl, None, cfg).item()["breakdown_s_per_sample"]["allreduce"]
        without = predict(DEEP, base, None, cfg).item()["breakdown_s_per_sample"]["allreduce"]
        floor = 2.0 * 2 * (8 - 1) / 8 * sum(DEEP_LAYER_BYTES) * copy / cores  # the messages' copies: below T
        assert floor < without * 32
        gamma = cl.worker.elem_time_s / cores  # the division by R, one pass over the gradient's values
        added = 2 * sum(DEEP_LAYER_BYTES) * copy / cores
        assert (with_copy - without) * 32 == pytest.approx(added, rel=1e-9)
        assert without * 32 > sum(DEEP_LAYER_BYTES) / 4 * gamma  # (in both)
    one = predict(DEEP, cl, None, _config().evolve(replicas=1)).item()
    assert one["breakdown_s_per_sample"]["allreduce"] == 0.0
