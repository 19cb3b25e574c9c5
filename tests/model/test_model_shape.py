"""The shape-aware CPU compute model (docs/model.md §12): its form by hand, its fit recovering
constants the model itself generated, profiled layers, intervals, and properties over every part."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnbench import presets
from dnnbench.model import evaluate, predict
from dnnbench.model.arrays import layer_signature, network_arrays
from dnnbench.model.compute import worker_compute
from dnnbench.model.evaluate import single_machine_time_per_sample
from dnnbench.model.shape_compute import phase_calls
from dnnbench.specs import Configuration, Machine, Network
from dnnbench.specs.shape import (
    ACTIVATION_FUNCTIONS,
    ELEM_FAMILY_FIELDS,
    FUNCTION_PRICED_AS,
    GEMM_PHASES,
    ProfiledLayer,
    ShapeRate,
)
from tests.strategies import network_dicts, shape_rates

ZERO_GEMM = {"mac_time_s": 0.0}
ZERO_ELEM: dict[str, float] = {}


def rate(**over: Any) -> ShapeRate:
    base: dict[str, Any] = {g: dict(ZERO_GEMM) for g in GEMM_PHASES}
    base.update({f: dict(ZERO_ELEM) for f in ELEM_FAMILY_FIELDS if f != "max_pool"})  # (max pool: as pool)
    base["cache_bytes"] = 2**40
    base.update(over)
    return ShapeRate.build(base)


def machine(r: ShapeRate, cores: int = 4, **over: Any) -> Machine:
    return Machine.build({"cores": cores, "mac_time_s": {"conv": 1e-9, "fc": 1e-9}, "elem_time_s": 1e-9,
                          "llc_bytes": 2**25, "memory_bytes": 2**36, "shape_rate": r.to_dict(), **over})


CONV = Network.build({"name": "one-conv", "layers": [
    {"kind": "input", "shape": [3, 16, 16]},
    {"kind": "activation", "function": "relu"},
    {"kind": "conv2d", "out_channels": 8, "kernel": 3, "padding": 1, "stride": 2},
]})


def test_a_convolution_by_hand() -> None:
    """M = H_out·W_out per sample, N = C_out, K = C_in·k², each term with its own constant."""
    r = rate(conv_forward={"mac_time_s": 1e-11, "weight_element_time_s": 2e-10, "input_element_time_s": 3e-10,
                           "output_element_time_s": 4e-10, "strided_mac_time_s": 5e-12,
                           "strided_input_element_time_s": 6e-10, "call_time_s": 7e-6})
    arr = network_arrays(CONV)
    b = 4.0
    f, bp, wg, upd = phase_calls(arr, r, np.ones(2), np.zeros(2, bool), b, 1.0)
    m, n, k = 8 * 8, 8, 3 * 9
    macs = b * m * n * k
    want = (1e-11 * macs + 2e-10 * n * k + 3e-10 * b * m * k + 4e-10 * b * m * n + 5e-12 * macs
            + 6e-10 * b * 3 * 16 * 16 + 7e-6)
    assert f[1] == pytest.approx(want, rel=1e-12)
    assert arr.gemm_weight_elems[1] == n * k and arr.gemm_input_elems[1] == m * k and arr.gemm_output_elems[1] == m * n
    assert bp[1] == 0.0 and wg[1] == 0.0 and upd[1] == 0.0  # only the forward constants are set


DEPTHWISE = Network.build({"name": "depthwise", "layers": [
    {"kind": "input", "shape": [8, 12, 12]},
    {"kind": "conv2d", "name": "dw3", "out_channels": 8, "kernel": 3, "padding": 1, "groups": 8},
    {"kind": "conv2d", "name": "dw5", "out_channels": 8, "kernel": [3, 5], "padding": [1, 2], "groups": 8,
     "activation": "tanh"},
    {"kind": "conv2d", "name": "grouped", "out_channels": 8, "kernel": 5, "padding": 2, "groups": 2},
    {"kind": "activation", "name": "gelu", "function": "gelu"},
    {"kind": "batchnorm", "name": "bn"},
]})


def test_depthwise_and_grouped_convolutions_by_hand() -> None:
    """A depthwise conv (one input channel per group) with a kernel wider than 3 pays t_dw per MAC; a
    grouped one with several channels per group pays t_g; a 3×3 depthwise one pays neither."""
    arr = network_arrays(DEPTHWISE)
    assert list(arr.depthwise_wide[:3]) == [False, True, False]
    assert list(arr.grouped[:3]) == [False, False, True]
    r = rate(conv_weight_grad={"mac_time_s": 1e-11, "grouped_mac_time_s": 2e-11, "depthwise_wide_mac_time_s": 5e-10})
    b = 2.0
    wg = phase_calls(arr, r, np.ones(5), np.zeros(5, bool), b, 1.0)[2]
    macs = b * arr.macs_weight_grad[:3]
    assert wg[0] == pytest.approx(1e-11 * macs[0], rel=1e-12)
    assert wg[1] == pytest.approx((1e-11 + 5e-10) * macs[1], rel=1e-12)
    assert wg[2] == pytest.approx((1e-11 + 2e-11) * macs[2], rel=1e-12)


SMALL_GROUPS = Network.build({"name": "small-groups", "layers": [
    {"kind": "input", "shape": [12, 10, 10]},
    {"kind": "conv2d", "name": "three_per_group", "out_channels": 4, "kernel": 3, "padding": 1, "groups": 4},
    {"kind": "conv2d", "name": "multiplier", "out_channels": 8, "kernel": 7, "padding": 3, "groups": 4},
    {"kind": "conv2d", "name": "depthwise7", "out_channels": 8, "kernel": 7, "padding": 3, "groups": 8},
    {"kind": "conv2d", "name": "depthwise11", "out_channels": 8, "kernel": 11, "padding": 5, "groups": 8},
]})


def test_grouped_convolutions_pay_per_element_of_their_small_products() -> None:
    """A grouped conv (3 input channels and 1 output per group; a channel multiplier, 1 input and 2
    outputs per group) pays t_ga per element of M·K and t_gc per element of C (M·N), by hand from the
    shapes; a depthwise one (1 and 1) is not grouped, and its forward pays t_dw only past a kernel 9 wide
    (at 11×11, not at 7×7)."""
    arr = network_arrays(SMALL_GROUPS)
    assert list(arr.grouped) == [True, True, False, False]
    assert list(arr.depthwise_wide) == [False, False, True, True]
    assert list(arr.depthwise_wide_forward) == [False, False, False, True]
    r = rate(conv_forward={"mac_time_s": 1e-11, "grouped_mac_time_s": 2e-11, "grouped_input_element_time_s": 3e-10,
                           "grouped_output_element_time_s": 7e-10, "depthwise_wide_mac_time_s": 5e-10})
    b = 4.0
    fwd = phase_calls(arr, r, np.ones(4), np.zeros(4, bool), b, 2.0)[0]
    hw = 100.0
    # (MACs, M·K over all groups, M·N) per sample, from the shapes
    three = (hw * 4 * 3 * 9, hw * 12 * 9, hw * 4)
    mult = (hw * 8 * 1 * 49, hw * 4 * 49, hw * 8)
    for got, (macs, mk, mn) in ((fwd[0], three), (fwd[1], mult)):
        assert got == pytest.approx(b * (3e-11 * macs + 3e-10 * mk + 7e-10 * mn) / 2.0, rel=1e-12)
    assert fwd[2] == pytest.approx(b * 1e-11 * hw * 8 * 49 / 2.0, rel=1e-12)
    assert fwd[3] == pytest.approx(b * (1e-11 + 5e-10) * hw * 8 * 121 / 2.0, rel=1e-12)



def test_a_depthwise_convolution_in_its_own_kernels_reads_its_input_without_im2col() -> None:
    """The input term t_a of a depthwise convolution is per input element in the library's depthwise
    kernels (7×7: forward and input gradient; not its weight gradient, which falls back) and per element
    of the im2col matrix M·K in the generic kernel (11×11 forward), by hand from the shapes."""
    arr = network_arrays(SMALL_GROUPS)
    cost = {"mac_time_s": 0.0, "input_element_time_s": 3e-10}
    r = rate(conv_forward=cost, conv_input_grad=cost, conv_weight_grad=cost)
    b = 2.0
    fwd, bwd, wg, _ = phase_calls(arr, r, np.ones(4), np.zeros(4, bool), b, 1.0)
    inputs = 8 * 10 * 10  # values of the 8×10×10 input a sample reads
    assert fwd[2] == pytest.approx(b * 3e-10 * inputs, rel=1e-12)  # 7×7: depthwise kernel
    assert bwd[2] == pytest.approx(b * 3e-10 * inputs, rel=1e-12)
    assert wg[2] == pytest.approx(b * 3e-10 * 100 * 8 * 49, rel=1e-12)  # 7×7 weight gradient: generic, M·K
    assert fwd[3] == pytest.approx(b * 3e-10 * 100 * 8 * 121, rel=1e-12)  # 11×11 forward: generic, M·K
    assert bwd[3] == pytest.approx(b * 3e-10 * inputs, rel=1e-12)  # the input gradient never falls back


STRIDED = Network.build({"name": "strided", "layers": [
    {"kind": "input", "shape": [16, 12, 12], "needs_gradient": True},  # so that the convolutions back-propagate
    {"kind": "activation", "name": "pre", "function": "relu"},
    {"kind": "conv2d", "name": "dense", "out_channels": 16, "kernel": 3, "stride": 2, "padding": 1},
    {"kind": "conv2d", "name": "depthwise", "out_channels": 16, "kernel": 3, "stride": 2, "padding": 1, "groups": 16},
    {"kind": "conv2d", "name": "few_per_group", "out_channels": 16, "kernel": 1, "stride": 2, "groups": 4},
    {"kind": "conv2d", "name": "blocked_groups", "out_channels": 16, "kernel": 1, "stride": 1, "groups": 2},
]})


def test_the_strided_scatter_is_paid_where_the_library_scatters() -> None:
    """t_si (per element of the layer's input, stride above 1) prices a dense convolution's strided
    gradient; a depthwise one in its own kernels steps through its input in place and a grouped one
    below the channel block writes it by col2im: neither pays it. By hand from the shapes."""
    cost = {"mac_time_s": 0.0, "strided_input_element_time_s": 5e-10}
    r = rate(conv_forward=cost, conv_input_grad=cost, conv_weight_grad=cost)
    b = 2.0
    phases = phase_calls(network_arrays(STRIDED), r, np.ones(5), np.zeros(5, bool), b, 1.0)[:3]
    for t in phases:
        assert t[1] == pytest.approx(b * 5e-10 * 16 * 12 * 12, rel=1e-12)
        assert t[2] == 0.0 and t[3] == 0.0 and t[4] == 0.0  # (the last: stride 1)

POOLS = Network.build({"name": "pools", "layers": [
    {"kind": "input", "shape": [16, 8, 8], "needs_gradient": True},  # so that the pools back-propagate
    {"kind": "activation", "name": "pre", "function": "relu"},
    {"kind": "pool", "name": "max", "mode": "max", "window": 2},
    {"kind": "pool", "name": "avg", "mode": "avg", "window": 2},
]})


def test_a_max_pool_moves_its_int64_argmax_forward_and_backward() -> None:
    """Max pooling writes the argmax of each output (8 bytes, twice a value) forward and reads it
    backward; average pooling has none. With only the pool family's byte time set, by hand."""
    arr = network_arrays(POOLS)
    assert list(arr.max_pool) == [False, True, False]
    r = rate(pool={"byte_time_s": 1e-10})
    b = 4.0
    f, bp, _, _ = phase_calls(arr, r, np.ones(3), np.zeros(3, bool), b, 1.0)
    ins, outs = b * arr.in_values * 4.0, b * arr.out_values * 4.0
    assert f[1] == pytest.approx(1e-10 * (ins[1] + outs[1] + 2 * outs[1]), rel=1e-12)
    assert bp[1] == pytest.approx(1e-10 * (ins[1] + 2 * outs[1] + 2 * outs[1]), rel=1e-12)
    assert f[2] == pytest.approx(1e-10 * (ins[2] + outs[2]), rel=1e-12)
    assert bp[2] == pytest.approx(1e-10 * (ins[2] + 2 * outs[2]), rel=1e-12)


def test_a_max_pool_is_priced_by_its_own_family_where_the_rate_has_one() -> None:
    """Max pooling's forward compares every window element and writes the argmax (several times an
    average pool's time per element on a CPU); a rate with a max_pool family prices max pools by it
    and average pools by the pool family; a rate without one (a calibration before it) by pool."""
    arr = network_arrays(POOLS)
    b = 4.0
    both = rate(pool={"op_time_s": 1e-9}, max_pool={"op_time_s": 5e-9, "backward_op_time_s": 2e-10})
    f, bp, _, _ = phase_calls(arr, both, np.ones(3), np.zeros(3, bool), b, 1.0)
    assert f[1] == pytest.approx(5e-9 * b * arr.elem_forward[1], rel=1e-12)
    assert bp[1] == pytest.approx(2e-10 * b * arr.elem_backprop[1], rel=1e-12)
    assert f[2] == pytest.approx(1e-9 * b * arr.elem_forward[2], rel=1e-12)  # the average pool
    alone = rate(pool={"op_time_s": 1e-9})
    assert alone.max_pool is None
    f0, _, _, _ = phase_calls(arr, alone, np.ones(3), np.zeros(3, bool), b, 1.0)
    assert f0[1] == pytest.approx(1e-9 * b * arr.elem_forward[1], rel=1e-12)
    # A stored rate without the field loads as before, and scaling keeps a missing family missing.
    stored = alone.to_dict()
    stored.pop("max_pool", None)
    assert ShapeRate.model_validate(stored).scaled(2.0).max_pool is None
    assert both.scaled(2.0).max_pool.op_time_s == pytest.approx(1e-8)


def test_each_activation_function_adds_its_own_time_per_element() -> None:
    """tanh fused into a conv and GELU alone cost their function's extra time per output element on top
    of the activation family's; the others none. The normalisation's weight gradient takes its own
    time per byte when the family has one, else the backward's op and byte times."""
    arr = network_arrays(DEPTHWISE)
    base = rate(activation={"op_time_s": 1e-10})
    extra = rate(activation={"op_time_s": 1e-10}, functions={"tanh": {"forward_op_time_s": 2e-9},
                                                             "gelu": {"forward_op_time_s": 7e-10,
                                                                      "backward_op_time_s": 3e-10}})
    b, ones, flat = 4.0, np.ones(5), np.zeros(5, bool)
    f0, b0, w0, _ = phase_calls(arr, base, ones, flat, b, 2.0)
    f1, b1, w1, _ = phase_calls(arr, extra, ones, flat, b, 2.0)
    outs = b * arr.out_values
    assert f1[1] - f0[1] == pytest.approx(2e-9 * outs[1] / 2.0, rel=1e-9)  # fused tanh
    assert f1[3] - f0[3] == pytest.approx(7e-10 * outs[3] / 2.0, rel=1e-9)  # GELU alone
    assert b1[3] - b0[3] == pytest.approx(3e-10 * outs[3] / 2.0, rel=1e-9)
    assert f1[0] == f0[0] and f1[2] == f0[2] and f1[4] == f0[4]
    bn = 4
    old = rate(norm={"op_time_s": 1e-9, "byte_time_s": 2e-11})
    own = rate(norm={"op_time_s": 1e-9, "byte_time_s": 2e-11, "weight_grad_byte_time_s": 5e-12})
    ins = outs_bytes = b * arr.out_values[bn] * 4.0
    w_old = phase_calls(arr, old, ones, flat, b, 1.0)[2][bn]
    w_own = phase_calls(arr, own, ones, flat, b, 1.0)[2][bn]
    assert w_old == pytest.approx(1e-9 * b * arr.elem_backprop[bn] + 2e-11 * (ins + outs_bytes), rel=1e-12)
    assert w_own == pytest.approx(5e-12 * (ins + outs_bytes), rel=1e-12)


def test_a_family_s_backward_op_time_prices_its_backward_passes_only() -> None:
    """ElemCost.backward_op_time_s replaces op_time_s in a family's backward and its weight-gradient pass
    (None: op_time_s); the forward keeps op_time_s. For the activation family it also prices the fused
    activation's backward of a conv or fc layer."""
    arr = network_arrays(DEPTHWISE)
    b, ones, flat = 4.0, np.ones(5), np.zeros(5, bool)
    same = rate(norm={"op_time_s": 1e-9}, activation={"op_time_s": 1e-10})
    none = rate(norm={"op_time_s": 1e-9, "backward_op_time_s": None}, activation={"op_time_s": 1e-10})
    own = rate(norm={"op_time_s": 1e-9, "backward_op_time_s": 3e-10},
               activation={"op_time_s": 1e-10, "backward_op_time_s": 4e-10})
    p_same, p_none, p_own = (phase_calls(arr, r, ones, flat, b, 1.0) for r in (same, none, own))
    assert all(np.array_equal(x, y) for x, y in zip(p_same, p_none, strict=True))
    bn, fused, alone = 4, 1, 3  # the batch norm, the conv with tanh fused, GELU alone
    assert p_own[0][bn] == p_same[0][bn] and p_own[0][fused] == p_same[0][fused]
    assert p_own[1][bn] - p_same[1][bn] == pytest.approx((3e-10 - 1e-9) * b * arr.elem_backprop[bn], rel=1e-9)
    assert p_own[2][bn] - p_same[2][bn] == pytest.approx((3e-10 - 1e-9) * b * arr.elem_backprop[bn], rel=1e-9)
    assert p_own[1][alone] - p_same[1][alone] == pytest.approx(3e-10 * b * arr.elem_backprop[alone], rel=1e-9)
    assert p_own[1][fused] - p_same[1][fused] == pytest.approx(3e-10 * b * arr.elem_backprop[fused], rel=1e-9)


def test_threads_divide_the_work_but_not_the_call() -> None:
    r = rate(fc_forward={"mac_time_s": 1e-10, "call_time_s": 1e-5}, thread_contention=0.25)
    net = presets.network("mnist-adam")
    arr = network_arrays(net)
    one, four = (phase_calls(arr, r, np.ones_like(arr.weights), np.zeros(len(arr.weights), bool), 8.0,
                             np.asarray(t / (1 + 0.25 * (t - 1))))[0] for t in (1.0, 4.0))
    fc = arr.is_fc
    t_eff = 4 / (1 + 0.25 * 3)
    assert np.allclose((four - 1e-5)[fc], (one - 1e-5)[fc] / t_eff)


TWO_FC = Network.build({"name": "two-fc", "layers": [
    {"kind": "input", "shape": [64]},
    {"kind": "fc", "out_features": 48},  # so that the next one has an input gradient
    {"kind": "fc", "out_features": 32},
]})


def test_a_product_of_one_row_streams_its_weights_at_its_own_time() -> None:
    """An FC layer on one sample (M = 1) pays the vector time per weight element in each phase; at
    two samples, or without a vector time of its own, the packing time."""
    phases = ("fc_forward", "fc_input_grad", "fc_weight_grad")
    r = rate(**{g: {"mac_time_s": 0.0, "weight_element_time_s": 4e-10, "vector_weight_element_time_s": 1e-10}
                for g in phases})
    arr = network_arrays(TWO_FC)
    one, two = (phase_calls(arr, r, np.ones(2), np.zeros(2, bool), b, 1.0)[:3] for b in (1.0, 2.0))
    n_k = 48 * 32
    assert [p[1] for p in one] == pytest.approx([1e-10 * n_k] * 3, rel=1e-12)
    assert [p[1] for p in two] == pytest.approx([4e-10 * n_k] * 3, rel=1e-12)
    plain = rate(**{g: {"mac_time_s": 0.0, "weight_element_time_s": 4e-10} for g in phases})
    assert [p[1] for p in phase_calls(arr, plain, np.ones(2), np.zeros(2, bool), 1.0, 1.0)[:3]] == pytest.approx(
        [4e-10 * n_k] * 3, rel=1e-12)


def test_the_update_pays_memory_when_weights_and_gradients_leave_the_cache() -> None:
    """The optimizer step's working set is the weights, their gradients and the optimizer's state:
    past the cache it moves its bytes (3 per weight value, 2 more per state value) at the memory's time
    too."""
    arr = network_arrays(TWO_FC)
    held = (48 * 32 + 32) * 4.0
    for cache, state, want_mem in ((2 * held - 1, 0.0, True), (2 * held, 0.0, False), (3 * held - 1, 4.0, True),
                                   (3 * held, 4.0, False)):
        r = rate(update_byte_time_s=1e-10, memory_byte_time_s=1e-9, cache_bytes=int(cache))
        upd = phase_calls(arr, r, np.ones(2), np.zeros(2, bool), 8.0, 1.0, optimizer_state_bytes=state)[3]
        moved = held * (3.0 + 2.0 * state / 4.0)
        assert upd[1] == pytest.approx(1e-10 * moved + (1e-9 * moved if want_mem else 0.0), rel=1e-12), (cache, state)


def test_a_cache_and_memory_bandwidth_of_each_cores_own_scale_with_the_threads() -> None:
    """With ``memory_per_core`` a call on T threads holds its working set in T caches and streams from
    memory at T_eff times one core's rate; without it, one shared cache and bandwidth at every T."""
    arr = network_arrays(TWO_FC)
    held = (48 * 32 + 32) * 4.0
    moved = 3.0 * held
    for per_core in (False, True):
        for threads, sigma in ((1.0, 0.0), (2.0, 0.0), (2.0, 0.25), (4.0, 0.5)):
            t_eff = threads / (1.0 + sigma * (threads - 1.0))
            for cache in (int(2 * held) - 1, int(2 * held * threads) - 1, int(2 * held * threads)):
                r = rate(update_byte_time_s=1e-10, memory_byte_time_s=1e-9, cache_bytes=cache,
                         memory_per_core=per_core)
                upd = phase_calls(arr, r, np.ones(2), np.zeros(2, bool), 8.0, t_eff, threads=threads)[3]
                caches, streams = (threads, t_eff) if per_core else (1.0, 1.0)
                want_mem = 2 * held > cache * caches
                assert upd[1] == pytest.approx(1e-10 * moved / t_eff + (1e-9 * moved / streams if want_mem else 0.0),
                                               rel=1e-12), (per_core, threads, sigma, cache)


#: Products and activations at one time per multiply-add and per call each (the fit tests' ground truth).
PLAIN_PRODUCTS: dict[str, Any] = {
    "conv_forward": {"mac_time_s": 2e-11, "call_time_s": 1e-5},
    "conv_input_grad": {"mac_time_s": 3e-11, "call_time_s": 2e-5},
    "conv_weight_grad": {"mac_time_s": 2.5e-11, "call_time_s": 2e-5},
    "fc_forward": {"mac_time_s": 1e-11, "call_time_s": 5e-6},
    "fc_input_grad": {"mac_time_s": 1.5e-11, "call_time_s": 5e-6},
    "fc_weight_grad": {"mac_time_s": 1.2e-11, "call_time_s": 6e-6},
    "activation": {"op_time_s": 5e-10, "forward_call_time_s": 4e-6, "backward_call_time_s": 6e-6}}


def test_the_fit_chooses_a_cache_of_each_cores_own_from_timings_at_several_threads() -> None:
    """Timings the model made with ``memory_per_core`` at one and two threads are fitted back with it
    (and without it, without it)."""
    from dnnbench.measure.shapes import _predict as modelled
    from dnnbench.measure.shapes import case_arrays, fit_shape_rate, shape_cases

    cases = shape_cases(120, seed=5, threads=(1, 2))
    for per_core in (True, False):
        truth = rate(**PLAIN_PRODUCTS,
                     update_byte_time_s=2e-11, update_call_time_s=3e-5, memory_byte_time_s=2e-10,
                     cache_bytes=2**21, thread_contention=0.2, memory_per_core=per_core)
        times = modelled(case_arrays(cases), cases, truth, cores=2)
        measured = [{p: float(v) for p, v in zip(("forward", "input_grad", "weight_grad", "update"), row,
                                                 strict=True)} for row in times]
        fit = fit_shape_rate(cases, measured, [2**21, 2**25], cores=2)
        assert fit.rate.memory_per_core is per_core
        assert fit.rate.cache_bytes == 2**21 and fit.rate.thread_contention == pytest.approx(0.2)
        assert fit.summary()["max_abs_residual"] < 1e-3


def test_the_fit_recovers_constants_the_model_generated() -> None:
    """Timings made by the model itself are fitted back exactly: the fit's design is the model."""
    from dnnbench.measure.shapes import _predict as modelled
    from dnnbench.measure.shapes import case_arrays, fit_shape_rate, shape_cases

    truth = rate(conv_forward={"mac_time_s": 2e-11, "output_element_time_s": 1e-9, "call_time_s": 1e-5,
                               "grouped_output_element_time_s": 3e-9},
                 conv_input_grad={"mac_time_s": 3e-11, "call_time_s": 2e-5},
                 conv_weight_grad={"mac_time_s": 2.5e-11, "weight_element_time_s": 1e-9, "call_time_s": 2e-5},
                 fc_forward={"mac_time_s": 1e-11, "call_time_s": 5e-6, "weight_element_time_s": 2e-10,
                             "vector_weight_element_time_s": 6e-11},
                 fc_input_grad={"mac_time_s": 1.5e-11, "call_time_s": 5e-6},
                 fc_weight_grad={"mac_time_s": 1.2e-11, "call_time_s": 6e-6},
                 activation={"op_time_s": 5e-10, "forward_call_time_s": 4e-6, "backward_call_time_s": 6e-6},
                 pool={"op_time_s": 2e-9, "forward_call_time_s": 5e-6, "backward_call_time_s": 5e-6},
                 max_pool={"op_time_s": 6e-9, "backward_op_time_s": 4e-10, "forward_call_time_s": 5e-6,
                           "backward_call_time_s": 5e-6},
                 norm={"op_time_s": 1e-9, "forward_call_time_s": 9e-6, "backward_call_time_s": 9e-6,
                       "weight_grad_byte_time_s": 1e-11},
                 functions={"tanh": {"forward_op_time_s": 2e-9}, "gelu": {"forward_op_time_s": 8e-10,
                                                                           "backward_op_time_s": 4e-10}},
                 update_byte_time_s=2e-10, update_call_time_s=3e-5, memory_byte_time_s=5e-11, cache_bytes=2**25,
                 group_block_channels=4)
    cases = shape_cases(120, seed=3)
    arr = case_arrays(cases)
    # Grouped cases with 4 channels per group (only a block of 4 prices them as generated) and fewer.
    assert np.any(arr.grouped & (arr.group_channels == 4)) and np.any(arr.grouped & (arr.group_channels < 4))
    times = modelled(case_arrays(cases), cases, truth, cores=1)
    measured = [{p: float(v) for p, v in zip(("forward", "input_grad", "weight_grad", "update"), row, strict=True)}
                for row in times]
    fit = fit_shape_rate(cases, measured, [2**20, 2**25], cores=1)
    assert fit.rate.cache_bytes == 2**25
    assert fit.summary()["max_abs_residual"] < 1e-3
    assert fit.rate.conv_forward.mac_time_s == pytest.approx(2e-11, rel=1e-2)
    assert fit.rate.fc_weight_grad.call_time_s == pytest.approx(6e-6, rel=1e-2)
    assert fit.rate.fc_forward.vector_weight_element_time_s == pytest.approx(6e-11, rel=5e-2)
    assert fit.rate.functions.tanh.forward_op_time_s == pytest.approx(2e-9, rel=5e-2)
    assert fit.rate.max_pool is not None and fit.rate.max_pool.op_time_s == pytest.approx(6e-9, rel=5e-2)
    assert fit.rate.group_block_channels == 4
    assert fit.rate.conv_forward.grouped_output_element_time_s == pytest.approx(3e-9, rel=5e-2)
    assert fit.band.p10 == pytest.approx(0.0, abs=1e-3) and fit.band.p90 == pytest.approx(0.0, abs=1e-3)


def _profiled(net: Network, r: ShapeRate, fwd: float, bwd: float, b: tuple[int, int] = (8, 64),
              threads: int = 1, spread: float = 0.0) -> tuple[ProfiledLayer, ...]:
    """Every costed layer of ``net`` profiled at ``fwd``/``bwd`` seconds per sample (fixed cost 0)."""
    out = {}
    for layer, c in zip(net.layers[1:], net.layer_counts[1:], strict=True):
        sig = layer_signature(layer, c.input_shape)
        out[sig] = ProfiledLayer(signature=sig, threads=threads, batch_samples=b,
                                 forward_s=(fwd * b[0], fwd * b[1]), backward_s=(bwd * b[0], bwd * b[1]),
                                 spread=spread)
    return tuple(out.values())


def test_profiled_layers_take_their_measured_time() -> None:
    """A network whose layers were all timed: its forward and backward are the timings at any batch
    between (and beyond) the two profiled ones, whatever the shape model says."""
    net = presets.network("lenet5")
    r = rate(
        conv_forward={"mac_time_s": 1e-11}, conv_input_grad={"mac_time_s": 1e-11},
        conv_weight_grad={"mac_time_s": 1e-11}, fc_forward={"mac_time_s": 1e-11},
        fc_input_grad={"mac_time_s": 1e-11}, fc_weight_grad={"mac_time_s": 1e-11},
        activation={"op_time_s": 1e-10}, pool={"op_time_s": 1e-10}, norm={"op_time_s": 1e-10})
    m = machine(r).evolve(profiled_layers=_profiled(net, r, fwd=1e-5, bwd=3e-5))
    arr = network_arrays(net)
    for b in (8.0, 16.0, 64.0, 100.0):
        c = worker_compute(arr, m, np.asarray(1.0), 1, np.zeros_like(arr.weights), np.zeros(len(arr.weights), bool), b)
        model = worker_compute(arr, machine(r), np.asarray(1.0), 1, np.zeros_like(arr.weights),
                               np.zeros(len(arr.weights), bool), b)
        costed_fwd = np.sum(phase_calls(arr, r, np.ones_like(arr.weights), np.zeros(len(arr.weights), bool), b,
                                        1.0)[0] > 0)
        assert float(model.forward_s) > 0 and float(model.forward_s) != pytest.approx(1e-5 * costed_fwd)
        assert float(c.forward_s) == pytest.approx(1e-5 * costed_fwd, rel=1e-9)
    # Splitting the layers over W machines keeps the model's dependence on the share.
    two = worker_compute(arr, m, np.asarray(2.0), 1, np.zeros_like(arr.weights), np.zeros(len(arr.weights), bool), 16.0)
    assert float(two.forward_s) < 1e-5 * costed_fwd


def test_intervals_bracket_the_prediction_and_narrow_with_profiles() -> None:
    net = presets.network("lenet5")
    r = rate(conv_forward={"mac_time_s": 1e-11}, fc_forward={"mac_time_s": 1e-11}, activation={"op_time_s": 1e-10})
    banded = machine(r, compute_error={"p10": -0.2, "p90": 0.4})
    cl = presets.cluster("adam-2014").evolve(worker=banded, ps=banded, machines=4)
    cfg = Configuration(threads=1)
    item = predict(net, cl, None, cfg).item()
    iv = item["interval_p10_p90"]
    assert iv["epoch_time_s"][0] <= item["epoch_time_s"] <= iv["epoch_time_s"][1]
    assert iv["samples_per_s"][0] <= item["samples_per_s"] <= iv["samples_per_s"][1]
    assert iv["speedup"][0] <= item["speedup"] * (1 + 1e-12) and item["speedup"] <= iv["speedup"][1] * (1 + 1e-12)
    # One machine, all compute: the ends are the band exactly.
    assert iv["epoch_time_s"][0] == pytest.approx(0.8 * item["epoch_time_s"], rel=1e-9)
    assert iv["epoch_time_s"][1] == pytest.approx(1.4 * item["epoch_time_s"], rel=1e-9)
    # Without a band there is no interval; every layer profiled with no spread: none either way.
    plain = cl.evolve(worker=banded.evolve(compute_error=None))
    assert predict(net, plain, None, cfg).item()["interval_p10_p90"] is None
    profiled = banded.evolve(profiled_layers=_profiled(net, r, 1e-5, 2e-5))
    tight = predict(net, cl.evolve(worker=profiled), None, cfg).item()["interval_p10_p90"]["epoch_time_s"]
    assert tight[0] == pytest.approx(tight[1], rel=1e-9)


def test_a_profiled_band_is_the_launches_range_and_the_step_check_by_hand() -> None:
    """Every layer profiled over 3 launches with spread 0.1 and a whole-step check 4 % off: the band is
    ±sqrt((k_3·0.1)² + 0.04²), k_3 = 1.2816·sqrt(1 + π/6) / 1.693 (the p10–p90 half-width of a new
    normal measurement about the median of 3, per unit of their range); with half the layers
    profiled it is halfway to the calibration's band. One launch has no range: k_1 = 0."""
    from dnnbench.model.interval import compute_band, range_half_width

    net = presets.network("lenet5")
    r = rate(conv_forward={"mac_time_s": 1e-11})
    k3 = 1.2816 * np.sqrt(1 + np.pi / 6) / 1.693
    assert range_half_width(3) == pytest.approx(k3, rel=1e-12) and range_half_width(1) == 0.0
    assert range_half_width(2) > range_half_width(3) > range_half_width(10) > range_half_width(50) > 0
    every = tuple(p.evolve(launches=3, step_error=0.04) for p in _profiled(net, r, 1e-5, 2e-5, spread=0.1))
    m = machine(r, compute_error={"p10": -0.2, "p90": 0.4}).evolve(profiled_layers=every)
    e = float(np.hypot(k3 * 0.1, 0.04))
    lo, hi = compute_band(net, m)  # type: ignore[misc]
    assert (lo, hi) == (pytest.approx(-e, rel=1e-9), pytest.approx(e, rel=1e-9))
    half = m.evolve(profiled_layers=every[: len(every) // 2])
    arr = network_arrays(net)
    f = sum(s in {p.signature for p in half.profiled_layers} for s, g in zip(arr.signatures, arr.group, strict=True)
            if g >= 0) / int(np.sum(arr.group >= 0))
    lo, hi = compute_band(net, half)  # type: ignore[misc]
    assert lo == pytest.approx((1 - f) * -0.2 - f * e, rel=1e-9)
    assert hi == pytest.approx((1 - f) * 0.4 + f * e, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(network_dicts(), shape_rates(), st.sampled_from([1, 2, 8]), st.sampled_from([1, 16, 128]),
       st.sampled_from([1.1, 2.0]))
def test_properties_over_every_part(net_dict: dict[str, Any], r_dict: dict[str, Any], threads: int, b: int,
                                    factor: float) -> None:
    """Times are finite and non-negative; a machine slower in every constant is never faster; more of
    a layer's share (fewer machines in the replica) never costs less; more threads never cost more."""
    net = Network.build(net_dict)
    r = ShapeRate.build(r_dict)
    m = machine(r, cores=8)
    cfg = Configuration(threads=threads, local_batch_samples=b)
    cl = presets.cluster("adam-2014").evolve(worker=m, ps=m)
    t = single_machine_time_per_sample(net, cl, cfg)
    assert np.isfinite(t) and t >= 0.0
    slow = cl.evolve(worker=m.evolve(shape_rate=r.scaled(factor)))
    assert single_machine_time_per_sample(net, slow, cfg) >= t * (1 - 1e-12)
    arr = network_arrays(net)
    zeros, flat = np.zeros_like(arr.weights), np.zeros(len(arr.weights), bool)
    per_w = worker_compute(arr, m, np.array([1.0, 2.0, 4.0]), threads, zeros, flat, float(b)).total_s
    assert np.all(np.diff(per_w) <= 1e-15 + 1e-12 * per_w[:-1])
    more = worker_compute(arr, m, np.asarray(1.0), min(8, threads * 2), zeros, flat, float(b)).total_s
    assert float(more) <= t * (1 + 1e-12)
    # The vectorised evaluation agrees with one configuration at a time.
    pred = evaluate(net, cl.evolve(machines=8), None, cfg, workers_per_replica=np.array([1.0, 2.0]), replicas=1.0,
                    ps_machines=0.0)
    one = evaluate(net, cl.evolve(machines=8), None, cfg.evolve(workers_per_replica=2))
    assert float(pred.time_per_sample_s[1]) == pytest.approx(float(one.time_per_sample_s), rel=1e-12)


@pytest.mark.parametrize(("function", "priced_as"), sorted(FUNCTION_PRICED_AS.items()))
def test_functions_calibration_does_not_time_cost_what_their_arithmetic_does(function: str, priced_as: str) -> None:
    """The functions calibration does not time (ELU, Mish, hardtanh, exp, a square root, ...) take the
    calibrated costs of the function they are priced as, alone and fused, on every shape-aware machine;
    under autocast those on its float32 list write fp32."""
    def net(f: str) -> Network:
        return Network.build({"name": f, "layers": [
            {"kind": "input", "shape": [8, 12, 12]},
            {"kind": "conv2d", "out_channels": 8, "kernel": 3, "padding": 1, "activation": f},
            {"kind": "activation", "function": f}, {"kind": "flatten"}, {"kind": "fc", "out_features": 10}]})
    cost = {"forward_op_time_s": 2e-9, "backward_op_time_s": 3e-9, "forward_call_time_s": 1e-6,
            "backward_call_time_s": 2e-6}
    r = rate(activation={"op_time_s": 1e-10}, functions={priced_as: cost})
    cl = presets.cluster("modern-2025")
    cl = cl.evolve(worker=machine(r))
    cfg = Configuration(local_batch_samples=16)
    a, b = (predict(net(f), cl, "mnist", cfg) for f in (function, priced_as))
    assert float(a.time_per_sample_s) == pytest.approx(float(b.time_per_sample_s), rel=1e-12)
    plain = predict(net(function), cl.evolve(worker=machine(rate(activation={"op_time_s": 1e-10}))), "mnist", cfg)
    assert float(a.time_per_sample_s) > float(plain.time_per_sample_s)  # the function's own costs are paid
    arr = network_arrays(net(function))
    assert list(arr.act_function[:2]) == [ACTIVATION_FUNCTIONS.index(priced_as)] * 2
    # autocast's CUDA float32 list has softplus, exp, log, reciprocal and rsqrt among these
    assert list(arr.out_fp32[:2]) == [function in ("softplus", "exp", "log", "reciprocal", "rsqrt")] * 2


def test_an_activation_functions_fixed_time_per_call() -> None:
    """GELU's own fixed time per call is charged once per forward and once per backward call, alone and
    fused into an FC layer, scaled by the calls' factor; the ReLU pays none of it."""
    net = Network.build({"name": "acts", "layers": [
        {"kind": "input", "shape": [64], "needs_gradient": True},  # every layer back-propagates
        {"kind": "activation", "function": "relu"},
        {"kind": "activation", "function": "gelu"},
        {"kind": "fc", "out_features": 32, "activation": "gelu"},
    ]})
    arr = network_arrays(net)
    ones, flat = np.ones(3), np.zeros(3, bool)
    base = rate()
    extra = rate(functions={"gelu": {"forward_call_time_s": 7e-6, "backward_call_time_s": 1.4e-5}})
    for calls in (1.0, 0.5):
        f0, b0, w0, _ = phase_calls(arr, base, ones, flat, 16.0, 1.0, calls=calls)
        f1, b1, w1, _ = phase_calls(arr, extra, ones, flat, 16.0, 1.0, calls=calls)
        assert f1 - f0 == pytest.approx([0.0, 7e-6 * calls, 7e-6 * calls], abs=1e-15)
        assert b1 - b0 == pytest.approx([0.0, 1.4e-5 * calls, 1.4e-5 * calls], abs=1e-15)
        # The fused activation's backward runs again in the weight-gradient pass (as timed alone).
        assert w1 - w0 == pytest.approx([0.0, 0.0, 1.4e-5 * calls], abs=1e-15)


COPIED = Network.build({"name": "layout-copies", "layers": [
    {"kind": "input", "shape": [16, 32, 32]},
    {"kind": "activation", "function": "relu"},
    {"kind": "conv2d", "name": "wide_in", "out_channels": 4, "kernel": 3, "padding": 1},
    {"kind": "conv2d", "name": "narrow_in", "out_channels": 16, "kernel": 3, "padding": 1},
]})


def test_onednn_layout_copies_by_hand() -> None:
    """With layout copies priced, a oneDNN convolution moves and maps anew: forward, its input (from 8
    input channels, the default block) and its output; input gradient, its output and its input; weight
    gradient, its input and its output. Each buffer is its own fresh allocation."""
    t_mem, t_fresh = 1e-10, 1e-9
    common = {"memory_byte_time_s": t_mem, "fresh_byte_time_s": t_fresh, "fresh_threshold_bytes": 1,
              "cache_bytes": 1}
    arr = network_arrays(COPIED)
    assert list(arr.conv_in_channels) == [0, 16, 4]
    b = 4.0
    with_copies, without = (phase_calls(arr, rate(**common, layout_copies=c), np.ones(3), np.zeros(3, bool), b, 1.0)
                            for c in (True, False))
    extra = [w - o for w, o in zip(with_copies, without, strict=True)]
    ins_a, outs_a = b * 16 * 32 * 32 * 4, b * 4 * 32 * 32 * 4
    ins_b, outs_b = outs_a, b * 16 * 32 * 32 * 4

    def copies(*buffers: float) -> float:
        return t_mem * 2 * sum(buffers) + t_fresh * sum(buffers)

    assert extra[0][1] == pytest.approx(copies(ins_a, outs_a), rel=1e-12)
    assert extra[1][1] == pytest.approx(copies(outs_a, ins_a), rel=1e-12)
    assert extra[2][1] == pytest.approx(copies(ins_a, outs_a), rel=1e-12)
    assert extra[0][2] == pytest.approx(copies(outs_b), rel=1e-12)  # 4 input channels: read as they are
    assert extra[1][2] == pytest.approx(copies(outs_b, ins_b), rel=1e-12)
    # With 8-channel blocks (AVX2) the weight gradient copies every input but an image's 3 channels ...
    assert extra[2][2] == pytest.approx(copies(ins_b, outs_b), rel=1e-12)
    # ... with 16-channel ones (AVX-512) from 16 channels, as the forward.
    wide = [w - o for w, o in zip(*(phase_calls(arr, rate(**common, layout_copies=c, group_block_channels=16),
                                                np.ones(3), np.zeros(3, bool), b, 1.0) for c in (True, False)),
                                  strict=True)]
    assert wide[2][2] == pytest.approx(copies(outs_b), rel=1e-12)
    assert wide[0][1] == pytest.approx(copies(ins_a, outs_a), rel=1e-12)
    assert extra[0][0] == extra[1][0] == extra[2][0] == extra[3][2] == 0.0  # the ReLU, the update
    # Convolutions PyTorch runs natively (batch 1, at most 20,480 input values) make no such copies.
    native = [w - o for w, o in zip(*(phase_calls(arr, rate(**common, layout_copies=c), np.ones(3),
                                                  np.zeros(3, bool), 1.0, 1.0) for c in (True, False)), strict=True)]
    assert all(float(np.abs(e).max()) == 0.0 for e in native)


def test_a_layout_copy_in_cache_pays_its_own_time_per_byte_over_the_threads() -> None:
    """In cache a layout copy reads and writes its bytes at ShapeRate.layout_copy_byte_time_s, split
    over T_eff like the rest of the call (oneDNN's reorders run threaded); out of cache it pays the
    memory term besides."""
    t_copy = 5e-11
    arr = network_arrays(COPIED)
    b, t_eff = 4.0, 2.0
    ins_a, outs_a = b * 16 * 32 * 32 * 4, b * 4 * 32 * 32 * 4
    f, bp, wg, _ = (np.subtract(x, y) for x, y in zip(
        phase_calls(arr, rate(layout_copies=True, layout_copy_byte_time_s=t_copy), np.ones(3), np.zeros(3, bool),
                    b, t_eff),
        phase_calls(arr, rate(layout_copies=True), np.ones(3), np.zeros(3, bool), b, t_eff), strict=True))
    assert f[1] == pytest.approx(t_copy * 2 * (ins_a + outs_a) / t_eff, rel=1e-12)
    assert bp[1] == pytest.approx(t_copy * 2 * (outs_a + ins_a) / t_eff, rel=1e-12)
    assert f[0] == 0.0 and wg[0] == 0.0  # the ReLU copies nothing
    off = phase_calls(arr, rate(layout_copies=False, layout_copy_byte_time_s=t_copy), np.ones(3), np.zeros(3, bool),
                      b, t_eff)
    plain = phase_calls(arr, rate(), np.ones(3), np.zeros(3, bool), b, t_eff)
    assert all(np.array_equal(x, y) for x, y in zip(off, plain, strict=True))  # no copies, no copy time


def test_the_fit_chooses_layout_copies_when_the_timings_have_them() -> None:
    from dnnbench.measure.shapes import _predict as modelled
    from dnnbench.measure.shapes import case_arrays, fit_shape_rate, shape_cases

    cases = shape_cases(120, seed=3)
    arr = case_arrays(cases)
    for copies in (True, False):
        truth = rate(**PLAIN_PRODUCTS,
                     pool={"op_time_s": 2e-9, "forward_call_time_s": 5e-6, "backward_call_time_s": 5e-6},
                     norm={"op_time_s": 1e-9, "forward_call_time_s": 9e-6, "backward_call_time_s": 9e-6},
                     other={"op_time_s": 1e-9, "forward_call_time_s": 3e-6, "backward_call_time_s": 3e-6},
                     update_byte_time_s=2e-10, update_call_time_s=3e-5, memory_byte_time_s=2e-10,
                     fresh_byte_time_s=1e-9, cache_bytes=2**22, layout_copies=copies)
        times = modelled(arr, cases, truth, cores=1)
        measured = [{p: float(v) for p, v in zip(("forward", "input_grad", "weight_grad", "update"), row,
                                                 strict=True)} for row in times]
        fit = fit_shape_rate(cases, measured, [2**22], cores=1)
        assert fit.rate.layout_copies is copies
        assert fit.summary()["max_abs_residual"] < 1e-3
        assert fit.rate.memory_byte_time_s == pytest.approx(2e-10, rel=1e-2)


def test_a_fixed_filter_has_a_signature_of_its_own_and_costs_no_weight_gradient() -> None:
    """A conv2d that is not learned is keyed apart from a learned one (profiles of either apply to it
    alone), a learned one's key names no ``learned`` field, and the shape model prices no weight-gradient
    phase or update for the fixed one, the same forward and input gradient."""
    def net(learned: bool) -> Network:
        fixed = {} if learned else {"learned": False}
        return Network.build({"name": "f", "layers": [
            {"kind": "input", "shape": [8, 16, 16]}, {"kind": "conv2d", "out_channels": 8, "kernel": 3},
            {"kind": "conv2d", "out_channels": 8, "kernel": 3, "groups": 8, "bias": False, "activation": "relu",
             **fixed},
            {"kind": "flatten"}, {"kind": "fc", "out_features": 10}]})
    learned, fixed = net(True), net(False)
    a, b = layer_signature(learned.layers[2], (8, 14, 14)), layer_signature(fixed.layers[2], (8, 14, 14))
    assert a != b and '"learned"' not in a and '"learned":false' in b
    cost = {"mac_time_s": 1e-11, "weight_element_time_s": 2e-10, "input_element_time_s": 3e-10, "call_time_s": 7e-6}
    r = rate(conv_forward=cost, conv_input_grad=cost, conv_weight_grad=cost, update_byte_time_s=1e-10,
             activation={"op_time_s": 1e-9, "byte_time_s": 1e-10, "forward_call_time_s": 1e-6,
                         "backward_call_time_s": 1e-6})
    (fl, bl, wl, ul), (ff, bf, wf, uf) = (
        [np.asarray(x)[1] for x in phase_calls(network_arrays(n), r, np.ones(4), np.zeros(4, bool), 16.0, 1.0)]
        for n in (learned, fixed))
    assert (ff, bf) == (fl, bl) and wl > 0 and ul > 0 and wf == 0 and uf == 0
