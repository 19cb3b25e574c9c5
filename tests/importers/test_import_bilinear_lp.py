"""``nn.Bilinear`` and the power-average poolings ``nn.LPPool1d``/``nn.LPPool2d`` import as the steps PyTorch
runs. FlopCounterMode counts no FLOPs for ``nn.Bilinear`` (its ``_trilinear`` kernel has no formula), so its
products are checked against the formula and against FlopCounterMode on the runner's build, which computes
them as ``mm`` and ``bmm``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import dnnbench
from dnnbench.counts import totals
from dnnbench.measure import torchnet

from .import_helpers import imports_like_pytorch, params, step_flops


class Fusion(nn.Module):
    """Two branches of one input combined by a bilinear layer (bilinear pooling of features)."""

    def __init__(self, bias: bool = True) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(12, 6), nn.Linear(12, 5)
        self.bilinear = nn.Bilinear(6, 5, 7, bias=bias)
        self.head = nn.Linear(7, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.bilinear(self.a(x), self.b(x))))


class TokenFusion(nn.Module):
    """The same per token of a sequence."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.bilinear = nn.Bilinear(8, 8, 9)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        return self.bilinear(h, torch.tanh(h))


@pytest.mark.parametrize(("module", "shape"), [(Fusion(), (12,)), (Fusion(bias=False), (12,)),
                                                (TokenFusion(), (10, 4))])
def test_bilinear_has_pytorch_s_weights_and_its_two_products(module: nn.Module, shape: tuple[int, ...]) -> None:
    net = dnnbench.from_torch(module, shape)
    t = totals(net)
    assert t.weights == params(module)
    tokens = shape[0] if len(shape) == 2 else 1
    m = module.bilinear
    o, i, j = m.out_features, m.in1_features, m.in2_features
    product = [c for layer, c in zip(net.layers, net.layer_counts, strict=True) if layer.kind == "matmul"]
    weight = net.layer_counts[net.layer_names.index("bilinear.weight")]
    # x1·A (out·in1·in2 per token), then each output's row of it times x2 (out·in2 per token).
    assert weight.macs_forward == tokens * o * i * j and product[0].macs_forward == tokens * o * j
    others = sum(c.macs_forward for layer, c in zip(net.layers, net.layer_counts, strict=True)
                 if layer.kind == "fc" and c is not weight)
    assert t.macs_forward == tokens * (o * i * j + o * j) + others
    # The runner computes the same two products, which FlopCounterMode counts there.
    built = torchnet.build_model(net)
    assert params(built) == t.weights
    x = torch.randn(3, *shape)
    forward, _ = step_flops(lambda: built(x))
    assert forward == 2 * 3 * t.macs_forward
    assert totals(dnnbench.from_torch(built, shape)) == t


def test_bilinear_computes_what_pytorch_computes() -> None:
    """The decomposition's arithmetic: x1·A as a product of width out·in2, rows times x2, the bias."""
    torch.manual_seed(0)
    m = nn.Bilinear(6, 5, 7)
    x1, x2 = torch.randn(4, 6), torch.randn(4, 5)
    rows = (x1 @ m.weight.permute(1, 0, 2).reshape(6, 35)).view(4, 7, 5)
    ours = (rows @ x2.view(4, 5, 1)).view(4, 7) + m.bias
    assert torch.allclose(ours, m(x1, x2), atol=1e-5)


class FunctionalFusion(nn.Module):
    """Fusion with the bilinear form written as ``F.bilinear`` of the module's own weight and bias."""

    def __init__(self, bias: bool = True) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(12, 6), nn.Linear(12, 5)
        self.weight = nn.Parameter(torch.randn(7, 6, 5))
        self.bias = nn.Parameter(torch.randn(7)) if bias else None
        self.head = nn.Linear(7, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(nn.functional.bilinear(self.a(x), self.b(x), self.weight, self.bias)))


@pytest.mark.parametrize("bias", [True, False])
def test_f_bilinear_imports_as_nn_bilinear_does(bias: bool) -> None:
    functional = dnnbench.from_torch(FunctionalFusion(bias), (12,))
    assert totals(functional) == totals(dnnbench.from_torch(Fusion(bias), (12,)))
    assert totals(functional).weights == params(FunctionalFusion(bias))
    assert [layer.kind for layer in functional.layers].count("matmul") == 1


def test_f_bilinear_of_a_weight_that_is_not_learned_is_a_one_line_error() -> None:
    class Fixed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(4, 3)
            self.register_buffer("w", torch.randn(2, 3, 3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.a(x)
            return nn.functional.bilinear(h, h, self.w)

    with pytest.raises(dnnbench.SpecError) as err:
        dnnbench.from_torch(Fixed(), (4,))
    assert "\n" not in str(err.value) and "F.bilinear" in str(err.value)


class LpNet(nn.Module):
    def __init__(self, p: float, one_d: bool) -> None:
        super().__init__()
        conv, pool = (nn.Conv1d, nn.LPPool1d) if one_d else (nn.Conv2d, nn.LPPool2d)
        self.conv = conv(3, 8, 3)
        self.pool = pool(p, 2) if one_d else pool(p, (2, 3), stride=2, ceil_mode=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(torch.relu(self.conv(x)))


@pytest.mark.parametrize(("p", "one_d"), [(2.0, False), (3.0, False), (1.5, True), (2, True)])
def test_lp_pooling_imports_as_its_steps(p: float, one_d: bool) -> None:
    shape = (3, 17) if one_d else (3, 11, 14)
    net = imports_like_pytorch(LpNet(p, one_d), shape, torch.randn(2, *shape))
    pools = [layer for layer in net.layers if layer.kind == "pool"]
    assert len(pools) == 1 and pools[0].mode == "avg"
    kinds = [layer.kind for layer in net.layers]
    assert kinds.count("scale") == 2
    # PyTorch's output shape, ceil_mode included.
    assert net.shapes[-1] == tuple(LpNet(p, one_d)(torch.randn(1, *shape)).shape[1:])
