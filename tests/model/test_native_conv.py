"""Which convolutions PyTorch runs natively on a CPU (im2col and a matrix product) instead of through
oneDNN: the model's rule (``shape_compute.native_convs``) against PyTorch's own backend choice, and the
price of such a convolution (the FC layers' rates)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnbench.model.arrays import network_arrays
from dnnbench.model.shape_compute import native_convs, phase_calls
from dnnbench.specs import Network
from dnnbench.specs.shape import ELEM_FAMILY_FIELDS, GEMM_PHASES, ShapeRate


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def torch_backend(batch: int, c: int, h: int, w: int, layer: dict[str, Any], threads: int) -> str:
    """PyTorch's choice for this convolution (fp32, CPU, training: weights that need a gradient)."""
    kh, kw = layer["kernel"]
    x = torch.zeros(batch, c, h, w)
    weight = torch.zeros(layer["out_channels"], c // layer["groups"], kh, kw, requires_grad=True)
    with torch_threads(threads):
        backend = torch._C._select_conv_backend(x, weight, None, list(layer["stride"]), list(layer["padding"]),
                                                list(layer["dilation"]), False, [0, 0], layer["groups"], None)
    return str(backend.name)


@st.composite
def conv_cases(draw: st.DrawFn) -> tuple[int, int, int, int, dict[str, Any], int]:
    groups = draw(st.sampled_from([1, 1, 1, 2, 4]))
    c = groups * draw(st.sampled_from([1, 2, 3, 8, 16]))
    out = groups * draw(st.sampled_from([1, 4, 8]))
    kernel = (draw(st.sampled_from([1, 1, 3, 4, 5])), draw(st.sampled_from([1, 1, 3, 4, 5])))
    dilation = (draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from([1, 1, 2])))
    stride = (draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from([1, 1, 2])))
    h = draw(st.integers(max(1, (kernel[0] - 1) * dilation[0] + 1), 48))
    w = draw(st.integers(max(1, (kernel[1] - 1) * dilation[1] + 1), 48))
    batch = draw(st.sampled_from([1, 1, 2, 8, 15, 16, 32]))
    layer = {"kind": "conv2d", "out_channels": out, "kernel": list(kernel), "stride": list(stride),
             "padding": [0, 0], "dilation": list(dilation), "groups": groups}
    return batch, c, h, w, layer, draw(st.sampled_from([1, 2]))


@settings(max_examples=300, deadline=None)
@given(conv_cases())
def test_the_native_rule_is_pytorchs(case: tuple[int, int, int, int, dict[str, Any], int]) -> None:
    """Every drawn convolution (groups, rectangular kernels, strides, dilations, batches about the
    rule's limits, 1 and 2 threads): the model calls it native exactly when PyTorch picks its own kernel
    (Slow2d, or SlowDilated2d for a dilated one)."""
    batch, c, h, w, layer, threads = case
    net = Network.build({"name": "c", "layers": [{"kind": "input", "shape": [c, h, w]}, {**layer, "name": "conv"}]})
    arr = network_arrays(net)
    native = bool(native_convs(arr, float(batch), arr.in_values, float(threads))[0])
    backend = torch_backend(batch, c, h, w, layer, threads)
    assert native == backend.startswith("Slow"), (backend, batch, c, h, w, layer, threads)


@st.composite
def conv3d_cases(draw: st.DrawFn) -> tuple[int, tuple[int, int, int, int], dict[str, Any], int]:
    groups = draw(st.sampled_from([1, 1, 1, 2]))
    c = groups * draw(st.sampled_from([1, 2, 3, 8]))
    kernel = [draw(st.sampled_from([1, 3])), draw(st.sampled_from([1, 3, 4])), draw(st.sampled_from([1, 3, 4]))]
    stride = [draw(st.sampled_from([1, 1, 2])) for _ in range(3)]
    dilation = [draw(st.sampled_from([1, 1, 2])) for _ in range(3)]
    dims = tuple(draw(st.integers((k - 1) * d + 1, 24)) for k, d in zip(kernel, dilation, strict=True))
    layer = {"kind": "conv3d", "out_channels": groups * draw(st.sampled_from([1, 4])), "kernel": kernel,
             "stride": stride, "padding": 0, "dilation": dilation, "groups": groups}
    return draw(st.sampled_from([1, 1, 2, 8, 15, 16])), (c, *dims), layer, draw(st.sampled_from([1, 2]))


@settings(max_examples=200, deadline=None)
@given(conv3d_cases())
def test_the_native_rule_of_3d_convolutions_is_pytorchs(case: tuple[int, tuple[int, ...], dict[str, Any], int]
                                                        ) -> None:
    """3-D convolutions: ATen counts a volume's input values without its last axis (N·C·D·H) and reads
    the kernel's last two sizes; the model calls one native exactly when PyTorch picks Slow3d or
    SlowDilated3d."""
    batch, shape, layer, threads = case
    net = Network.build({"name": "c", "layers": [{"kind": "input", "shape": list(shape)}, {**layer, "name": "conv"}]})
    arr = network_arrays(net)
    native = bool(native_convs(arr, float(batch), arr.in_values, float(threads))[0])
    x = torch.zeros(batch, *shape)
    weight = torch.zeros(layer["out_channels"], shape[0] // layer["groups"], *layer["kernel"], requires_grad=True)
    with torch_threads(threads):
        backend = torch._C._select_conv_backend(x, weight, None, layer["stride"], [0, 0, 0], layer["dilation"], False,
                                                [0, 0, 0], layer["groups"], None)
    assert native == str(backend.name).startswith("Slow"), (backend, case)


def rate(**over: Any) -> ShapeRate:
    base: dict[str, Any] = {g: {"mac_time_s": 0.0} for g in GEMM_PHASES}
    base.update({f: {} for f in ELEM_FAMILY_FIELDS})
    base["cache_bytes"] = 2**40
    base.update(over)
    return ShapeRate.build(base)


POINTWISE = Network.build({"name": "pw", "layers": [
    {"kind": "input", "shape": [32, 14, 14]},
    {"kind": "conv2d", "out_channels": 64, "kernel": 1},
]})


@pytest.mark.parametrize(("batch", "threads", "native"), [(8.0, 1.0, True), (16.0, 1.0, False), (8.0, 2.0, False)])
def test_a_native_convolution_takes_the_fc_rates(batch: float, threads: float, native: bool) -> None:
    """A 1x1 convolution below batch 16 on one thread costs what an FC layer's matrix product of its
    shape would (M = 14·14·b, N = 64, K = 32): the FC forward's time per multiply-add and per call;
    at batch 16, or on two threads, oneDNN's."""
    r = rate(conv_forward={"mac_time_s": 1e-10, "call_time_s": 1e-4},
             fc_forward={"mac_time_s": 2e-11, "call_time_s": 1e-5})
    arr = network_arrays(POINTWISE)
    fwd = phase_calls(arr, r, np.ones(1), np.zeros(1, bool), batch, 1.0, threads=threads)[0]
    macs = 14 * 14 * 64 * 32 * batch
    expected = 2e-11 * macs + 1e-5 if native else 1e-10 * macs + 1e-4
    assert fwd[0] == pytest.approx(expected, rel=1e-9)
