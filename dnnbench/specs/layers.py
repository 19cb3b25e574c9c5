"""Layer kinds: each knows its output shape and its per-sample counts (polymorphism, no if-chains).

Shapes are per sample: ``(C, H, W)`` for feature maps, ``(N,)`` for vectors. Counts follow
docs/model.md §3: MACs (one multiply and one add; FLOPs = 2 x MACs) for conv and fully connected
layers, element operations for pooling, activations, normalisation and softmax.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, model_validator

from .base import UNION_TAGS, Spec, fail

Shape = tuple[int, ...]
ActivationName = Literal["none", "relu", "tanh", "sigmoid"]
PairOrInt = int | tuple[int, int]


@dataclass(frozen=True)
class LayerCounts:
    """Per-sample counts of one layer (weights and MACs exclude nothing; bias weights included)."""

    input_shape: Shape
    output_shape: Shape
    weights: int
    activations: int  # output elements per sample
    macs_forward: int
    macs_backprop: int  # error to the layer below; 0 for the first layer
    macs_weight_grad: int
    elem_ops_forward: int
    elem_ops_backprop: int
    partition_units: int  # units split by vertical partitioning (output maps or neurons)


def _pair(value: PairOrInt) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _elements(shape: Shape) -> int:
    return math.prod(shape)


def _activation_ops(name: str, outputs: int) -> int:
    # One element op per output forward and one backward (docs/model.md §3).
    return 0 if name == "none" else outputs


class _Layer(Spec):
    name: str = Field(default="", description="An optional unique name of the layer.")

    def output_shape(self, input_shape: Shape, where: str) -> Shape:  # pragma: no cover - abstract
        raise NotImplementedError

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        raise NotImplementedError  # pragma: no cover - abstract

    @property
    def has_weights(self) -> bool:
        return False


def _require_maps(layer: str, shape: Shape, where: str) -> None:
    if len(shape) != 3:
        fail(f"{where}.kind", layer, f"needs a (C, H, W) feature-map input, got shape {list(shape)}")


def _window_out(size: int, kernel: int, stride: int, pad: int, where: str, field: str, axis: str) -> int:
    if kernel > size + 2 * pad:
        fail(f"{where}.{field}", kernel, f"is larger than the input {axis} {size} (with padding {pad})")
    return (size + 2 * pad - kernel) // stride + 1


class InputLayer(_Layer):
    """The network's input: one sample's shape."""

    kind: Literal["input"] = Field(default="input", description="The layer kind.")
    shape: tuple[Annotated[int, Field(gt=0)], ...] = Field(min_length=1, max_length=3,
                                                           description="One sample: (C, H, W), (H, W) or (N,).")

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        return tuple(self.shape) if len(self.shape) != 2 else (1, *self.shape)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n = _elements(output_shape)
        return LayerCounts(input_shape, output_shape, 0, n, 0, 0, 0, 0, 0, output_shape[0])


class Conv2d(_Layer):
    """A 2-D convolution (with an optional activation fused after it)."""

    kind: Literal["conv2d"] = Field(default="conv2d", description="The layer kind.")
    out_channels: int = Field(gt=0, description="Output feature maps.")
    kernel: PairOrInt = Field(description="Kernel size: one number or [height, width].")
    stride: PairOrInt = Field(default=1, description="Stride: one number or [height, width].")
    padding: PairOrInt = Field(default=0, description="Zero padding on each side: one number or [height, width].")
    bias: bool = Field(default=True, description="Whether the layer has a bias per output map.")
    activation: ActivationName = Field(default="none", description="Activation applied to the output.")

    @model_validator(mode="after")
    def _check_windows(self) -> Conv2d:
        for field, low in (("kernel", 1), ("stride", 1), ("padding", 0)):
            for v in _pair(getattr(self, field)):
                if v < low:
                    fail(field, v, f"must be >= {low}")
        return self

    @property
    def has_weights(self) -> bool:
        return True

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _require_maps("conv2d", input_shape, where)
        _, h, w = input_shape
        (kh, kw), (sh, sw), (ph, pw) = _pair(self.kernel), _pair(self.stride), _pair(self.padding)
        return (
            self.out_channels,
            _window_out(h, kh, sh, ph, where, "kernel", "height"),
            _window_out(w, kw, sw, pw, where, "kernel", "width"),
        )

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        c_in = input_shape[0]
        kh, kw = _pair(self.kernel)
        outputs = _elements(output_shape)
        weights = self.out_channels * c_in * kh * kw + (self.out_channels if self.bias else 0)
        macs = outputs * c_in * kh * kw  # C_out·H_out·W_out·C_in·K_h·K_w (model.md §3)
        act = _activation_ops(self.activation, outputs)
        return LayerCounts(
            input_shape, output_shape, weights, outputs,
            macs_forward=macs,
            macs_backprop=0 if first else macs,
            macs_weight_grad=macs,
            elem_ops_forward=act,
            elem_ops_backprop=act,
            partition_units=self.out_channels,
        )


class Pool(_Layer):
    """Max or average pooling."""

    kind: Literal["pool"] = Field(default="pool", description="The layer kind.")
    mode: Literal["max", "avg"] = Field(default="max", description="max or avg pooling.")
    window: PairOrInt = Field(description="Window size: one number or [height, width].")
    stride: PairOrInt | None = Field(default=None, description="Stride (None: the window).")
    padding: PairOrInt = Field(default=0, description="Padding on each side, at most half the window.")

    @model_validator(mode="after")
    def _check_windows(self) -> Pool:
        for v in _pair(self.window):
            if v < 1:
                fail("window", v, "must be >= 1")
        for v in _pair(self.stride if self.stride is not None else self.window):
            if v < 1:
                fail("stride", v, "must be >= 1")
        for v in _pair(self.padding):
            if v < 0:
                fail("padding", v, "must be >= 0")
            if 2 * v > max(_pair(self.window)):
                fail("padding", v, "must be at most half the window")
        return self

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        _require_maps("pool", input_shape, where)
        c, h, w = input_shape
        (kh, kw), (ph, pw) = _pair(self.window), _pair(self.padding)
        sh, sw = _pair(self.stride if self.stride is not None else self.window)
        return (
            c,
            _window_out(h, kh, sh, ph, where, "window", "height"),
            _window_out(w, kw, sw, pw, where, "window", "width"),
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


class FullyConnected(_Layer):
    """A fully connected layer (with an optional activation)."""

    kind: Literal["fc"] = Field(default="fc", description="The layer kind.")
    out_features: int = Field(gt=0, description="Output neurons.")
    bias: bool = Field(default=True, description="Whether the layer has a bias per neuron.")
    activation: ActivationName = Field(default="none", description="Activation applied to the output.")

    @property
    def has_weights(self) -> bool:
        return True

    def output_shape(self, input_shape: Shape, where: str) -> Shape:
        return (self.out_features,)

    def counts(self, input_shape: Shape, output_shape: Shape, first: bool) -> LayerCounts:
        n_in = _elements(input_shape)
        macs = n_in * self.out_features  # N_in·N_out (model.md §3)
        act = _activation_ops(self.activation, self.out_features)
        return LayerCounts(
            input_shape, output_shape,
            weights=macs + (self.out_features if self.bias else 0),
            activations=self.out_features,
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
            partition_units=output_shape[0],
        )

    def _weights(self, input_shape: Shape) -> int:
        return 0


class Activation(_Elementwise):
    """An element-wise activation function."""

    kind: Literal["activation"] = Field(default="activation", description="The layer kind.")
    function: Literal["relu", "tanh", "sigmoid"] = Field(default="relu", description="The function.")


class Dropout(_Elementwise):
    """Dropout costs nothing in the model (a mask multiply hidden in the neighbouring layers)."""

    kind: Literal["dropout"] = Field(default="dropout", description="The layer kind.")
    p: float = Field(default=0.5, ge=0.0, lt=1.0, description="Probability of dropping an element.")

    def _per_output(self) -> tuple[int, int]:
        return 0, 0


class LocalResponseNorm(_Elementwise):
    """LRN: ``size`` element ops per output forward (the window's sum of squares) and backward."""

    kind: Literal["lrn"] = Field(default="lrn", description="The layer kind.")
    size: int = Field(default=5, gt=0, description="Neighbouring channels in the normalisation window.")

    def _per_output(self) -> tuple[int, int]:
        return self.size, self.size


class BatchNorm(_Elementwise):
    """Batch normalisation: 2 element ops per output each way, 2·C weights (scale and shift)."""

    kind: Literal["batchnorm"] = Field(default="batchnorm", description="The layer kind.")

    def _per_output(self) -> tuple[int, int]:
        return 2, 2

    def _weights(self, input_shape: Shape) -> int:
        return 2 * input_shape[0]


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


Layer = Annotated[
    InputLayer | Conv2d | Pool | FullyConnected | Activation | Dropout | LocalResponseNorm | BatchNorm | Flatten
    | Softmax,
    Field(discriminator="kind"),
]

LAYER_TYPES: dict[str, type[_Layer]] = {
    cls.model_fields["kind"].default: cls
    for cls in (InputLayer, Conv2d, Pool, FullyConnected, Activation, Dropout, LocalResponseNorm,
                BatchNorm, Flatten, Softmax)
}
UNION_TAGS.update(LAYER_TYPES)
