"""Networks from teaching and everyday research code: a variational autoencoder (``torch.randn_like``
noise, ``torch.exp``), a Siamese network (a difference and ``abs``), a sub-pixel super-resolution network
(``nn.PixelShuffle``, ``nn.PixelUnshuffle``). Each imports from PyTorch with its weights and FLOPs, from
its ONNX export with the same counts, and is built back by the runner (docs/importing.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from importers.import_helpers import dense_weight_grad, params, step_flops
from importers.onnx_export import export
from torch import nn

import dnnbench
from dnnbench import presets
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.importers._build import SpecBuilder
from dnnbench.measure import torchnet
from dnnbench.model import evaluate
from dnnbench.specs import Configuration


class VAE(nn.Module):
    """Kingma and Welling's MNIST VAE as PyTorch's examples write it: the reparameterisation
    ``mu + eps * exp(logvar / 2)`` with ``eps = randn_like``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc21, self.fc22 = nn.Linear(784, 400), nn.Linear(400, 20), nn.Linear(400, 20)
        self.fc3, self.fc4 = nn.Linear(20, 400), nn.Linear(400, 784)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.fc1(x.view(-1, 784)))
        mu, logvar = self.fc21(h), self.fc22(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))


class Siamese(nn.Module):
    """Two inputs stacked as one sample, one shared encoder, the L1 distance of their codes."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 16))
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head((self.encoder(x[:, 0]) - self.encoder(x[:, 1])).abs())


class SubPixel(nn.Module):
    """ESPCN (Shi et al. 2016): convolutions at low resolution, a pixel shuffle up; an unshuffle in front."""

    def __init__(self, factor: int = 3) -> None:
        super().__init__()
        self.down = nn.PixelUnshuffle(2)
        self.body = nn.Sequential(nn.Conv2d(12, 32, 5, padding=2), nn.Tanh(), nn.Conv2d(32, 3 * factor ** 2, 3,
                                                                                          padding=1))
        self.up = nn.PixelShuffle(factor)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(F.pixel_shuffle(self.up(self.body(self.down(x))), 1))


CASES = [(VAE, (1, 28, 28)), (Siamese, (2, 32)), (SubPixel, (3, 16, 16))]


@pytest.mark.parametrize("cls,shape", CASES, ids=[c.__name__ for c, _ in CASES])
def test_an_everyday_network_imports_with_pytorch_s_weights_and_flops(cls: type[nn.Module], shape: tuple[int, ...],
                                                                      tmp_path: Path) -> None:
    module = cls()
    net = dnnbench.from_torch(module, shape)
    t = totals(net)
    assert t.weights == params(module)
    forward, backward = step_flops(lambda: module(torch.zeros(2, *shape)))
    assert forward == 2 * 2 * t.macs_forward
    assert backward == 2 * 2 * (t.macs_backprop + dense_weight_grad(net))
    built = torchnet.build_model(net)
    assert params(built) == t.weights
    assert tuple(built(torch.zeros(2, *net.layers[0].shape)).shape[1:]) == net.shapes[-1]
    assert totals(dnnbench.from_torch(built, net.layers[0].shape)) == t
    assert totals(dnnbench.from_onnx(export(module, shape, tmp_path / "net.onnx"))) == t
    pred = evaluate(net, presets.cluster("modern-2025"), presets.dataset("mnist"), Configuration())
    assert float(pred.time_per_sample_s) > 0


def test_the_vae_s_noise_is_a_constant_factor_and_exp_an_activation() -> None:
    net = dnnbench.from_torch(VAE(), (1, 28, 28))
    kinds = [(layer.kind, getattr(layer, "function", None) or getattr(layer, "activation", None)) for layer in
             net.layers]
    assert ("activation", "exp") in kinds and ("scale", None) in kinds and ("add", "none") in kinds
    assert not any(kind == "dropout" for kind, _ in kinds)  # noise is no mask


def _views(net: dnnbench.specs.Network, x: torch.Tensor) -> torch.Tensor:
    """Apply a chain of reshape and permute layers to a batch, as the runner does."""
    for layer in net.layers[1:]:
        if layer.kind == "reshape":
            x = x.reshape(x.shape[0], *layer.shape)
        else:
            assert layer.kind == "permute"
            x = x.permute(0, *(d + 1 for d in layer.dims))
    return x


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 4), st.integers(1, 4), st.booleans(), st.booleans())
@settings(max_examples=40, deadline=None)
def test_a_pixel_shuffle_moves_the_values_pytorch_and_onnx_move(r: int, c: int, h: int, w: int, unshuffle: bool,
                                                                 dcr: bool) -> None:
    """The view, permute, view chain against F.pixel_shuffle / F.pixel_unshuffle (CRD order) and ONNX's
    reference DepthToSpace (DCR) / SpaceToDepth."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    shape = (c, h * r, w * r) if unshuffle else (c * r * r, h, w)
    b = SpecBuilder(shape)
    if b.pixel_shuffle(shape, r, "shuffle", "test", b.last, unshuffle=unshuffle, blocks_first=dcr or unshuffle
                       ) == b.last == "input":
        assert r == 1  # a factor of 1 moves nothing
        return
    net = b.build("shuffle", "", "")
    x = torch.arange(2 * int(np.prod(shape)), dtype=torch.float32).reshape(2, *shape)
    if dcr or unshuffle:
        op = "SpaceToDepth" if unshuffle else "DepthToSpace"
        node = helper.make_node(op, ["x"], ["y"], blocksize=r, **({} if unshuffle else {"mode": "DCR"}))
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        want = torch.from_numpy(ReferenceEvaluator(helper.make_model(graph)).run(None, {"x": x.numpy()})[0])
    else:
        want = F.pixel_shuffle(x, r)
    assert torch.equal(_views(net, x), want)
    assert net.shapes[-1] == tuple(want.shape[1:])


def test_a_torch_pixel_unshuffle_moves_the_values_pytorch_moves() -> None:
    b = SpecBuilder((3, 6, 4))
    b.pixel_shuffle((3, 6, 4), 2, "down", "test", b.last, unshuffle=True, blocks_first=False)
    x = torch.randn(2, 3, 6, 4)
    assert torch.equal(_views(b.build("down", "", ""), x), F.pixel_unshuffle(x, 2))


@pytest.mark.parametrize("module,shape", [(nn.PixelShuffle(2), (6, 4, 4)), (nn.PixelUnshuffle(3), (2, 4, 6))])
def test_a_shuffle_that_does_not_divide_is_one_line(module: nn.Module, shape: tuple[int, ...]) -> None:
    with pytest.raises(SpecError, match=r"does not fit the module \(RuntimeError:") as err:
        dnnbench.from_torch(module, shape)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("shape,factor,unshuffle,message", [
    ((6, 4, 4), 2, False, "shuffles 6 channels by 2; they must divide by 4"),
    ((2, 4, 6), 3, True, "unshuffles 4x6 maps by 3, which does not divide them"),
    ((4, 4), 2, False, r"shuffles a \[4, 4\] input; dnnbench shuffles \(C, H, W\) maps"),
])
def test_a_shuffle_the_builder_cannot_make_is_one_line(shape: tuple[int, ...], factor: int, unshuffle: bool,
                                                       message: str) -> None:
    b = SpecBuilder(shape)
    with pytest.raises(SpecError, match=message) as err:
        b.pixel_shuffle(shape, factor, "up", "DepthToSpace node 'up'", b.last, unshuffle=unshuffle)
    assert "\n" not in str(err.value)
