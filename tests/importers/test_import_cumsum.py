"""Running sums: ``torch.cumsum`` and ``x.cumsum`` import as ``cumsum`` layers. The example is causal linear
attention (Katharopoulos et al. 2020, "Transformers are RNNs"), whose keys-times-values and keys are summed
over the positions so far. Running products (``torch.cumprod``, ``x.cumprod``) import as ``cumsum`` layers
with ``product``: a discrete-time survival model's probabilities and a stick-breaking process's weights."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dnnbench
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet
from dnnbench.specs.layers import CumSum

from .import_helpers import imports_like_pytorch


class CausalLinearAttention(nn.Module):
    def __init__(self, width: int = 16, method: bool = False) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, width)
        self.out = nn.Linear(width, width)
        self.method = method

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = F.elu(self.q(x)) + 1, F.elu(self.k(x)) + 1, self.v(x)
        kv = k.unsqueeze(-1) * v.unsqueeze(-2)  # (B, S, d, d): each position's outer product
        kv = kv.cumsum(1) if self.method else torch.cumsum(kv, dim=1)
        z = torch.cumsum(k, -2)
        num = (q.unsqueeze(-2) @ kv).squeeze(-2)
        den = (q * z).sum(-1, keepdim=True)
        return self.out(num / den)


@pytest.mark.parametrize("method", [False, True])
def test_causal_linear_attention_imports_with_its_running_sums(method: bool) -> None:
    net = imports_like_pytorch(CausalLinearAttention(method=method), (12, 16), torch.randn(2, 12, 16))
    sums = [(layer, shape) for layer, shape in zip(net.layers, net.shapes, strict=True) if layer.kind == "cumsum"]
    assert [(layer.axis, shape) for layer, shape in sums] == [(0, (12, 16, 16)), (0, (12, 16))]
    # One element op per value each way.
    c = net.layer_counts[net.layers.index(sums[0][0])]
    assert c.elem_ops_forward == c.elem_ops_backprop == 12 * 16 * 16


def test_the_runner_sums_as_pytorch_does() -> None:
    x = torch.randn(3, 4, 5, 6)
    for axis in (0, 1, -1):
        built = torchnet._cumsum(CumSum(axis=axis), (4, 5, 6))
        assert torch.equal(built(x), torch.cumsum(x, axis % 3 + 1))


class Survival(nn.Module):
    """A discrete-time survival head: hazards per interval, survival the running product of 1 − hazard;
    or a stick-breaking process's weights v_k · prod_{j<k} (1 − v_j) (``method``: the tensor methods)."""

    def __init__(self, method: bool = False) -> None:
        super().__init__()
        self.body, self.hazard = nn.Linear(16, 32), nn.Linear(32, 10)
        self.method = method

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.sigmoid(self.hazard(torch.relu(self.body(x))))
        if self.method:
            return h * (1 - h).cumprod(dim=1)
        return torch.cumprod(1 - h, 1)


@pytest.mark.parametrize("method", [False, True])
def test_running_products_import_with_their_backward(method: bool) -> None:
    net = imports_like_pytorch(Survival(method), (16,), torch.randn(3, 16))
    products = [i for i, layer in enumerate(net.layers) if layer.kind == "cumsum"]
    assert len(products) == 1 and net.layers[products[0]].product and net.layers[products[0]].axis == 0
    c = net.layer_counts[products[0]]
    assert (c.elem_ops_forward, c.elem_ops_backprop) == (10, 6 * 10)  # a test for zeros, 2 flips, 3 passes
    # The product's backward counts five operations per output more than the sum's.
    sums = net.evolve(layers=[layer.evolve(product=False) if i in products else layer
                              for i, layer in enumerate(net.layers)])
    assert totals(net).elem_ops_backprop == totals(sums).elem_ops_backprop + 5 * 10


def test_the_runner_multiplies_as_pytorch_does() -> None:
    x = torch.rand(3, 4, 5, 6, requires_grad=True)
    for axis in (0, 1, -1):
        built = torchnet._cumsum(CumSum(axis=axis, product=True), (4, 5, 6))
        assert torch.equal(built(x), torch.cumprod(x, axis % 3 + 1))
    assert CumSum(product=True).to_dict() == {"name": "", "kind": "cumsum", "product": True}
    assert "product" not in CumSum().to_dict()


def test_a_running_product_over_the_batch_or_a_computed_axis_is_one_line() -> None:
    class Net(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x).cumprod(0)

    with pytest.raises(SpecError) as err:
        dnnbench.from_torch(Net(), (4, 8))
    assert "\n" not in str(err.value) and "multiplies along the batch axis" in str(err.value)


def test_a_running_sum_over_the_batch_is_one_line() -> None:
    class Net(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x).cumsum(0)

    with pytest.raises(SpecError) as err:
        dnnbench.from_torch(Net(), (4, 8))
    assert "\n" not in str(err.value) and "batch axis" in str(err.value)


def test_onnx_cumsum_imports_with_the_same_counts(tmp_path) -> None:
    """torch's ONNX export of ``torch.cumsum`` (a CumSum node of a constant axis) imports as from_torch does."""
    from dnnbench.counts import totals

    from .onnx_export import export

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(torch.cumsum(torch.tanh(self.a(x)), dim=1))

    module = Net()
    via_onnx = dnnbench.from_onnx(export(module, (6, 8), tmp_path / "net.onnx"))
    assert [layer.axis for layer in via_onnx.layers if layer.kind == "cumsum"] == [0]
    assert totals(via_onnx) == totals(dnnbench.from_torch(module, (6, 8)))


class Envelope(nn.Module):
    """A running maximum (a monotone envelope of a score over the positions so far: torch.cummax's values,
    read by [0] or .values) and a running minimum (``x.cummin(dim)``), both with their indices unused."""

    def __init__(self, attribute: bool) -> None:
        super().__init__()
        self.fc, self.head = nn.Linear(8, 8), nn.Linear(8, 2)
        self.attribute = attribute

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        top = torch.cummax(h, dim=1).values if self.attribute else torch.cummax(h, 1)[0]
        low, _ = h.cummin(-1)
        return self.head((top - low).mean(1))


@pytest.mark.parametrize("attribute", [False, True])
def test_running_extremes_are_priced_as_running_sums(attribute: bool) -> None:
    """cummax and cummin: one comparison per value forward, each error added back where the extreme was:
    a cumsum layer along the same axis (FLOPs against FlopCounterMode: none)."""
    net = imports_like_pytorch(Envelope(attribute), (12, 8), torch.randn(2, 12, 8))
    running = [(layer.axis, shape) for layer, shape in zip(net.layers, net.shapes, strict=True)
               if layer.kind == "cumsum"]
    assert running == [(0, (12, 8)), (1, (12, 8))]


def test_running_extremes_along_the_batch_are_one_line_errors() -> None:
    class Batch(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cummax(x, 0)[0]

    with pytest.raises(SpecError, match="takes running extremes along the batch axis") as err:
        dnnbench.from_torch(Batch(), (4,))
    assert "\n" not in str(err.value)


class RunningPartition(nn.Module):
    """A running log-partition over the positions so far (``torch.logcumsumexp``, or the method)."""

    def __init__(self, method: bool) -> None:
        super().__init__()
        self.fc, self.head = nn.Linear(8, 8), nn.Linear(8, 2)
        self.method = method

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        z = h.logcumsumexp(1) if self.method else torch.logcumsumexp(h, dim=-2)
        return self.head(z.mean(1))


@pytest.mark.parametrize("method", [False, True])
def test_logcumsumexp_is_an_exp_a_running_sum_and_a_log(method: bool) -> None:
    net = imports_like_pytorch(RunningPartition(method), (12, 8), torch.randn(2, 12, 8))
    (k,) = [k for k, layer in enumerate(net.layers) if layer.kind == "cumsum"]
    before, running, after = net.layers[k - 1:k + 2]
    # the exp fused into the linear layer before it (its only reader), as an activation is
    assert getattr(before, "activation", None) == "exp" or getattr(before, "function", None) == "exp"
    assert running.axis == 0 and (after.kind, after.function) == ("activation", "log")
