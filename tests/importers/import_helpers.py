"""Shared pieces of the importer and count tests: a network of unusual layers, a name-free layer
comparison, a training step's FLOPs as FlopCounterMode counts them and the counts to hold them against."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from dnnbench.specs import Network


def step_flops(step: Callable[[], torch.Tensor]) -> tuple[int, int]:
    """(forward, backward) FLOPs FlopCounterMode counts for ``step`` (which returns the loss, or an output
    whose sum is taken) and its backward, with PyTorch's math attention, whose products it counts."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    with sdpa_kernel(SDPBackend.MATH):
        forward = FlopCounterMode(display=False)
        with forward:
            step()
        both = FlopCounterMode(display=False)
        with both:
            step().sum().backward()
    return forward.get_total_flops(), both.get_total_flops() - forward.get_total_flops()


def imports_like_pytorch(module: nn.Module, shape: tuple[int, ...], example: torch.Tensor) -> Network:
    """``from_torch(module, shape)``, checked: its weights are the module's parameters; its forward and
    backward FLOPs are what FlopCounterMode counts for ``example`` (a batch); the runner builds it back
    with those weights and its output shape, and the built module imports back to the same counts."""
    import dnnbench
    from dnnbench.counts import totals
    from dnnbench.measure import torchnet

    net = dnnbench.from_torch(module, shape)
    t = totals(net)
    assert t.weights == params(module)
    batch = example.shape[0]
    forward, backward = step_flops(lambda: module(example))
    assert forward == 2 * batch * t.macs_forward
    assert backward == 2 * batch * (t.macs_backprop + dense_weight_grad(net))
    built = torchnet.build_model(net)
    assert params(built) == t.weights
    rebuilt = torch.zeros(batch, *net.layers[0].shape, dtype=example.dtype)
    assert tuple(built(rebuilt).shape[1:]) == net.shapes[-1]
    assert totals(dnnbench.from_torch(built, net.layers[0].shape)) == t
    return net


def counted_like_pytorch(module: nn.Module, shape: object, *example: torch.Tensor,
                         no_onednn: bool = False) -> Network:
    """``from_torch(module, shape)``, checked: its weights are the module's parameters and its forward and
    backward FLOPs what FlopCounterMode counts for ``example`` (a batch of each input); ``no_onednn``:
    counted with oneDNN off, whose LSTM kernel hides its products from the counter."""
    import dnnbench
    from dnnbench.counts import totals

    net = dnnbench.from_torch(module, shape)
    t = totals(net)
    assert t.weights == params(module)
    was = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(was and not no_onednn)
    try:
        forward, backward = step_flops(lambda: module(*example))
    finally:
        torch._C._set_mkldnn_enabled(was)
    batch = example[0].shape[0]
    assert forward == 2 * batch * t.macs_forward
    assert backward == 2 * batch * (t.macs_backprop + dense_weight_grad(net))
    return net


def params(module: nn.Module) -> int:
    """The module's learned values, each shared parameter once."""
    return sum(p.numel() for p in module.parameters())


def dense_weight_grad(net: Network) -> int:
    """Weight-gradient MACs as FlopCounterMode counts them: a grouped convolution's as the dense one's."""
    return sum(c.macs_weight_grad * getattr(layer, "groups", 1) for layer, c in zip(net.layers, net.layer_counts,
                                                                                     strict=True))


def without_names(net: Network) -> list[dict]:
    """Layer dicts without names, a pool's default stride (None: the window) written out."""
    out = []
    for layer in net.layers:
        d = {k: v for k, v in layer.to_dict().items() if k != "name"}
        if d["kind"] == "pool" and d["stride"] is None:
            d["stride"] = d["window"]
        out.append(d)
    return out


def structure(net: Network) -> list[tuple[dict, tuple[int, ...]]]:
    """Each layer's dict without its name or inputs, and the positions of its inputs: graphs equal up to
    the names of their layers."""
    return [({k: v for k, v in d.items() if k != "inputs"}, tuple(ids))
            for d, ids in zip(without_names(net), net.input_indices, strict=True)]


class Odd(nn.Module):
    """Strided, padded, non-square and bias-less layers, functional pools, BN, LRN and adaptive pooling."""

    def __init__(self, lrn: bool = True) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, kernel_size=(3, 5), stride=(1, 2), padding=(1, 2))
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 12, kernel_size=3, stride=2, padding=1, bias=False)  # strided, not first
        # torch's ONNX exporter decomposes LocalResponseNorm into a dozen ops: leave it out for ONNX tests
        self.lrn = nn.LocalResponseNorm(3) if lrn else nn.Identity()
        self.c3 = nn.Conv2d(12, 16, kernel_size=3, padding="same")
        self.pool = nn.AdaptiveAvgPool2d((2, 2))
        self.fc1 = nn.Linear(64, 20, bias=False)
        self.fc2 = nn.Linear(20, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.sigmoid(self.bn(self.c1(x)))
        x = F.max_pool2d(x, 2)
        x = self.lrn(F.relu(self.c2(x)))
        x = F.avg_pool2d(self.c3(x).tanh(), kernel_size=2, stride=1)
        x = self.pool(x)
        x = x.reshape(x.shape[0], -1)
        x = F.dropout(self.fc1(x), p=0.25, training=self.training)
        return F.log_softmax(self.fc2(x), dim=-1)


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x)


class AfterFc(nn.Module):
    """``fn(x)`` after an fc layer on the last axis (so that a layer of no weights, ``fn``'s, carries a
    gradient to weights)."""

    def __init__(self, width: int, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.fc, self.fn = nn.Linear(width, width), fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(self.fc(x))


def builds_what_the_module_computes(module: nn.Module, shape: tuple[int, ...]) -> Network:
    """:func:`imports_like_pytorch`, and the runner's build, given the module's weights, computes exactly
    the module's output."""
    from dnnbench.measure import torchnet

    net = imports_like_pytorch(module, shape, torch.randn(2, *shape))
    built = torchnet.build_model(net)
    for mine, theirs in zip(built.parameters(), module.parameters(), strict=True):
        mine.data.copy_(theirs.data)
    x = torch.randn(3, *shape)
    assert torch.equal(built(x), module(x))
    return net


class MultiTask(nn.Module):
    """A multi-task network: a convolution of ``width`` maps, then heads of different shapes returned as a
    dict (5 class logits and a box of ``box`` values from the pooled maps, a map of ``segments`` classes)."""

    def __init__(self, width: int = 8, box: int = 4, segments: int = 2) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.cls, self.box, self.seg = nn.Linear(width, 5), nn.Linear(width, box), nn.Conv2d(width, segments, 1)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        y = torch.relu(self.stem(x))
        pooled = y.mean((2, 3))
        return {"cls": self.cls(pooled), "box": self.box(pooled), "seg": self.seg(y)}


class GraphAttention(nn.Module):
    """One graph attention layer (Veličković et al. 2018) over a fixed adjacency held as a buffer: node
    features (V, F) per sample, a shared projection, a one-unit score of every pair of projected nodes
    (their features concatenated), LeakyReLU, the non-edges masked, a softmax over each node's
    neighbours, their projections weighed and summed, a mean over the nodes and a 3-way head."""

    def __init__(self, nodes: int = 10, features: int = 8, width: int = 16) -> None:
        super().__init__()
        self.w = nn.Linear(features, width, bias=False)
        self.a = nn.Linear(2 * width, 1, bias=False)
        self.register_buffer("adjacency", (torch.rand(nodes, nodes, generator=torch.Generator().manual_seed(0))
                                           > 0.5).float() + torch.eye(nodes))
        self.fc = nn.Linear(width, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.w(x)
        v = z.shape[1]
        pairs = torch.cat([z.unsqueeze(2).expand(-1, -1, v, -1), z.unsqueeze(1).expand(-1, v, -1, -1)], -1)
        e = F.leaky_relu(self.a(pairs).squeeze(-1), 0.2).masked_fill(self.adjacency == 0, float("-inf"))
        return self.fc(torch.bmm(torch.softmax(e, -1), z).mean(1))
