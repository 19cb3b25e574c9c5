"""Which kernels oneDNN runs a convolution's phases in and which tensors it copies between PyTorch's
plain layout and its blocked one: the model's rules (``arrays.DEPTHWISE_*_MAX_WIDTH``, read by
``depthwise_wide`` and ``depthwise_wide_forward``; ``shape_compute.layout_copied``) against what
``ONEDNN_VERBOSE`` prints for each phase."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from dnnbench.model.arrays import network_arrays
from dnnbench.model.shape_compute import layout_copied
from dnnbench.specs import Network

#: Depthwise kernels (height, width, stride down, stride across) around both width limits, tall and
#: wide ones apart (the width decides), and strides across above and at the kernel's width.
KERNELS = [(3, 3, 1, 1), (5, 5, 1, 1), (1, 5, 1, 1), (5, 1, 1, 1), (9, 9, 1, 1), (3, 10, 1, 1), (10, 3, 1, 1),
           (11, 11, 1, 1), (1, 11, 1, 1), (11, 1, 1, 1), (5, 13, 1, 1), (3, 3, 4, 4), (3, 3, 2, 2), (2, 2, 2, 2),
           (3, 1, 1, 2), (1, 3, 2, 1), (1, 1, 2, 2)]

#: One training step of each convolution (in channels, out channels, kernel, stride, groups, side); oneDNN
#: prints each primitive it executes.
SCRIPT = """
import json, sys, torch
torch.set_num_threads(1)
for cin, cout, (kh, kw), (sh, sw), groups, side in json.loads(sys.argv[1]):
    conv = torch.nn.Conv2d(cin, cout, (kh, kw), (sh, sw), padding=(kh // 2, kw // 2), groups=groups)
    x = torch.randn(2, cin, side, side, requires_grad=True)
    print("CASE", flush=True)
    conv(x).sum().backward()
"""


def _convolutions(specs: list[tuple[int, int, tuple[int, int], tuple[int, int], int, int]]) -> list[list[list[str]]]:
    """Each convolution's exec lines from ONEDNN_VERBOSE, split into fields."""
    env = {**os.environ, "ONEDNN_VERBOSE": "1"}
    out = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(specs)], env=env, capture_output=True,
                         text=True, timeout=180, check=True).stdout
    cases: list[list[list[str]]] = []
    for line in out.splitlines():
        if line.startswith("CASE"):
            cases.append([])
        elif cases and ",exec," in line:
            cases[-1].append(line.split(","))
    return cases


def _avx2_or_skip(cases: list[list[list[str]]]) -> None:
    impls = {f[f.index("convolution") + 1] for c in cases for f in c if "convolution" in f}
    # On an AVX-512 CPU oneDNN mixes in kernels of another channel block (16, not 8) and other copies.
    if not any("avx2" in i for i in impls) or any("avx512" in i for i in impls):
        pytest.skip("the rules were read off oneDNN's AVX2 kernels; this CPU runs others: " + "; ".join(sorted(impls)))


def _network(cin: int, cout: int, kernel: tuple[int, int], stride: tuple[int, int], groups: int, side: int
             ) -> Network:
    return Network.build({"name": "conv", "layers": [
        {"kind": "input", "shape": [cin, side, side]},
        {"kind": "conv2d", "out_channels": cout, "kernel": list(kernel), "stride": list(stride),
         "padding": [kernel[0] // 2, kernel[1] // 2], "groups": groups}]})


def test_the_depthwise_rule_matches_the_library_s_choice() -> None:
    specs = [(32, 32, (kh, kw), (sh, sw), 32, 20) for kh, kw, sh, sw in KERNELS]
    cases = _convolutions(specs)
    _avx2_or_skip(cases)
    for spec, lines in zip(specs, cases, strict=True):
        arr = network_arrays(_network(*spec))
        got = [f[f.index("convolution") + 1] + " " + f[f.index("convolution") + 2] for f in lines
               if "convolution" in f]
        phases = {"forward": [i for i in got if "forward" in i], "backward_weights": [i for i in got if
                                                                                      "backward_weights" in i],
                  "backward_data": [i for i in got if "backward_data" in i]}
        assert all(len(v) == 1 for v in phases.values()), (spec, got)
        generic = {k: "gemm" in v[0] for k, v in phases.items()}
        assert all("jit_dw" in v[0] or "gemm" in v[0] for v in phases.values()), (spec, got)
        assert generic["forward"] == bool(arr.depthwise_wide_forward[0]), (spec, got)
        assert generic["backward_weights"] == bool(arr.depthwise_wide[0]), (spec, got)
        assert not generic["backward_data"], (spec, got)  # the input gradient: jit_dw at every width


#: Convolutions whose input and output differ in shape (so that each copy is told by its dimensions):
#: dense ones of 3, 4 and 12 input channels, a grouped one with enough channels per group for the
#: blocked kernel and one with too few, depthwise ones in jit_dw, past the weight gradient's stride
#: limit and past the forward's width limit.
COPY_CASES = [(12, 16, (3, 3), (1, 1), 1, 14), (4, 16, (3, 3), (1, 1), 1, 14), (3, 16, (5, 5), (2, 2), 1, 28),
              (64, 128, (3, 3), (1, 1), 4, 14), (48, 24, (1, 1), (2, 2), 8, 14), (48, 48, (3, 3), (2, 2), 48, 14),
              (48, 48, (1, 1), (2, 2), 48, 14), (24, 24, (11, 11), (4, 4), 24, 32)]


def _dims(fields: list[str]) -> str:
    return next(f for f in fields[::-1] if "x" in f and f.replace("x", "").isdigit())


def test_the_layout_copies_match_the_library_s_reorders() -> None:
    """Reorders of the input's and the output's shape: before the forward (input in), between the
    forward and the input gradient (output back, output's error in), and between the input gradient and
    the weight gradient (input's error back, input in; output's error in)."""
    cases = _convolutions(COPY_CASES)
    _avx2_or_skip(cases)
    for spec, lines in zip(COPY_CASES, cases, strict=True):
        net = _network(*spec)
        arr = network_arrays(net)
        conv = np.array([True])
        (in_f, out_f), (out_b, in_b), (in_w, out_w) = (tuple(bool(m[0]) for m in pair)
                                                      for pair in layout_copied(arr, 8, conv))
        cin, cout, (kh, kw), (sh, sw), _, side = spec
        shape_in = f"2x{cin}x{side}x{side}"
        shape_out = f"2x{cout}x{(side + 2 * (kh // 2) - kh) // sh + 1}x{(side + 2 * (kw // 2) - kw) // sw + 1}"
        kinds = ["forward" if "forward_training" in f else "data" if "backward_data" in f
                 else "weights" if "backward_weights" in f else "reorder" for f in lines]
        first, data, weights = kinds.index("forward"), kinds.index("data"), kinds.index("weights")
        assert first < data < weights, (spec, kinds)

        def count(lo: int, hi: int, shape: str, kinds: list[str] = kinds, lines: list[list[str]] = lines) -> int:
            return sum(1 for k, f in zip(kinds[lo:hi], lines[lo:hi], strict=True) if k == "reorder"
                       and _dims(f) == shape)

        seen: dict[str, Any] = {"input in": count(0, first, shape_in), "output back, error in":
                                count(first, data, shape_out), "input's error back, input in":
                                count(data, weights, shape_in), "output's error in": count(data, weights, shape_out)}
        want = {"input in": int(in_f), "output back, error in": int(out_f) + int(out_b),
                "input's error back, input in": int(in_b) + int(in_w), "output's error in": int(out_w)}
        assert seen == want, (spec, [f[f.index("exec") + 3] + " " + _dims(f) for f in lines])
