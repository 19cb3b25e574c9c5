"""Accelerators, nodes, precision, memory per device and ZeRO (docs/model.md §11): the formulas by hand,
the presets' datasheet numbers, one-line errors, and invariants over drawn clusters."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import graph_network_dicts, spec_floats

from dnnbench import presets
from dnnbench.errors import SpecError
from dnnbench.model import evaluate, predict
from dnnbench.model.allreduce import collective_s
from dnnbench.model.arrays import autocast_fp32, network_arrays
from dnnbench.specs import Cluster, Configuration, Network

FC = Network.build({"name": "one-fc", "layers": [{"kind": "input", "shape": [4096]},
                                                 {"kind": "fc", "out_features": 4096}]})


def _device_cluster(**acc: Any) -> Cluster:
    data = presets.cluster("dgx-a100").to_dict()
    data["worker"]["accelerator"].update(acc)
    data["worker"]["layer_overhead_s"] = 0.0
    return Cluster.build(data)


def test_a_layer_on_a_device_is_the_roofline_of_its_multiply_adds_and_bytes() -> None:
    cl = _device_cluster(half_efficiency_macs=0.0, efficiency_fc=0.5)
    b = 256
    cfg = Configuration(local_batch_samples=b, precision="tf32")
    bd = predict(FC, cl, "mnist", cfg).breakdown
    macs = 4096 * 4096
    # 4096 outputs fill 4096 / (4096 + 64) of the tiles (half_efficiency_channels 64, the default).
    rate = 156e12 / 2 * 0.5 * 4096 / (4096 + 64)
    bw = 2039e9
    # Compute-bound at b = 256: forward = MACs / rate; the bytes (4 B each) would take less. The loss's
    # log-softmax on the raw outputs is a pass of its own: it reads and writes the 4096 outputs.
    loss = 2 * 4096 * 4 / bw
    assert float(bd.compute_forward_s) == pytest.approx(macs / rate + loss, rel=1e-12)
    # The first layer passes no error to the input; back-prop is the loss's backward alone (its error
    # written into zeros, then the log-softmax's: 4 passes over the outputs).
    assert float(bd.compute_backprop_s) == pytest.approx(4 * 4096 * 4 / bw, rel=1e-12)
    # The weight gradient, and the bias's gradient in a kernel of its own: it reads the 4096 errors.
    assert float(bd.compute_weight_grad_s) == pytest.approx(macs / rate + 4096 * 4 / bw, rel=1e-12)
    # At b = 1 the weights' bytes bind: 4096·4097 weights read once per sample.
    one = predict(FC, cl, "mnist", cfg.evolve(local_batch_samples=1)).breakdown
    weights = 4096 * 4097
    assert float(one.compute_forward_s) == pytest.approx((2 * 4096 * 4 + weights * 4) / bw + loss, rel=1e-12)


def test_mixed_precision_casts_fp32_inputs_and_weights_to_16_bits() -> None:
    """Autocast casts the fp32 input (read 4 bytes, write 2) and every fp32 weight each forward before
    the product reads the 16-bit copies; the loss runs in fp32. At b = 256 the weights' casts bind."""
    cl = _device_cluster(half_efficiency_macs=0.0, efficiency_fc=0.5)
    b = 256
    bd = predict(FC, cl, "mnist", Configuration(local_batch_samples=b, precision="fp16")).breakdown
    rate, bw = 312e12 / 2 * 0.5 * 4096 / (4096 + 64), 2039e9
    weights = 4096 * 4097
    operands = 4096 * (2 + 2) + 4096 * 2 + weights * (2 + 6) / b  # fp32 input, fp16 output, cast weights
    passes = 2 * 4096 * 4 + 4096 * (4 + 2)  # the fp32 loss, the input's cast
    assert operands / bw > 4096 * 4096 / rate
    assert float(bd.compute_forward_s) == pytest.approx((operands + passes) / bw, rel=1e-12)


def test_small_calls_run_below_peak_on_the_efficiency_curve() -> None:
    cl = _device_cluster(half_efficiency_macs=float(4096 * 4096 * 8), efficiency_fc=0.8, memory_bytes_per_s=1e16)
    cfg = Configuration(local_batch_samples=8, precision="tf32")
    fwd = float(predict(FC, cl, "mnist", cfg).breakdown.compute_forward_s)
    # m = m_half: half of the large-call efficiency (and the width's 4096 / (4096 + 64)).
    # The loss's log-softmax pass reads and writes the 4096 outputs at 4 bytes.
    assert fwd == pytest.approx(4096 * 4096 / (156e12 / 2 * 0.4 * 4096 / 4160) + 2 * 4096 * 4 / 1e16, rel=1e-12)


def _fc_chain(width: int, activation: str = "none") -> Network:
    return Network.build({"name": f"fc-{width}", "layers": [
        {"kind": "input", "shape": [4096]}, {"kind": "fc", "out_features": 4096},
        {"kind": "fc", "out_features": width, "activation": activation, "bias": False}]})


def test_a_narrow_layer_fills_fewer_tiles_by_its_width() -> None:
    """e·n/(n + n_half) on each phase's output width: forward the outputs, back-prop the inputs, the
    weight gradient the narrower side of its matrix."""
    cl = _device_cluster(half_efficiency_macs=0.0, efficiency_fc=0.5, memory_bytes_per_s=1e18)
    cfg = Configuration(local_batch_samples=256, precision="fp16")
    rate = 312e12 / 2 * 0.5
    for width in (16, 64, 1024):
        parts = predict(_fc_chain(width), cl, "mnist", cfg).breakdown
        macs = 4096 * width
        fc1 = 4096 * 4096 / (rate * 4096 / 4160)
        loss = 2 * width * 2 / 1e18
        assert float(parts.compute_forward_s) == pytest.approx(fc1 + macs / (rate * width / (width + 64)) + loss,
                                                               rel=1e-9)
        assert float(parts.compute_backprop_s) == pytest.approx(macs / (rate * 4096 / 4160), rel=1e-9)
        assert float(parts.compute_weight_grad_s) == pytest.approx(fc1 + macs / (rate * width / (width + 64)),
                                                                   rel=1e-9)
    # n_half = 0: every width alike, the shape-blind roofline.
    blind = _device_cluster(half_efficiency_macs=0.0, efficiency_fc=0.5, memory_bytes_per_s=1e18,
                            half_efficiency_channels=0.0)
    parts = predict(_fc_chain(16), blind, "mnist", cfg).breakdown
    assert float(parts.compute_forward_s) == pytest.approx((4096 * 4096 + 4096 * 16) / rate, rel=1e-9)


def test_a_fused_activation_and_a_fork_are_passes_of_their_own() -> None:
    """Eager PyTorch runs a fused activation in place after its layer (read and write the output) and its
    backward apart (read error and output, write the error); an output feeding two layers has their
    errors added (read two, write one). These bytes add to the layer's roofline."""
    cl = _device_cluster(half_efficiency_macs=0.0, efficiency_fc=0.5, memory_bytes_per_s=1e12)
    cfg = Configuration(local_batch_samples=256, precision="fp16")
    plain = predict(_fc_chain(1024), cl, "mnist", cfg).breakdown
    relu = predict(_fc_chain(1024, "relu"), cl, "mnist", cfg).breakdown
    assert float(relu.compute_forward_s - plain.compute_forward_s) == pytest.approx(2 * 1024 * 2 / 1e12, rel=1e-9)
    assert float(relu.compute_backprop_s - plain.compute_backprop_s) == pytest.approx(3 * 1024 * 2 / 1e12, rel=1e-9)
    fork = Network.build({"name": "fork", "layers": [
        {"kind": "input", "shape": [4096]}, {"kind": "fc", "out_features": 4096, "name": "a"},
        {"kind": "fc", "out_features": 1024, "inputs": ["a"], "name": "b"},
        {"kind": "fc", "out_features": 1024, "inputs": ["a"], "name": "c"},
        {"kind": "add", "inputs": ["b", "c"]}]})
    arr = network_arrays(fork)
    assert list(arr.extra_consumers) == [1.0, 0.0, 0.0, 0.0]
    from dnnbench.model.compute import device_values

    assert device_values(arr).backprop_passes[0] == 3 * 4096


def test_mixed_precision_is_faster_and_unsupported_precisions_are_one_line_errors() -> None:
    fp32 = predict("resnet50", "dgx-a100", None, Configuration(local_batch_samples=256))
    fp16 = predict("resnet50", "dgx-a100", None, Configuration(local_batch_samples=256, precision="fp16"))
    assert fp16.samples_per_s > 2 * fp32.samples_per_s
    with pytest.raises(SpecError, match=r"^precision: 'bf16' is not supported by NVIDIA V100 SXM2 16GB; expected one "
                                        r"of fp32, fp16$"):
        predict("resnet50", "dgx1-v100", None, Configuration(precision="bf16"))
    with pytest.raises(SpecError, match=r"^precision: 'fp16' is not a mode of the CPU machine"):
        predict("lenet5", "modern-2025", None, Configuration(precision="fp16"))


def test_the_device_presets_hold_their_datasheet_numbers() -> None:
    # Dense rates (datasheets print sparse tensor rates, twice these), memory and bandwidth.
    a100 = presets.device("a100-80gb").accelerator
    assert a100 is not None
    assert (a100.peak_flops_per_s.fp32, a100.peak_flops_per_s.tf32, a100.peak_flops_per_s.bf16) == (19.5e12, 156e12,
                                                                                                    312e12)
    assert (a100.memory_bytes, a100.memory_bytes_per_s) == (80e9, 2039e9)
    h100 = presets.device("h100-sxm").accelerator
    assert h100 is not None and h100.peak_flops_per_s.fp16 == 989.5e12 and h100.memory_bytes_per_s == 3.35e12
    t4 = presets.device("t4").accelerator
    assert t4 is not None and t4.peak_flops_per_s.supported == ("fp32", "fp16")
    for name in presets.names("devices"):
        m = presets.device(name)
        assert m.source and (m.accelerator is None or m.accelerator.source)


def test_a_cluster_names_a_device_preset_and_a_wrong_name_is_one_line() -> None:
    cl = presets.cluster("dgx-h100")
    assert cl.worker == presets.device("h100-sxm")
    data = cl.to_dict()
    data["worker"] = "b200"
    with pytest.raises(SpecError, match=r"^worker: 'b200' is not a device preset; expected one of a100-40gb"):
        Cluster.build(data)
    data["ps"] = "v100"
    data["worker"] = "v100"
    with pytest.raises(SpecError, match=r"^ps: .*computes only on an accelerator; the PS computes updates on a CPU"):
        Cluster.build(data)


def test_hierarchical_all_reduce_by_hand_and_flat_when_one_rank_per_node() -> None:
    n, alpha, b, a_in, b_in, g, nodes = 1e8, 5e-6, 25e9, 2e-6, 300e9, 8.0, 4.0
    p = g * nodes
    want = (2 * (g - 1) * a_in + 2 * (g - 1) / g * n / b_in + 2 * (nodes - 1) * alpha
            + 2 * (nodes - 1) / nodes * (n / g) / b)
    got = collective_s("hierarchical", n, p, alpha, b, 0.0, 4.0, per_node=g, intra_bytes_per_s=b_in,
                       intra_latency_s=a_in)
    assert float(got) == pytest.approx(want, rel=1e-12)
    ring = collective_s("ring", n, p, alpha, b, 0.0, 4.0)
    assert float(collective_s("hierarchical", n, p, alpha, b, 0.0, 4.0)) == pytest.approx(float(ring), rel=1e-12)
    # A flat ring over nodes runs at min(B_in, g·B); NCCL's tree latency counts hops in and between nodes.
    flat = collective_s("ring", n, p, alpha, b, 0.0, 4.0, per_node=g, intra_bytes_per_s=b_in, intra_latency_s=a_in)
    assert float(flat) == pytest.approx(2 * (p - 1) * alpha + 2 * (p - 1) / p * n / min(b_in, g * b), rel=1e-12)
    tree = collective_s("tree", n, p, alpha, b, 0.0, 4.0, per_node=g, intra_bytes_per_s=b_in, intra_latency_s=a_in)
    assert float(tree) == pytest.approx(2 * ((g - 1) * a_in + 2 * alpha) + 2 * n / min(b_in, g * b), rel=1e-12)
    inside = collective_s("ring", n, 8, alpha, b, 0.0, 4.0, per_node=g, intra_bytes_per_s=b_in, intra_latency_s=a_in)
    assert float(inside) == pytest.approx(2 * 7 * a_in + 2 * 7 / 8 * n / b_in, rel=1e-12)


def _parts(cfg: Configuration, cluster: str = "dgx-a100", **knobs: Any) -> dict[str, float]:
    return predict("gpt2-small:seq_len=128", cluster, None, cfg.evolve(**knobs)).item()[
        "memory_bytes_per_worker_parts"]


def test_memory_per_device_follows_zero_by_hand() -> None:
    psi = float(network_arrays(presets.network("gpt2-small:seq_len=128")).weights.sum())
    base = Configuration(data_parallel="allreduce", replicas=8, precision="fp16", optimizer="adam")
    for stage, (w, g, s) in enumerate([(2, 2, 12), (2, 2, 12 / 8), (2, 2 / 8, 12 / 8), (2 / 8, 2 / 8, 12 / 8)]):
        parts = _parts(base, zero_stage=stage)
        assert (parts["weights"], parts["gradients"], parts["optimizer_state"]) == pytest.approx(
            (w * psi, g * psi, s * psi), rel=1e-12)
    sgd = _parts(Configuration(data_parallel="allreduce", optimizer="momentum", precision="tf32"))
    assert (sgd["weights"], sgd["gradients"], sgd["optimizer_state"]) == pytest.approx((4 * psi,) * 3, rel=1e-12)


def _residual_tokens() -> Network:
    """Token ids -> embedding (fp32 table) -> layer norm and fc both reading it -> add -> fc head."""
    return Network.build({"name": "residual-tokens", "layers": [
        {"kind": "input", "shape": [8]}, {"kind": "embedding", "vocabulary": 50, "dim": 16, "name": "emb"},
        {"kind": "layer_norm", "name": "ln", "inputs": ["emb"]},
        {"kind": "fc", "out_features": 16, "name": "proj", "inputs": ["ln"]},
        {"kind": "fc", "out_features": 16, "name": "side", "inputs": ["emb"]},
        {"kind": "add", "inputs": ["proj", "side"], "name": "sum"},
        {"kind": "fc", "out_features": 10, "name": "head", "inputs": ["sum"]}]})


def test_autocast_keeps_in_fp32_what_it_leaves_in_fp32() -> None:
    """The embedding's fp32 output is kept by the layer norm (fp32) and by an fc (its 16-bit copy); the
    layer norm's fp32 output only by a product (the copy alone, 16-bit); the add of fp16 and fp16 is 16-bit."""
    net = _residual_tokens()
    assert autocast_fp32(net) == [True, True, True, False, False, False, False]
    arr = network_arrays(net)
    per_token = 8 * 16
    assert (arr.autocast_fp32_kept_values, arr.autocast_copy_values) == (per_token, per_token)
    cl = _device_cluster()
    b = 32
    cfg = Configuration(local_batch_samples=b, optimizer="sgd")
    fp16 = predict(net, cl, None, cfg.evolve(precision="fp16")).item()["memory_bytes_per_worker_parts"]
    tf32 = predict(net, cl, None, cfg.evolve(precision="tf32")).item()["memory_bytes_per_worker_parts"]
    kept = float(arr.kept_values.sum() + arr.input_kept_values)
    biggest = float(np.sort(arr.out_values)[-2:].sum())
    # fp16: every kept value at 2 bytes, the embedding's output 2 bytes more, and its 16-bit copy.
    assert fp16["activations"] == pytest.approx(((kept + biggest) * 2 + per_token * 2 + per_token * 2) * b,
                                                rel=1e-12)
    assert tf32["activations"] == pytest.approx((kept + biggest) * 4 * b, rel=1e-12)  # no autocast


@settings(max_examples=40, deadline=None)
@given(graph_network_dicts())
def test_autocast_memory_lies_between_all_16_bit_and_all_fp32_with_copies(net_dict: dict[str, Any]) -> None:
    net = Network.build(net_dict)
    arr = network_arrays(net)
    kept = float(arr.kept_values.sum() + arr.input_kept_values)
    assert 0.0 <= arr.autocast_copy_values <= arr.autocast_fp32_kept_values <= kept
    products = ("conv2d", "fc", "attention", "sdpa", "matmul")
    wide = autocast_fp32(net)
    # Products write 16 bits, but for a function of autocast's float32 list fused after one.
    fp32_functions = ("softplus", "exp", "log", "rsqrt", "reciprocal")
    assert not any(w for w, layer in zip(wide, net.layers, strict=True)
                   if layer.kind in products and getattr(layer, "activation", "none") not in fp32_functions)
    assert all(w for w, layer in zip(wide, net.layers, strict=True) if layer.kind in ("layer_norm", "softmax"))


def test_an_infeasible_configuration_names_what_does_not_fit_and_by_how_much() -> None:
    item = predict("gpt2-small", "commodity-t4", None, Configuration(local_batch_samples=64, optimizer="adam")).item()
    assert not item["feasible"] and item["infeasible_reason"] == "worker memory"
    detail = item["infeasible_detail"]
    need, cap = item["memory_bytes_per_worker"], item["memory_capacity_bytes_per_worker"]
    assert detail.startswith("worker memory: needs ") and "activations" in detail and " over" in detail
    assert cap == 16e9 and need > cap
    over = re.search(r", ([\d.]+) (GB|GiB) over$", detail)
    assert over, detail
    unit = 1e9 if over.group(2) == "GB" else 2**30
    assert float(over.group(1)) == pytest.approx((need - cap) / unit, abs=0.05 * (need - cap) / unit)


def test_batch_norm_outputs_feeding_a_relu_are_not_kept_for_backward() -> None:
    net = presets.network("resnet50")
    arr = network_arrays(net)
    kept = dict(zip(arr.names, arr.kept_values, strict=True))
    outs = dict(zip(arr.names, arr.out_values, strict=True))
    kinds = {name: layer.kind for name, layer in zip(net.layer_names, net.layers, strict=True)}
    bn_relu = [n for n in kept if kinds[n] == "batchnorm" and kept[n] == 0.0]
    assert bn_relu and all(kept[n] == outs[n] for n in kept if kinds[n] == "conv2d")
    assert sum(kept.values()) < sum(arr.activations)


def test_a_replica_inside_a_node_exchanges_on_the_intra_link() -> None:
    cfg = Configuration(workers_per_replica=8)
    inside = predict("vgg16", "dgx-a100", None, cfg).breakdown.model_parallel_network_s
    across = predict("vgg16", "dgx-a100", None, cfg.evolve(workers_per_replica=16)).breakdown.model_parallel_network_s
    nic_only = presets.cluster("dgx-a100").evolve(node=None)
    flat = predict("vgg16", nic_only, None, cfg).breakdown.model_parallel_network_s
    assert float(inside) < float(flat) / 5 and float(across) > float(inside)


@st.composite
def device_problems(draw: Any) -> tuple[Cluster, Configuration]:
    cl = presets.cluster(draw(st.sampled_from([c for c in presets.names("clusters")
                                               if presets.cluster(c).node is not None])))
    acc = cl.worker.accelerator
    assert acc is not None
    cfg = Configuration(data_parallel="allreduce", precision=draw(st.sampled_from(acc.peak_flops_per_s.supported)),
                        optimizer=draw(st.sampled_from(["sgd", "momentum", "adam"])),
                        zero_stage=draw(st.integers(0, 3)), local_batch_samples=draw(st.sampled_from([1, 32, 256])),
                        push_interval_samples=draw(st.sampled_from([1, 32, 256])),
                        allreduce={"algorithm": draw(st.sampled_from(["ring", "tree", "hierarchical"])),
                                   "overlap_backward": draw(st.booleans())})
    return cl, cfg


@settings(max_examples=60, deadline=None)
@given(device_problems(), st.sampled_from(["resnet50", "lenet5", "gpt2-small:seq_len=64"]),
       st.sampled_from([2.0, 4.0]))
def test_more_nics_faster_links_and_more_memory_never_hurt(problem: tuple[Cluster, Configuration], net: str,
                                                           f: float) -> None:
    cl, cfg = problem
    node = cl.node
    assert node is not None
    w = np.array([1, 1, 2, 4, 1], dtype=float)
    r = np.array([1, 8, 4, 8, 32], dtype=float)
    base = evaluate(net, cl, None, cfg, workers_per_replica=w, replicas=r, ps_machines=0.0)
    link = node.link.evolve(bytes_per_s=node.link.bytes_per_s * f)
    better = cl.evolve(node=node.evolve(nics=node.nics * 2, link=link),
                       worker_nic=cl.worker_nic.evolve(upload_bits_per_s=cl.worker_nic.upload_bits_per_s * f,
                                                       download_bits_per_s=cl.worker_nic.download_bits_per_s * f))
    fast = evaluate(net, better, None, cfg, workers_per_replica=w, replicas=r, ps_machines=0.0)
    assert np.all(fast.samples_per_s >= base.samples_per_s * (1 - 1e-12))
    assert np.all(np.isfinite(base.samples_per_s)) and np.all(base.samples_per_s > 0)
    acc = cl.worker.accelerator
    assert acc is not None
    bigger = cl.evolve(worker=cl.worker.evolve(accelerator=acc.evolve(memory_bytes=acc.memory_bytes * 4)))
    more = evaluate(net, bigger, None, cfg, workers_per_replica=w, replicas=r, ps_machines=0.0)
    assert np.all(more.feasible | ~base.feasible)
    # ZeRO shards never need more memory than the stage below.
    if cfg.zero_stage:
        less = evaluate(net, cl, None, cfg.evolve(zero_stage=cfg.zero_stage - 1), workers_per_replica=w,
                        replicas=r, ps_machines=0.0)
        assert np.all(base.memory_bytes_per_worker <= less.memory_bytes_per_worker * (1 + 1e-12))


@settings(max_examples=40, deadline=None)
@given(graph_network_dicts(), st.sampled_from(["fp32", "fp16"]), spec_floats(0.5, 512.0), spec_floats(0.5, 512.0),
       st.sampled_from([1, 16, 256]))
def test_a_wider_tile_never_speeds_up_a_network(net_dict: dict[str, Any], precision: str, a: float, b: float,
                                                batch: int) -> None:
    """Over drawn graphs with every layer kind: device compute is finite and positive, the passes are
    never negative, and a larger half-efficiency width never predicts a faster step."""
    net = Network.build(net_dict)
    lo, hi = sorted((a, b))
    cfg = Configuration(local_batch_samples=batch, precision=precision)
    times = [float(predict(net, _device_cluster(half_efficiency_channels=n), "mnist", cfg).breakdown.compute_s)
             for n in (0.0, lo, hi)]
    assert all(np.isfinite(t) and t > 0 for t in times)
    assert times[0] <= times[1] * (1 + 1e-12) and times[1] <= times[2] * (1 + 1e-12)
    from dnnbench.model.compute import device_values

    moved = device_values(network_arrays(net))
    assert all(np.all(np.asarray(v) >= 0) for v in moved)


def test_a_precision_takes_its_own_efficiency_curve_and_the_others_keep_the_accelerators() -> None:
    own = {"conv": 0.25, "fc": 0.4, "half_efficiency_macs": 0.0, "half_efficiency_channels": 0.0}
    cl = _device_cluster(half_efficiency_macs=0.0, efficiency_fc=0.5, efficiency_by_precision={"tf32": own},
                         half_efficiency_channels=32.0)
    b = 256
    macs = 4096 * 4096
    tf32 = predict(FC, cl, "mnist", Configuration(local_batch_samples=b, precision="tf32")).breakdown
    loss = 2 * 4096 * 4 / 2039e9  # the loss's log-softmax pass: values read and written, in fp32
    assert float(tf32.compute_forward_s) == pytest.approx(macs / (156e12 / 2 * 0.4) + loss, rel=1e-12)
    fp32 = predict(FC, cl, "mnist", Configuration(local_batch_samples=b, precision="fp32")).breakdown
    assert float(fp32.compute_forward_s) == pytest.approx(macs / (19.5e12 / 2 * 0.5 * 4096 / 4128) + loss,
                                                          rel=1e-12)
    acc = cl.worker.accelerator
    assert acc is not None and acc.efficiency("fp32").fc == 0.5 and acc.efficiency("tf32").conv == 0.25
    # A curve without its own width takes the accelerator's.
    no_width = acc.evolve(efficiency_by_precision={"tf32": {"conv": 0.25, "fc": 0.4, "half_efficiency_macs": 0.0}})
    assert no_width.efficiency("tf32").half_efficiency_channels == 32.0
    # A curve for a mode the device lacks is one line naming the field.
    with pytest.raises(SpecError, match=r"^efficiency_by_precision\.bf16: .* is for a mode the device lacks; "
                                        r"expected one of fp32, fp16$"):
        presets.device("v100").accelerator.evolve(efficiency_by_precision={"bf16": own})


@pytest.mark.parametrize(("precision", "measured"), [("tf32", 938.0), ("fp16", 2470.0), ("fp32", 150.0)])
def test_one_measured_throughput_fits_that_precisions_efficiency_and_leaves_the_others(precision: str,
                                                                                      measured: float) -> None:
    from dnnbench.measure.device import fit_precision_efficiency

    cl = presets.cluster("dgx-a100").evolve(worker=presets.device("a100-80gb"), node=None, machines=1)
    cfg = Configuration(precision=precision, local_batch_samples=256, optimizer="momentum")
    worker, report = fit_precision_efficiency("resnet50", cl, "imagenet1k", cfg, measured)
    fitted = cl.evolve(worker=worker)
    assert float(predict("resnet50", fitted, "imagenet1k", cfg).samples_per_s) == pytest.approx(measured, rel=1e-4)
    assert report["bound"] is None and report["predicted_after_samples_per_s"] == pytest.approx(measured, rel=1e-4)
    base = cl.worker.accelerator
    acc = worker.accelerator
    assert base is not None and acc is not None
    # conv and matmul scale together; m_half stays; every other precision predicts as before.
    mine = acc.efficiency(precision)
    assert mine.conv / base.efficiency_conv == pytest.approx(mine.fc / base.efficiency_fc, rel=1e-9)
    assert mine.half_efficiency_macs == base.half_efficiency_macs
    assert mine.half_efficiency_channels == base.half_efficiency_channels
    for other in ("fp32", "tf32", "fp16", "bf16"):
        if other != precision:
            c = cfg.evolve(precision=other)
            assert predict("resnet50", fitted, "imagenet1k", c).samples_per_s == \
                predict("resnet50", cl, "imagenet1k", c).samples_per_s


def test_a_fitted_device_carries_the_measured_band_and_its_predictions_an_interval() -> None:
    from dnnbench.measure.device import ONE_ROW_FIT_BAND, fit_precision_efficiency

    cl = presets.cluster("dgx-a100").evolve(worker=presets.device("h200-sxm"), node=None, machines=1)
    cfg = Configuration(precision="fp16", local_batch_samples=256, optimizer="momentum")
    assert predict("vgg16", cl, "imagenet1k", cfg).interval == {}  # the preset as shipped: no band
    worker, report = fit_precision_efficiency("resnet50", cl, "imagenet1k", cfg, 5815.0)
    assert worker.compute_error == ONE_ROW_FIT_BAND and report["compute_error"]["p90"] == 0.49
    # Another network on the fitted device: one GPU is all compute, so samples/s spans exactly
    # 1 / (1 + p90) to 1 / (1 + p10) of the point prediction.
    pred = predict("vgg16", cl.evolve(worker=worker), "imagenet1k", cfg)
    lo, hi = pred.interval["samples_per_s"]
    rate = float(pred.samples_per_s)
    assert float(lo) == pytest.approx(rate / 1.49, rel=1e-3) and float(hi) == pytest.approx(rate / 0.82, rel=1e-3)
    kept, _ = fit_precision_efficiency("resnet50", cl, "imagenet1k", cfg, 5815.0, band=None)
    assert kept.compute_error is None


def test_a_measurement_beyond_the_device_stops_at_efficiency_one_and_says_so() -> None:
    from dnnbench.measure.device import fit_precision_efficiency

    cl = presets.cluster("dgx-a100").evolve(worker=presets.device("a100-80gb"), node=None, machines=1)
    cfg = Configuration(precision="fp16", local_batch_samples=256)
    worker, report = fit_precision_efficiency("resnet50", cl, "imagenet1k", cfg, 1e7)
    acc = worker.accelerator
    assert acc is not None and max(acc.efficiency("fp16").conv, acc.efficiency("fp16").fc) == 1.0
    assert report["bound"] == "memory, overhead or narrow layers"
    assert report["predicted_after_samples_per_s"] < 1e7
    with pytest.raises(SpecError, match=r"^measured_samples_per_s: -1\.0 "):
        fit_precision_efficiency("resnet50", cl, "imagenet1k", cfg, -1.0)
    with pytest.raises(SpecError, match=r"^worker\.accelerator: "):
        fit_precision_efficiency("resnet50", presets.cluster("modern-2025"), "imagenet1k",
                                 Configuration(local_batch_samples=8), 10.0)
