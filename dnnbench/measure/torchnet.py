"""Build a PyTorch model from a network spec (shapes from the spec), whole or vertically partitioned.

Every spec layer after the input becomes one ``torch.nn.Module`` (conv/FC layers carry their own
activation), so per-layer timings line up with the model's per-layer counts (docs/model.md §3).

Vertical partitioning (Adam, docs/model.md §5): with ``part=(p, W)`` each conv/FC layer keeps only
its p-th slice of output maps / neurons; the layer's full input is assembled from every process's
slice by an exchange (:mod:`dnnbench.measure.modelparallel`). Pool and elementwise layers act on the
local slice. torch is imported inside functions only.
"""

from __future__ import annotations

from typing import Any

from ..errors import SpecError
from ..specs import Network
from ..specs.layers import (
    Activation,
    BatchNorm,
    Conv2d,
    Dropout,
    Flatten,
    FullyConnected,
    InputLayer,
    LocalResponseNorm,
    Pool,
    Softmax,
    _pair,
)


def slice_bounds(units: int, part: tuple[int, int]) -> tuple[int, int]:
    """[start, stop) of process p's share of ``units`` split over W (ceil-sized first, like ι(W))."""
    p, w = part
    size = -(-units // w)
    start = min(units, p * size)
    return start, min(units, start + size)


def _act(name: str) -> Any:
    import torch.nn as nn

    return {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}[name]() if name != "none" else None


def _module(layer: Any, in_shape: tuple[int, ...], part: tuple[int, int] | None, where: str) -> Any:
    """The torch module of one spec layer (registry by layer type; see ``_BUILDERS``)."""
    builder = _BUILDERS.get(type(layer))
    if builder is None:
        raise SpecError(f"{where}.kind", layer.kind, "has no PyTorch equivalent in dnnbench.measure")
    return builder(layer, in_shape, part)


def _in_channels(in_shape: tuple[int, ...], part: tuple[int, int] | None, exchanged: bool) -> int:
    """Channels a layer sees: the full input when exchanged (or whole model), else its local slice."""
    c = in_shape[0]
    if part is None or exchanged:
        return c
    lo, hi = slice_bounds(c, part)
    return hi - lo


def _conv(layer: Conv2d, in_shape: tuple[int, ...], part: tuple[int, int] | None) -> Any:
    import torch.nn as nn

    lo, hi = (0, layer.out_channels) if part is None else slice_bounds(layer.out_channels, part)
    mods = [nn.Conv2d(in_shape[0], hi - lo, _pair(layer.kernel), _pair(layer.stride), _pair(layer.padding),
                      bias=layer.bias)]
    act = _act(layer.activation)
    return nn.Sequential(*mods, *([act] if act is not None else []))


def _fc(layer: FullyConnected, in_shape: tuple[int, ...], part: tuple[int, int] | None) -> Any:
    import math

    import torch.nn as nn

    lo, hi = (0, layer.out_features) if part is None else slice_bounds(layer.out_features, part)
    mods: list[Any] = [nn.Flatten()] if len(in_shape) > 1 else []
    mods.append(nn.Linear(math.prod(in_shape), hi - lo, bias=layer.bias))
    act = _act(layer.activation)
    return nn.Sequential(*mods, *([act] if act is not None else []))


def _pool(layer: Pool, in_shape: tuple[int, ...], part: tuple[int, int] | None) -> Any:
    import torch.nn as nn

    stride = _pair(layer.stride if layer.stride is not None else layer.window)
    if layer.mode == "max":
        return nn.MaxPool2d(_pair(layer.window), stride, _pair(layer.padding))
    return nn.AvgPool2d(_pair(layer.window), stride, _pair(layer.padding))


def _activation(layer: Activation, in_shape: tuple[int, ...], part: tuple[int, int] | None) -> Any:
    return _act(layer.function)


def _dropout(layer: Dropout, in_shape: tuple[int, ...], part: tuple[int, int] | None) -> Any:
    import torch.nn as nn

    return nn.Dropout(layer.p)


def _lrn(layer: LocalResponseNorm, in_shape: tuple[int, ...], part: tuple[int, int] | None) -> Any:
    import torch.nn as nn

    return nn.LocalResponseNorm(layer.size)


def _batchnorm(layer: BatchNorm, in_shape: tuple[int, ...], part: tuple[int, int] | None) -> Any:
    import torch.nn as nn

    c = _in_channels(in_shape, part, exchanged=False)
    return nn.BatchNorm2d(c) if len(in_shape) == 3 else nn.BatchNorm1d(c)


def _flatten(layer: Flatten, in_shape: tuple[int, ...], part: tuple[int, int] | None) -> Any:
    import torch.nn as nn

    return nn.Flatten()


def _softmax(layer: Softmax, in_shape: tuple[int, ...], part: tuple[int, int] | None) -> Any:
    import torch.nn as nn

    # LogSoftmax + NLL loss = softmax cross-entropy, the same element work as the spec's softmax.
    return nn.LogSoftmax(dim=1)


_BUILDERS: dict[type, Any] = {
    Conv2d: _conv, FullyConnected: _fc, Pool: _pool, Activation: _activation, Dropout: _dropout,
    LocalResponseNorm: _lrn, BatchNorm: _batchnorm, Flatten: _flatten, Softmax: _softmax,
}


def build_layers(net: Network, part: tuple[int, int] | None = None) -> list[tuple[str, Any, bool]]:
    """``[(name, module, exchanged_input)]`` for every layer after the input.

    ``exchanged_input`` is True for conv/FC layers that need the full output of the layer below
    assembled from every partition (all but the first compute layer, docs/model.md §5). The softmax
    of a partitioned model runs on full logits, so it is marked exchanged as well.
    """
    import torch

    torch.manual_seed(0)
    out: list[tuple[str, Any, bool]] = []
    shape: tuple[int, ...] = ()
    seen_compute = False
    for i, (name, layer, lshape) in enumerate(zip(net.layer_names, net.layers, net.shapes, strict=False)):
        if isinstance(layer, InputLayer):
            shape = lshape
            continue
        weighted = isinstance(layer, (Conv2d, FullyConnected))
        exchanged = part is not None and ((weighted and seen_compute) or isinstance(layer, Softmax))
        mod = _module(layer, shape, part, f"layers[{i}]")
        if mod is not None:
            out.append((name, mod, exchanged))
        seen_compute = True
        shape = lshape
    return out


def build_model(net: Network) -> Any:
    """The whole network as ``torch.nn.Sequential`` with one named child per spec layer."""
    from collections import OrderedDict

    import torch.nn as nn

    return nn.Sequential(OrderedDict((name, mod) for name, mod, _ in build_layers(net)))


def ends_in_log_probs(net: Network) -> bool:
    """True when the spec ends in softmax (the loss is then NLL of log-probabilities)."""
    return isinstance(net.layers[-1], Softmax)


def loss_fn(net: Network) -> Any:
    """NLL after a softmax layer, else cross-entropy on the raw outputs (1-D outputs are classes)."""
    import torch.nn as nn

    return nn.NLLLoss() if ends_in_log_probs(net) else nn.CrossEntropyLoss()


def batch(net: Network, batch_size: int, seed: int = 0) -> tuple[Any, Any]:
    """A synthetic mini-batch: inputs of the spec's input shape and class labels of its output width."""
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randn((batch_size, *net.input_shape), generator=g)
    classes = net.shapes[-1][0] if len(net.shapes[-1]) == 1 else 1
    y = torch.randint(0, classes, (batch_size,), generator=g)
    return x, y
