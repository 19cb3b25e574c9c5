"""Layer kinds: each knows its output shape and its per-sample counts (polymorphism, no if-chains).

Shapes are per sample: ``(C, H, W)`` for feature maps, ``(S, D)`` for sequences (S tokens of width D)
and ``(N,)`` for vectors. Counts follow docs/model.md §3: MACs (one multiply and one add; FLOPs = 2 x
MACs) for convolutions, fully connected layers and attention, the matrix products PyTorch's
FlopCounterMode counts; element operations, counted and named separately, for everything else (pooling,
activations, normalisation, softmax, additions).

A layer takes the output of the layer before it, or of the layers its ``inputs`` name (a graph): ``add``
and ``concat`` take two or more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import Field, model_serializer, model_validator

from ..errors import TAG_HINTS
from .base import UNION_TAGS, Spec, fail

Shape = tuple[int, ...]
ActivationName = Literal["none", "relu", "relu6", "tanh", "sigmoid", "gelu", "silu", "hardswish", "hardsigmoid",
                         "leaky_relu", "elu", "selu", "mish", "softplus", "hardtanh", "exp", "abs", "celu",
                         "log_sigmoid", "tanhshrink", "threshold", "rrelu", "softshrink", "hardshrink", "sqrt", "rsqrt",
                         "reciprocal", "log", "erf", "sin", "cos", "nan_to_num"]
#: What an ``activation`` layer computes: a function a conv or fc layer may fuse (``ActivationName``), or
#: ``pow``, the power ``x ** exponent`` of a constant exponent, which stays a layer of its own.
FunctionName = Literal["relu", "relu6", "tanh", "sigmoid", "gelu", "silu", "hardswish", "hardsigmoid", "leaky_relu",
                       "elu", "selu", "mish", "softplus", "hardtanh", "exp", "abs", "celu", "log_sigmoid",
                       "tanhshrink", "threshold", "rrelu", "softshrink", "hardshrink", "sqrt", "rsqrt", "reciprocal",
                       "log", "erf", "sin", "cos", "nan_to_num", "pow"]
PairOrInt = int | tuple[int, int]
TripleOrInt = int | tuple[int, int, int]

#: Per-sample axes a view (reshape, permute), a slice or a concat may have: a (H, W, C) map cut into
#: windows is (H/w, w, W/w, w, C) between its views.
MAX_VIEW_AXES = 6


@dataclass(frozen=True)
class LayerCounts:
    """Per-sample counts of one layer (weights and MACs exclude nothing; bias weights included)."""

    input_shape: Shape
    output_shape: Shape
    weights: int
    activations: int  # values per sample kept for backward: the output (attention: its inner tensors too)
    macs_forward: int
    macs_backprop: int  # error to the layer below; 0 for the first layer
    macs_weight_grad: int
    elem_ops_forward: int
    elem_ops_backprop: int
    partition_units: int  # units split by vertical partitioning (output maps or neurons)


def _pair(value: PairOrInt) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _triple(value: TripleOrInt) -> tuple[int, int, int]:
    return (value, value, value) if isinstance(value, int) else (int(value[0]), int(value[1]), int(value[2]))


def _require_volumes(layer: str, shape: Shape, where: str) -> None:
    if len(shape) != 4:
        fail(f"{where}.kind", layer, f"needs a (C, D, H, W) volume input, got shape {list(shape)}")


def _at_least(field: str, value: PairOrInt, low: int) -> None:
    """A one-line error naming ``field`` unless both of a pair's numbers are at least ``low``."""
    for v in _pair(value):
        if v < low:
            fail(field, v, f"must be >= {low}")


def _elements(shape: Shape) -> int:
    return math.prod(shape)


def _units(shape: Shape) -> int:
    """What vertical partitioning splits: channels of maps, the width of a sequence, a vector's values."""
    return shape[1] if len(shape) == 2 else shape[0]


def _activation_ops(name: str, outputs: int) -> int:
    # One element op per output forward and one backward (docs/model.md §3).
    return 0 if name == "none" else outputs


class _Layer(Spec):
    name: str = Field(default="", description="An optional unique name of the layer (inputs refer to it).")
    inputs: tuple[Annotated[str, Field(min_length=1)], ...] = Field(
        default=(), description="Names of the layers whose outputs this layer takes, in order; empty: the layer "
                                "before it. add and concat take two or more.")
    shares: str = Field(default="", description="The name of an earlier layer whose parameters this layer uses again, "
                                                "tensors of the same sizes (one module called twice: a Siamese "
                                                "encoder, ALBERT's repeated block): they are counted once, there; "
                                                "this layer still reads them and computes their gradient. Empty: "
                                                "its own.")

    #: How many inputs the kind takes: (fewest, most); most None: any number.
    arity: ClassVar[tuple[int, int | None]] = (1, 1)
    #: Whether layers of the kind may hold parameters (so another may ``share`` them, or they another's).
    may_hold_parameters: ClassVar[bool] = False
    #: Whether no gradient flows back through layers of the kind (their output is a constant).
    blocks_gradient: ClassVar[bool] = False
    #: Fields left out of a saved spec when they hold these values (so chain specs read as they were).
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": []}

    @model_serializer(mode="wrap")
    def _drop_quiet_defaults(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            if data.get("shares") == "":
                del data["shares"]
            for key, value in self.quiet_defaults.items():
                if key in data and data[key] in (value, tuple(value) if isinstance(value, list) else value):
                    del data[key]
        return data

    def output_shape(self, input_shape: Shape, where: str) -> Shape:  # pragma: no cover - abstract
        raise NotImplementedError

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        raise NotImplementedError  # pragma: no cover - abstract

    def graph_output_shape(self, input_shapes: tuple[Shape, ...], where: str) -> Shape:
        """The output shape from every input's shape (one input unless the kind combines several)."""
        return self.output_shape(input_shapes[0], where)

    def graph_counts(self, input_shapes: tuple[Shape, ...], output_shape: Shape, first: bool) -> LayerCounts:
        return self.counts(input_shapes[0], output_shape, first)

    def graph_counts_needing(self, input_shapes: tuple[Shape, ...], output_shape: Shape,
                             needs: tuple[bool, ...]) -> LayerCounts:
        """The counts given which inputs' gradients backward computes (``needs``, one per input): of
        every kind, none of them (``first``) or all; a kind whose inputs' gradients are separate
        products (``matmul``) counts only the needed ones."""
        return self.graph_counts(input_shapes, output_shape, first=not any(needs))

    @property
    def has_weights(self) -> bool:
        return False

    def parameter_tensors(self, input_shape: Shape, weights: int) -> tuple[int, ...]:
        """The layer's ``weights`` as PyTorch's module holds them, one tensor per parameter, in the reverse
        of the order backward hands their gradients over (DDP's buckets take whole tensors in that
        order): the order the module registers them, but for a convolution, whose weight's gradient
        comes before its bias's."""
        return (weights,) if weights else ()


def _with_bias(weights: int, bias: int) -> tuple[int, ...]:
    """A weight tensor, then a bias of ``bias`` values (0: none)."""
    return (weights - bias, bias) if bias else ((weights,) if weights else ())


def _check_convolution(layer: Any, spread: Any) -> None:
    """One-line errors for a convolution's windows (``spread``: one number to a pair or a triple) and groups."""
    for field, low in (("kernel", 1), ("stride", 1), ("padding", 0), ("dilation", 1)):
        for v in spread(getattr(layer, field)):
            if v < low:
                fail(field, v, f"must be >= {low}")
    if layer.out_channels % layer.groups:
        fail("groups", layer.groups, f"must divide out_channels {layer.out_channels}")


def _check_output_padding(layer: Any, spread: Any) -> None:
    """A transposed convolution's output padding is below its stride or its dilation on every axis."""
    for extra, stride, dilation in zip(spread(layer.output_padding), spread(layer.stride), spread(layer.dilation),
                                       strict=True):
        if extra < 0 or extra >= max(stride, dilation):
            fail("output_padding", extra, f"must be >= 0 and below the stride {stride} or the dilation {dilation}")


def _convolution_tensors(layer: Any, input_shape: Shape, weights: int) -> tuple[int, ...]:
    """A convolution's parameter tensors: the weight's gradient comes before the bias's; a weight
    normalisation's magnitudes g and direction v take the weight's place (v's gradient first)."""
    bias = layer.out_channels if layer.bias else 0
    g = weight_norm_magnitudes(layer, input_shape)
    own = (weights - bias - g, g) if g else ((weights - bias,) if weights - bias else ())
    return (bias, *own) if bias else own


WeightNormName = Literal["none", "output", "input", "whole"]
KernelWeightNormName = Literal["none", "output", "input", "whole", "kernel_rows", "kernel_columns"]
_WEIGHT_NORM_DESCRIPTION = (
    "Weight normalisation (PyTorch's nn.utils.parametrizations.weight_norm): the weight is a direction v "
    "scaled by learned magnitudes g, recomputed from them every forward. none: a plain weight; output: one "
    "magnitude per output channel or neuron (PyTorch's dim=0 on a convolution or an fc layer, dim=1 on a "
    "transposed one: per output channel of a group); input: one per input channel (dim=1 on a convolution, "
    "of a group, or an fc layer; dim=0 on a transposed convolution); whole: one for the whole weight "
    "(dim=None).")
_KERNEL_WEIGHT_NORM_DESCRIPTION = _WEIGHT_NORM_DESCRIPTION + (
    " kernel_rows: one per row of the kernel (dim=2); kernel_columns: one per column (dim=3; dim=2 of a 1-D "
    "convolution, whose kernel is one row: wav2vec 2.0's positional convolution).")


def weight_norm_magnitudes(layer: Any, input_shape: Shape) -> int:
    """The magnitudes g of a weight-normalised layer (0 without weight normalisation): the weight
    tensor's size along the normalised axis, in PyTorch's layout (convolution: C_out × C_in/groups × K;
    transposed: C_in × C_out/groups × K; fc: N_out × N_in)."""
    mode = getattr(layer, "weight_norm", "none")
    if mode == "none":
        return 0
    if mode == "whole":
        return 1
    if mode in ("kernel_rows", "kernel_columns"):
        return _pair(layer.kernel)[mode == "kernel_columns"]
    if isinstance(layer, FullyConnected):
        n_in = input_shape[1] if len(input_shape) == 2 else _elements(input_shape)
        return layer.out_features if mode == "output" else n_in
    groups, out = int(layer.groups), int(layer.out_channels)
    if isinstance(layer, (ConvTranspose2d, ConvTranspose3d)):
        return input_shape[0] if mode == "input" else out // groups
    return out if mode == "output" else input_shape[0] // groups


def _check_weight_norm(layer: Any) -> None:
    """A weight-normalised layer learns its own weight."""
    if layer.weight_norm == "none":
        return
    if not getattr(layer, "learned", True):
        fail("weight_norm", layer.weight_norm, "must be none for a fixed filter (learned false)")
    if getattr(layer, "tied_to", ""):
        fail("weight_norm", layer.weight_norm, f"must be none for a layer tied to {layer.tied_to!r} (its weight is "
                                               "the other layer's)")


def _convolution_counts(layer: Any, input_shape: Shape, output_shape: Shape, first: bool, kernel_values: int,
                        transposed: bool = False) -> LayerCounts:
    """A convolution's counts: C_out·(C_in/groups)·K weights (+ a bias per output channel); per output
    value C_in/groups·K MACs, or, transposed, per input value C_out/groups·K (model.md §3); the same
    backward (not for a first layer) and for the weight gradient."""
    outputs = _elements(output_shape)
    macs = (_elements(input_shape) * (layer.out_channels // layer.groups) if transposed
            else outputs * (input_shape[0] // layer.groups)) * kernel_values
    learned = getattr(layer, "learned", True)  # a fixed filter: no weights, no weight gradient
    weights = layer.out_channels * (input_shape[0] // layer.groups) * kernel_values if learned else 0
    weights += weight_norm_magnitudes(layer, input_shape)
    act = _activation_ops(layer.activation, outputs)
    return LayerCounts(
        input_shape, output_shape, weights + (layer.out_channels if layer.bias else 0), outputs,
        macs_forward=macs, macs_backprop=0 if first else macs, macs_weight_grad=macs if learned else 0,
        # a fixed filter that sends no error down has no backward at all (nor its activation's)
        elem_ops_forward=act, elem_ops_backprop=act if learned or not first else 0,
        partition_units=layer.out_channels,
    )


def _check_axis(axis: int, shape: Shape, where: str) -> None:
    """A one-line error naming ``where``'s axis unless it is an axis of the per-sample ``shape``."""
    if not -len(shape) <= axis < len(shape):
        fail(f"{where}.axis", axis, f"must name an axis of the input {list(shape)}")


def _require_maps(layer: str, shape: Shape, where: str) -> None:
    if len(shape) != 3:
        fail(f"{where}.kind", layer, f"needs a (C, H, W) feature-map input, got shape {list(shape)}")


def _window_out(size: int, kernel: int, stride: int, pad: int, where: str, field: str, axis: str,
                ceil: bool = False) -> int:
    if kernel > size + 2 * pad:
        fail(f"{where}.{field}", kernel, f"is larger than the input {axis} {size} (with padding {pad})")
    if not ceil:
        return (size + 2 * pad - kernel) // stride + 1
    # PyTorch's ceil_mode: a last, partial window counts if it starts inside the input or its left padding.
    out = -(-(size + 2 * pad - kernel) // stride) + 1
    return out - 1 if (out - 1) * stride >= size + pad else out


class InputLayer(_Layer):
    """The network's input: one sample's shape."""

    kind: Literal["input"] = Field(default="input", description="The layer kind.")
    shape: tuple[Annotated[int, Field(gt=0)], ...] = Field(min_length=1, max_length=4,
                                                           description="One sample: (C, H, W), (H, W), (N,) or "
                                                                       "(C, D, H, W) volumes.")
    needs_gradient: bool = Field(default=False, description="Whether backward computes the gradient of the input "
                                                            "itself (an adversarial example's, a saliency map's, a "
                                                            "layer timed alone); training does not: the layers "
                                                            "before the first parameters then send no error down.")

    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "needs_gradient": False}

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        return tuple(self.shape) if len(self.shape) != 2 else (1, *self.shape)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        return LayerCounts(input_shape, output_shape, 0, n, 0, 0, 0, 0, 0, output_shape[0])


class Conv2d(_Layer):
    """A 2-D convolution, optionally grouped (depthwise: groups = input channels) and dilated, with an
    optional activation fused after it."""

    may_hold_parameters: ClassVar[bool] = True

    kind: Literal["conv2d"] = Field(default="conv2d", description="The layer kind.")
    out_channels: int = Field(gt=0, description="Output feature maps.")
    kernel: PairOrInt = Field(description="Kernel size: one number or [height, width].")
    stride: PairOrInt = Field(default=1, description="Stride: one number or [height, width].")
    padding: PairOrInt = Field(default=0, description="Zero padding on each side: one number or [height, width].")
    dilation: PairOrInt = Field(default=1, description="Spacing between kernel taps: one number or [height, width].")
    groups: int = Field(default=1, gt=0, description="Channel groups: each output map sees in_channels/groups input "
                                                     "maps (depthwise: groups = in_channels).")
    bias: bool = Field(default=True, description="Whether the layer has a bias per output map.")
    learned: bool = Field(default=True, description="Whether the filter is learned. False: a fixed filter (a buffer, "
                                                    "not a parameter: an anti-aliasing blur, a fixed bilinear "
                                                    "upsampling), no weights, no weight gradient, no update, no bias.")
    activation: ActivationName = Field(default="none", description="Activation applied to the output.")
    weight_norm: KernelWeightNormName = Field(default="none", description=_KERNEL_WEIGHT_NORM_DESCRIPTION)
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "dilation": 1, "groups": 1, "learned": True,
                                                "weight_norm": "none"}

    @model_validator(mode="after")
    def _check_windows(self) -> Conv2d:
        _check_convolution(self, _pair)
        if not self.learned and self.bias:
            fail("bias", True, "must be false for a fixed filter (learned false): it has nothing to learn")
        _check_weight_norm(self)
        return self

    @property
    def has_weights(self) -> bool:
        return True

    @property
    def effective_kernel(self) -> tuple[int, int]:
        """The window a dilated kernel spans: d·(k − 1) + 1 each way."""
        (kh, kw), (dh, dw) = _pair(self.kernel), _pair(self.dilation)
        return dh * (kh - 1) + 1, dw * (kw - 1) + 1

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _require_maps("conv2d", input_shape, where)
        c, h, w = input_shape
        if c % self.groups:
            fail(f"{where}.groups", self.groups, f"must divide the input channels {c}")
        (kh, kw), (sh, sw), (ph, pw) = self.effective_kernel, _pair(self.stride), _pair(self.padding)
        return (
            self.out_channels,
            _window_out(h, kh, sh, ph, where, "kernel", "height"),
            _window_out(w, kw, sw, pw, where, "kernel", "width"),
        )

    def parameter_tensors(self, input_shape: Shape, weights: int) -> tuple[int, ...]:
        return _convolution_tensors(self, input_shape, weights)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        kh, kw = _pair(self.kernel)  # C_out·H_out·W_out·(C_in/groups)·K_h·K_w MACs (model.md §3)
        return _convolution_counts(self, input_shape, output_shape, first, kh * kw)


class ConvTranspose2d(Conv2d):
    """A transposed 2-D convolution (PyTorch's ``nn.ConvTranspose2d``, a decoder's or a U-Net's
    upsampling): each input value scatters its kernel into the output, ``stride`` apart. Its arithmetic
    is the input gradient of the convolution from its output's shape to its input's; ``padding`` crops
    the output on each side and ``output_padding`` adds rows and columns on one side."""

    kind: Literal["conv_transpose2d"] = Field(  # type: ignore[assignment]
        default="conv_transpose2d", description="The layer kind.")
    output_padding: PairOrInt = Field(default=0, description="Rows and columns added on one side of the output "
                                                             "(PyTorch's output_padding): one number or [height, "
                                                             "width], below the stride or the dilation.")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "dilation": 1, "groups": 1, "output_padding": 0,
                                                "learned": True, "weight_norm": "none"}

    @model_validator(mode="after")
    def _check_output_padding(self) -> ConvTranspose2d:
        _check_output_padding(self, _pair)
        return self

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _require_maps("conv_transpose2d", input_shape, where)
        c, h, w = input_shape
        if c % self.groups:
            fail(f"{where}.groups", self.groups, f"must divide the input channels {c}")
        (kh, kw), (sh, sw), (ph, pw), (oh, ow) = (self.effective_kernel, _pair(self.stride), _pair(self.padding),
                                                  _pair(self.output_padding))
        sizes = []
        for size, k, s, p, extra, axis in ((h, kh, sh, ph, oh, "height"), (w, kw, sw, pw, ow, "width")):
            out = (size - 1) * s - 2 * p + k + extra
            if out < 1:
                lines = "rows" if axis == "height" else "columns"
                fail(f"{where}.padding", p, f"crops {2 * p} {lines} off the output {axis} {out + 2 * p}, leaving none")
            sizes.append(out)
        return self.out_channels, sizes[0], sizes[1]

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        kh, kw = _pair(self.kernel)  # C_in·H_in·W_in·(C_out/groups)·K_h·K_w MACs (model.md §3)
        return _convolution_counts(self, input_shape, output_shape, first, kh * kw, transposed=True)


class Pool(_Layer):
    """Max or average pooling. A max pooling's window may be dilated (its taps ``dilation`` apart, as
    PyTorch's): it spans d·(k − 1) + 1 positions and still compares k_h·k_w values per output."""

    kind: Literal["pool"] = Field(default="pool", description="The layer kind.")
    mode: Literal["max", "avg"] = Field(default="max", description="max or avg pooling.")
    window: PairOrInt = Field(description="Window size: one number or [height, width].")
    stride: PairOrInt | None = Field(default=None, description="Stride (None: the window).")
    padding: PairOrInt = Field(default=0, description="Padding on each side, at most half the window.")
    ceil_mode: bool = Field(default=False, description="Round the output size up, as PyTorch's ceil_mode: a "
                                                       "last, partial window counts.")
    dilation: PairOrInt = Field(default=1, description="Spacing between a max pooling's window taps: one number "
                                                       "or [height, width] (average pooling: 1).")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "dilation": 1}

    @model_validator(mode="after")
    def _check_windows(self) -> Pool:
        _at_least("window", self.window, 1)
        _at_least("stride", self.stride if self.stride is not None else self.window, 1)
        _at_least("dilation", self.dilation, 1)
        if self.mode == "avg" and _pair(self.dilation) != (1, 1):
            fail("dilation", self.dilation, "must be 1 for average pooling (PyTorch's has none)")
        for v in _pair(self.padding):
            if v < 0:
                fail("padding", v, "must be >= 0")
            if 2 * v > max(_pair(self.window)):
                fail("padding", v, "must be at most half the window")
        return self

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _require_maps("pool", input_shape, where)
        c, h, w = input_shape
        ph, pw = _pair(self.padding)
        # the span a dilated window covers
        kh, kw = (d * (k - 1) + 1 for k, d in zip(_pair(self.window), _pair(self.dilation), strict=True))
        for span, size, pad, axis in ((kh, h, ph, "height"), (kw, w, pw, "width")):
            if _pair(self.dilation) != (1, 1) and span > size + 2 * pad:
                fail(f"{where}.window", self.window, f"spans {span} positions with dilation {self.dilation}, more "
                                                     f"than the input {axis} {size} (with padding {pad})")
        sh, sw = _pair(self.stride if self.stride is not None else self.window)
        return (
            c,
            _window_out(h, kh, sh, ph, where, "window", "height", self.ceil_mode),
            _window_out(w, kw, sw, pw, where, "window", "width", self.ceil_mode),
        )

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        kh, kw = _pair(self.window)
        outputs = _elements(output_shape)
        # Pooling is memory-bound element work, not free (model.md §3; real-runs: 27 % of a LeNet step).
        forward = outputs * kh * kw
        backward = outputs if self.mode == "max" else outputs * kh * kw
        return LayerCounts(
            input_shape, output_shape, 0, outputs, 0, 0, 0,
            elem_ops_forward=forward,
            elem_ops_backprop=0 if first else backward,
            partition_units=output_shape[0],
        )


class Conv3d(_Layer):
    """A 3-D convolution over (C, D, H, W) volumes (video clips: D frames; scans: D slices), optionally
    grouped and dilated, with an optional activation fused after it."""

    may_hold_parameters: ClassVar[bool] = True

    kind: Literal["conv3d"] = Field(default="conv3d", description="The layer kind.")
    out_channels: int = Field(gt=0, description="Output feature volumes.")
    kernel: TripleOrInt = Field(description="Kernel size: one number or [depth, height, width].")
    stride: TripleOrInt = Field(default=1, description="Stride: one number or [depth, height, width].")
    padding: TripleOrInt = Field(default=0, description="Zero padding on each side: one number or [depth, height, "
                                                        "width].")
    dilation: TripleOrInt = Field(default=1, description="Spacing between kernel taps: one number or [depth, height, "
                                                         "width].")
    groups: int = Field(default=1, gt=0, description="Channel groups: each output volume sees in_channels/groups "
                                                     "input volumes (depthwise: groups = in_channels).")
    bias: bool = Field(default=True, description="Whether the layer has a bias per output volume.")
    activation: ActivationName = Field(default="none", description="Activation applied to the output.")
    weight_norm: WeightNormName = Field(default="none", description=_WEIGHT_NORM_DESCRIPTION)
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "dilation": 1, "groups": 1, "weight_norm": "none"}

    @model_validator(mode="after")
    def _check_windows(self) -> Conv3d:
        _check_convolution(self, _triple)
        _check_weight_norm(self)
        return self

    @property
    def has_weights(self) -> bool:
        return True

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _require_volumes("conv3d", input_shape, where)
        if input_shape[0] % self.groups:
            fail(f"{where}.groups", self.groups, f"must divide the input channels {input_shape[0]}")
        spans = [d * (k - 1) + 1 for k, d in zip(_triple(self.kernel), _triple(self.dilation), strict=True)]
        return (self.out_channels, *(
            _window_out(size, k, stride, pad, where, "kernel", axis)
            for size, k, stride, pad, axis in zip(input_shape[1:], spans, _triple(self.stride), _triple(self.padding),
                                                  ("depth", "height", "width"), strict=True)))

    def parameter_tensors(self, input_shape: Shape, weights: int) -> tuple[int, ...]:
        return _convolution_tensors(self, input_shape, weights)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        return _convolution_counts(self, input_shape, output_shape, first, math.prod(_triple(self.kernel)))


class ConvTranspose3d(Conv3d):
    """A transposed 3-D convolution (PyTorch's ``nn.ConvTranspose3d``, a 3-D U-Net's upsampling): each
    input value scatters its kernel into the output, ``stride`` apart; the input gradient of the 3-D
    convolution from its output's shape to its input's. ``padding`` crops the output on each side and
    ``output_padding`` adds to one side."""

    kind: Literal["conv_transpose3d"] = Field(  # type: ignore[assignment]
        default="conv_transpose3d", description="The layer kind.")
    output_padding: TripleOrInt = Field(default=0, description="Values added on one side of each output axis "
                                                               "(PyTorch's output_padding): one number or [depth, "
                                                               "height, width], below the stride or the dilation.")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "dilation": 1, "groups": 1, "output_padding": 0,
                                                "weight_norm": "none"}

    @model_validator(mode="after")
    def _check_output_padding(self) -> ConvTranspose3d:
        _check_output_padding(self, _triple)
        return self

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _require_volumes("conv_transpose3d", input_shape, where)
        if input_shape[0] % self.groups:
            fail(f"{where}.groups", self.groups, f"must divide the input channels {input_shape[0]}")
        sizes = []
        for size, k, d, s, p, extra, axis in zip(input_shape[1:], _triple(self.kernel), _triple(self.dilation),
                                                 _triple(self.stride), _triple(self.padding),
                                                 _triple(self.output_padding), ("depth", "height", "width"),
                                                 strict=True):
            out = (size - 1) * s - 2 * p + d * (k - 1) + 1 + extra
            if out < 1:
                fail(f"{where}.padding", p, f"crops {2 * p} off the output {axis} {out + 2 * p}, leaving none")
            sizes.append(out)
        return (self.out_channels, *sizes)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        return _convolution_counts(self, input_shape, output_shape, first, math.prod(_triple(self.kernel)),
                                   transposed=True)


class Pool3d(_Layer):
    """Max or average pooling of (C, D, H, W) volumes. A max pooling's window may be dilated (its taps
    ``dilation`` apart, as PyTorch's): it spans d·(k − 1) + 1 positions and still compares k_d·k_h·k_w
    values per output."""

    kind: Literal["pool3d"] = Field(default="pool3d", description="The layer kind.")
    mode: Literal["max", "avg"] = Field(default="max", description="max or avg pooling.")
    window: TripleOrInt = Field(description="Window size: one number or [depth, height, width].")
    stride: TripleOrInt | None = Field(default=None, description="Stride (None: the window).")
    padding: TripleOrInt = Field(default=0, description="Padding on each side, at most half the window.")
    ceil_mode: bool = Field(default=False, description="Round the output size up, as PyTorch's ceil_mode: a "
                                                       "last, partial window counts.")
    dilation: TripleOrInt = Field(default=1, description="Spacing between a max pooling's window taps: one number "
                                                         "or [depth, height, width] (average pooling: 1).")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "dilation": 1}

    @model_validator(mode="after")
    def _check_windows(self) -> Pool3d:
        for field, value in (("window", self.window), ("stride", self.stride if self.stride is not None
                                                          else self.window), ("dilation", self.dilation)):
            for v in _triple(value):
                if v < 1:
                    fail(field, v, "must be >= 1")
        if self.mode == "avg" and _triple(self.dilation) != (1, 1, 1):
            fail("dilation", self.dilation, "must be 1 for average pooling (PyTorch's has none)")
        for v, k in zip(_triple(self.padding), _triple(self.window), strict=True):
            if v < 0:
                fail("padding", v, "must be >= 0")
            if 2 * v > k:
                fail("padding", v, "must be at most half the window")
        return self

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _require_volumes("pool3d", input_shape, where)
        stride = _triple(self.stride if self.stride is not None else self.window)
        # the span a dilated window covers
        spans = [d * (k - 1) + 1 for k, d in zip(_triple(self.window), _triple(self.dilation), strict=True)]
        axes = ("depth", "height", "width")
        for span, size, pad, axis in zip(spans, input_shape[1:], _triple(self.padding), axes, strict=True):
            if _triple(self.dilation) != (1, 1, 1) and span > size + 2 * pad:
                fail(f"{where}.window", self.window, f"spans {span} positions with dilation {self.dilation}, more "
                                                     f"than the input {axis} {size} (with padding {pad})")
        return (input_shape[0], *(
            _window_out(size, k, st, pad, where, "window", axis, self.ceil_mode)
            for size, k, st, pad, axis in zip(input_shape[1:], spans, stride, _triple(self.padding), axes,
                                              strict=True)))

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        window = math.prod(_triple(self.window))
        outputs = _elements(output_shape)
        backward = outputs if self.mode == "max" else outputs * window
        return LayerCounts(
            input_shape, output_shape, 0, outputs, 0, 0, 0,
            elem_ops_forward=outputs * window,
            elem_ops_backprop=0 if first else backward,
            partition_units=output_shape[0],
        )


class FullyConnected(_Layer):
    """A fully connected (linear) layer, with an optional activation. On a vector or feature maps it sees
    every input value; on a sequence ``(S, D)`` it acts on each token: ``(S, D) -> (S, out_features)``."""

    may_hold_parameters: ClassVar[bool] = True

    kind: Literal["fc"] = Field(default="fc", description="The layer kind.")
    out_features: int = Field(gt=0, description="Output neurons (per token on a sequence).")
    bias: bool = Field(default=True, description="Whether the layer has a bias per neuron.")
    activation: ActivationName = Field(default="none", description="Activation applied to the output.")
    tied_to: str = Field(default="", description="The name of an earlier embedding or fc layer whose weight matrix "
                                                 "this layer shares (a language model's output head tied to its "
                                                 "token embedding): the matrix is counted once, there; this layer "
                                                 "still computes its gradient. Empty: its own matrix.")
    weight_norm: WeightNormName = Field(default="none", description=_WEIGHT_NORM_DESCRIPTION)

    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "tied_to": "", "weight_norm": "none"}

    @model_validator(mode="after")
    def _check_norm(self) -> FullyConnected:
        _check_weight_norm(self)
        return self

    @property
    def has_weights(self) -> bool:
        return True

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        if len(input_shape) == 2:
            return (input_shape[0], self.out_features)
        return (self.out_features,)

    def matrix_weights(self, input_shape: Shape) -> int:
        """Values of the weight matrix (without the bias): what a tied layer shares."""
        n_in = input_shape[1] if len(input_shape) == 2 else _elements(input_shape)
        return n_in * self.out_features

    def parameter_tensors(self, input_shape: Shape, weights: int) -> tuple[int, ...]:
        if self.tied_to:
            return (self.out_features,) if self.bias else ()
        g = weight_norm_magnitudes(self, input_shape)
        bias = self.out_features if self.bias else 0
        return (weights - bias - g, g, *((bias,) if bias else ())) if g else _with_bias(weights, bias)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        tokens, n_in = (input_shape[0], input_shape[1]) if len(input_shape) == 2 else (1, _elements(input_shape))
        macs = tokens * n_in * self.out_features  # S·N_in·N_out (model.md §3)
        act = _activation_ops(self.activation, tokens * self.out_features)
        return LayerCounts(
            input_shape, output_shape,
            weights=n_in * self.out_features + (self.out_features if self.bias else 0)
            + weight_norm_magnitudes(self, input_shape),
            activations=tokens * self.out_features,
            macs_forward=macs,
            macs_backprop=0 if first else macs,
            macs_weight_grad=macs,
            elem_ops_forward=act,
            elem_ops_backprop=act,
            partition_units=self.out_features,
        )


class _Elementwise(_Layer):
    """Layers whose cost is element operations on their output, with a shape-preserving output."""

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        return input_shape

    def _per_output(self) -> tuple[int, int]:
        return 1, 1  # one element op per output each way (model.md §3)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        fwd, bwd = self._per_output()
        return LayerCounts(
            input_shape, output_shape, self._weights(input_shape), n, 0, 0, 0,
            elem_ops_forward=fwd * n,
            elem_ops_backprop=0 if first else bwd * n,
            partition_units=_units(output_shape),
        )

    def _weights(self, input_shape: Shape) -> int:
        return 0


class Activation(_Elementwise):
    """An element-wise function of one input: an activation, or a step of a normalisation or an
    activation written out by hand (``torch.sqrt``, ``torch.rsqrt``, ``x.pow(2)``, ``torch.erf``)."""

    kind: Literal["activation"] = Field(default="activation", description="The layer kind.")
    function: FunctionName = Field(default="relu", description="The function.")
    exponent: float | None = Field(default=None, allow_inf_nan=False,
                                   description="The constant power of ``pow`` (x ** exponent); None for the "
                                               "other functions.")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "exponent": None}

    @model_validator(mode="after")
    def _exponent_of_pow(self) -> Activation:
        if (self.function == "pow") != (self.exponent is not None):
            fail("exponent", self.exponent, "a number for the function pow (x ** exponent) and nothing for the "
                                            f"others; the function is {self.function!r}")
        return self


class PReLU(_Elementwise):
    """A leaky ReLU whose negative slope is learned (``nn.PReLU``): one slope for every value, or one per
    position of the sample's first axis (a map's channels). One element op per output each way; the
    slopes' gradient is a pass of its own, as a normalisation's scale's."""

    may_hold_parameters: ClassVar[bool] = True

    kind: Literal["prelu"] = Field(default="prelu", description="The layer kind.")
    per_channel: bool = Field(default=False, description="One learned slope per position of the sample's first "
                                                         "axis (a map's channels: nn.PReLU(num_parameters=C)) "
                                                         "instead of one for every value.")

    @property
    def has_weights(self) -> bool:
        return True

    def _weights(self, input_shape: Shape) -> int:
        return input_shape[0] if self.per_channel else 1


class Dropout(_Elementwise):
    """Dropout costs nothing in the model (a mask multiply hidden in the neighbouring layers)."""

    kind: Literal["dropout"] = Field(default="dropout", description="The layer kind.")
    p: float = Field(default=0.5, ge=0.0, lt=1.0, description="Probability of dropping an element.")
    per_sample: bool = Field(default=False, description="Whether it drops a whole sample's values at once (the "
                                                        "stochastic depth of a residual branch): one mask value "
                                                        "per sample instead of one per value.")
    per_channel: bool = Field(default=False, description="Whether it drops whole channels (nn.Dropout2d: a map's, "
                                                         "a signal's, a volume's first axis): one mask value per "
                                                         "channel instead of one per value.")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "per_channel": False}

    @model_validator(mode="after")
    def _one_mask_shape(self) -> Dropout:
        if self.per_sample and self.per_channel:
            fail("per_channel", True, "a dropout of whole samples (per_sample) or of whole channels, not both")
        return self

    def _per_output(self) -> tuple[int, int]:
        return 0, 0


class LocalResponseNorm(_Elementwise):
    """LRN: ``size`` element ops per output forward (the window's sum of squares) and backward."""

    kind: Literal["lrn"] = Field(default="lrn", description="The layer kind.")
    size: int = Field(default=5, gt=0, description="Neighbouring channels in the normalisation window.")

    def _per_output(self) -> tuple[int, int]:
        return self.size, self.size


class BatchNorm(_Elementwise):
    """Batch normalisation: 2 element ops per output each way, 2·C weights (scale and shift) when
    ``affine``."""

    may_hold_parameters: ClassVar[bool] = True

    kind: Literal["batchnorm"] = Field(default="batchnorm", description="The layer kind.")
    affine: bool = Field(default=True, description="Whether it learns a scale and a shift per channel "
                                                   "(nn.BatchNorm2d's affine).")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "affine": True}

    @property
    def has_weights(self) -> bool:
        return self.affine

    def _per_output(self) -> tuple[int, int]:
        return 2, 2

    def parameter_tensors(self, input_shape: Shape, weights: int) -> tuple[int, ...]:
        return _with_bias(weights, weights // 2)  # scale, then shift

    def _weights(self, input_shape: Shape) -> int:
        return 2 * input_shape[0] if self.affine else 0


class GroupNorm(_Elementwise):
    """Group normalisation of (C, …) values (``nn.GroupNorm``: the channels in ``groups`` groups, each
    normalised over its channels and positions): 2 element ops per output each way, as batch norm, and a
    scale and a shift per channel when ``affine``. Unlike batch norm it does not depend on the
    mini-batch (diffusion U-Nets, PoolFormer, detection heads)."""

    may_hold_parameters: ClassVar[bool] = True

    kind: Literal["group_norm"] = Field(default="group_norm", description="The layer kind.")
    groups: int = Field(gt=0, description="Groups the channels are split into (1: over the whole sample, "
                                          "channels: per channel); must divide the channels.")
    affine: bool = Field(default=True, description="Whether it learns a scale and a shift per channel.")

    @property
    def has_weights(self) -> bool:
        return self.affine

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        if input_shape[0] % self.groups:
            fail(f"{where}.groups", self.groups, f"must divide the channels ({input_shape[0]})")
        return input_shape

    def _per_output(self) -> tuple[int, int]:
        return 2, 2

    def parameter_tensors(self, input_shape: Shape, weights: int) -> tuple[int, ...]:
        return _with_bias(weights, weights // 2)  # scale, then shift

    def _weights(self, input_shape: Shape) -> int:
        return 2 * input_shape[0] if self.affine else 0


class Flatten(_Elementwise):
    """Feature maps to one vector (no work)."""

    kind: Literal["flatten"] = Field(default="flatten", description="The layer kind.")

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        return (_elements(input_shape),)

    def _per_output(self) -> tuple[int, int]:
        return 0, 0


class Softmax(_Elementwise):
    """Softmax over the vector (one element operation per output each way)."""

    kind: Literal["softmax"] = Field(default="softmax", description="The layer kind.")


def _require_sequence(layer: str, shape: Shape, where: str) -> None:
    if len(shape) != 2:
        fail(f"{where}.kind", layer, f"needs an (S, D) sequence input, got shape {list(shape)}")


class AdaptivePool(_Layer):
    """Adaptive (global when ``output_size`` is 1) average or max pooling of feature maps: PyTorch's
    windows ``[floor(i·H/h), ceil((i+1)·H/h))``. One element op per input value forward; backward one
    per input value (avg) or per output (max), as for pool."""

    kind: Literal["adaptive_pool"] = Field(default="adaptive_pool", description="The layer kind.")
    mode: Literal["avg", "max"] = Field(default="avg", description="avg or max pooling.")
    output_size: PairOrInt = Field(default=1, description="Output height and width: one number or [height, width].")

    @model_validator(mode="after")
    def _check(self) -> AdaptivePool:
        _at_least("output_size", self.output_size, 1)
        return self

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _require_maps("adaptive_pool", input_shape, where)
        oh, ow = _pair(self.output_size)
        if oh > input_shape[1] or ow > input_shape[2]:
            fail(f"{where}.output_size", [oh, ow], f"is larger than the input {list(input_shape[1:])}")
        return (input_shape[0], oh, ow)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n_in, n_out = _elements(input_shape), _elements(output_shape)
        backward = n_out if self.mode == "max" else n_in  # max routes each output's error to one input
        return LayerCounts(input_shape, output_shape, 0, n_out, 0, 0, 0,
                           elem_ops_forward=n_in, elem_ops_backprop=0 if first else backward,
                           partition_units=output_shape[0])


class Pad(_Layer):
    """Values added around feature maps (``F.pad`` of the last two axes: TensorFlow's "same" padding before a
    convolution, which may be uneven; a reflection of the border before a convolution). Forward one
    element op per output (the copy into the larger map); backward one per input for a constant (the
    error's inner part), one per output for the other modes (the border's errors added in;
    reconstructed). No weights."""

    kind: Literal["pad"] = Field(default="pad", description="The layer kind.")
    padding: tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)],
                   Annotated[int, Field(ge=0)]] = Field(description="Values added [left, right, top, bottom], as "
                                                                    "F.pad takes them.")
    mode: Literal["constant", "reflect", "replicate", "circular"] = Field(
        default="constant", description="What is added: a constant (value), the border mirrored without its edge "
                                        "(reflect), the edge repeated (replicate), or the opposite border "
                                        "(circular), as F.pad's modes.")
    value: float = Field(default=0.0, allow_inf_nan=False, description="The constant mode's value.")

    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "mode": "constant", "value": 0.0}

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _require_maps("pad", input_shape, where)
        left, right, top, bottom = self.padding
        if self.mode != "constant":
            _, h, w = input_shape
            limit = 1 if self.mode == "reflect" else 0  # reflect mirrors without the edge: fewer than the size
            if max(left, right) > w - limit or max(top, bottom) > h - limit:
                fail(f"{where}.padding", list(self.padding), f"is more than {self.mode} padding of a {h}x{w} map "
                                                             f"allows ({'less than' if limit else 'at most'} its "
                                                             "size on each side)")
        if self.mode != "constant" and self.value:
            fail(f"{where}.value", self.value, f"is for the constant mode; mode is {self.mode!r}")
        return (input_shape[0], input_shape[1] + top + bottom, input_shape[2] + left + right)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        back = _elements(input_shape) if self.mode == "constant" else _elements(output_shape)
        return LayerCounts(input_shape, output_shape, 0, _elements(output_shape), 0, 0, 0,
                           elem_ops_forward=_elements(output_shape),
                           elem_ops_backprop=0 if first else back, partition_units=output_shape[0])


class Upsample(_Layer):
    """Feature maps (or volumes) enlarged to ``size`` (``nn.Upsample``, ``F.interpolate``: a U-Net's
    decoder, a feature pyramid). ``nearest`` copies each output from one input value: one element op per
    output each way (backward adds each output's error into its input); ``bilinear`` blends four: four
    each way, ``bicubic`` sixteen, ``trilinear`` (volumes) eight (reconstructed). No weights; backward
    keeps nothing but the sizes."""

    kind: Literal["upsample"] = Field(default="upsample", description="The layer kind.")
    size: PairOrInt | tuple[int, int, int] = Field(
        description="Output height and width: one number or [height, width]; of (C, D, H, W) volumes one number "
                    "or [depth, height, width].")
    mode: Literal["nearest", "bilinear", "bicubic", "trilinear"] = Field(
        default="nearest", description="nearest, bilinear or bicubic (maps), nearest or trilinear (volumes).")

    @model_validator(mode="after")
    def _check(self) -> Upsample:
        for v in (self.size,) if isinstance(self.size, int) else self.size:
            if v < 1:
                fail("size", v, "must be >= 1")
        return self

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        if len(input_shape) == 4:
            if self.mode not in ("nearest", "trilinear"):
                fail(f"{where}.mode", self.mode, "is not a mode for (C, D, H, W) volumes; expected nearest or "
                                                 "trilinear")
            if not isinstance(self.size, int) and len(self.size) != 3:
                fail(f"{where}.size", list(self.size), "must be one number or [depth, height, width] for volumes")
            return (input_shape[0], *_triple(self.size))  # type: ignore[arg-type]
        _require_maps("upsample", input_shape, where)
        if self.mode == "trilinear":
            fail(f"{where}.mode", self.mode, "is for (C, D, H, W) volumes; expected nearest, bilinear or bicubic")
        if not isinstance(self.size, int) and len(self.size) != 2:
            fail(f"{where}.size", list(self.size), "must be one number or [height, width] for maps")
        oh, ow = _pair(self.size)  # type: ignore[arg-type]
        return (input_shape[0], oh, ow)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n_out = _elements(output_shape)
        per = {"nearest": 1, "bilinear": 4, "bicubic": 16, "trilinear": 8}[self.mode]
        return LayerCounts(input_shape, output_shape, 0, n_out, 0, 0, 0, elem_ops_forward=per * n_out,
                           elem_ops_backprop=0 if first else per * n_out, partition_units=output_shape[0])


class Add(_Layer):
    """Element-wise sum of two or more inputs of one shape (a residual connection), or broadcast over each
    other's positions (a dueling network's value (1,) plus its advantages (A,), GCNet's (C, 1, 1) context
    added at every position): the output takes the larger size of every axis. Forward: one element op
    per output per extra input; backward: the gradient is passed to every input of the output's shape
    unchanged (none), and summed over the spread positions for a broadcast one (one per output,
    reconstructed)."""

    kind: Literal["add"] = Field(default="add", description="The layer kind.")
    activation: ActivationName = Field(default="none", description="Activation applied to the sum.")
    arity: ClassVar[tuple[int, int | None]] = (2, None)

    def graph_output_shape(self, input_shapes: tuple[Shape, ...], where: str) -> Shape:
        out = input_shapes[0]
        for shape in input_shapes[1:]:
            if len(shape) != len(out) or any(x != y and 1 not in (x, y) for x, y in zip(shape, out, strict=True)):
                fail(f"{where}.inputs", [list(s) for s in input_shapes], "shapes of one length whose sizes are "
                                                                          "equal or 1 on every axis")
            out = tuple(max(x, y) for x, y in zip(out, shape, strict=True))
        return out

    def graph_counts(self, input_shapes: tuple[Shape, ...], output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        act = _activation_ops(self.activation, n)
        spread = sum(1 for s in input_shapes if tuple(s) != tuple(output_shape))
        return LayerCounts(input_shapes[0], output_shape, 0, n, 0, 0, 0,
                           elem_ops_forward=(len(input_shapes) - 1) * n + act, elem_ops_backprop=act + spread * n,
                           partition_units=_units(output_shape))


class Multiply(_Layer):
    """Element-wise product of two inputs (a gate): of one shape (a gated unit, SwiGLU's product), or
    broadcast over each other's positions (a squeeze-and-excitation gate of shape (C, 1, 1) on a
    (C, H, W) map, a (1, D) gate on an (S, D) sequence, FocalNet's (C, 1, 1) by (1, H, W)); with
    ``divide`` the first divided by the second (a normalisation by a sum). The output takes the larger
    size of every axis. Forward: one element op per output; backward: one per output for each input's
    gradient (a broadcast one's summed over the positions it was spread over), a divisor's two
    (reconstructed)."""

    kind: Literal["mul"] = Field(default="mul", description="The layer kind.")
    activation: ActivationName = Field(default="none", description="Activation applied to the product.")
    divide: bool = Field(default=False, description="Whether the first input is divided by the second instead.")
    arity: ClassVar[tuple[int, int | None]] = (2, 2)
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "divide": False}

    def graph_output_shape(self, input_shapes: tuple[Shape, ...], where: str) -> Shape:
        a, b = input_shapes
        if len(a) != len(b) or any(x != y and 1 not in (x, y) for x, y in zip(a, b, strict=True)):
            fail(f"{where}.inputs", [list(a), list(b)], "two shapes of one length whose sizes are equal or 1 on "
                                                        "every axis (a gate)")
        return tuple(max(x, y) for x, y in zip(a, b, strict=True))

    def graph_counts(self, input_shapes: tuple[Shape, ...], output_shape: Shape, first: bool) -> LayerCounts:
        return self.graph_counts_needing(input_shapes, output_shape, (True, True))

    def graph_counts_needing(self, input_shapes: tuple[Shape, ...], output_shape: Shape,
                             needs: tuple[bool, ...]) -> LayerCounts:
        """Backward: each input's gradient where it needs one and the other is computed (a constant's,
        ``zeros`` standing for a fixed table, needs none); without either, as for any other value."""
        n = _elements(output_shape)
        act = _activation_ops(self.activation, n)
        per_input = (1, 2 if self.divide else 1)
        grads = sum(k for k, need in zip(per_input, needs, strict=True) if need) if any(needs) else sum(per_input)
        return LayerCounts(input_shapes[0], output_shape, 0, n, 0, 0, 0,
                           elem_ops_forward=n + act, elem_ops_backprop=grads * n + act,
                           partition_units=_units(output_shape))


class Scale(_Layer):
    """A learned factor per channel multiplying its input (the layer scale of ConvNeXt and CaiT: a
    ``(C, 1, 1)`` parameter times a ``(C, H, W)`` map, a ``(D,)`` one times an ``(S, D)`` sequence). One
    weight per position along ``axis``. Forward one element op per output; backward one per output for
    the factors' gradient (summed over the other positions) and one for the input's gradient. With
    ``learned`` false it is a constant factor (``x * math.sqrt(d)``, ``x / 2``): no weights, and backward
    only the input's gradient; ``shared``: one learned factor for every value (1 weight)."""

    may_hold_parameters: ClassVar[bool] = True

    kind: Literal["scale"] = Field(default="scale", description="The layer kind.")
    axis: int = Field(default=0, ge=-MAX_VIEW_AXES, le=MAX_VIEW_AXES - 1,
                      description="The per-sample axis the factors run along (0: the channels of maps; -1: the "
                                  "last axis, a sequence's width or channels-last maps).")
    learned: bool = Field(default=True, description="Whether the factors are learned weights (a layer scale); "
                                                    "false: one constant factor for every value.")
    shared: bool = Field(default=False, description="One learned factor for every value (a learned temperature, "
                                                    "ReZero's α: 1 weight) instead of one per position of axis; "
                                                    "no effect unless learned.")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "shared": False}

    @property
    def has_weights(self) -> bool:
        return self.learned

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _check_axis(self.axis, input_shape, where)
        return input_shape

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        if not self.learned:
            return LayerCounts(input_shape, output_shape, 0, n, 0, 0, 0, elem_ops_forward=n,
                               elem_ops_backprop=0 if first else n, partition_units=_units(output_shape))
        return LayerCounts(input_shape, output_shape, 1 if self.shared else input_shape[self.axis], n, 0, 0, 0,
                           elem_ops_forward=n, elem_ops_backprop=n if first else 2 * n,
                           partition_units=_units(output_shape))


class Bias(_Layer):
    """A tensor that is no layer's output added to its input, broadcast over the input's leading axes: a
    relative-position bias gathered from a learned table and added to attention scores (Swin, BEiT), an
    attention mask of constants. ``weights`` is how many learned values the added tensor is computed
    from (the table; 0 for constants). Forward one element op per output; backward none for the input
    (its gradient passes unchanged) and, when learned, one per output for the table's gradient (summed
    into it)."""

    may_hold_parameters: ClassVar[bool] = True

    kind: Literal["bias"] = Field(default="bias", description="The layer kind.")
    weights: int = Field(default=0, ge=0, description="Learned values the added tensor is computed from (a "
                                                      "relative-position table); 0: a tensor of constants "
                                                      "(an attention mask).")

    @property
    def has_weights(self) -> bool:
        return self.weights > 0

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        return input_shape

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        return LayerCounts(input_shape, output_shape, self.weights, n, 0, 0, 0, elem_ops_forward=n,
                           elem_ops_backprop=n if self.weights else 0, partition_units=_units(output_shape))


class Concat(_Layer):
    """Two or more inputs joined along ``axis`` (0: channels of maps, tokens of sequences; -1: the last
    axis). Forward copies every value once (one element op per output); backward slices (none)."""

    kind: Literal["concat"] = Field(default="concat", description="The layer kind.")
    axis: int = Field(default=0, ge=-MAX_VIEW_AXES, le=MAX_VIEW_AXES - 1,
                      description="The per-sample axis to join along (0: channels or tokens; -1: the last).")
    arity: ClassVar[tuple[int, int | None]] = (2, None)

    def graph_output_shape(self, input_shapes: tuple[Shape, ...], where: str) -> Shape:
        first = input_shapes[0]
        if not -len(first) <= self.axis < len(first):
            fail(f"{where}.axis", self.axis, f"is not an axis of the input shape {list(first)}")
        axis = self.axis % len(first)
        out = list(first)
        out[axis] = sum(int(shape[axis]) for shape in input_shapes)
        return tuple(out)

    def graph_counts(self, input_shapes: tuple[Shape, ...], output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        return LayerCounts(input_shapes[0], output_shape, 0, n, 0, 0, 0, elem_ops_forward=n, elem_ops_backprop=0,
                           partition_units=_units(output_shape))


class LayerNorm(_Layer):
    """Layer normalisation over the last axis (a sequence's width or a vector), with a scale and shift
    per feature: 2·D weights (D without the shift); 4 element ops per output forward (mean, variance,
    normalise, affine) and 4 backward."""

    may_hold_parameters: ClassVar[bool] = True

    kind: Literal["layer_norm"] = Field(default="layer_norm", description="The layer kind.")
    affine: bool = Field(default=True, description="Whether it learns a scale and shift per feature.")
    bias: bool = Field(default=True, description="Whether the learned part has a shift as well as a scale "
                                                 "(nn.LayerNorm(bias=False) has none); no effect without affine.")

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        return input_shape

    def parameter_tensors(self, input_shape: Shape, weights: int) -> tuple[int, ...]:
        return _with_bias(weights, weights // 2 if self.bias else 0)  # scale, then shift

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        learned = (2 if self.bias else 1) * input_shape[-1] if self.affine else 0
        return LayerCounts(input_shape, output_shape, learned, n, 0, 0, 0,
                           elem_ops_forward=4 * n, elem_ops_backprop=4 * n, partition_units=_units(output_shape))


class Embedding(_Layer):
    """A lookup table: token ids ``(S,)`` to vectors ``(S, D)``. ``vocabulary``·D weights; one element op
    per output forward (the gather) and backward (the scatter-add into the table's gradient)."""

    may_hold_parameters: ClassVar[bool] = True

    kind: Literal["embedding"] = Field(default="embedding", description="The layer kind.")
    vocabulary: int = Field(gt=0, description="Rows of the table (distinct token ids).")
    dim: int = Field(gt=0, description="Width D of each vector.")
    tied_to: str = Field(default="", description="The name of an earlier fc or embedding layer whose weight matrix "
                                                 "this table is (tied embeddings): counted once, there. Empty: "
                                                 "its own table.")

    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "tied_to": ""}

    @property
    def has_weights(self) -> bool:
        return True

    def matrix_weights(self, input_shape: Shape) -> int:
        """Values of the table: what a tied layer shares."""
        return self.vocabulary * self.dim

    def parameter_tensors(self, input_shape: Shape, weights: int) -> tuple[int, ...]:
        return () if self.tied_to else (weights,)

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        if len(input_shape) != 1:
            fail(f"{where}.kind", "embedding", f"needs a (S,) input of token ids, got shape {list(input_shape)}")
        return (input_shape[0], self.dim)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        return LayerCounts(input_shape, output_shape, self.vocabulary * self.dim, n, 0, 0, 0,
                           elem_ops_forward=n, elem_ops_backprop=n, partition_units=self.dim)


class PositionEmbedding(_Layer):
    """Adds a learned table to a sequence ``(S, D)``: ``rows``·D weights (the maximum positions, or 2 for
    BERT's token types, whose one row is added to every token). One element op per output each way."""

    may_hold_parameters: ClassVar[bool] = True

    kind: Literal["position_embedding"] = Field(default="position_embedding", description="The layer kind.")
    rows: int = Field(gt=0, description="Rows of the learned table (e.g. the maximum sequence length).")

    @property
    def has_weights(self) -> bool:
        return True

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _require_sequence("position_embedding", input_shape, where)
        return input_shape

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        return LayerCounts(input_shape, output_shape, self.rows * input_shape[1], n, 0, 0, 0,
                           elem_ops_forward=n, elem_ops_backprop=n, partition_units=input_shape[1])


class ClassToken(_Layer):
    """Prepends ``tokens`` learned vectors to a sequence (ViT's class token): ``(S, D) -> (S + t, D)``,
    t·D weights; one element op per output forward (the copy)."""

    may_hold_parameters: ClassVar[bool] = True

    kind: Literal["class_token"] = Field(default="class_token", description="The layer kind.")
    tokens: int = Field(default=1, gt=0, description="Learned tokens put in front of the sequence.")

    @property
    def has_weights(self) -> bool:
        return True

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _require_sequence("class_token", input_shape, where)
        return (input_shape[0] + self.tokens, input_shape[1])

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        return LayerCounts(input_shape, output_shape, self.tokens * input_shape[1], n, 0, 0, 0,
                           elem_ops_forward=n, elem_ops_backprop=0, partition_units=input_shape[1])


class SelectToken(_Layer):
    """One token of a sequence as a vector: ``(S, D) -> (D,)`` (ViT's and BERT's class token). No work."""

    kind: Literal["select_token"] = Field(default="select_token", description="The layer kind.")
    index: int = Field(default=0, description="Which token (negative counts from the end).")

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _require_sequence("select_token", input_shape, where)
        if not -input_shape[0] <= self.index < input_shape[0]:
            fail(f"{where}.index", self.index, f"is not a token of the {input_shape[0]}-token sequence")
        return (input_shape[1],)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        return LayerCounts(input_shape, output_shape, 0, _elements(output_shape), 0, 0, 0, 0, 0,
                           partition_units=output_shape[0])


class Reshape(_Layer):
    """The same values in another per-sample shape (a view: no work)."""

    kind: Literal["reshape"] = Field(default="reshape", description="The layer kind.")
    shape: tuple[Annotated[int, Field(gt=0)], ...] = Field(min_length=1, max_length=MAX_VIEW_AXES,
                                                           description="The per-sample output shape (up to 6 axes: "
                                                                       "a view between layers, such as a "
                                                                       "channel shuffle's groups or a map cut "
                                                                       "into windows).")

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        if _elements(self.shape) != _elements(input_shape):
            fail(f"{where}.shape", list(self.shape), f"has {_elements(self.shape)} values; the input "
                 f"{list(input_shape)} has {_elements(input_shape)}")
        return tuple(self.shape)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        return LayerCounts(input_shape, output_shape, 0, _elements(output_shape), 0, 0, 0, 0, 0,
                           partition_units=_units(output_shape))


class StopGradient(_Layer):
    """Its input's values, through which no gradient flows back (``x.detach()``): a straight-through
    estimator's ``x + (q - x).detach()``, SimSiam's and BYOL's stopped branch, a target computed from
    the network's own output. A view: no work forward or backward."""

    kind: Literal["stop_gradient"] = Field(default="stop_gradient", description="The layer kind.")
    blocks_gradient: ClassVar[bool] = True

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        return tuple(input_shape)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        return LayerCounts(input_shape, output_shape, 0, _elements(output_shape), 0, 0, 0, 0, 0,
                           partition_units=_units(output_shape))


class Zeros(_Layer):
    """A tensor of zeros of ``shape`` per sample (a recurrent cell's initial state, ``torch.zeros(B, H)``
    or ``nn.LSTMCell(x)`` without one): its input gives only the batch. Forward one element op per output
    (the fill); no gradient flows back through it."""

    kind: Literal["zeros"] = Field(default="zeros", description="The layer kind.")
    shape: tuple[Annotated[int, Field(gt=0)], ...] = Field(min_length=1, max_length=MAX_VIEW_AXES,
                                                           description="The per-sample shape of the zeros.")
    blocks_gradient: ClassVar[bool] = True

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        return tuple(self.shape)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        return LayerCounts(input_shape, output_shape, 0, n, 0, 0, 0, elem_ops_forward=n, elem_ops_backprop=0,
                           partition_units=_units(output_shape))


def _broadcast(input_shapes: tuple[Shape, ...], where: str, what: str) -> Shape:
    """The shape values of ``input_shapes`` broadcast to: one length, each size equal or 1."""
    if len({len(s) for s in input_shapes}) != 1 or any(
            len({d for d in sizes if d != 1}) > 1 for sizes in zip(*input_shapes, strict=True)):
        fail(f"{where}.inputs", [list(s) for s in input_shapes], f"shapes of one length whose sizes are equal or 1 on "
                                                                 f"every axis ({what})")
    return tuple(max(sizes) for sizes in zip(*input_shapes, strict=True))


#: The comparisons a ``compare`` layer makes, by their PyTorch names.
COMPARISONS = ("gt", "ge", "lt", "le", "eq", "ne")


class Compare(_Layer):
    """A mask of where its input is greater than, at least, less than, at most, equal to or other than
    ``value`` (``x > 0``), or than a second input (``a < b``, broadcast): values that are true or false
    (``torch.where``'s condition, ``x * (x > 0)``). Forward one element op per output; no gradient flows
    back through it (a comparison has none)."""

    kind: Literal["compare"] = Field(default="compare", description="The layer kind.")
    op: Literal["gt", "ge", "lt", "le", "eq", "ne"] = Field(default="gt", description="The comparison: greater "
                                                                                       "(gt), at least (ge), less "
                                                                                       "(lt), at most (le), equal "
                                                                                       "(eq), other (ne).")
    value: float = Field(default=0.0, allow_inf_nan=False, description="The number a single input is compared "
                                                                       "with (unused with two inputs).")
    arity: ClassVar[tuple[int, int | None]] = (1, 2)
    blocks_gradient: ClassVar[bool] = True
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "value": 0.0}

    def graph_output_shape(self, input_shapes: tuple[Shape, ...], where: str) -> Shape:
        return _broadcast(input_shapes, where, "a comparison")

    def graph_counts(self, input_shapes: tuple[Shape, ...], output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        return LayerCounts(input_shapes[0], output_shape, 0, n, 0, 0, 0, elem_ops_forward=n, elem_ops_backprop=0,
                           partition_units=_units(output_shape))


class Where(_Layer):
    """Values chosen by a mask (``torch.where(mask, a, b)``, ``x.masked_fill(mask, v)`` of a mask computed
    from data): the first input is the mask, then the two branches (layer outputs, broadcast over each
    other), or one branch and the number ``value`` (in the first branch's place when ``value_first``).
    Forward one element op per output; backward one per output for each branch that is a layer output
    (its gradient where the mask chose it, zeros elsewhere). The mask it keeps for backward (one byte
    per value in PyTorch) is not counted."""

    kind: Literal["where"] = Field(default="where", description="The layer kind.")
    value: float = Field(default=0.0, allow_inf_nan=False,
                         description="The number in the branch that is no layer output (two inputs); an "
                                     "importer writes a fill of -inf or inf as -1e30 or 1e30 (the same cost).")
    value_first: bool = Field(default=False, description="Whether the number is the branch taken where the mask "
                                                         "is true (torch.where(mask, value, x)).")
    arity: ClassVar[tuple[int, int | None]] = (2, 3)
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "value": 0.0, "value_first": False}

    def graph_output_shape(self, input_shapes: tuple[Shape, ...], where: str) -> Shape:
        return _broadcast(input_shapes, where, "a mask and its branches")

    def graph_counts(self, input_shapes: tuple[Shape, ...], output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        branches = len(input_shapes) - 1
        return LayerCounts(input_shapes[-1], output_shape, 0, n, 0, 0, 0, elem_ops_forward=n,
                           elem_ops_backprop=0 if first else branches * n, partition_units=_units(output_shape))


class MaxUnpool(_Layer):
    """The inverse of a max pooling (``nn.MaxUnpool2d``: SegNet's decoder): each value written back at the
    position its window's maximum came from, zeros elsewhere, to (C, H_out, W_out) with H_out =
    (H − 1)·stride + window (or ``size``). No weights. Forward one element op per output (the zeros) and
    one per input (the scatter); backward one per input (the gather). The positions it reads (integers
    from the pooling) are not counted as kept values."""

    kind: Literal["max_unpool"] = Field(default="max_unpool", description="The layer kind.")
    window: PairOrInt = Field(description="The pooling's window: one number or [height, width].")
    stride: PairOrInt | None = Field(default=None, description="The pooling's stride (None: the window).")
    size: PairOrInt | None = Field(default=None, description="Output height and width (None: (H − 1)·stride + "
                                                             "window).")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "stride": None, "size": None}

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _require_maps("max_unpool", input_shape, where)
        (kh, kw), (sh, sw) = _pair(self.window), _pair(self.stride if self.stride is not None else self.window)
        if min(kh, kw, sh, sw) < 1:
            fail(f"{where}.window", self.window, "the window and stride must be >= 1")
        smallest = ((input_shape[1] - 1) * sh + kh, (input_shape[2] - 1) * sw + kw)
        if self.size is None:
            return (input_shape[0], *smallest)
        size = _pair(self.size)
        if any(not low - s <= got <= low + s for got, low, s in zip(size, smallest, (sh, sw), strict=True)):
            fail(f"{where}.size", list(size), f"must lie within a stride of {list(smallest)}, the size the "
                                              "pooled maps come from")
        return (input_shape[0], *size)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n_in, n_out = _elements(input_shape), _elements(output_shape)
        return LayerCounts(input_shape, output_shape, 0, n_out, 0, 0, 0, elem_ops_forward=n_out + n_in,
                           elem_ops_backprop=0 if first else n_in, partition_units=output_shape[0])


class CumSum(_Layer):
    """Running sums along ``axis`` of one sample (``torch.cumsum``: a linear attention's causal sums of keys
    times values, positions counted from a mask), or running products (``product``: ``torch.cumprod``, a
    stick-breaking or survival probability). Same shape. No weights. Forward one element op per output;
    backward one per output for sums (the error's running sums taken backwards), six for products
    (reconstructed from ATen's cumprod backward for inputs without zeros: a test for zeros, the error
    times the output, its running sums taken backwards, two flips, a division by the input; its
    backward reads the input and the output)."""

    kind: Literal["cumsum"] = Field(default="cumsum", description="The layer kind.")
    axis: int = Field(default=-1, ge=-MAX_VIEW_AXES, le=MAX_VIEW_AXES - 1,
                      description="The per-sample axis the sums run along.")
    product: bool = Field(default=False, description="Running products (torch.cumprod) rather than sums.")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "axis": -1, "product": False}

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _check_axis(self.axis, input_shape, where)
        return input_shape

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        backward = CUMPROD_BACKWARD_OPS * n if self.product else n
        return LayerCounts(input_shape, output_shape, 0, n, 0, 0, 0, elem_ops_forward=n,
                           elem_ops_backprop=0 if first else backward, partition_units=_units(output_shape))


#: Element operations per output of a running product's backward (:class:`CumSum`, reconstructed).
CUMPROD_BACKWARD_OPS = 6


class Repeat(_Layer):
    """Copies of one sample's values along ``axis``: the whole axis ``times`` times over, one copy after
    another (``x.repeat``, ``torch.tile``; ``x.expand`` of an axis of one value, which a later layer reads
    as if copied), or each position ``times`` times in turn (``interleave``: ``x.repeat_interleave``).
    No weights. Forward one element op per output (the copy); backward one per output (each copy's error
    added back into its source). Nothing kept."""

    kind: Literal["repeat"] = Field(default="repeat", description="The layer kind.")
    axis: int = Field(default=0, ge=-MAX_VIEW_AXES, le=MAX_VIEW_AXES - 1,
                      description="The per-sample axis the values are repeated along.")
    times: int = Field(ge=1, description="How many copies of each value the output holds along the axis.")
    interleave: bool = Field(default=False, description="Each position's copies side by side "
                                                        "(repeat_interleave); false: copies of the whole axis in "
                                                        "turn (repeat, tile, expand).")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "axis": 0, "interleave": False}

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _check_axis(self.axis, input_shape, where)
        out = list(input_shape)
        out[self.axis] *= self.times
        return tuple(out)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        return LayerCounts(input_shape, output_shape, 0, n, 0, 0, 0, elem_ops_forward=n,
                           elem_ops_backprop=0 if first else n, partition_units=_units(output_shape))


class Windows(_Layer):
    """Windows of ``size`` positions every ``step`` positions along ``axis`` of one sample, the position
    within the window as a new last axis (``x.unfold(d, size, step)``: a signal cut into overlapping
    frames, HaloNet's overlapping blocks). Windows side by side (``step == size``) import as views
    instead. No weights. Forward one element op per output (PyTorch's view is read by the next layer as
    if copied); backward one per output (each window's error added back at its positions). Nothing kept."""

    kind: Literal["windows"] = Field(default="windows", description="The layer kind.")
    axis: int = Field(default=-1, ge=-MAX_VIEW_AXES, le=MAX_VIEW_AXES - 1,
                      description="The per-sample axis the windows slide along.")
    size: int = Field(gt=0, description="Positions per window.")
    step: int = Field(gt=0, description="Positions from one window's start to the next's.")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "axis": -1}

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _check_axis(self.axis, input_shape, where)
        if len(input_shape) >= MAX_VIEW_AXES:
            fail(f"{where}.kind", self.kind, f"adds an axis to {list(input_shape)}; values have at most "
                                             f"{MAX_VIEW_AXES} axes per sample")
        length = input_shape[self.axis]
        if self.size > length:
            fail(f"{where}.size", self.size, f"must be at most the axis's size {length}")
        out = list(input_shape)
        out[self.axis] = (length - self.size) // self.step + 1
        return (*out, self.size)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        return LayerCounts(input_shape, output_shape, 0, n, 0, 0, 0, elem_ops_forward=n,
                           elem_ops_backprop=0 if first else n, partition_units=_units(output_shape))


Positions = tuple[Annotated[int, Field(ge=0)], ...]


def _check_positions(index: Positions, size: int, where: str, what: str) -> None:
    """A one-line error unless every position of ``index`` lies on an axis of ``size`` positions."""
    if max(index) >= size:
        fail(f"{where}.index", max(index), f"must be below the size {size} of the axis it {what}")


class Gather(_Layer):
    """The positions ``index`` of ``axis`` of one sample, in that order, repeats allowed
    (``x.index_select(d, idx)``, ``x[:, idx]`` of constant positions: a graph's edges' source nodes). No
    weights. Forward one element op per output (the copy); backward one per output (each error added
    back at its position) and one per input (the input's error zeroed first). Nothing kept: the
    positions are constants."""

    kind: Literal["gather"] = Field(default="gather", description="The layer kind.")
    axis: int = Field(default=-1, ge=-MAX_VIEW_AXES, le=MAX_VIEW_AXES - 1,
                      description="The per-sample axis the positions are taken along.")
    index: Positions = Field(min_length=1, description="The positions taken, in order (repeats allowed), each "
                                                       "below the axis's size.")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "axis": -1}

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _check_axis(self.axis, input_shape, where)
        _check_positions(self.index, input_shape[self.axis], where, "takes positions of")
        out = list(input_shape)
        out[self.axis] = len(self.index)
        return tuple(out)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n_in, n_out = _elements(input_shape), _elements(output_shape)
        return LayerCounts(input_shape, output_shape, 0, n_out, 0, 0, 0, elem_ops_forward=n_out,
                           elem_ops_backprop=0 if first else n_out + n_in, partition_units=_units(output_shape))


#: Element ops of a ``scatter_add`` layer per value of its second input and per output, forward and
#: backward: (value forward, output forward, value backward, output backward), by whether PyTorch's kernel
#: reads an index per value (``scatter_add``, ``scatter_reduce``) or one per slice (``index_add``,
#: ``index_reduce``), and by reduction. A sum by slices is the reconstruction the other entries are
#: measured against: forward the first input copied and each value added, backward each value's error
#: gathered. The others are that sum's ops times what the forms cost beside ``index_add`` on a CPU
#: (``benchmarks/bench_scatter.py``: one thread, two graphs, 8 edges per node and one per 2 nodes, the
#: backward's per-value multiple the geometric mean of the two). Forward they hold within 35 % at both
#: graphs; backward, per-value kernels and products cost about twice as much per value on the denser graph
#: as on the sparser, so there the model gives 0.45 to 1.75 times the measured multiple.
SCATTER_OPS: dict[tuple[bool, str], tuple[int, int, int, int]] = {
    (False, "sum"): (1, 1, 1, 0), (False, "mean"): (3, 5, 5, 0), (False, "amax"): (1, 1, 6, 0),
    (False, "amin"): (1, 1, 6, 0), (False, "prod"): (1, 1, 17, 0),
    (True, "sum"): (4, 2, 4, 0), (True, "mean"): (10, 6, 14, 0), (True, "amax"): (9, 4, 17, 0),
    (True, "amin"): (9, 4, 17, 0), (True, "prod"): (4, 2, 37, 0)}

#: What leaving the first input out of the reduction (``include_self=False``) adds per value (forward,
#: backward), by the same kernels (measured as :data:`SCATTER_OPS`): the start written at the positions
#: first, and, per value, a backward that masks the positions the values reached.
SCATTER_WITHOUT_SELF_OPS: dict[bool, tuple[int, int]] = {False: (1, 1), True: (9, 6)}


def scatter_ops(n_out: int, n_values: int, reduce: str, include_self: bool, per_value: bool) -> tuple[int, int]:
    """Element ops (forward, backward) of a ``scatter_add`` layer of ``n_out`` outputs and ``n_values``
    values (:data:`SCATTER_OPS`, :data:`SCATTER_WITHOUT_SELF_OPS`)."""
    value_fwd, out_fwd, value_bwd, out_bwd = SCATTER_OPS[(per_value, reduce)]
    extra_fwd, extra_bwd = (0, 0) if include_self else SCATTER_WITHOUT_SELF_OPS[per_value]
    return (n_out * out_fwd + n_values * (value_fwd + extra_fwd),
            n_out * out_bwd + n_values * (value_bwd + extra_bwd))


class ScatterAdd(_Layer):
    """The second input's values added into the first's at the positions ``index`` of ``axis``, one
    position per value of the second input along that axis (``base.index_add(d, idx, src)``: a graph's
    messages summed at their target nodes; ``torch.zeros_like(x).index_add_(...)``), or reduced there by
    their mean, maximum, minimum or product (``reduce``: ``index_reduce``, ``scatter_reduce``). Both inputs
    have the same shape but along ``axis``. The output has the first input's shape. No weights. A sum by
    slices: forward one element op per output (the first input copied) and one per value of the second
    (its add); backward one per value of the second (its error gathered at its positions); the first
    input's error is the output's. Other reductions and PyTorch's per-value scatter kernels
    (``index_per_value``) cost the multiples of that :data:`SCATTER_OPS` gives (measured); leaving the
    first input's values out (``include_self: false``) adds :data:`SCATTER_WITHOUT_SELF_OPS`. Nothing
    kept."""

    kind: Literal["scatter_add"] = Field(default="scatter_add", description="The layer kind.")
    axis: int = Field(default=-1, ge=-MAX_VIEW_AXES, le=MAX_VIEW_AXES - 1,
                      description="The per-sample axis the values are added along.")
    index: Positions = Field(min_length=1, description="For each position of the second input along the axis, "
                                                       "the position of the first it is added to.")
    reduce: Literal["sum", "mean", "amax", "amin", "prod"] = Field(
        default="sum", description="How the values at one position combine with the first input's value there: "
                                   "their sum (index_add), mean, maximum, minimum or product (index_reduce).")
    include_self: bool = Field(default=True, description="Whether the first input's value at a position the "
                                                         "values reach takes part in their reduction (false: "
                                                         "it is replaced by the reduction of the values alone).")
    index_per_value: bool = Field(default=False, description="Whether PyTorch's kernel reads an index per value "
                                                            "(scatter_add, scatter_reduce of the positions "
                                                            "broadcast over the values: 2 to 9 times the ops per "
                                                            "value of the same reduction by slice, "
                                                            "SCATTER_OPS) rather than one per slice "
                                                            "(index_add, index_reduce).")
    arity: ClassVar[tuple[int, int | None]] = (2, 2)
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "axis": -1, "reduce": "sum", "include_self": True,
                                                "index_per_value": False}

    def graph_output_shape(self, input_shapes: tuple[Shape, ...], where: str) -> Shape:
        base, values = input_shapes
        _check_axis(self.axis, base, where)
        axis = self.axis % len(base)
        if len(values) != len(base) or any(x != y for k, (x, y) in enumerate(zip(base, values, strict=True))
                                           if k != axis) or values[axis] != len(self.index):
            expected = [*base[:axis], len(self.index), *base[axis + 1:]]
            fail(f"{where}.inputs", [list(base), list(values)], f"expected a second input of {expected}: the "
                                                                f"first's shape with one position per index")
        _check_positions(self.index, base[axis], where, "adds to")
        return tuple(base)

    def graph_counts(self, input_shapes: tuple[Shape, ...], output_shape: Shape, first: bool) -> LayerCounts:
        n_out, n_values = _elements(output_shape), _elements(input_shapes[1])
        forward, backward = scatter_ops(n_out, n_values, self.reduce, self.include_self, self.index_per_value)
        return LayerCounts(input_shapes[1], output_shape, 0, n_out, 0, 0, 0, elem_ops_forward=forward,
                           elem_ops_backprop=0 if first else backward, partition_units=_units(output_shape))


class TopK(_Layer):
    """The ``k`` largest (or smallest) values along ``axis`` of one sample, in order (``torch.topk``'s
    values: k-max pooling over a sentence's positions). No weights. Forward one element op per input
    value (the selection; reconstructed: the k values' sort is small beside it); backward one per input
    (the error is zeros of the input's shape with the k gradients written at their positions). The
    positions it keeps (integers) are not counted as kept values."""

    kind: Literal["topk"] = Field(default="topk", description="The layer kind.")
    k: int = Field(gt=0, description="How many values are kept along the axis.")
    axis: int = Field(default=-1, ge=-MAX_VIEW_AXES, le=MAX_VIEW_AXES - 1,
                      description="The per-sample axis the values are chosen along.")
    largest: bool = Field(default=True, description="The largest values (torch.topk's default); false: the "
                                                    "smallest.")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "axis": -1, "largest": True}

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _check_axis(self.axis, input_shape, where)
        if self.k > input_shape[self.axis]:
            fail(f"{where}.k", self.k, f"must be at most the axis's size {input_shape[self.axis]}")
        out = list(input_shape)
        out[self.axis] = self.k
        return tuple(out)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n_in = _elements(input_shape)
        return LayerCounts(input_shape, output_shape, 0, _elements(output_shape), 0, 0, 0, elem_ops_forward=n_in,
                           elem_ops_backprop=0 if first else n_in, partition_units=_units(output_shape))


class _Windows(_Layer):
    """The sliding windows of ``F.unfold`` and ``F.fold``: their size, stride, padding and dilation."""

    window: PairOrInt = Field(description="Window size (kernel_size): one number or [height, width].")
    stride: PairOrInt = Field(default=1, description="Stride between windows: one number or [height, width].")
    padding: PairOrInt = Field(default=0, description="Zeros added on each side: one number or [height, width].")
    dilation: PairOrInt = Field(default=1, description="Spacing of a window's taps: one number or [height, width].")

    @model_validator(mode="after")
    def _check_windows(self) -> _Windows:
        _at_least("window", self.window, 1)
        _at_least("stride", self.stride, 1)
        _at_least("dilation", self.dilation, 1)
        _at_least("padding", self.padding, 0)
        return self

    def _positions(self, h: int, w: int, where: str) -> tuple[int, int]:
        """Window positions down and across (c, h, w) maps."""
        (kh, kw), (dh, dw) = _pair(self.window), _pair(self.dilation)
        (sh, sw), (ph, pw) = _pair(self.stride), _pair(self.padding)
        return (_window_out(h, dh * (kh - 1) + 1, sh, ph, where, "window", "height"),
                _window_out(w, dw * (kw - 1) + 1, sw, pw, where, "window", "width"))

    @property
    def _taps(self) -> int:
        kh, kw = _pair(self.window)
        return kh * kw


class Unfold(_Windows):
    """Every window of (C, H, W) maps as a column (``F.unfold``, ``nn.Unfold``: im2col, a convolution
    written as a matrix product): (C·k_h·k_w, L), L the windows' positions. No weights. Forward one
    element op per output (the copy; padding writes zeros); backward one per output (col2im adds each
    back into the input's error). Nothing is kept."""

    kind: Literal["unfold"] = Field(default="unfold", description="The layer kind.")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "stride": 1, "padding": 0, "dilation": 1}

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _require_maps("unfold", input_shape, where)
        c, h, w = input_shape
        oh, ow = self._positions(h, w, where)
        return (c * self._taps, oh * ow)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        return LayerCounts(input_shape, output_shape, 0, n, 0, 0, 0, elem_ops_forward=n,
                           elem_ops_backprop=0 if first else n, partition_units=output_shape[0])


class Fold(_Windows):
    """Columns summed back into (C, H, W) maps at their windows (``F.fold``, ``nn.Fold``: col2im, the
    inverse of ``unfold`` up to overlaps): from (C·k_h·k_w, L) to (C, H, W) of ``size``. No weights.
    Forward one element op per input (each added into its place); backward one per input (the windows
    of the error gathered again). Nothing is kept."""

    kind: Literal["fold"] = Field(default="fold", description="The layer kind.")
    size: PairOrInt = Field(description="The maps' height and width (output_size): one number or [height, width].")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "stride": 1, "padding": 0, "dilation": 1}

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        h, w = _pair(self.size)
        if min(h, w) < 1:
            fail(f"{where}.size", self.size, "a height and width of at least 1")
        oh, ow = self._positions(h, w, where)
        if len(input_shape) != 2 or input_shape[0] % self._taps or input_shape[1] != oh * ow:
            fail(f"{where}.kind", "fold", f"needs (C·{self._taps}, {oh * ow}) columns (the window's "
                 f"{self._taps} taps, {oh}×{ow} positions on {h}×{w} maps), got shape {list(input_shape)}")
        return (input_shape[0] // self._taps, h, w)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(input_shape)
        return LayerCounts(input_shape, output_shape, 0, _elements(output_shape), 0, 0, 0, elem_ops_forward=n,
                           elem_ops_backprop=0 if first else n, partition_units=output_shape[0])


class Permute(_Layer):
    """The per-sample axes in another order (``[1, 0]`` turns maps reshaped to (C, H·W) into a sequence
    of H·W tokens of width C). A view: no work."""

    kind: Literal["permute"] = Field(default="permute", description="The layer kind.")
    dims: tuple[int, ...] = Field(min_length=2, max_length=MAX_VIEW_AXES,
                                  description="The new order of the per-sample axes.")

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        if sorted(self.dims) != list(range(len(input_shape))):
            fail(f"{where}.dims", list(self.dims), f"must order the axes 0..{len(input_shape) - 1} of the input "
                 f"{list(input_shape)}")
        return tuple(input_shape[d] for d in self.dims)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        return LayerCounts(input_shape, output_shape, 0, _elements(output_shape), 0, 0, 0, 0, 0,
                           partition_units=_units(output_shape))


class Slice(_Layer):
    """Positions ``start`` to ``stop`` of its input along ``axis``: one of the pieces a tensor is split
    into (``x.chunk``, ``x.split``: the queries, keys and values of one projection). A view: no work
    forward; backward one element op per output (its gradient is copied into the input's)."""

    kind: Literal["slice"] = Field(default="slice", description="The layer kind.")
    axis: int = Field(default=-1, ge=-MAX_VIEW_AXES, le=MAX_VIEW_AXES - 1,
                      description="The per-sample axis to take positions of.")
    start: int = Field(ge=0, description="The first position taken.")
    stop: int = Field(gt=0, description="One past the last position taken.")

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _check_axis(self.axis, input_shape, where)
        size = input_shape[self.axis]
        if not self.start < self.stop <= size:
            fail(f"{where}.stop", self.stop, f"must be above start ({self.start}) and at most the axis's size {size}")
        out = list(input_shape)
        out[self.axis] = self.stop - self.start
        return tuple(out)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        return LayerCounts(input_shape, output_shape, 0, n, 0, 0, 0, elem_ops_forward=0,
                           elem_ops_backprop=0 if first else n, partition_units=_units(output_shape))


#: Reductions whose backward reads their input (the norm's, the variance's and the deviation's
#: gradient is the error scaled by each value's distance from zero or from the mean; the log-sum-exp's
#: the error times the input's softmax).
SPREAD_REDUCTIONS = ("l2", "var", "std", "logsumexp")


class Reduce(_Layer):
    """A sum, mean, Euclidean norm, maximum, minimum, variance or standard deviation over axes of one
    sample (``x.sum(dim)``, ``x.mean(dim)``: the branches of a split attention added up, a mean over the
    heads; ``x.norm(dim=...)``: ConvNeXt-V2's global response norm; ``torch.max(x, dim)[0]``: a text CNN's
    max over time, PointNet's global feature; ``x.var(dim)``, ``x.std(dim)``: a normalisation written out);
    global average pooling is a ``pool``. Forward one element op per input value (two for the norm, the
    variance and the deviation: a difference or a square, and a sum); backward one per input value (the
    error spread back over the axes, or written at the extremes' positions and zeros elsewhere; two for
    the norm, the variance and the deviation, which scale it by the input's distance from zero or the
    mean). A log-sum-exp (a contrastive loss's, a router's z-loss) three forward (the maximum taken out,
    the exponential, the sum) and two backward (the softmax of the input times the error; it reads its
    input) per input value."""

    kind: Literal["reduce"] = Field(default="reduce", description="The layer kind.")
    axes: tuple[Annotated[int, Field(ge=-MAX_VIEW_AXES, le=MAX_VIEW_AXES - 1)], ...] = Field(
        min_length=1, max_length=MAX_VIEW_AXES, description="The per-sample axes summed over (negative: from the "
                                                            "last).")
    mode: Literal["sum", "mean", "l2", "max", "min", "var", "std", "logsumexp"] = Field(
        default="sum", description="The sum of the values, their mean, their Euclidean norm (l2), their maximum, "
                                   "their minimum, their variance (var), their standard deviation (std) or the "
                                   "logarithm of the sum of their exponentials (logsumexp).")
    keepdim: bool = Field(default=False, description="Whether the axes stay, of size 1.")

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        rank = len(input_shape)
        axes = [a % rank if -rank <= a < rank else None for a in self.axes]
        if None in axes or len(set(axes)) != len(axes):
            fail(f"{where}.axes", list(self.axes), f"must name distinct axes of the input {list(input_shape)}")
        if not self.keepdim and len(axes) == rank:
            fail(f"{where}.axes", list(self.axes), "would leave no axis; keep them (keepdim) or reduce fewer")
        return tuple(1 if i in axes else d for i, d in enumerate(input_shape) if self.keepdim or i not in axes)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(input_shape)
        forward, backward = {"logsumexp": (3, 2)}.get(self.mode, (2, 2) if self.mode in SPREAD_REDUCTIONS else (1, 1))
        return LayerCounts(input_shape, output_shape, 0, _elements(output_shape), 0, 0, 0,
                           elem_ops_forward=forward * n, elem_ops_backprop=0 if first else backward * n,
                           partition_units=_units(output_shape))


class ScaledDotProductAttention(_Layer):
    """Attention without its projections (``F.scaled_dot_product_attention``): queries (…, S, d), keys
    (…, S_k, d) and values (…, S_k, d_v), the leading axis the heads, to (…, S, d_v). Per sample and head:
    the scores S·S_k·d MACs and the weighted sum S·S_k·d_v; backward twice those (the gradients of
    queries, keys, values and scores); the softmax S·S_k element ops each way, and as many again for a
    learned bias on the scores (``bias_weights``). ``causal`` masks the future; the products are counted
    whole, as PyTorch's kernels and FlopCounterMode do."""

    may_hold_parameters: ClassVar[bool] = True

    kind: Literal["sdpa"] = Field(default="sdpa", description="The layer kind.")
    causal: bool = Field(default=False, description="Whether a token attends only to itself and earlier ones.")
    bias_weights: int = Field(default=0, ge=0, description="Learned values of a bias the kernel adds to the scores "
                                                           "(its attn_mask: BEiT's relative-position bias); 0: "
                                                           "none.")
    arity: ClassVar[tuple[int, int | None]] = (3, 3)
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "bias_weights": 0}

    @property
    def has_weights(self) -> bool:
        return self.bias_weights > 0

    def graph_output_shape(self, input_shapes: tuple[Shape, ...], where: str) -> Shape:
        q, k, v = input_shapes
        if (len(q) < 2 or not len(q) == len(k) == len(v) or q[:-2] != k[:-2] or k[:-2] != v[:-2]
                or q[-1] != k[-1] or k[-2] != v[-2]):
            fail(f"{where}.inputs", [list(q), list(k), list(v)], "queries (…, S, d), keys (…, S_k, d) and values "
                 "(…, S_k, d_v) with the same leading axes")
        return (*q[:-1], v[-1])

    def graph_counts(self, input_shapes: tuple[Shape, ...], output_shape: Shape, first: bool) -> LayerCounts:
        q, k, v = input_shapes
        heads = _elements(q[:-2]) if len(q) > 2 else 1
        scores = heads * q[-2] * k[-2]
        macs = scores * (q[-1] + v[-1])
        biased = scores if self.bias_weights else 0  # the bias added, its gradient summed into the table
        return LayerCounts(q, output_shape, self.bias_weights, _elements(output_shape), macs,
                           0 if first else 2 * macs, 0, elem_ops_forward=scores + biased,
                           elem_ops_backprop=scores + biased, partition_units=heads)


class MatMul(_Layer):
    """The product of two layer outputs, ``a @ b``: a (…, M, K) by b (…, K, N) to (…, M, N), the leading
    axes (attention's heads) the same for both, or of size 1 in one of them, which is then used at
    every position of the other's (broadcast, as ``torch.matmul`` does: LambdaNet's content lambda, one
    for all heads): the scores ``q @ k.transpose(-2, -1)`` and the weighted sum ``att @ v`` of attention
    written out by hand; or of a constant (``zeros`` standing for a fixed matrix: a graph's adjacency) and a
    layer output. No weights. Forward M·N·K MACs per leading position of the output; backward that much
    for the gradient of each input that needs one (a constant needs none), plus one element op per value
    of a broadcast input's gradient at each position it was used (their sum); both inputs are kept for
    backward."""

    kind: Literal["matmul"] = Field(default="matmul", description="The layer kind.")
    arity: ClassVar[tuple[int, int | None]] = (2, 2)

    def graph_output_shape(self, input_shapes: tuple[Shape, ...], where: str) -> Shape:
        a, b = input_shapes
        if (len(a) < 2 or len(a) != len(b) or a[-1] != b[-2]
                or any(x != y and 1 not in (x, y) for x, y in zip(a[:-2], b[:-2], strict=True))):
            fail(f"{where}.inputs", [list(a), list(b)], "a (…, M, K) and b (…, K, N) with the same leading axes "
                                                        "(or of size 1 in one of them)")
        return (*(max(x, y) for x, y in zip(a[:-2], b[:-2], strict=True)), a[-2], b[-1])

    def graph_counts(self, input_shapes: tuple[Shape, ...], output_shape: Shape, first: bool) -> LayerCounts:
        return self.graph_counts_needing(input_shapes, output_shape, (not first, not first))

    def graph_counts_needing(self, input_shapes: tuple[Shape, ...], output_shape: Shape,
                             needs: tuple[bool, ...]) -> LayerCounts:
        """Backward computes the gradient of each input that needs one, a product each: a constant
        operand (a graph's fixed adjacency, ``zeros``) takes none."""
        a, b = input_shapes
        lead = _elements(output_shape[:-2]) if len(a) > 2 else 1
        macs = lead * a[-2] * a[-1] * b[-1]
        summed = sum(lead * x[-2] * x[-1] - _elements(x) for x, need in zip((a, b), needs, strict=True) if need)
        return LayerCounts(a, output_shape, 0, _elements(output_shape), macs, sum(needs) * macs, 0,
                           elem_ops_forward=0, elem_ops_backprop=summed,
                           partition_units=lead if len(a) > 2 else a[-2])


class AffineGrid(_Layer):
    """The sampling grid of an affine transform (``F.affine_grid``: a spatial transformer's): a (2, 3)
    matrix θ per sample to (H, W, 2) coordinates, the (H·W, 3) grid of output positions times θᵀ. No
    weights. Forward H·W·6 element ops (PyTorch's kernel multiplies inside itself, unseen by
    FlopCounterMode); backward θ's gradient, a product of H·W·6 MACs; it keeps nothing."""

    kind: Literal["affine_grid"] = Field(default="affine_grid", description="The layer kind.")
    size: PairOrInt = Field(description="Height and width of the grid (the sampled maps'): one number or "
                                        "[height, width].")
    align_corners: bool = Field(default=False, description="Whether -1 and 1 are the centres of the corner "
                                                           "positions rather than their outer edges (no cost).")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "align_corners": False}

    @model_validator(mode="after")
    def _check_size(self) -> AffineGrid:
        for v in _pair(self.size):
            if v < 1:
                fail("size", v, "must be >= 1")
        return self

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        if tuple(input_shape) != (2, 3):
            fail(f"{where}.kind", "affine_grid", f"needs a (2, 3) matrix per sample, got shape {list(input_shape)}")
        h, w = _pair(self.size)
        return (h, w, 2)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        macs = _elements(output_shape) * 3
        return LayerCounts(input_shape, output_shape, 0, _elements(output_shape), 0, 0 if first else macs, 0,
                           elem_ops_forward=macs, elem_ops_backprop=0, partition_units=output_shape[0])


#: Input values a grid sample blends per output value.
GRID_SAMPLE_TAPS = {"nearest": 1, "bilinear": 4, "bicubic": 16}


class GridSample(_Layer):
    """Feature maps (C, H, W) sampled at a grid of positions (H', W', 2) (``F.grid_sample``: a spatial
    transformer's warp, deformable sampling) to (C, H', W'). No weights. Forward, per output value, as
    many element ops as input values it blends (1 nearest, 4 bilinear, 16 bicubic); backward as many
    again for the maps' gradient and as many for the grid's (reconstructed). Both inputs are kept for
    backward."""

    kind: Literal["grid_sample"] = Field(default="grid_sample", description="The layer kind.")
    mode: Literal["bilinear", "nearest", "bicubic"] = Field(default="bilinear", description="How an output "
                                                                                            "value is read.")
    padding_mode: Literal["zeros", "border", "reflection"] = Field(
        default="zeros", description="What positions outside the maps read (no cost).")
    align_corners: bool = Field(default=False, description="Whether -1 and 1 are the centres of the corner "
                                                           "positions rather than their outer edges (no cost).")
    arity: ClassVar[tuple[int, int | None]] = (2, 2)
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "mode": "bilinear", "padding_mode": "zeros",
                                                "align_corners": False}

    def graph_output_shape(self, input_shapes: tuple[Shape, ...], where: str) -> Shape:
        maps, grid = input_shapes
        if len(maps) != 3 or len(grid) != 3 or grid[2] != 2:
            fail(f"{where}.inputs", [list(maps), list(grid)], "(C, H, W) maps and an (H', W', 2) grid of positions")
        return (maps[0], grid[0], grid[1])

    def graph_counts(self, input_shapes: tuple[Shape, ...], output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape) * GRID_SAMPLE_TAPS[self.mode]
        return LayerCounts(input_shapes[0], output_shape, 0, _elements(output_shape), 0, 0, 0,
                           elem_ops_forward=n, elem_ops_backprop=0 if first else 2 * n,
                           partition_units=output_shape[0])


class Attention(_Layer):
    """Multi-head self-attention over a sequence ``(S, D)`` with H heads, projections included
    (PyTorch's ``nn.MultiheadAttention``). Per sample: the Q, K, V and output projections 4·S·D² MACs,
    the scores Q·Kᵀ S²·D and the weighted sum S²·D; the softmax S²·H element ops each way. Backward:
    the input gradient S·D² (output projection) + 3·S·D² (Q, K, V; not for a first layer) + 2·S²·D
    twice (through the two score products), the weight gradient 4·S·D². ``causal`` masks the future;
    the products are counted whole, as PyTorch's kernels and FlopCounterMode do."""

    may_hold_parameters: ClassVar[bool] = True

    kind: Literal["attention"] = Field(default="attention", description="The layer kind.")
    heads: int = Field(gt=0, description="Attention heads H; the width D must be a multiple.")
    bias: bool = Field(default=True, description="Whether the projections have biases.")
    causal: bool = Field(default=False, description="Whether a token attends only to itself and earlier ones.")

    @property
    def has_weights(self) -> bool:
        return True

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _require_sequence("attention", input_shape, where)
        if input_shape[1] % self.heads:
            fail(f"{where}.heads", self.heads, f"must divide the width {input_shape[1]}")
        return input_shape

    def parameter_tensors(self, input_shape: Shape, weights: int) -> tuple[int, ...]:
        # nn.MultiheadAttention: in_proj_weight (Q, K, V), in_proj_bias, out_proj.weight, out_proj.bias.
        d = input_shape[-1]
        return (3 * d * d, 3 * d, d * d, d) if self.bias else (3 * d * d, d * d)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        s, d = input_shape
        proj = s * d * d
        scores = s * s * d
        softmax = s * s * self.heads
        return LayerCounts(
            input_shape, output_shape,
            # Kept for backward: Q, K, V, the softmax's probabilities, the heads' output and the output
            # (Korthikanti et al. 2022, section 4.1, without the dropout masks).
            weights=4 * d * d + (4 * d if self.bias else 0),
            activations=5 * s * d + s * s * self.heads,
            macs_forward=4 * proj + 2 * scores,
            macs_backprop=proj * (1 if first else 4) + 4 * scores,
            macs_weight_grad=4 * proj,
            elem_ops_forward=softmax, elem_ops_backprop=softmax,
            partition_units=self.heads,
        )


#: Gates of a recurrent cell (each a product of width H from the input and one from the state).
RECURRENT_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
#: Element operations per hidden unit per step (reconstructed from PyTorch's cells): LSTM the gates' sum
#: (4), their functions (4), the cell update c' = f·c + i·g (3), tanh(c') and o·tanh(c') (2); GRU the
#: reset and update gates' sums and sigmoids (4), n = tanh(i_n + r·h_n) (3), h' = (1 − z)·n + z·h (3);
#: a plain RNN the sum and its function (2). As many backward.
RECURRENT_ELEM_OPS = {"lstm": 13, "gru": 10, "rnn_tanh": 2, "rnn_relu": 2}


class Recurrent(_Layer):
    """A recurrent layer over a sequence ``(S, D)`` (PyTorch's ``nn.LSTM``, ``nn.GRU``, ``nn.RNN`` with
    ``batch_first=True``): ``layers`` stacked layers, each one or two directions, output ``(S, H·dirs)``
    (every step's hidden state of the last layer). Per step, direction and layer of input width I, a
    cell of G gates (LSTM 4, GRU 3, RNN 1) multiplies the input by a G·H×I matrix and the state by a
    G·H×H one: S·G·H·(I + H) MACs forward, as many for the weight gradient; backward the input's
    gradient S·G·H·I (not for a first layer's input) and the state's (S − 1)·G·H·H (the initial state
    is a constant). On ``(R, S, D)``, R sequences of each sample run side by side (the rows of a map
    folded into the batch: Sequencer's LSTMs), output ``(R, S, H·dirs)``: R times the counts, the same
    S steps. An LSTM with a ``projection`` P (PyTorch's ``proj_size``, LSTMP) multiplies each step's
    hidden state by a P×H matrix: its state, output and the next layer's input are P wide (output
    ``(S, P·dirs)``), the state product G·H×P, plus S·P·H MACs per layer and direction forward, as many
    backward (every step's error goes through it) and for the weight gradient."""

    may_hold_parameters: ClassVar[bool] = True

    kind: Literal["recurrent"] = Field(default="recurrent", description="The layer kind.")
    mode: Literal["lstm", "gru", "rnn_tanh", "rnn_relu"] = Field(
        default="lstm", description="The cell: lstm, gru, or a plain rnn with tanh or relu.")
    hidden: int = Field(gt=0, description="Hidden units H of each direction.")
    layers: int = Field(default=1, gt=0, description="Stacked recurrent layers (each takes the last's outputs).")
    bidirectional: bool = Field(default=False, description="Whether each layer also runs the sequence backwards "
                                                           "(output width 2·H).")
    bias: bool = Field(default=True, description="Whether the cells have biases (two per gate: PyTorch's b_ih "
                                                 "and b_hh).")
    projection: int = Field(default=0, ge=0, description="An LSTM's projection of its hidden state (PyTorch's "
                                                         "proj_size): P < H, the state and output P wide; 0: none.")
    quiet_defaults: ClassVar[dict[str, Any]] = {"inputs": [], "layers": 1, "bidirectional": False, "projection": 0}

    @model_validator(mode="after")
    def _check_projection(self) -> Recurrent:
        if self.projection and self.mode != "lstm":
            fail("projection", self.projection, "is an LSTM's (PyTorch's proj_size); use 0 for a GRU or an RNN")
        if self.projection and self.projection >= self.hidden:
            fail("projection", self.projection, f"must be less than hidden ({self.hidden}), as PyTorch's proj_size")
        return self

    @property
    def has_weights(self) -> bool:
        return True

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def state_width(self) -> int:
        """The width of each step's hidden state and output per direction: P with a projection, else H."""
        return self.projection or self.hidden

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        if len(input_shape) not in (2, 3):
            fail(f"{where}.kind", "recurrent", f"needs an (S, D) sequence input or (R, S, D) sequences side by "
                                               f"side, got shape {list(input_shape)}")
        return *input_shape[:-1], self.state_width * self.directions

    def _widths(self, input_shape: Shape) -> list[int]:
        """Each stacked layer's input width I."""
        return [input_shape[-1]] + [self.state_width * self.directions] * (self.layers - 1)

    def parameter_tensors(self, input_shape: Shape, weights: int) -> tuple[int, ...]:
        # Per layer and direction, as nn.LSTM registers them: weight_ih, weight_hh, bias_ih, bias_hh (and a
        # projection's weight_hr).
        rows, p = RECURRENT_GATES[self.mode] * self.hidden, self.state_width
        projection = [self.projection * self.hidden] if self.projection else []
        out: list[int] = []
        for width in self._widths(input_shape):
            out += [rows * width, rows * p, *([rows, rows] if self.bias else []), *projection] * self.directions
        return tuple(out)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        steps, h, dirs, p = input_shape[-2], self.hidden, self.directions, self.state_width
        side = math.prod(input_shape[:-2])  # sequences side by side (R; 1 for one sequence)
        rows = RECURRENT_GATES[self.mode] * h
        widths = self._widths(input_shape)
        projected = steps * dirs * self.layers * self.projection * h  # each step's state times the P×H matrix
        products = steps * dirs * sum(rows * (w + p) for w in widths) + projected
        # Backward: the input's gradient at every step (not the first layer's when its input needs none),
        # the state's at every step but the first (the initial state is a constant) and, with a
        # projection, its input's at every step.
        inputs = steps * dirs * rows * (sum(widths) - (widths[0] if first else 0))
        states = (steps - 1) * dirs * self.layers * rows * p + projected
        elem = steps * dirs * self.layers * RECURRENT_ELEM_OPS[self.mode] * h
        return LayerCounts(
            input_shape, output_shape,
            weights=sum(self.parameter_tensors(input_shape, 0)),
            # Kept for backward (reconstructed): per step, direction and layer the gates, the cell state
            # and the output, (G + 2)·H, and a projection's output P.
            activations=side * steps * dirs * self.layers * (rows + 2 * h + self.projection),
            macs_forward=side * products,
            macs_backprop=side * (inputs + states),
            macs_weight_grad=side * products,
            elem_ops_forward=side * elem, elem_ops_backprop=side * elem,
            partition_units=h,
        )


Layer = Annotated[
    InputLayer | Conv2d | ConvTranspose2d | Conv3d | ConvTranspose3d | Pool3d | Pool | FullyConnected | Activation
    | PReLU | Dropout | LocalResponseNorm | BatchNorm | Flatten
    | Softmax | AdaptivePool | Pad | Upsample | GroupNorm | Add | Multiply | Scale | Concat | LayerNorm
    | Embedding | PositionEmbedding | ClassToken | SelectToken | Reshape | Permute | Attention | Slice
    | ScaledDotProductAttention | MatMul | Bias | Reduce | Recurrent | AffineGrid | GridSample | Zeros | Compare
    | Where | MaxUnpool | Unfold | Fold | CumSum | Repeat | Windows | TopK | StopGradient | Gather | ScatterAdd,
    Field(discriminator="kind"),
]

LAYER_TYPES: dict[str, type[_Layer]] = {
    cls.model_fields["kind"].default: cls
    for cls in (InputLayer, Conv2d, ConvTranspose2d, Conv3d, ConvTranspose3d, Pool3d, Pool, FullyConnected, Activation,
                PReLU, Dropout, LocalResponseNorm, BatchNorm, GroupNorm, Flatten, Softmax, AdaptivePool, Pad, Upsample,
                Add, Multiply, Scale, Concat, LayerNorm, Embedding, PositionEmbedding, ClassToken, SelectToken, Reshape,
                Permute, Attention, Slice, ScaledDotProductAttention, MatMul, Bias, Reduce, Recurrent, AffineGrid,
                GridSample, Zeros, Compare, Where, MaxUnpool, Unfold, Fold, CumSum, TopK, Repeat, Windows,
                StopGradient, Gather, ScatterAdd)
}
UNION_TAGS.update(LAYER_TYPES)
# {"kind": "relu"}: the unknown kind is a function of the activation kind
TAG_HINTS.update({("kind", f): f"{f} is a function of the activation kind (kind activation, function {f})"
                  for f in get_args(FunctionName)})
