"""ONNX files to network specs, with the ``onnx`` package and its shape inference (issue 10).

The graph is read in its (topologically sorted) node order. The data path starts at the graph input;
nodes that only compute shapes (Shape, Gather, Concat of constants, ...) are skipped; every other node
becomes a layer whose inputs are the layers its data inputs come from (Add of two data tensors: a
residual ``add``; Concat: ``concat``). Batch size is fixed to 1 before shape inference so every shape is
concrete. Attention exported as its matrix products is not recognised (import such a model with
``from_torch``). Mapping of operators: docs/importing.md.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import SpecError
from ._build import (
    WEIGHT_NORMED_KINDS,
    Shape,
    SpecBuilder,
    activation_handler,
    adaptive_pool_handler,
    as_pair,
    broadcast_together,
    einsum_product,
    finite_fill,
    input_shapes,
    layer_handler,
    one_input,
    pad_layer,
    pair_or_int,
    power,
    prelu_layer,
    reduce_layer,
    scale_axis,
)
from .onnx_recurrent import RecurrentImport

if TYPE_CHECKING:  # pragma: no cover - types only
    from ..specs import Network

#: Operators that read the data tensor only for its shape: no layer.
_SHAPE_OPS = {"Shape", "Size"}


@dataclass
class _Node:
    node: Any  # onnx.NodeProto
    origin: str  # "Conv node '/features/0/Conv'"
    name: str
    in_shape: Shape
    out_shape: Shape
    attrs: dict[str, Any]
    weights: dict[str, tuple[int, ...]]  # initializer / constant name -> dims
    inputs: list[str]  # spec layer names of the data inputs, in order
    in_shapes: list[Shape]
    fusable: bool = True  # the data input has no other consumer

    @property
    def source(self) -> str:
        return self.inputs[0]

    def weight_dims(self, index: int) -> tuple[int, ...] | None:
        names = list(self.node.input)
        return self.weights.get(names[index]) if index < len(names) and names[index] else None

    def has_input(self, index: int) -> bool:
        return index < len(self.node.input) and bool(self.node.input[index])

    constants: dict[str, Any] = field(default_factory=dict)  # initializer name -> TensorProto
    random: dict[str, float | None] = field(default_factory=dict)  # random tensor -> its keep probability
    held: dict[str, int] = field(default_factory=dict)  # constant -> learned values it derives from

    def learned(self) -> int:
        """Learned values held by this node's constant inputs (a position table, a class token)."""
        return sum(self.held.get(x, 0) for x in self.node.input if x and x in self.weights)

    def constant(self, index: int) -> float | None:
        """The scalar value of constant input ``index`` (Clip's bounds), or None."""
        from onnx import numpy_helper

        names = list(self.node.input)
        if index >= len(names) or names[index] not in self.constants:
            return None
        value = numpy_helper.to_array(self.constants[names[index]])
        return float(value.reshape(-1)[0]) if value.size == 1 else None


def _array(n: _Node, index: int) -> Any:
    """The values of constant input ``index`` as an array, or None."""
    from onnx import numpy_helper

    names = list(n.node.input)
    if index >= len(names) or names[index] not in n.constants:
        return None
    return numpy_helper.to_array(n.constants[names[index]])


def _fail(n: _Node, text: str) -> SpecError:
    return SpecError.plain(n.origin, text)


def _symmetric_pads(n: _Node) -> tuple[int, int]:
    pads = [int(p) for p in n.attrs.get("pads", [0, 0, 0, 0])]
    auto = n.attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        kernel = as_pair(n.attrs.get("kernel_shape") or list(n.weight_dims(1) or (1, 1, 1, 1))[2:])
        dilation = as_pair(list(n.attrs.get("dilations", [1, 1])))
        span = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]  # what the padding must add
        if any(x % 2 for x in span) or as_pair(n.attrs.get("strides", [1, 1])) != (1, 1):
            raise _fail(n, f"has auto_pad={auto} with an even kernel or a stride; dnnbench padding is symmetric")
        return (span[0] // 2, span[1] // 2)
    if len(pads) != 4 or pads[0] != pads[2] or pads[1] != pads[3]:
        raise _fail(n, f"has asymmetric pads {pads}; dnnbench padding is symmetric")
    return (pads[0], pads[1])


def _volume_pads(n: _Node) -> list[int]:
    """A 3-D node's symmetric pads (explicit, or SAME for odd spans at stride 1)."""
    auto = n.attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    kernel = [int(k) for k in n.attrs.get("kernel_shape") or list(n.weight_dims(1) or (1,) * 5)[2:]]
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        spans = [d * (k - 1) for k, d in zip(kernel, n.attrs.get("dilations", [1, 1, 1]), strict=True)]
        if any(x % 2 for x in spans) or any(int(st) != 1 for st in n.attrs.get("strides", [1, 1, 1])):
            raise _fail(n, f"has auto_pad={auto} with an even kernel or a stride; dnnbench padding is symmetric")
        return [x // 2 for x in spans]
    pads = [int(p) for p in n.attrs.get("pads", [0] * 6)]
    if len(pads) != 6 or pads[:3] != pads[3:]:
        raise _fail(n, f"has asymmetric pads {pads}; dnnbench padding is symmetric")
    return pads[:3]


def _conv3d(b: SpecBuilder, n: _Node) -> str:
    """Conv with a 5-D weight on (C, D, H, W) volumes: a conv3d layer."""
    w = n.weight_dims(1)
    assert w is not None
    layer: dict[str, object] = {
        "kind": "conv3d", "out_channels": int(w[0]), "kernel": pair_or_int(n.attrs.get("kernel_shape") or w[2:]),
        "stride": pair_or_int(n.attrs.get("strides", [1, 1, 1])), "padding": pair_or_int(_volume_pads(n)),
        "bias": n.has_input(2)}
    if any(int(d) != 1 for d in n.attrs.get("dilations", [1, 1, 1])):
        layer["dilation"] = pair_or_int(list(n.attrs["dilations"]))
    if int(n.attrs.get("group", 1)) != 1:
        layer["groups"] = int(n.attrs["group"])
    return b.add(layer, n.out_shape, n.name, n.origin, n.inputs)


def _conv(b: SpecBuilder, n: _Node) -> str:
    one_input(n)
    w = n.weight_dims(1)
    if w is not None and len(w) == 5:
        return _conv3d(b, n)
    if w is None or len(w) != 4:
        raise _fail(n, "has no constant 4-D weight; dnnbench imports Conv with its weights as initializers")
    layer = {"kind": "conv2d", "out_channels": int(w[0]), "kernel": pair_or_int(n.attrs.get("kernel_shape") or w[2:]),
             "stride": pair_or_int(n.attrs.get("strides", [1, 1])), "padding": pair_or_int(_symmetric_pads(n)),
             "bias": n.has_input(2)}
    if any(int(d) != 1 for d in n.attrs.get("dilations", [1, 1])):
        layer["dilation"] = pair_or_int(list(n.attrs["dilations"]))
    if int(n.attrs.get("group", 1)) != 1:
        layer["groups"] = int(n.attrs["group"])
    return b.add(layer, n.out_shape, n.name, n.origin, n.inputs)


def _conv_transpose(b: SpecBuilder, n: _Node) -> str:
    """ConvTranspose: a conv_transpose2d layer (its weight is C_in x C_out/groups x k_h x k_w). The output
    size comes from the pads and output_padding; an ``output_shape`` attribute is read through the
    inferred shape (the layer's own shape check names a mismatch)."""
    one_input(n)
    w = n.weight_dims(1)
    if w is not None and len(w) == 5:  # of (C, D, H, W) volumes
        groups = int(n.attrs.get("group", 1))
        layer3: dict[str, object] = {
            "kind": "conv_transpose3d", "out_channels": int(w[1]) * groups,
            "kernel": pair_or_int(n.attrs.get("kernel_shape") or w[2:]),
            "stride": pair_or_int(n.attrs.get("strides", [1, 1, 1])), "padding": pair_or_int(_volume_pads(n)),
            "bias": n.has_input(2)}
        for key, field_name, rest in (("output_padding", "output_padding", 0), ("dilations", "dilation", 1)):
            values = [int(v) for v in n.attrs.get(key, [rest] * 3)]
            if any(v != rest for v in values):
                layer3[field_name] = pair_or_int(values)
        if groups != 1:
            layer3["groups"] = groups
        return b.add(layer3, n.out_shape, n.name, n.origin, n.inputs)
    if w is None or len(w) != 4:
        raise _fail(n, "has no constant 4-D weight; dnnbench imports ConvTranspose with its weights as initializers")
    auto = n.attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    if auto not in ("NOTSET", "VALID"):
        raise _fail(n, f"has auto_pad={auto}; dnnbench imports ConvTranspose with explicit, symmetric pads")
    groups = int(n.attrs.get("group", 1))
    layer: dict[str, object] = {
        "kind": "conv_transpose2d", "out_channels": int(w[1]) * groups,
        "kernel": pair_or_int(n.attrs.get("kernel_shape") or w[2:]),
        "stride": pair_or_int(n.attrs.get("strides", [1, 1])), "padding": pair_or_int(_symmetric_pads(n)),
        "bias": n.has_input(2)}
    extra = as_pair(list(n.attrs.get("output_padding", [0, 0])))
    if "output_shape" in n.attrs:  # the sizes past the pads' output are output_padding
        c, h, w_in = n.in_shape
        kh, kw = as_pair(n.attrs.get("kernel_shape") or w[2:])
        (sh, sw), (ph, pw) = as_pair(n.attrs.get("strides", [1, 1])), _symmetric_pads(n)
        (dh, dw) = as_pair(n.attrs.get("dilations", [1, 1]))
        extra = (n.out_shape[1] - ((h - 1) * sh - 2 * ph + dh * (kh - 1) + 1),
                 n.out_shape[2] - ((w_in - 1) * sw - 2 * pw + dw * (kw - 1) + 1))
    if extra != (0, 0):
        layer["output_padding"] = pair_or_int(extra)
    if any(int(d) != 1 for d in n.attrs.get("dilations", [1, 1])):
        layer["dilation"] = pair_or_int(list(n.attrs["dilations"]))
    if groups != 1:
        layer["groups"] = groups
    return b.add(layer, n.out_shape, n.name, n.origin, n.inputs)


def _fc(b: SpecBuilder, n: _Node) -> str:
    """Gemm or MatMul by a constant: an fc layer on a vector or an (S, D) sequence; on (A, B, D) values
    (channels-last maps) the same fc on A·B tokens between two views, as ``from_torch`` imports it.
    MatMul of two data tensors (attention written out by hand: Q·Kᵀ, P·V) is a ``matmul`` layer."""
    if n.node.op_type == "MatMul" and len(n.inputs) == 2 and n.weight_dims(1) is None:
        return b.add({"kind": "matmul"}, n.out_shape, n.name, n.origin, n.inputs)
    one_input(n)
    if int(n.attrs.get("transA", 0)) or n.weight_dims(1) is None:
        raise _fail(n, "needs the data as its left operand and a constant weight matrix as its right one")
    layer = {"kind": "fc", "out_features": int(n.out_shape[-1]), "bias": n.node.op_type == "Gemm" and n.has_input(2)}
    if len(n.in_shape) in (1, 2):
        return b.add(layer, n.out_shape, n.name, n.origin, n.inputs)
    a, c, d = n.in_shape
    tokens = b.flatten(n.in_shape, (a * c, d), f"{n.name}_tokens", n.origin, n.source)
    out = b.add(layer, (a * c, n.out_shape[-1]), n.name, n.origin, [tokens])
    return b.flatten((a * c, n.out_shape[-1]), n.out_shape, f"{n.name}_positions", n.origin, out)


def _fc_before(b: SpecBuilder, source: str) -> dict[str, Any] | None:
    """The bias-free fc layer whose output ``source`` is (directly, or through the view back to
    positions that follows an fc on channels-last maps), else None."""
    if source != b.last:
        return None
    last = b.layers[-1]
    if last["kind"] == "reshape" and len(b.layers) > 2 and b.layers[-2]["kind"] == "fc" and "inputs" not in last:
        last = b.layers[-2]
    return last if last["kind"] == "fc" and not last["bias"] else None


def _add(b: SpecBuilder, n: _Node) -> str:
    """Two data tensors: a residual ``add``. A data tensor and a constant: the bias of the MatMul
    right before it (an exporter's Linear)."""
    if len(n.inputs) >= 2:
        if not broadcast_together(n.in_shapes, n.out_shape):
            raise _fail(n, f"adds shapes {[list(s) for s in n.in_shapes]} of different lengths; dnnbench's add "
                        "takes inputs of one length whose sizes are equal or 1 on every axis")
        return b.add({"kind": "add"}, n.out_shape, n.name, n.origin, n.inputs)
    consts = [b_ for b_ in n.node.input if b_ in n.weights]
    vector = len(consts) == 1 and len(n.weights[consts[0]]) == 1
    fc = _fc_before(b, n.source)
    if fc is not None and vector and n.in_shape == n.out_shape:
        fc["bias"] = True
        return b.last
    learned = n.learned()
    if len(n.out_shape) == 2 and learned and learned % n.out_shape[1] == 0 and not vector:
        return b.add({"kind": "position_embedding", "rows": learned // n.out_shape[1]}, n.out_shape, n.name, n.origin,
                     n.inputs)
    if len(consts) == 1 and not learned and n.in_shape == n.out_shape and math.prod(n.weights[consts[0]]) == 1:
        return b.add({"kind": "bias", "weights": 0}, n.out_shape, n.name, n.origin, n.inputs)  # x + eps
    if len(consts) == 1 and learned and n.in_shape == n.out_shape:  # a learned shift broadcast over the values
        return b.add({"kind": "bias", "weights": learned}, n.out_shape, n.name, n.origin, n.inputs)
    raise _fail(n, "adds a constant to a tensor; dnnbench imports Add of two layer outputs (a residual), of a "
                "learned table to a sequence, or as the bias of the MatMul before it")


_RANDOM_OPS = ("RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike", "Bernoulli")
#: Random operators that read a data tensor for its shape only (``torch.randn_like(mu)``).
_RANDOM_LIKE = ("RandomUniformLike", "RandomNormalLike")
#: The "keep probability" of normal draws (a VAE's noise, ``mu + eps * std``): no mask, one factor per value.
NOISE = -1.0


def _sub(b: SpecBuilder, n: _Node) -> str:
    """``x - y`` of two data tensors of one shape (a Siamese network's difference, PoolFormer's ``pool(x) -
    x``): counted as an add, as ``from_torch`` counts it; data minus one constant number or a learned
    shift: a bias, as for ``Add``."""
    consts = [x for x in n.node.input if x in n.weights]
    if len(n.inputs) == 2 and broadcast_together(n.in_shapes, n.out_shape):
        return b.add({"kind": "add"}, n.out_shape, n.name, n.origin, n.inputs)
    if len(n.inputs) == 1 and len(consts) == 1 and n.in_shape == n.out_shape and (
            n.learned() or math.prod(n.weights[consts[0]]) == 1):
        return b.add({"kind": "bias", "weights": n.learned()}, n.out_shape, n.name, n.origin, n.inputs)
    raise _fail(n, "subtracts tensors of other shapes or a constant tensor; dnnbench imports Sub of two layer "
                "outputs of one shape, or of one constant number or a learned shift")


def _random_tensors(graph: Any, weights: dict[str, tuple[int, ...]]) -> dict[str, float | None]:
    """Tensors computed from a random operator (a training export's dropout mask, torchvision's stochastic
    depth: ``RandomUniformLike < keep``, cast, divided by keep), each with its keep probability where a
    ``Less`` than a constant number tells it, else None; :data:`NOISE` for normal draws that no ``Less``
    turns into a mask."""
    from onnx import numpy_helper

    numbers: dict[str, float] = {}
    for t in graph.initializer:
        if int(np.prod(t.dims)) == 1:
            numbers[t.name] = float(numpy_helper.to_array(t).reshape(-1)[0])
    for node in graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value" and int(np.prod(a.t.dims)) == 1:
                    numbers[node.output[0]] = float(numpy_helper.to_array(a.t).reshape(-1)[0])
    random: dict[str, float | None] = {}
    for node in graph.node:
        ins = [x for x in node.input if x]
        drawn = [random[x] for x in ins if x in random]
        if node.op_type in _RANDOM_OPS:
            keep: float | None = NOISE if node.op_type in ("RandomNormal", "RandomNormalLike") else None
        elif drawn and all(x in random or x in weights for x in ins):  # not data: a mask's arithmetic
            keep = next((k for k in drawn if k is not None), None)
            if node.op_type == "Less" and len(ins) == 2 and ins[1] in numbers:
                keep = numbers[ins[1]]
            elif node.op_type in ("Less", "Greater", "LessOrEqual", "GreaterOrEqual") and keep == NOISE:
                keep = None  # a mask drawn from normal values
        else:
            continue
        for out in node.output:
            random[out] = keep
    return random


def _constant_factor(n: _Node, consts: list[str]) -> bool:
    """One data tensor and one constant number that holds no learned value (x * 2, x / sqrt(d))."""
    return (len(n.inputs) == 1 and len(consts) == 1 and not n.learned()
            and int(np.prod(n.weights[consts[0]] or (1,))) == 1)


def _div(b: SpecBuilder, n: _Node) -> str:
    """Data divided by one constant number: a constant factor (a scale that learns nothing); one data
    tensor by another: a ``mul`` that divides."""
    names = list(n.node.input)
    consts = [x for x in names if x in n.weights]
    if _constant_factor(n, consts) and names.index(consts[0]) == 1:
        return b.add({"kind": "scale", "learned": False}, n.out_shape, n.name, n.origin, n.inputs)
    if _constant_factor(n, consts) and names.index(consts[0]) == 0:  # c / x (torch's export of rsqrt: 1 / Sqrt)
        return b.activation("reciprocal", n.out_shape, n.name, n.origin, n.source, n.fusable)
    if len(n.inputs) == 2 and not consts:
        return b.add({"kind": "mul", "divide": True}, n.out_shape, n.name, n.origin, n.inputs)
    raise _fail(n, "divides by a constant tensor; dnnbench imports Div of data by one constant number (a constant "
                "factor) or by other data")


def _mul(b: SpecBuilder, n: _Node) -> str:
    """Two data tensors: a gate ``mul`` (squeeze-and-excitation, a gated unit). (x · Sigmoid(x), torch's
    export of SiLU, is an activation: see :func:`_self_gated`.)"""
    consts = [x for x in n.node.input if x in n.weights]
    masks = [x for x in n.node.input if x in n.random]
    if len(n.inputs) == 1 and len(masks) == 1 and n.random[masks[0]] == NOISE and n.in_shape == n.out_shape:
        # data times normal noise (a VAE's eps * std): one constant factor per value
        return b.add({"kind": "scale", "learned": False}, n.out_shape, n.name, n.origin, n.inputs)
    if len(n.inputs) == 1 and len(masks) == 1:  # data times a random mask: a dropout
        keep = n.random[masks[0]]
        p = float(f"{1.0 - keep:.7g}") if keep is not None and 0.0 < keep <= 1.0 else 0.5
        if p == 0.0:
            return n.source
        per_sample = int(np.prod(n.weights.get(masks[0]) or (0,))) == 1 and int(np.prod(n.out_shape)) > 1
        return b.add({"kind": "dropout", "p": p, "per_sample": per_sample}, n.out_shape, n.name, n.origin,
                     n.inputs)
    if len(n.inputs) == 1 and len(consts) == 1 and n.learned():
        axis = scale_axis(n.weights[consts[0]], n.in_shape)
        if axis is not None:
            return b.add({"kind": "scale", "axis": axis}, n.out_shape, n.name, n.origin, n.inputs)
    if _constant_factor(n, consts):
        if n.constant(list(n.node.input).index(consts[0])) == 1.0:  # x · 1 (addcmul's value): nothing
            return n.source
        return b.add({"kind": "scale", "learned": False}, n.out_shape, n.name, n.origin, n.inputs)
    if len(n.node.input) == 2 and n.node.input[0] == n.node.input[1]:  # x · x (torch's export of torch.square)
        return power(b, 2.0, n.out_shape, n.name, n.origin, n.source, n.fusable)
    if len(n.inputs) != 2:
        raise _fail(n, "multiplies a tensor by a constant; dnnbench imports Mul of two layer outputs (a gate), of "
                    "a learned factor per channel (a layer scale) and of one constant number")
    return b.add({"kind": "mul"}, n.out_shape, n.name, n.origin, n.inputs)


def _pow(b: SpecBuilder, n: _Node) -> str:
    """``Pow`` of data to a constant number (torch's export of ``x ** p``): :func:`power_layer`."""
    one_input(n)
    exponent = n.constant(1) if n.node.input[0] not in n.weights else None
    if exponent is None:
        raise _fail(n, "raises to a power that is no constant number; dnnbench imports Pow of data to a constant "
                    "number")
    return power(b, exponent, n.out_shape, n.name, n.origin, n.source, n.fusable)


def _affine_grid(b: SpecBuilder, n: _Node) -> str:
    """``AffineGrid`` (torch's export of ``F.affine_grid``): θ (2, 3) per sample to an (H, W, 2) grid."""
    one_input(n)
    if n.in_shape != (2, 3) or len(n.out_shape) != 3:
        raise _fail(n, f"makes a grid from {list(n.in_shape)} matrices; dnnbench imports the 2-D affine grid of a "
                    "(2, 3) matrix per sample")
    layer: dict[str, Any] = {"kind": "affine_grid", "size": [int(d) for d in n.out_shape[:2]]}
    if int(n.attrs.get("align_corners", 0)):
        layer["align_corners"] = True
    return b.add(layer, n.out_shape, n.name, n.origin, n.inputs)


#: GridSample's modes by their ONNX names (opset 16's and 20's) -> the spec's.
_SAMPLE_MODES = {"bilinear": "bilinear", "linear": "bilinear", "nearest": "nearest", "bicubic": "bicubic",
                 "cubic": "bicubic"}


def _grid_sample(b: SpecBuilder, n: _Node) -> str:
    """``GridSample`` of (C, H, W) maps at an (H', W', 2) grid (torch's export of ``F.grid_sample``)."""
    def text(key: str, default: str) -> str:
        value = n.attrs.get(key, default)
        return value.decode() if isinstance(value, bytes) else str(value)

    mode = _SAMPLE_MODES.get(text("mode", "bilinear"))
    if len(n.inputs) != 2 or len(n.in_shapes[0]) != 3 or mode is None:
        raise _fail(n, f"samples {[list(s) for s in n.in_shapes]} (mode {text('mode', 'bilinear')!r}); dnnbench "
                    "imports the sampling of (C, H, W) maps at a grid of positions, nearest, linear or cubic")
    padding = text("padding_mode", "zeros")
    layer: dict[str, Any] = {"kind": "grid_sample"}
    if mode != "bilinear":
        layer["mode"] = mode
    if padding != "zeros":
        layer["padding_mode"] = padding
    if int(n.attrs.get("align_corners", 0)):
        layer["align_corners"] = True
    return b.add(layer, n.out_shape, n.name, n.origin, n.inputs)


def _max_unpool(b: SpecBuilder, n: _Node) -> str:
    """``MaxUnpool`` of a max pooling's values by its positions (torch's export of ``nn.MaxUnpool2d``): a
    ``max_unpool`` layer of the values."""
    one_input(n)
    window = [int(k) for k in n.attrs.get("kernel_shape", [])]
    stride = [int(k) for k in n.attrs.get("strides", window)]
    if len(window) != 2 or len(n.in_shape) != 3 or any(int(p) for p in n.attrs.get("pads", [])):
        raise _fail(n, "unpools other than (C, H, W) maps without padding; dnnbench imports MaxUnpool of maps")
    layer: dict[str, Any] = {"kind": "max_unpool", "window": pair_or_int(tuple(window))}
    if stride != window:
        layer["stride"] = pair_or_int(tuple(stride))
    if tuple(n.out_shape[1:]) != tuple((n.in_shape[i + 1] - 1) * stride[i] + window[i] for i in range(2)):
        layer["size"] = [int(d) for d in n.out_shape[1:]]
    return b.add(layer, n.out_shape, n.name, n.origin, n.inputs)


def _cumsum(b: SpecBuilder, n: _Node) -> str:
    """``CumSum`` along a constant axis (torch's export of ``torch.cumsum``): a ``cumsum`` layer; its
    ``exclusive`` and ``reverse`` forms count the same."""
    one_input(n)
    axis = n.constant(1)
    if axis is None:
        raise _fail(n, "sums along an axis that is no constant; dnnbench imports CumSum along a constant axis")
    per_sample = int(axis) % (len(n.in_shape) + 1) - 1
    if per_sample < 0:
        raise _fail(n, "sums along the batch axis, which is not one sample's layer")
    return b.add({"kind": "cumsum", "axis": per_sample}, n.out_shape, n.name, n.origin, n.inputs)


def _neg(b: SpecBuilder, n: _Node) -> str:
    """``Neg``: a constant factor of −1, as ``from_torch`` counts ``-x``."""
    one_input(n)
    return b.add({"kind": "scale", "learned": False}, n.out_shape, n.name, n.origin, n.inputs)


def _concat(b: SpecBuilder, n: _Node) -> str:
    axis = int(n.attrs.get("axis", 1))
    rank = len(n.out_shape) + 1
    if axis % rank == 0:
        raise _fail(n, "concatenates along the batch axis, which is not one sample's layer")
    if len(n.inputs) != len([x for x in n.node.input if x]):
        learned = n.learned()
        if (len(n.inputs) == 1 and len(n.out_shape) == 2 and axis % rank == 1 and learned
                and learned % n.out_shape[1] == 0):
            return b.add({"kind": "class_token", "tokens": learned // n.out_shape[1]}, n.out_shape, n.name, n.origin,
                         n.inputs)
        raise _fail(n, "concatenates data with constants; dnnbench imports Concat of layer outputs, or of learned "
                    "tokens in front of a sequence (a class token)")
    return b.add({"kind": "concat", "axis": axis % rank - 1}, n.out_shape, n.name, n.origin, n.inputs)


def _gather(b: SpecBuilder, n: _Node) -> str:
    """A constant table indexed by token ids: an embedding; a sequence indexed at one token: select_token."""
    table = n.weight_dims(0)
    if table is not None and len(table) == 2 and int(n.attrs.get("axis", 0)) == 0:
        return b.add({"kind": "embedding", "vocabulary": int(table[0]), "dim": int(table[1])}, n.out_shape, n.name,
                     n.origin, n.inputs)
    index = n.constant(1)
    indices = _array(n, 1)
    axis = int(n.attrs.get("axis", 0)) % (len(n.in_shape) + 1) - 1
    if table is None and index is not None and axis == 0 and len(n.in_shape) == 2 and indices.ndim == 0:
        return b.add({"kind": "select_token", "index": int(index)}, n.out_shape, n.name, n.origin, n.inputs)
    if table is None and index is not None and axis >= 0 and indices.ndim == 0:
        # x[:, :, i] (a temporal network's last step of a (C, L) signal): one position, the axis dropped
        start = int(index) % n.in_shape[axis]
        cut = (*n.in_shape[:axis], 1, *n.in_shape[axis + 1:])
        piece = b.add({"kind": "slice", "axis": axis, "start": start, "stop": start + 1}, cut, n.name, n.origin,
                      n.inputs)
        return b.flatten(cut, n.out_shape, n.name + "_view", n.origin, piece)
    if table is None and index is not None and axis >= 0 and indices.shape == (1,):
        # x[:, [i]] (nanoGPT's last token x[:, [-1], :]): one position of the axis, kept.
        start = int(index) % n.in_shape[axis]
        return b.add({"kind": "slice", "axis": axis, "start": start, "stop": start + 1}, n.out_shape, n.name,
                     n.origin, n.inputs)
    raise _fail(n, "gathers in a way dnnbench does not import; supported: a constant table indexed by token ids "
                "(an embedding), one token of a sequence (x[:, i]), one position of an axis (x[:, :, i]) or kept "
                "(x[:, [i]])")


def _where(b: SpecBuilder, n: _Node) -> str:
    """``Where(mask, value, x)`` or ``Where(mask, x, value)`` of a constant mask and a constant value (a
    causal mask filled with -inf, ``masked_fill``'s export): one element op per value each way, a
    constant factor's cost (a scale that learns nothing). Of a mask computed from data (a ``compare``)
    between data tensors, or data and one constant number: a ``where`` layer."""
    names = list(n.node.input)
    data = [x for x in names[1:] if x not in n.weights]
    if len(n.inputs) == 1 and names[0] in n.weights and len(data) == 1 and not n.learned():
        return b.add({"kind": "scale", "learned": False}, n.out_shape, n.name, n.origin, n.inputs)
    if names[0] not in n.weights and not n.learned():
        if len(n.inputs) == 3:
            return b.add({"kind": "where"}, n.out_shape, n.name, n.origin, n.inputs)
        constant = next((i for i in (1, 2) if names[i] in n.weights), None)
        value = n.constant(constant) if constant is not None and len(n.inputs) == 2 else None
        if value is not None and not math.isnan(value):
            layer = {"kind": "where", "value": finite_fill(value), "value_first": constant == 1}
            return b.add(layer, n.out_shape, n.name, n.origin, n.inputs)
    what = ("by a constant mask between two layer outputs" if names[0] in n.weights and len(n.inputs) == 2
            else "between constant tensors or by a learned mask")
    raise _fail(n, f"selects {what}; dnnbench imports Where of a constant mask between one layer output and a "
                "constant, and of a mask computed from data between layer outputs or a layer output and a number")


def _extremum(kind: str) -> Callable[[SpecBuilder, _Node], str]:
    """``Max``/``Min`` of two data tensors, or of data and one constant number (torch's export of
    ``torch.maximum``, ``torch.minimum``): the mask and the ``where`` it chooses by, as ``from_torch``
    imports them."""
    def handle(b: SpecBuilder, n: _Node) -> str:
        names = [x for x in n.node.input if x]
        if len(names) == 2 and len(n.inputs) == 2:
            mask = b.add({"kind": "compare", "op": kind}, n.out_shape, f"{n.name}_mask", n.origin, n.inputs)
            return b.add({"kind": "where"}, n.out_shape, n.name, n.origin, [mask, *n.inputs])
        constant = next((i for i, x in enumerate(names) if x in n.weights), None)
        value = n.constant(constant) if len(names) == 2 and len(n.inputs) == 1 and constant is not None else None
        if value is None or math.isnan(value):
            raise _fail(n, "takes the extremum of other than two tensors, or of a constant tensor; dnnbench imports "
                        "Max and Min of two data tensors or of data and one number")
        mask = b.add({"kind": "compare", "op": kind, "value": value}, n.out_shape, f"{n.name}_mask", n.origin,
                     n.inputs)
        return b.add({"kind": "where", "value": finite_fill(value)}, n.out_shape, n.name, n.origin, [mask, *n.inputs])
    return handle


#: ONNX's comparisons -> the compare layer's.
_COMPARISONS = {"Greater": "gt", "GreaterOrEqual": "ge", "Less": "lt", "LessOrEqual": "le", "Equal": "eq"}


def _compare(b: SpecBuilder, n: _Node) -> str:
    """``Greater``, ``Less``, ... of data and data or one constant number: a ``compare`` layer."""
    kind = _COMPARISONS[n.node.op_type]
    names = list(n.node.input)
    if len(n.inputs) == 2:
        return b.add({"kind": "compare", "op": kind}, n.out_shape, n.name, n.origin, n.inputs)
    constant = next((i for i in (0, 1) if names[i] in n.weights), None)
    value = n.constant(constant) if constant is not None and len(n.inputs) == 1 else None
    if value is None:
        raise _fail(n, "compares with a constant tensor; dnnbench imports comparisons of data with data or with "
                    "one number")
    swapped = {"gt": "lt", "lt": "gt", "ge": "le", "le": "ge"}.get(kind, kind) if constant == 0 else kind
    return b.add({"kind": "compare", "op": swapped, "value": value}, n.out_shape, n.name, n.origin, n.inputs)


def _slice(b: SpecBuilder, n: _Node) -> str:
    """``Slice`` of contiguous positions of one per-sample axis (constant starts and ends, step 1): a
    slice layer (``x.chunk``'s pieces as torch exports them)."""
    one_input(n)
    if n.has_input(1):  # opset 10 and later: starts, ends, axes, steps as inputs
        starts, ends = n.constant(1), n.constant(2)
        axes = n.constant(3) if n.has_input(3) else 0.0
        steps = n.constant(4) if n.has_input(4) else 1.0
        single = all(len(n.weights.get(x, (1,))) <= 1 and int(np.prod(n.weights.get(x, (1,)))) == 1
                     for x in list(n.node.input)[1:] if x)
    else:
        listed = [n.attrs.get(k) for k in ("starts", "ends")]
        single = all(v is not None and len(v) == 1 for v in listed) and len(n.attrs.get("axes", [0])) == 1
        starts, ends = (float(listed[0][0]), float(listed[1][0])) if single else (None, None)  # type: ignore[index]
        axes, steps = float(n.attrs.get("axes", [0])[0]), 1.0
    if not single or None in (starts, ends, axes, steps) or steps != 1:
        raise _fail(n, "slices other than contiguous positions of one axis with constant bounds; dnnbench imports "
                    "those (a slice layer)")
    rank = len(n.in_shape) + 1
    axis = int(axes) % rank - 1  # type: ignore[arg-type]
    if axis < 0:
        raise _fail(n, "takes part of the batch axis, which is not one sample's layer")
    size = n.in_shape[axis]
    start, stop, _ = slice(int(max(min(starts, 2**62), -2**62)), int(max(min(ends, 2**62), -2**62))).indices(size)  # type: ignore[arg-type]
    if (start, stop) == (0, size):
        return n.source
    return b.add({"kind": "slice", "axis": axis, "start": start, "stop": stop}, n.out_shape, n.name, n.origin,
                 n.inputs)


def _pad(b: SpecBuilder, n: _Node) -> str:
    """``Pad`` of (C, H, W) maps' height and width, or of a (C, L) signal's length (no axes input; constant,
    reflect, edge or wrap): a pad layer."""
    one_input(n)
    pads = _array(n, 1)
    if pads is not None and len(pads) == 6 and n.in_shape[1:2] == (1,):  # a (C, L) signal's, on (C, 1, L) maps
        pads = np.array([pads[0], pads[1], 0, pads[2], pads[3], pads[4], 0, pads[5]])
    value = n.constant(2) if n.has_input(2) else 0.0
    mode = n.attrs.get("mode", b"constant")
    mode = {"edge": "replicate", "wrap": "circular"}.get(mode.decode() if isinstance(mode, bytes) else str(mode),
                                                        mode.decode() if isinstance(mode, bytes) else str(mode))
    if (pads is None or len(pads) != 8 or mode not in ("constant", "reflect", "replicate", "circular")
            or n.has_input(3) or any(int(pads[i]) for i in (0, 1, 4, 5)) or min(int(p) for p in pads) < 0):
        raise _fail(n, "pads other than the height and width of feature maps; dnnbench's pad adds values around "
                    "maps (constant, reflect, edge or wrap)")
    top, left, bottom, right = (int(pads[i]) for i in (2, 3, 6, 7))
    if not any((top, left, bottom, right)):
        return n.source
    return b.add(pad_layer([left, right, top, bottom], mode, value), n.out_shape, n.name, n.origin, n.inputs)


def _resize(b: SpecBuilder, n: _Node) -> str:
    """``Resize`` of (C, H, W) maps, or of a (C, L) signal, nearest or linear: an upsample layer to the
    inferred size (a signal's linear resize priced as bilinear, as ``from_torch`` prices it)."""
    one_input(n)
    mode = n.attrs.get("mode", b"nearest")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in ("nearest", "linear", "cubic") or len(n.in_shape) != 3 or n.out_shape[0] != n.in_shape[0]:
        raise _fail(n, f"resizes with mode {mode!r} or over other axes than a map's height and width; dnnbench's "
                    "upsample is nearest or bilinear")
    return b.add({"kind": "upsample", "size": pair_or_int(n.out_shape[1:]),
                  "mode": {"nearest": "nearest", "linear": "bilinear", "cubic": "bicubic"}[mode]}, n.out_shape, n.name,
                 n.origin, n.inputs)


def _depth_to_space(unshuffle: bool) -> Callable[[SpecBuilder, _Node], str]:
    """``DepthToSpace`` (CRD: torch's pixel shuffle; DCR) and ``SpaceToDepth``: a view, a permute and a view
    (:meth:`SpecBuilder.pixel_shuffle`)."""
    def handle(b: SpecBuilder, n: _Node) -> str:
        one_input(n)
        mode = n.attrs.get("mode", b"DCR")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        return b.pixel_shuffle(n.in_shape, int(n.attrs.get("blocksize", 1)), n.name, n.origin, n.source,
                               unshuffle=unshuffle, blocks_first=unshuffle or mode == "DCR")
    return handle


def _layer_norm(b: SpecBuilder, n: _Node) -> str:
    one_input(n)
    axis = int(n.attrs.get("axis", -1))
    if axis not in (-1, len(n.in_shape)):
        raise _fail(n, f"normalises from axis {axis}; dnnbench layer_norm normalises the last axis only")
    layer: dict[str, object] = {"kind": "layer_norm", "affine": n.has_input(1)}
    if n.has_input(1) and not n.has_input(2):
        layer["bias"] = False
    return b.add(layer, n.out_shape, n.name, n.origin, n.inputs)


def _transpose(b: SpecBuilder, n: _Node) -> str:
    one_input(n)
    perm = [int(p) for p in n.attrs.get("perm", list(range(len(n.in_shape) + 1))[::-1])]
    if perm[0] != 0:
        raise _fail(n, f"transposes with perm {perm}, moving the batch axis; dnnbench permutes one sample's axes")
    dims = [p - 1 for p in perm[1:]]
    if dims == list(range(len(dims))):
        return n.source
    return b.add({"kind": "permute", "dims": dims}, n.out_shape, n.name, n.origin, n.inputs)


def _clip(b: SpecBuilder, n: _Node) -> str:
    """Clip to [0, 6] is ReLU6 (torch exports nn.ReLU6 so), to [0, ∞) ReLU (``x.clamp(min=0)``), between
    other numbers hardtanh (nn.Hardtanh, ``x.clamp(a, b)``)."""
    one_input(n)
    bounds = [n.constant(i) for i in (1, 2)]
    low = bounds[0] if bounds[0] is not None else n.attrs.get("min")
    high = bounds[1] if bounds[1] is not None else n.attrs.get("max")
    if low is None and high is None:
        raise _fail(n, "clips to no bounds; dnnbench imports Clip with constant bounds")
    function = ("relu" if high is None and float(low) == 0.0 else
                "relu6" if low is not None and high is not None and (float(low), float(high)) == (0.0, 6.0)
                else "hardtanh")
    return b.activation(function, n.out_shape, n.name, n.origin, n.source, n.fusable)


def _prelu(b: SpecBuilder, n: _Node) -> str:
    """``PRelu`` by constant slopes (one, or one per channel): a prelu layer."""
    slopes = _array(n, 1)
    if slopes is None or len(n.inputs) != 1:
        raise _fail(n, "has slopes that are not a constant; dnnbench imports PRelu by learned slopes")
    return b.add(prelu_layer(int(slopes.size), n.in_shape, n.origin), n.out_shape, n.name, n.origin, n.inputs)


def _hard_sigmoid(b: SpecBuilder, n: _Node) -> str:
    """HardSigmoid with PyTorch's slope 1/6 and offset 1/2 (how torch exports nn.Hardsigmoid)."""
    one_input(n)
    alpha, beta = float(n.attrs.get("alpha", 0.2)), float(n.attrs.get("beta", 0.5))
    if abs(alpha - 1 / 6) > 1e-6 or abs(beta - 0.5) > 1e-6:
        raise _fail(n, f"has alpha {alpha:g} and beta {beta:g}; dnnbench imports HardSigmoid as PyTorch's "
                       "(alpha 1/6, beta 0.5)")
    return b.activation("hardsigmoid", n.out_shape, n.name, n.origin, n.source, n.fusable)


def _pool(mode: str) -> Callable[[SpecBuilder, _Node], str]:
    def handle(b: SpecBuilder, n: _Node) -> str:
        one_input(n)
        if len(n.attrs.get("kernel_shape", [])) == 3:  # of (C, D, H, W) volumes
            layer: dict[str, object] = {"kind": "pool3d", "mode": mode,
                                        "window": pair_or_int(list(n.attrs["kernel_shape"])),
                                        "stride": pair_or_int(list(n.attrs.get("strides", [1, 1, 1]))),
                                        "padding": pair_or_int(_volume_pads(n))}
            if any(int(d) != 1 for d in n.attrs.get("dilations", [1, 1, 1])):  # a max pooling's taps apart
                layer["dilation"] = pair_or_int(list(n.attrs["dilations"]))
            if n.attrs.get("ceil_mode", 0):
                layer["ceil_mode"] = True
            return b.add(layer, n.out_shape, n.name, n.origin, n.inputs)
        window = as_pair(list(n.attrs["kernel_shape"]))
        return b.pool(mode, window, as_pair(list(n.attrs.get("strides", [1, 1]))), _symmetric_pads(n), n.out_shape,
                      n.name, n.origin, n.source, ceil_mode=bool(n.attrs.get("ceil_mode", 0)),
                      dilation=as_pair(list(n.attrs.get("dilations", [1, 1]))))
    return handle


def _dropout(b: SpecBuilder, n: _Node) -> str:
    """Dropout's ratio is its second input from opset 12 (torch writes a constant), an attribute before;
    a ratio of 0 is an identity (nothing is dropped, nothing kept)."""
    one_input(n)
    ratio = n.constant(1) if n.has_input(1) else None
    p = float(f"{float(ratio if ratio is not None else n.attrs.get('ratio', 0.5)):.7g}")  # a float32 constant
    if p == 0.0:
        return n.source
    return b.add({"kind": "dropout", "p": p}, n.out_shape, n.name, n.origin, n.inputs)


def _lrn(b: SpecBuilder, n: _Node) -> str:
    one_input(n)
    return b.add({"kind": "lrn", "size": int(n.attrs["size"])}, n.out_shape, n.name, n.origin, n.inputs)


def _flatten(b: SpecBuilder, n: _Node) -> str:
    one_input(n)
    return b.flatten(n.in_shape, n.out_shape, n.name, n.origin, n.source)


def _reduce_pool(mode: str) -> Callable[[SpecBuilder, _Node], str]:
    """ReduceMean (ReduceMax) over a map's height and width: global average (max) pooling, then a flatten
    unless the axes are kept; read off the shapes, since the axes are an attribute or an input depending
    on the opset. Over other axes: a reduce layer."""
    def handle(b: SpecBuilder, n: _Node) -> str:
        return _global_pool(b, n, mode)
    return handle


def _global_pool(b: SpecBuilder, n: _Node, mode: str) -> str:
    one_input(n)
    if len(n.in_shape) != 3 or tuple(n.out_shape) not in ((n.in_shape[0], 1, 1), (n.in_shape[0],)):
        return _reduce(b, n, {"avg": "mean"}.get(mode, mode))
    c = n.in_shape[0]
    pooled = b.adaptive_pool(mode, n.in_shape, (c, 1, 1), n.name, n.origin, n.source)
    if len(n.out_shape) == 3:
        return pooled
    return b.flatten((c, 1, 1), n.out_shape, n.name + "_flatten", n.origin, pooled)


def _reduce(b: SpecBuilder, n: _Node, mode: str = "sum") -> str:
    """ReduceSum, ReduceMin, and a ReduceMean or ReduceMax that is not global pooling, over axes of one
    sample (an attribute before opset 13 for ReduceSum and 18 for the others, then an input): a reduce
    layer."""
    one_input(n)
    axes = _array(n, 1) if n.has_input(1) else n.attrs.get("axes")
    layer = reduce_layer(None if axes is None else [int(a) for a in axes], n.in_shape, mode,
                         bool(n.attrs.get("keepdims", 1)), n.origin)
    return b.add(layer, n.out_shape, n.name, n.origin, n.inputs)


def _expand(b: SpecBuilder, n: _Node) -> str:
    """``Expand`` of a layer output over axes of size 1 (torch's export of ``F.normalize`` spreads the norm
    over the values it divides): nothing; the layer that reads it broadcasts the output (a ``mul``, an
    ``add``)."""
    one_input(n)
    if not broadcast_together([n.in_shape], n.out_shape):
        raise _fail(n, f"expands {list(n.in_shape)} to {list(n.out_shape)}; dnnbench imports Expand over axes of "
                    "size 1 into a product or sum that broadcasts")
    return n.source


def _einsum(b: SpecBuilder, n: _Node) -> str:
    """``Einsum`` of two data tensors that is a batched matrix product (torch's export of ``torch.einsum``):
    :func:`einsum_product`, as ``from_torch`` imports it."""
    equation = n.attrs.get("equation", b"")
    equation = equation.decode() if isinstance(equation, bytes) else str(equation)
    if n.learned():
        raise _fail(n, "is an einsum with a learned operand; dnnbench imports Einsum of two layer outputs that is a "
                    "batched matrix product")
    return einsum_product(b, equation, n.inputs, n.in_shapes, n.out_shape, n.name, n.origin)


def _identity(b: SpecBuilder, n: _Node) -> str:
    one_input(n)
    return n.source


def _instance_norm(b: SpecBuilder, n: _Node) -> str:
    """InstanceNormalization: each sample's channels normalised over their positions, with a scale and a
    shift per channel (ONNX always has them: an export of a module without them writes ones and zeros,
    counted as learned): a group norm of one channel per group."""
    one_input(n)
    if len(n.in_shape) not in (3, 4):
        raise _fail(n, f"normalises a {list(n.in_shape)} input; dnnbench's group_norm takes (C, H, W) maps or "
                    "(C, D, H, W) volumes")
    return b.add({"kind": "group_norm", "groups": n.in_shape[0]}, n.out_shape, n.name, n.origin, n.inputs)


def _on_maps(handler: Callable[[SpecBuilder, _Node], str]) -> Callable[[SpecBuilder, _Node], str]:
    """A node on a (C, L) signal (a 1-D Conv, ConvTranspose, pooling, InstanceNormalization, Pad or Resize) as the 2-D
    ``handler``'s on (C, 1, L) maps, between two views, its attributes and weights given 1 along the
    height (0 for its pads), as ``from_torch`` imports the 1-D modules. Other inputs go to ``handler``."""
    def handle(b: SpecBuilder, n: _Node) -> str:
        if len(n.in_shape) != 2:
            return handler(b, n)
        if len(n.out_shape) != 2 or len(n.inputs) != 1:
            raise _fail(n, f"takes a {list(n.in_shape)} input; dnnbench imports 1-D nodes on (C, L) signals")
        (c, length), (c_out, out_length) = n.in_shape, n.out_shape
        maps = b.maps(n.source, n.in_shape, n.origin)
        attrs = dict(n.attrs)
        for key, low in (("kernel_shape", 1), ("strides", 1), ("dilations", 1), ("output_padding", 0),
                         ("output_shape", 1)):
            if key in attrs:
                attrs[key] = [low, *[int(v) for v in attrs[key]]]
        if "pads" in attrs:
            first, last = (int(v) for v in attrs["pads"])
            attrs["pads"] = [0, first, 0, last]
        weights = {k: (*v[:2], 1, v[2]) if len(v) == 3 else v for k, v in n.weights.items()}
        lifted = replace(n, in_shape=(c, 1, length), out_shape=(c_out, 1, out_length), inputs=[maps],
                         in_shapes=[(c, 1, length)], attrs=attrs, weights=weights)
        out = handler(b, lifted)
        if out == maps:  # nothing emitted (a 1-wide window): the signal as it was
            return n.source
        return b.signal(out, n.out_shape, f"{n.name}_signal", n.origin)
    return handle


_OPS: dict[str, Callable[[SpecBuilder, _Node], str]] = {
    "Conv": _on_maps(_conv), "ConvTranspose": _on_maps(_conv_transpose), "Gemm": _fc,
    "Slice": _slice, "Pad": _on_maps(_pad), "Resize": _on_maps(_resize), "MatMul": _fc, "Add": _add, "Sub": _sub,
    "Expand": _expand, "Einsum": _einsum,
    "DepthToSpace": _depth_to_space(False), "SpaceToDepth": _depth_to_space(True),
    "Concat": _concat,
    "MaxPool": _on_maps(_pool("max")), "AveragePool": _on_maps(_pool("avg")),
    "GlobalAveragePool": _on_maps(adaptive_pool_handler("avg")),
    "GlobalMaxPool": _on_maps(adaptive_pool_handler("max")), "InstanceNormalization": _on_maps(_instance_norm),
    "Relu": activation_handler("relu"), "LeakyRelu": activation_handler("leaky_relu"),
    "Elu": activation_handler("elu"), "Selu": activation_handler("selu"), "Mish": activation_handler("mish"),
    "Softplus": activation_handler("softplus"), "PRelu": _prelu, "ReduceSum": _reduce,
    "ReduceL2": lambda b, n: _reduce(b, n, "l2"), "ReduceLogSumExp": lambda b, n: _reduce(b, n, "logsumexp"),
    "Exp": activation_handler("exp"), "Abs": activation_handler("abs"), "Tanh": activation_handler("tanh"),
    "Sqrt": activation_handler("sqrt"), "Reciprocal": activation_handler("reciprocal"),
    "Log": activation_handler("log"), "Erf": activation_handler("erf"), "Celu": activation_handler("celu"),
    "Sin": activation_handler("sin"), "Cos": activation_handler("cos"),
    "Pow": _pow, "Neg": _neg, "CumSum": _cumsum, "MaxUnpool": _max_unpool, "AffineGrid": _affine_grid,
    "GridSample": _grid_sample,
    "Cast": _identity,
    **dict.fromkeys(_COMPARISONS, _compare), "Max": _extremum("ge"), "Min": _extremum("le"),
    "Sigmoid": activation_handler("sigmoid"),
    "Clip": _clip, "Gelu": activation_handler("gelu"), "Gather": _gather, "LayerNormalization": _layer_norm,
    "RMSNormalization": _layer_norm,
    "Transpose": _transpose,
    "Dropout": _dropout, "Div": _div, "LRN": _lrn, "BatchNormalization": layer_handler("batchnorm"),
    "Flatten": _flatten, "Reshape": _flatten, "Squeeze": _flatten, "Unsqueeze": _flatten,
    "Softmax": layer_handler("softmax"), "LogSoftmax": layer_handler("softmax"),
    "Identity": _identity, "ReduceMean": _reduce_pool("avg"),
    "ReduceMax": _reduce_pool("max"), "ReduceMin": lambda b, n: _reduce(b, n, "min"), "Mul": _mul,
    "HardSwish": activation_handler("hardswish"), "HardSigmoid": _hard_sigmoid, "Where": _where,
}


#: Constant subgraphs of at most this many values per tensor are folded before shape inference.
FOLD_MAX_VALUES = 4096


def _weight_norms(graph: Any) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    """Weights torch's export computes as weight_norm does, ``Mul(g, Div(v, ReduceL2(v)))`` on
    initializers (read before small constants are folded away): the weight's name -> (g's dims, v's)."""
    dims = {t.name: tuple(int(d) for d in t.dims) for t in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    found: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    for mul in graph.node:
        if mul.op_type != "Mul" or len(mul.input) != 2:
            continue
        for k, x in enumerate(mul.input):
            div, g = producers.get(x), mul.input[1 - k]
            if div is None or div.op_type != "Div" or len(div.input) != 2 or g not in dims:
                continue
            norm = producers.get(div.input[1])
            if norm is not None and norm.op_type == "ReduceL2" and norm.input[0] == div.input[0] in dims:
                found[mul.output[0]] = (dims[g], dims[div.input[0]])
    return found


def _mark_weight_norm(added: list[dict[str, Any]], node: Any,
                      norms: dict[str, tuple[tuple[int, ...], tuple[int, ...]]]) -> None:
    """A Conv, ConvTranspose or Gemm whose weight is weight-normalised (:func:`_weight_norms`): its layer
    gets ``weight_norm`` from g's shape (one value: whole; along the weight's first axis: output, or input
    for a transposed convolution; along its second: the other; along a kernel axis: kernel_rows or
    kernel_columns), so the magnitudes are counted."""
    if node.op_type not in ("Conv", "ConvTranspose", "Gemm") or len(node.input) < 2 or node.input[1] not in norms:
        return
    g_dims, w_dims = norms[node.input[1]]
    normed = [entry for entry in added if entry["kind"] in WEIGHT_NORMED_KINDS]
    if len(normed) != 1:
        return
    kept = [k for k, (g, w) in enumerate(zip(g_dims, w_dims, strict=False)) if g == w > 1]
    if int(np.prod(g_dims)) == 1:
        normed[0]["weight_norm"] = "whole"
        return
    axis = kept[0] if len(kept) == 1 else 0 if g_dims and g_dims[0] == w_dims[0] else 1
    kernel = {(4, 2): "kernel_rows", (4, 3): "kernel_columns", (3, 2): "kernel_columns"}.get((len(w_dims), axis))
    if axis > 1 and (node.op_type == "Gemm" or kernel is None):
        raise SpecError.plain(node.name or node.op_type, f"normalises its weight along axis {axis}; dnnbench imports "
                              "weight_norm with dim 0, 1 or None, or along a kernel axis of a 1-D or 2-D convolution")
    if node.op_type == "Gemm" and not any(a.name == "transB" and a.i for a in node.attribute):
        axis = 1 - axis  # an (in, out) matrix: its first axis is the inputs
    transposed = node.op_type == "ConvTranspose"
    normed[0]["weight_norm"] = kernel or ("output" if (axis == 0) != transposed else "input")


def _fold_small_constants(graph: Any) -> dict[str, int]:
    """Fold nodes whose inputs are all small constants (shape arithmetic such as ConstantOfShape, Where,
    Expand of a class token) into initializers, so shape inference can tell what follows them; exporters
    that do not fold constants leave such chains (ONNX's own data propagation stops at some of them).
    Returns, for each folded initializer, the learned values it derives from (a position table gathered
    at some positions still holds the whole table)."""
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator

    values: dict[str, Any] = {t.name: numpy_helper.to_array(t) for t in graph.initializer
                              if int(np.prod(t.dims)) <= FOLD_MAX_VALUES}
    held: dict[str, int] = {t.name: int(np.prod(t.dims)) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value" and int(np.prod(a.t.dims)) <= FOLD_MAX_VALUES:
                    values[node.output[0]] = numpy_helper.to_array(a.t)
    folded: list[Any] = []
    for node in graph.node:
        ins = [x for x in node.input if x]
        if (node.op_type in ("Constant", "Dropout", *_RANDOM_OPS) or not ins
                or not all(x in values for x in ins) or node.domain not in ("", "ai.onnx")):
            continue
        try:
            outs = ReferenceEvaluator(node).run(None, {x: values[x] for x in ins})
        except Exception:  # an operator the reference evaluator lacks: leave the node as it is
            continue
        if any(np.size(o) > FOLD_MAX_VALUES for o in outs):
            continue
        for name, value in zip(node.output, outs, strict=False):
            values[name] = np.asarray(value)
            held[name] = sum(held.get(x, 0) for x in ins)
        folded.append(node)
    if not folded:
        return {}
    produced = {o for n in folded for o in n.output}
    used = {x for n in graph.node if n not in folded for x in n.input} | {o.name for o in graph.output}
    keep = [n for n in graph.node if n not in folded]
    del graph.node[:]
    graph.node.extend(keep)
    for name in sorted(produced & used):
        graph.initializer.append(numpy_helper.from_array(values[name], name))
    return {name: held[name] for name in produced & used}


def _known_shapes_as_constants(graph: Any, shapes: dict[str, Shape | None]) -> bool:
    """Replace every ``Shape`` node whose input's shape is known by that shape as an initializer (its
    ``start`` and ``end`` respected); True when one was replaced."""
    from onnx import numpy_helper

    replaced = []
    for node in graph.node:
        known = shapes.get(node.input[0]) if node.op_type == "Shape" and node.input else None
        if known is None:
            continue
        start = next((a.i for a in node.attribute if a.name == "start"), 0)
        end = next((a.i for a in node.attribute if a.name == "end"), None)
        value = np.asarray(list(known)[start:end], dtype=np.int64)
        graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
        replaced.append(node)
    if replaced:
        keep = [n for n in graph.node if n not in replaced]
        del graph.node[:]
        graph.node.extend(keep)
    return bool(replaced)


def _self_gated(graph: Any) -> dict[int, tuple[str, str, int] | None]:
    """Node index -> what it is in one activation torch writes as several nodes: ``x · g(x)`` for
    ``nn.SiLU`` (g a Sigmoid) and, before opset 18, ``nn.Mish`` (g a Tanh of a Softplus); ``Log(Sigmoid(x))``
    for ``nn.LogSigmoid``; ``x − Tanh(x)`` for ``nn.Tanhshrink``. None for the inner nodes (skipped),
    ``(x, function, uses)`` for the last (one activation of x, which the pattern reads ``uses`` times)."""
    users: dict[str, int] = {}
    for n in graph.node:
        for x in n.input:
            users[x] = users.get(x, 0) + 1
    made = {n.output[0]: (i, n) for i, n in enumerate(graph.node)}

    def gate(name: str) -> tuple[list[int], str, str] | None:
        """(g's node indices, its input x, the function) of the value ``name``, each used by the next alone."""
        i, n = made.get(name, (-1, None))
        if n is None or users.get(name) != 1:
            return None
        if n.op_type == "Sigmoid":
            return [i], n.input[0], "silu"
        if n.op_type != "Tanh":
            return None
        j, inner = made.get(n.input[0], (-1, None))
        if inner is not None and inner.op_type == "Softplus" and users.get(n.input[0]) == 1:
            return [i, j], inner.input[0], "mish"
        return None

    def inner(name: str, op_type: str) -> tuple[int, str] | None:
        """(the node index, its input) of the value ``name`` when an ``op_type`` node makes it for one user."""
        i, n = made.get(name, (-1, None))
        return (i, n.input[0]) if n is not None and n.op_type == op_type and users.get(name) == 1 else None

    out: dict[int, tuple[str, str, int] | None] = {}
    for i, n in enumerate(graph.node):
        if n.op_type == "Log" and (hit := inner(n.input[0], "Sigmoid")) is not None:
            out[hit[0]], out[i] = None, (hit[1], "log_sigmoid", 1)
        elif n.op_type == "Sub" and len(n.input) == 2 and (hit := inner(n.input[1], "Tanh")) is not None \
                and hit[1] == n.input[0]:
            out[hit[0]], out[i] = None, (hit[1], "tanhshrink", 2)
        if n.op_type != "Mul" or len(n.input) != 2:
            continue
        for a, b in ((n.input[0], n.input[1]), (n.input[1], n.input[0])):
            gated = gate(b)
            if gated is not None and gated[1] == a:
                out.update(dict.fromkeys(gated[0]))
                out[i] = (a, gated[2], 2)
                break
    return out


@dataclass(frozen=True)
class _GroupNorm:
    """torch's export of ``nn.GroupNorm`` / ``F.group_norm`` (Reshape to groups, InstanceNormalization,
    Reshape back, Mul by the scale, Add the shift) or of ``nn.InstanceNorm2d``: one group norm of ``maps``
    written at node ``last``."""

    maps: str
    groups: int
    affine: bool
    last: int


def _group_norms(graph: Any, shapes: dict[str, Shape | None], held: dict[str, int],
                 constants: set[str]) -> dict[int, _GroupNorm | None]:
    """Node index -> the group norm it ends (a :class:`_GroupNorm`), or None for the chain's other nodes.
    ``constants``: initializers, Constant nodes' outputs and the tensors computed from them alone."""
    producer = {o: i for i, n in enumerate(graph.node) for o in n.output if o}
    users: dict[str, list[int]] = {}
    for i, n in enumerate(graph.node):
        for x in n.input:
            users.setdefault(x, []).append(i)

    def only_user(tensor: str, op: str) -> int | None:
        found = users.get(tensor, [])
        return found[0] if len(found) == 1 and graph.node[found[0]].op_type == op else None

    def constant_other(i: int, tensor: str) -> str | None:
        """The other input of node ``i`` when it is a constant (learned or not), else None."""
        others = [x for x in graph.node[i].input if x and x != tensor]
        return others[0] if len(others) == 1 and others[0] in constants else None

    out: dict[int, _GroupNorm | None] = {}
    for i, n in enumerate(graph.node):
        if n.op_type != "InstanceNormalization":
            continue
        x = n.input[0]
        chain = [i]
        before = producer.get(x)
        maps, groups = x, 0
        if before is not None and graph.node[before].op_type == "Reshape" and len(users.get(x, [])) == 1:
            source = graph.node[before].input[0]
            src, grouped = shapes.get(source), shapes.get(x)
            if src is not None and grouped is not None and len(src) == 4 and len(grouped) == 3:
                maps, groups = source, int(grouped[1])
                chain.insert(0, before)
        end = n.output[0]
        if groups:
            back = only_user(end, "Reshape")
            if back is None or shapes.get(graph.node[back].output[0]) != shapes.get(maps):
                continue
            chain.append(back)
            end = graph.node[back].output[0]
            # The scale and the shift: learned (affine) or the exporter's ones and zeros (affine=False).
            mul = only_user(end, "Mul")
            add = only_user(graph.node[mul].output[0], "Add") if mul is not None else None
            gamma = constant_other(mul, end) if mul is not None else None
            beta = constant_other(add, graph.node[mul].output[0]) if mul is not None and add is not None else None
            affine = False
            if gamma is not None and beta is not None:
                chain += [mul, add]  # type: ignore[list-item]
                affine = held.get(gamma, 0) > 0 and held.get(beta, 0) > 0
        else:
            shape = shapes.get(x)
            if shape is None or len(shape) != 4:
                continue
            groups = int(shape[1])
            affine = held.get(n.input[1], 0) > 0 if len(n.input) > 1 else False
        for j in chain:
            out[j] = None
        out[chain[-1]] = _GroupNorm(maps, groups, affine, chain[-1])
    return out


@dataclass(frozen=True)
class _Attention:
    """The nodes torch's exporter writes for one ``nn.MultiheadAttention`` (one name scope)."""

    scope: str
    input: str
    output: str
    heads: int
    bias: bool
    causal: bool


def _attention_blocks(graph: Any, weights: dict[str, tuple[int, ...]], shapes: dict[str, Shape | None],
                      held: dict[str, int], data_input: str) -> dict[int, _Attention]:
    """Node index -> its attention block. torch's exporter names every node after the module path that
    made it (``/h/h.0/attn/MatMul``), and ``nn.MultiheadAttention`` computes in one function, so its nodes
    share a scope: one with a Softmax between two products of data tensors (Q·Kᵀ, then P·V), one data
    tensor in (self-attention) and one out. Other exporters' attention stays a one-line error."""
    import math

    def scope_of(name: str) -> str | None:
        return name.rsplit("/", 1)[0] if name.startswith("/") and name.count("/") >= 2 else None

    out: dict[int, _Attention] = {}
    softmax_scopes = {scope_of(n.name) for n in graph.node if n.op_type == "Softmax"} - {None}
    producers = {o: i for i, n in enumerate(graph.node) for o in n.output}
    for scope in softmax_scopes:
        members = [i for i, n in enumerate(graph.node) if n.name.startswith(scope + "/")]
        nodes = [graph.node[i] for i in members]
        products = [n for n in nodes if n.op_type == "MatMul" and all(x not in weights for x in n.input)]
        if len(products) < 2:
            continue
        inside = {o for n in nodes for o in n.output}
        inputs = {x for n in nodes for x in n.input if x and x not in inside and x not in weights}
        users = {x for i, n in enumerate(graph.node) if i not in set(members) for x in n.input}
        users |= {o.name for o in graph.output}
        outputs = [o for n in nodes for o in n.output if o in users and o not in weights]
        if len(inputs) != 1 or len(outputs) != 1:
            continue
        x = next(iter(inputs))
        if x != data_input and x not in producers:
            continue
        xs = shapes.get(x)
        if xs is None or len(xs) != 3:
            continue
        s, d = xs[1], xs[2]
        scores = next((shapes.get(n.output[0]) for n in products
                       if shapes.get(n.output[0]) and tuple(shapes[n.output[0]][-2:]) == (s, s)), None)  # type: ignore[index]
        if not scores:
            continue
        heads = math.prod(scores) // (s * s)
        bias = any(held.get(c, 0) in (d, 3 * d) for n in nodes if n.op_type in ("Add", "Gemm")
                   for c in n.input if c in weights)
        causal = any(n.op_type == "Trilu" for n in nodes)
        block = _Attention(scope, x, outputs[0], int(heads), bias, causal)
        for i in members:
            out[i] = block
    return out


def _layer_name(label: str) -> str:
    """``features.0`` for torch's exported node name ``/features/features.0/Conv`` (the module path)."""
    if not label.startswith("/"):
        return label
    parts = [p for p in label.split("/") if p]
    return parts[-2] if len(parts) >= 2 else (parts[0] if parts else label)


#: ONNX's own limit for one protobuf file (weights beyond it live in external data, which is not read).
MAX_ONNX_BYTES = 2**31


def _load(source: str | os.PathLike[str]) -> Any:
    import onnx

    from ..fileio import read_bytes

    p = Path(source)
    data = read_bytes(p, "file", MAX_ONNX_BYTES)  # a regular file only: never a pipe or a device
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf DecodeError, RuntimeWarning-free garbage, truncated files
        raise SpecError("file", str(p), f"is not a valid ONNX model ({type(exc).__name__})") from None
    if not model.graph.node or not model.graph.input:
        raise SpecError("file", str(p), "is not a valid ONNX model (no graph nodes or inputs)")
    return model


def _record_tied(added: list[dict[str, Any]], node: Any, root: dict[str, str], constants: dict[str, Any],
                 owners: list[tuple[str, str, str, Any]]) -> None:
    """Shared weights: layers whose matrix is one initializer (an export without constant folding
    transposes it in the graph for a head tied to its embedding), or an embedding's table (``Gather``) and
    a head's matrix (``MatMul``/``Gemm``) of equal values (a folding export writes the transposed copy):
    the later layer is ``tied_to`` the earlier."""
    from onnx import numpy_helper

    entry = next((e for e in added if e["kind"] in ("fc", "embedding")), None)
    if entry is None:
        return
    name = node.input[0] if node.op_type == "Gather" else node.input[1] if len(node.input) > 1 else ""
    source = root.get(name)
    if source is None or source not in constants:
        return
    values = numpy_helper.to_array(constants[source])
    if values.ndim != 2:
        return
    # As (output rows, input columns) of the layer: an embedding's table (V, D), a MatMul's weight (D, V)
    # transposed, a Gemm's as its transB says; a transposed initializer's root is already (V, D).
    transposed = (node.op_type == "MatMul" and source == name) or (
        node.op_type == "Gemm" and source == name and not int(next(
            (a.i for a in node.attribute if a.name == "transB"), 0)))
    matrix = values.T if transposed else values
    for owner, kind, initializer, theirs in owners:
        # Equal values tie a head to an embedding only (copies of one layer start out equal too).
        equal = kind != entry["kind"] and theirs.shape == matrix.shape and np.array_equal(theirs, matrix)
        if initializer == source or equal:
            entry["tied_to"] = owner
            return
    owners.append((str(entry["name"]), str(entry["kind"]), source, matrix))


def from_onnx(source: str | os.PathLike[str] | Any, input_shape: Any = None,
              name: str | None = None, description: str | None = None) -> Network:
    """A network spec from an ONNX file (or a loaded ``onnx.ModelProto``), docs/importing.md.

    ``input_shape`` (one sample, ``(C, H, W)``; one per input for a graph of several) overrides the
    file's input shapes; the batch size is set to 1. Each data input of a graph of several becomes an
    ``input`` layer named after it. ``name`` defaults to the file name without ``.onnx``. Unsupported
    operators and branches are a :class:`SpecError` naming the node and its operator.
    """
    try:
        return _from_onnx(source, input_shape, name, description)
    except SpecError:
        raise
    except Exception as exc:  # a form the importer does not expect: one line, not a traceback
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
        where = str(source) if isinstance(source, (str, os.PathLike)) else "the ONNX model"
        raise SpecError.plain(where, f"is a graph dnnbench's ONNX importer fails on ({type(exc).__name__}: "
                              f"{first}); docs/importing.md lists what it imports") from None


def _from_onnx(source: str | os.PathLike[str] | Any, input_shape: Any, name: str | None,
               description: str | None) -> Network:
    """:func:`from_onnx`'s work."""
    import onnx
    from onnx import numpy_helper, shape_inference

    if isinstance(source, onnx.ModelProto):
        model, stem, where = source, (source.graph.name or "onnx-model"), "the ONNX model"
    else:
        model, stem, where = _load(source), Path(source).name.removesuffix(".onnx"), str(source)
    model = onnx.ModelProto.FromString(model.SerializeToString())  # a copy: the input shape is rewritten
    graph = model.graph
    norms = _weight_norms(graph)
    folded_held = _fold_small_constants(graph)
    weights: dict[str, tuple[int, ...]] = {t.name: tuple(int(d) for d in t.dims) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute:
            for a in node.attribute:
                if a.name == "value":
                    weights[node.output[0]] = tuple(int(d) for d in numpy_helper.to_array(a.t).shape)
    inputs = [i for i in graph.input if i.name not in weights]
    if not inputs:
        raise SpecError("file", where, "has no data input")
    given = None if input_shape is None else input_shapes(input_shape)
    if given is not None and len(given) != len(inputs):
        raise SpecError("input_shape", input_shape, f"gives {len(given)} input(s); {Path(where).name} has "
                                                    f"{len(inputs)} ({', '.join(i.name for i in inputs)}): give "
                                                    "one shape per input")
    sample_shapes: list[Shape] = []
    for k, data in enumerate(inputs):
        dims = data.type.tensor_type.shape.dim
        if given is not None:
            del dims[:]
            for d in (1, *given[k]):
                dims.add().dim_value = d
        else:
            which = "an input" if len(inputs) == 1 else f"input {data.name!r}"
            if not dims:
                raise SpecError("file", where, f"has {which} without a shape: give input_shape (--input-shape C H W)")
            dims[0].Clear()
            dims[0].dim_value = 1
            if any(not d.HasField("dim_value") or d.dim_value < 1 for d in dims[1:]):
                raise SpecError("file", where, f"has {which} with symbolic sizes: give input_shape "
                                               "(--input-shape C H W)")
        sample_shapes.append(tuple(int(d.dim_value) for d in dims[1:]))
    data_input = inputs[0]
    sample_shape = sample_shapes[0]
    shown = list(sample_shape) if len(inputs) == 1 else [list(x) for x in sample_shapes]
    for out in graph.output:  # stored output shapes (symbolic batch, another input size) would clash
        out.type.tensor_type.ClearField("shape")
    del graph.value_info[:]
    def infer() -> dict[str, Shape | None]:
        try:
            inferred = shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise SpecError("file", where, f"fails ONNX shape inference with input {shown} "
                            f"({type(exc).__name__}: {first[:160]})") from None
        found: dict[str, Shape | None] = {}
        for vi in (*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output):
            t = vi.type.tensor_type
            if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
                found[vi.name] = tuple(int(d.dim_value) for d in t.shape.dim)
        return found

    shapes = infer()
    # Shape arithmetic on data that ONNX's data propagation does not follow (x.chunk's bounds computed
    # from Shape, Gather, Add, Div, Mul by the legacy exporter): a Shape of a tensor whose shape is known
    # becomes a constant, the arithmetic after it is folded, and shapes are inferred again.
    for _ in range(8):
        if all(o in shapes for n in graph.node for o in n.output if o) or not _known_shapes_as_constants(
                graph, shapes):
            break
        folded_held.update(_fold_small_constants(graph))
        shapes = infer()

    # Constants: initializers, Constant nodes and whatever is computed from them alone (an exporter that
    # does not fold constants writes Linear weights as Transpose(weight)). ``held``: the learned values
    # (initializers) a constant derives from, e.g. a position table gathered at positions 0..S-1.
    held: dict[str, int] = {t.name: int(np.prod(t.dims)) for t in graph.initializer}
    held.update(folded_held)
    root: dict[str, str] = {t.name: t.name for t in graph.initializer}  # constant -> the initializer it views
    for node in graph.node:
        ins = [x for x in node.input if x]
        if ins and all(x in weights for x in ins):
            for out in node.output:
                if shapes.get(out) is not None:
                    weights[out] = shapes[out]  # type: ignore[assignment]
                    held[out] = sum(held.get(x, 0) for x in ins)
                    if node.op_type == "Transpose" and ins[0] in root:
                        root[out] = root[ins[0]]

    random = _random_tensors(graph, weights)
    # A graph of several inputs names each after its ONNX input (one input is "input", as always).
    builder = SpecBuilder(sample_shape, _layer_name(data_input.name) if len(inputs) > 1 else "input")
    layer_of: dict[str, str] = {data_input.name: builder.last}  # data tensor -> the layer carrying it
    for data, shape in zip(inputs[1:], sample_shapes[1:], strict=True):
        layer_of[data.name] = builder.add_input(shape, _layer_name(data.name))
    consumers: dict[str, int] = {}
    for node in graph.node:
        for x in node.input:
            consumers[x] = consumers.get(x, 0) + 1
    constant_values = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value":
                    constant_values[node.output[0]] = a.t

    def per_sample(tensor: str, origin: str) -> Shape:
        s = shapes.get(tensor)
        if s is None:
            raise SpecError.plain(origin, f"has output {tensor!r} whose shape ONNX shape inference cannot tell")
        if not s or s[0] != 1:
            raise SpecError.plain(origin, f"changes the batch dimension (output shape {list(s)})")
        return s[1:]

    owners: list[tuple[str, str, str, Any]] = []  # (spec layer, its kind, initializer, values as (rows, columns))
    attention = _attention_blocks(graph, weights, shapes, held, data_input.name)
    gated = _self_gated(graph)
    group_norms = _group_norms(graph, shapes, held, set(weights))
    recurrent = RecurrentImport(graph, builder, layer_of, shapes, weights, constant_values,
                                lambda start, names: builder.record_parameters(
                                    start, frozenset(root.get(x, x) for x in names if held.get(x, 0) > 0)))
    for i, node in enumerate(graph.node):
        label = node.name or f"{node.op_type}_{i}"
        origin = f"{node.op_type} node {label!r}"
        if i in group_norms:  # a group norm as torch exports it: one layer at its last node
            norm = group_norms[i]
            if norm is not None and norm.maps in layer_of:
                layer_of[node.output[0]] = builder.add(
                    {"kind": "group_norm", "groups": norm.groups, "affine": norm.affine},
                    per_sample(node.output[0], origin), _layer_name(label), origin, [layer_of[norm.maps]])
            continue
        block = attention.get(i)
        if block is not None:  # one node of an exported nn.MultiheadAttention: the block is one layer
            if node.output[0] == block.output:
                layer_of[block.output] = builder.add(
                    {"kind": "attention", "heads": block.heads, "bias": block.bias, "causal": block.causal},
                    per_sample(block.output, origin), _layer_name(block.scope + "/x"), f"attention {block.scope!r}",
                    [layer_of[block.input]])
            continue
        if i in gated:  # x · sigmoid(x), x · tanh(softplus(x)), log(sigmoid(x)), x - tanh(x): one activation
            pair = gated[i]
            if pair is not None and pair[0] in layer_of:
                x, function, uses = pair
                fusable = consumers.get(x, 0) == uses  # nothing but the pattern reads x
                layer_of[node.output[0]] = builder.activation(function, per_sample(node.output[0], origin),
                                                              _layer_name(label), origin, layer_of[x], fusable)
            continue
        if recurrent.take(node, {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}, origin,
                          _layer_name(label)):
            continue  # LSTM, GRU, RNN and the time-major tensors around them
        data_in = [x for x in node.input if x in layer_of]
        if not data_in or node.op_type in _SHAPE_OPS or node.op_type in _RANDOM_LIKE:
            continue  # constants, shape arithmetic and random draws shaped like data: no layer
        if node.op_type == "Split" and node.input[0] in layer_of:  # x.chunk, x.split: a slice per piece used
            in_shape = per_sample(node.input[0], origin)
            axis = int(next((a.i for a in node.attribute if a.name == "axis"), 0)) % (len(in_shape) + 1) - 1
            if axis < 0:
                raise SpecError.plain(origin, "splits the batch axis, which is not one sample's layer")
            start = 0
            for k, out in enumerate(node.output):
                size = per_sample(out, origin)[axis]
                if consumers.get(out):
                    layer_of[out] = builder.add({"kind": "slice", "axis": axis, "start": start, "stop": start + size},
                                                per_sample(out, origin), f"{_layer_name(label)}_{k}", origin,
                                                [layer_of[node.input[0]]])
                start += size
            continue
        handler = _OPS.get(node.op_type)
        if handler is None:
            raise SpecError.plain(origin, f"has the operator {node.op_type}, which dnnbench's importer does not "
                                  "support; supported: " + ", ".join(sorted(_OPS)))
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        item = _Node(node, origin, _layer_name(label), per_sample(data_in[0], origin),
                     per_sample(node.output[0], origin), attrs, weights, [layer_of[x] for x in data_in],
                     [per_sample(x, origin) for x in data_in],
                     fusable=len(data_in) == 1 and consumers.get(data_in[0], 0) == 1)
        item.constants = constant_values
        item.held = held
        item.random = random
        before = len(builder.layers)
        layer_of[node.output[0]] = handler(builder, item)
        # The learned initializers the node reads (a module called twice reads the same ones again).
        builder.record_parameters(before, frozenset(root.get(x, x) for x in node.input
                                                    if x in weights and held.get(x, 0) > 0))
        _record_tied(builder.layers[before:], node, root, constant_values, owners)
        _mark_weight_norm(builder.layers[before:], node, norms)
    outputs = [o.name for o in graph.output]
    if len(outputs) != 1 or layer_of.get(outputs[0]) != builder.last:
        raise SpecError("file", where, "must have one output: the last layer's")
    return builder.build(
        name or stem.lower(),
        description if description is not None else f"Imported from the ONNX model {Path(stem).name}.",
        f"Imported by dnnbench.from_onnx from {Path(where).name} (ONNX shape inference, input "
        f"{shown}).",
    )


__all__ = ["from_onnx"]
