"""Which depthwise convolutions oneDNN runs in its own depthwise kernels (``jit_dw``) and which in its
generic GEMM kernel: the model's rule (``arrays.DEPTHWISE_*_MAX_WIDTH``, read by ``depthwise_wide`` and
``depthwise_wide_forward``) against the implementation ``ONEDNN_VERBOSE`` names for each phase."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dnnbench.model.arrays import network_arrays
from dnnbench.specs import Network

#: Kernels (height, width) around both limits, tall and wide ones apart (the width decides).
KERNELS = [(3, 3), (5, 5), (1, 5), (5, 1), (9, 9), (3, 10), (10, 3), (11, 11), (1, 11), (11, 1), (5, 13)]

#: One training step of a depthwise convolution per kernel; oneDNN prints each primitive it executes.
SCRIPT = """
import json, sys, torch
torch.set_num_threads(1)
for kh, kw in json.loads(sys.argv[1]):
    conv = torch.nn.Conv2d(32, 32, (kh, kw), padding=(kh // 2, kw // 2), groups=32)
    x = torch.randn(2, 32, 20, 20, requires_grad=True)
    print("KERNEL", kh, kw, flush=True)
    conv(x).sum().backward()
    print("", flush=True)
"""


def onednn_implementations() -> dict[tuple[int, int], list[str]]:
    """For each kernel, the implementations of the convolution primitives oneDNN ran (forward, then
    backward data and backward weights in the order autograd calls them)."""
    env = {**os.environ, "ONEDNN_VERBOSE": "1"}
    out = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(KERNELS)], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    impls: dict[tuple[int, int], list[str]] = {}
    current: tuple[int, int] | None = None
    for line in out.splitlines():
        if line.startswith("KERNEL"):
            _, kh, kw = line.split()
            current = (int(kh), int(kw))
            impls[current] = []
        elif current is not None and ",exec," in line and ",convolution," in line:
            fields = line.split(",")
            impls[current].append(fields[fields.index("convolution") + 1] + " " + fields[fields.index("convolution")
                                                                                         + 2])
    return impls


def test_the_depthwise_rule_matches_the_library_s_choice() -> None:
    impls = onednn_implementations()
    if not any("avx2" in i for v in impls.values() for i in v):
        pytest.skip("the limits were read off oneDNN's AVX2 kernels; this CPU runs others: "
                    + "; ".join(sorted({i for v in impls.values() for i in v})))
    for kh, kw in KERNELS:
        net = Network.build({"name": "dw", "layers": [
            {"kind": "input", "shape": [32, 20, 20]},
            {"kind": "conv2d", "out_channels": 32, "kernel": [kh, kw], "padding": [kh // 2, kw // 2], "groups": 32}]})
        arr = network_arrays(net)
        got = impls[(kh, kw)]
        phases = {"forward": [i for i in got if "forward" in i], "backward_weights": [i for i in got if
                                                                                      "backward_weights" in i],
                  "backward_data": [i for i in got if "backward_data" in i]}
        assert all(len(v) == 1 for v in phases.values()), (kh, kw, got)
        generic = {k: "gemm" in v[0] for k, v in phases.items()}
        assert all("jit_dw" in v[0] or "gemm" in v[0] for v in phases.values()), (kh, kw, got)
        assert generic["forward"] == bool(arr.depthwise_wide_forward[0]), (kh, kw, got)
        assert generic["backward_weights"] == bool(arr.depthwise_wide[0]), (kh, kw, got)
        assert not generic["backward_data"], (kh, kw, got)  # the input gradient: jit_dw at every width
