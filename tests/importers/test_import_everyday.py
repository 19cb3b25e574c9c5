"""Networks from teaching and everyday research code: a variational autoencoder (``torch.randn_like``
noise, ``torch.exp``), a Siamese network (a difference and ``abs``) and one scored by cosine similarity
and pairwise distance, a sub-pixel super-resolution network (``nn.PixelShuffle``, ``nn.PixelUnshuffle``),
SIREN (sines), a ShuffleNet unit (``nn.ChannelShuffle``, 1-D padding modules), SegNet (max unpooling),
a text CNN and PointNet (maxima over an axis), a temporal convolution network (``nn.GLU``, the last step
``y[:, :, -1]``), a LLaMA block (RMS norms), an autoencoder (``nn.Unflatten``), a spectral-norm GAN
critic. Each imports from PyTorch with its weights and FLOPs, from its ONNX export with the same counts
(where torch exports it so), and is built back by
the runner (docs/importing.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from importers.import_helpers import imports_like_pytorch, params, step_flops
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


class TextCNN(nn.Module):
    """Kim (2014): convolutions of 3, 4 and 5 words over the embedded sentence, each max over time."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(500, 32)
        self.convs = nn.ModuleList([nn.Conv1d(32, 16, k) for k in (3, 4, 5)])
        self.head = nn.Linear(48, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.embed(x).transpose(1, 2)
        return self.head(torch.cat([torch.max(F.relu(c(e)), dim=2)[0] for c in self.convs], 1))


class PointNet(nn.Module):
    """Qi et al. (2017) without its transform nets: shared per-point layers, a max over the points
    (``.values``), a minimum beside it (``amin``), a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.points = nn.Sequential(nn.Conv1d(3, 32, 1), nn.BatchNorm1d(32), nn.ReLU(), nn.Conv1d(32, 64, 1))
        self.head = nn.Sequential(nn.Linear(128, 32), nn.ReLU(), nn.Linear(32, 5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.points(x)
        return self.head(torch.cat((f.max(dim=2).values, f.amin(2)), 1))


class TemporalConv(nn.Module):
    """A causal temporal convolution block (Bai et al. 2018): padding cut off the end, a residual, the
    last step read as ``y[:, :, -1]``; gated linear units (``nn.GLU``) between."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(8, 32, 3, padding=2)
        self.glu = nn.GLU(dim=1)
        self.conv2 = nn.Conv1d(16, 16, 3, padding=4, dilation=2)
        self.skip = nn.Conv1d(8, 16, 1)
        self.head = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.glu(self.conv1(x)[:, :, :-2])
        y = F.relu(F.glu(torch.cat((self.conv2(y)[:, :, :-4], y), 1), dim=1) + self.skip(x))
        return self.head(y[:, :, -1])


class RMSNorm(nn.Module):
    """LLaMA's RMS norm as its reference code writes it."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Llama(nn.Module):
    """One LLaMA block: RMS norms (hand-written and ``nn.RMSNorm``), causal attention, a SwiGLU MLP."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(300, 32)
        self.norm1, self.norm2, self.norm = RMSNorm(32), nn.RMSNorm(32), RMSNorm(32)
        self.qkv, self.out = nn.Linear(32, 96, bias=False), nn.Linear(32, 32, bias=False)
        self.w1, self.w3, self.w2 = nn.Linear(32, 64, bias=False), nn.Linear(32, 64, bias=False), nn.Linear(64, 32,
                                                                                                         bias=False)
        self.head = nn.Linear(32, 300, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        b, t, c = h.shape
        q, k, v = (z.view(b, t, 4, 8).transpose(1, 2) for z in self.qkv(self.norm1(h)).split(32, 2))
        h = h + self.out(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c))
        g = self.norm2(h)
        h = h + self.w2(F.silu(self.w1(g)) * self.w3(g))
        return self.head(F.rms_norm(self.norm(h), (32,)))


class AutoEncoder(nn.Module):
    """An MNIST autoencoder whose decoder ends in ``nn.Unflatten``."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Flatten(), nn.Linear(784, 32), nn.ReLU())
        self.decoder = nn.Sequential(nn.Linear(32, 784), nn.Sigmoid(), nn.Unflatten(1, (1, 28, 28)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x)).flatten(1).unflatten(1, (1, 784))


class Critic(nn.Module):
    """A GAN discriminator with spectral norm (Miyato et al. 2018) on its convolutions."""

    def __init__(self) -> None:
        super().__init__()
        norm = nn.utils.parametrizations.spectral_norm
        self.body = nn.Sequential(norm(nn.Conv2d(3, 16, 4, 2, 1)), nn.LeakyReLU(0.2), norm(nn.Conv2d(16, 32, 4, 2, 1)),
                                  nn.LeakyReLU(0.2))
        self.head = norm(nn.Linear(32 * 4 * 4, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x).flatten(1))


class BagOfWords(nn.Module):
    """A fastText-style classifier: the maximum of a bag of token embeddings (``nn.EmbeddingBag``)."""

    def __init__(self) -> None:
        super().__init__()
        self.bag, self.head = nn.EmbeddingBag(500, 32, mode="max"), nn.Linear(32, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.bag(x))


class Dueling(nn.Module):
    """Wang et al. (2016): a state's value (1,) plus its advantages (A,) less their mean, broadcast."""

    def __init__(self) -> None:
        super().__init__()
        self.body, self.value, self.advantage = nn.Linear(8, 32), nn.Linear(32, 1), nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.body(x))
        a = self.advantage(h)
        return self.value(h) + a - a.mean(dim=1, keepdim=True)


class Softsign(nn.Module):
    """An MLP with ``nn.Softsign`` and ``F.softsign``."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 20), nn.Softsign(), nn.Linear(20, 20))
        self.head = nn.Linear(20, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.softsign(self.net(x)))


class Siren(nn.Module):
    """Sitzmann et al. (2020): sine activations, ``torch.sin(30 * linear(x))``; a cosine feature beside."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.out = nn.Linear(2, 32), nn.Linear(32, 32), nn.Linear(64, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.sin(30.0 * self.a(x))
        h = self.b(h)
        return self.out(torch.cat((h.sin(), torch.cos(h)), 1))


class SiameseScores(nn.Module):
    """A Siamese network scored by ``F.cosine_similarity`` and ``F.pairwise_distance`` of its two codes."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
        self.head = nn.Linear(2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.encoder(x[:, 0]), self.encoder(x[:, 1])
        return self.head(torch.stack((F.cosine_similarity(a, b), F.pairwise_distance(a, b)), 1))


class ShuffleUnit(nn.Module):
    """A ShuffleNet unit written with ``nn.ChannelShuffle``, on signals padded by ``nn.ReflectionPad1d``
    first."""

    def __init__(self) -> None:
        super().__init__()
        self.signal = nn.Sequential(nn.ReflectionPad1d(2), nn.Conv1d(4, 8, 5), nn.ReplicationPad1d((1, 0)))
        self.unit = nn.Sequential(nn.Conv2d(8, 16, 1, groups=4), nn.ChannelShuffle(4),
                                  nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.ReLU())
        self.head = nn.Linear(16 * 4 * 5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.signal(x)  # (8, 20)
        return self.head(self.unit(s.view(-1, 8, 4, 5)).flatten(1))


class SegNet(nn.Module):
    """Badrinarayanan et al. (2017) in small: max pooling that returns its maxima's positions, a decoder
    that unpools by them (``nn.MaxUnpool2d``, ``F.max_unpool2d`` to the size before an uneven pooling)."""

    def __init__(self) -> None:
        super().__init__()
        self.enc1, self.enc2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 16, 3, padding=1)
        self.pool, self.unpool = nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)
        self.dec2, self.dec1 = nn.Conv2d(16, 8, 3, padding=1), nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h1, i1 = self.pool(F.relu(self.enc1(x)))
        h2, i2 = F.max_pool2d(F.relu(self.enc2(h1)), 2, return_indices=True)
        d = F.max_unpool2d(F.relu(h2), i2, 2, output_size=h1.shape[-2:])
        return self.dec1(self.unpool(F.relu(self.dec2(d)), i1))


CASES = [(VAE, (1, 28, 28), True), (SegNet, (3, 18, 18), False), (Siren, (2,), True), (SiameseScores, (2, 16), False),
         (ShuffleUnit, (4, 19), False),
         (Dueling, (8,), True), (Softsign, (10,), True), (Siamese, (2, 32), True),
         (SubPixel, (3, 16, 16), True), (BagOfWords, (12,), False),
         (TextCNN, (30,), True), (PointNet, (3, 50), True), (TemporalConv, (8, 24), True),
         (Llama, (12,), False), (AutoEncoder, (1, 28, 28), True), (Critic, (3, 16, 16), False)]


@pytest.mark.parametrize("cls,shape,onnx", CASES, ids=[c.__name__ for c, _, _ in CASES])
def test_an_everyday_network_imports_with_pytorch_s_weights_and_flops(cls: type[nn.Module], shape: tuple[int, ...],
                                                                      onnx: bool, tmp_path: Path) -> None:
    """(torch cannot export LLaMA's ``F.rms_norm``, ``nn.ChannelShuffle``, ``nn.MaxUnpool2d`` nor spectral
    norm's power iteration; it writes an embedding bag as a loop.)"""
    module = cls()
    dtype = torch.long if isinstance(module, (TextCNN, Llama, BagOfWords)) else torch.float32
    net = imports_like_pytorch(module, shape, torch.zeros(2, *shape, dtype=dtype))
    t = totals(net)
    if onnx:
        assert totals(dnnbench.from_onnx(export(module, shape, tmp_path / "net.onnx", dtype=dtype))) == t
    pred = evaluate(net, presets.cluster("modern-2025"), presets.dataset("mnist"), Configuration())
    assert float(pred.time_per_sample_s) > 0


class WeightedBag(nn.Module):
    """A bag of token embeddings summed with a weight per token (``per_sample_weights``: TF-IDF weights)."""

    def __init__(self) -> None:
        super().__init__()
        self.bag, self.head = nn.EmbeddingBag(500, 16, mode="sum"), nn.Linear(16, 3)

    def forward(self, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return self.head(self.bag(ids, per_sample_weights=weights))


def test_an_embedding_bag_with_per_sample_weights_imports_as_its_products_and_sum() -> None:
    """Each token's embedding times its weight (viewed as a column), summed over the bag; the runner's build
    trains with the module's weights and computes what the module does."""
    module = WeightedBag()
    net = dnnbench.from_torch(module, [(12,), (12,)])
    assert [layer.kind for layer in net.layers] == ["input", "input", "embedding", "reshape", "mul", "reduce", "fc"]
    assert net.shapes[4] == (12, 16) and totals(net).weights == sum(p.numel() for p in module.parameters())
    built = torchnet.build_model(net)
    for mine, theirs in zip(built.parameters(), module.parameters(), strict=True):
        mine.data.copy_(theirs.data)
    ids, weights = torch.randint(0, 500, (4, 12)), torch.rand(4, 12)
    assert torch.allclose(built(ids, weights), module(ids, weights), atol=1e-6)
    with pytest.raises(SpecError, match=r"^OffsetBag input_shape: \[12\] does not fit the module .*offsets") as err:
        dnnbench.from_torch(OffsetBag(), (12,))
    assert "\n" not in str(err.value)


class OffsetBag(nn.Module):
    """Offsets with a (B, S) batch: torch itself refuses them (a batch of bags laid end to end, torchtext's
    text classifier, has no shape per sample)."""

    def __init__(self) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(500, 16, mode="mean")

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.bag(ids, torch.zeros(1, dtype=torch.long))


def test_a_channel_shuffle_and_a_similarity_compute_what_pytorch_computes() -> None:
    """The runner's view, permute, view against ``nn.ChannelShuffle``; the layers of a cosine similarity
    built back against ``F.cosine_similarity`` (a pairwise distance's difference builds back as the sum
    it is counted as: only its shape is compared)."""
    x = torch.randn(2, 12, 2, 3)
    shuffle = dnnbench.from_torch(nn.ChannelShuffle(3), (12, 2, 3))
    assert torch.equal(_views(shuffle, x), nn.ChannelShuffle(3)(x))

    class Scores(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat((F.cosine_similarity(x[:, 0], x[:, 1]).unsqueeze(1),
                              F.pairwise_distance(x[:, 0], x[:, 1]).unsqueeze(1)), 1)

    net = dnnbench.from_torch(Scores(), (2, 8))
    x = torch.randn(3, 2, 8)
    got, want = torchnet.build_model(net)(x), Scores()(x)
    assert got.shape == want.shape and torch.allclose(got[:, 0], want[:, 0], atol=1e-5)


@pytest.mark.parametrize("shape", [(3, 16, 16), (2, 18, 13)])
def test_patches_cut_by_unfold_are_the_views_pytorch_takes(shape: tuple[int, ...]) -> None:
    """A ViT's patches written by hand, ``x.unfold(2, 4, 4).unfold(3, 4, 4)``: a reshape and a permute per
    axis (and a slice where 4 does not divide it) with PyTorch's values; windows that overlap are
    ``windows`` layers, which copy."""
    class Patches(nn.Module):
        def __init__(self, step: int = 4) -> None:
            super().__init__()
            self.step = step

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.unfold(2, 4, self.step).unfold(3, 4, self.step)

    net = dnnbench.from_torch(Patches(), shape)
    x = torch.randn(2, *shape)
    want = Patches()(x)
    assert torch.equal(_views(net, x), want) and net.shapes[-1] == tuple(want.shape[1:])
    assert totals(net).macs_forward == 0 and totals(net).elem_ops_forward == 0  # views
    overlapping = dnnbench.from_torch(Patches(step=2), shape)  # windows layers (test_import_windows.py)
    assert [layer.kind for layer in overlapping.layers].count("windows") == 2
    assert overlapping.shapes[-1] == tuple(Patches(step=2)(x).shape[1:])


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
        elif layer.kind == "slice":
            x = x.narrow(layer.axis % (x.dim() - 1) + 1, layer.start, layer.stop - layer.start)
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


def test_extremes_over_time_and_points_are_reduce_layers_and_indices_their_search() -> None:
    net = dnnbench.from_torch(PointNet(), (3, 50))
    assert [(layer.mode, layer.axes) for layer in net.layers if layer.kind == "reduce"] == [("max", (1,)),
                                                                                            ("min", (1,))]

    class Unpacked(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            values, _ = x.max(dim=1)  # the indices unpacked, unused
            return values

    assert [layer.kind for layer in dnnbench.from_torch(Unpacked(), (4, 5)).layers] == ["input", "reshape", "reduce"]

    class Argmax(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.max(dim=1)[1].float()

    # the indices used as values: the same search, without a gradient (as argmax)
    assert [layer.kind for layer in dnnbench.from_torch(Argmax(), (4, 5)).layers] == ["input", "reshape", "reduce",
                                                                                       "stop_gradient"]


def test_a_global_max_over_maps_is_max_pooling_from_pytorch_and_onnx(tmp_path: Path) -> None:
    module = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body, self.fc = module, nn.Linear(8, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.body(x).amax(dim=(2, 3)))

    net = dnnbench.from_torch(Head(), (3, 10, 10))
    assert [(layer.kind, getattr(layer, "mode", None)) for layer in net.layers][2] == ("pool", "max")
    assert totals(dnnbench.from_onnx(export(Head(), (3, 10, 10), tmp_path / "head.onnx"))) == totals(net)


def test_rms_norms_are_layer_norms_without_a_shift() -> None:
    net = dnnbench.from_torch(Llama(), (12,))
    norms = [layer.to_dict() for layer in net.layers if layer.kind == "layer_norm"]
    assert [(d["affine"], d.get("bias", True)) for d in norms] == [(True, False)] * 3 + [(False, True)]


def test_the_onnx_rms_normalization_operator_is_a_layer_norm_without_a_shift() -> None:
    from onnx import TensorProto, helper, numpy_helper

    scale = numpy_helper.from_array(np.ones(16, dtype=np.float32), "scale")
    weight = numpy_helper.from_array(np.ones((16, 4), dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("RMSNormalization", ["x", "scale"], ["n"], axis=-1), helper.make_node("MatMul", ["n", "w"],
                                                                                                ["y"])],
        "rms", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [scale, weight])
    net = dnnbench.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)]))
    assert [layer.to_dict()["kind"] for layer in net.layers][-2:] == ["layer_norm", "fc"]
    assert net.layers[-2].to_dict()["bias"] is False and totals(net).weights == 16 + 64


def test_weight_norm_imports_as_a_field_of_its_layer_with_the_magnitudes_counted() -> None:
    """``weight_norm`` (the parametrization and the older hook) is the layer's ``weight_norm``: g per
    output (dim 0; dim 1 of a transposed convolution), per input (dim 1; dim 0 of a transposed one) or one
    (dim None); the weights are the module's parameters, and the runner builds the same normalisation."""
    norm = nn.utils.parametrizations.weight_norm
    module = nn.Sequential(norm(nn.Conv2d(3, 8, 3)), nn.ReLU(), norm(nn.ConvTranspose2d(8, 6, 3, groups=2)),
                           norm(nn.ConvTranspose2d(6, 4, 2, stride=2), dim=1), nn.Flatten(),
                           norm(nn.Linear(4 * 16 * 16, 4), dim=1), norm(nn.Linear(4, 3), dim=None))
    net = dnnbench.from_torch(module, (3, 8, 8))
    normed = [(layer.kind, layer.weight_norm) for layer in net.layers if hasattr(layer, "weight_norm")]
    assert normed == [("conv2d", "output"), ("conv_transpose2d", "input"), ("conv_transpose2d", "output"),
                      ("fc", "input"), ("fc", "whole")]
    assert totals(net).weights == params(module)
    assert [net.parameter_tensors(i) for i in (1, 2)] == [(8, 216, 8), (6, 216, 8)]  # bias, v, g
    built = torchnet.build_model(net)
    assert params(built) == params(module)
    assert sorted(tuple(p.shape) for p in built.parameters()) == sorted(tuple(p.shape) for p in module.parameters())
    with pytest.warns(FutureWarning):
        old = nn.Sequential(nn.utils.weight_norm(nn.Conv1d(3, 8, 3)), nn.Flatten(), nn.Linear(8 * 6, 4))
    assert [getattr(layer, "weight_norm", None) for layer in dnnbench.from_torch(old, (3, 8)).layers
            if layer.kind in ("conv2d", "fc")] == ["output", "none"]
    assert totals(dnnbench.from_torch(old, (3, 8))).weights == params(old)


def test_an_onnx_export_of_weight_norm_imports_as_from_torch_imports_it(tmp_path: Path) -> None:
    """torch exports weight_norm as Mul(g, Div(v, ReduceL2(v))) on the initializers: the same fields, so
    the magnitudes are counted; a large weight (not folded as a small constant) as well as small ones."""
    norm = nn.utils.parametrizations.weight_norm
    module = nn.Sequential(norm(nn.Conv2d(3, 8, 3)), nn.ReLU(), norm(nn.ConvTranspose2d(8, 6, 3, groups=2)),
                           norm(nn.ConvTranspose2d(6, 4, 2, stride=2), dim=1), nn.Flatten(),
                           norm(nn.Linear(4 * 16 * 16, 4), dim=1), norm(nn.Linear(4, 3), dim=None))
    net = dnnbench.from_onnx(export(module, (3, 8, 8), tmp_path / "normed.onnx"))
    assert [getattr(layer, "weight_norm", None) for layer in net.layers if layer.kind != "flatten"][1:] == [
        "output", "input", "output", "input", "whole"]
    assert totals(net) == totals(dnnbench.from_torch(module, (3, 8, 8))) and totals(net).weights == params(module)


class PositionalConvolution(nn.Module):
    """wav2vec 2.0's relative positional embedding: a grouped 1-D convolution over the frames, weight-normalised
    along its kernel axis (``dim=2``: one magnitude per kernel position), GELU, added to the frames; and a
    2-D convolution normalised per kernel row (``dim=2``) and one per column (``dim=3``)."""

    def __init__(self) -> None:
        super().__init__()
        norm = nn.utils.parametrizations.weight_norm
        self.pos = norm(nn.Conv1d(16, 16, 9, padding=4, groups=4), name="weight", dim=2)
        self.rows = norm(nn.Conv2d(1, 4, (3, 5), padding=(1, 2)), dim=2)
        self.columns = norm(nn.ConvTranspose2d(4, 2, (3, 5), padding=(1, 2)), dim=3)
        self.head = nn.Linear(2 * 16 * 20, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + F.gelu(self.pos(x))
        y = self.columns(torch.relu(self.rows(y.unsqueeze(1))))
        return self.head(y.flatten(1))


def test_weight_norm_along_a_kernel_axis_counts_one_magnitude_per_kernel_row_or_column(tmp_path: Path) -> None:
    """A 1-D convolution's kernel axis is the column axis of its 2-D layer; a 2-D convolution's dim 2 and
    3 are its kernel's rows and columns: the weights are the module's parameters, the runner builds the
    same parameters, and the ONNX export imports the same."""
    module = PositionalConvolution()
    net = imports_like_pytorch(module, (16, 20), torch.randn(2, 16, 20))
    normed = [layer.weight_norm for layer in net.layers if getattr(layer, "weight_norm", "none") != "none"]
    assert normed == ["kernel_columns", "kernel_rows", "kernel_columns"]
    built = torchnet.build_model(net)
    assert sorted(p.numel() for p in built.parameters()) == sorted(p.numel() for p in module.parameters())
    onnx_net = dnnbench.from_onnx(export(module, (16, 20), tmp_path / "positional.onnx"))
    assert [layer.weight_norm for layer in onnx_net.layers if getattr(layer, "weight_norm", "none") != "none"] == normed
    assert totals(onnx_net).weights == params(module)


def test_weight_norm_along_a_kernel_axis_of_a_volume_or_a_linear_layer_is_a_one_line_error() -> None:
    module = nn.Sequential(nn.utils.parametrizations.weight_norm(nn.Conv3d(3, 8, 3), dim=2))
    with pytest.raises(SpecError, match=r"normalises its weight along axis 2; dnnbench imports weight_norm with "
                                        r"dim 0, 1 or None, or along a kernel axis of a 1-D or 2-D convolution"):
        dnnbench.from_torch(module, (3, 8, 8, 8))
    with pytest.raises(SpecError, match=r"layers\[1\]\.weight_norm: 'kernel_rows'"):
        dnnbench.Network.build({"name": "n", "layers": [
            {"kind": "input", "shape": [8]}, {"kind": "fc", "out_features": 4, "weight_norm": "kernel_rows"}]})


class _Bilinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pair = nn.utils.parametrizations.weight_norm(nn.Bilinear(8, 8, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pair(x, x)


@pytest.mark.parametrize(("build", "shape", "normed"), [
    (lambda: nn.Sequential(nn.utils.parametrizations.weight_norm(nn.Embedding(100, 16)), nn.Flatten(),
                           nn.Linear(160, 2)), (10,), "weight"),
    (lambda: nn.Sequential(nn.utils.weight_norm(nn.LSTM(8, 16, batch_first=True), name="weight_hh_l0")), (5, 8),
     "weight_hh_l0"),
    (lambda: nn.Sequential(nn.utils.parametrizations.weight_norm(nn.Linear(8, 4), name="bias")), (8,), "bias"),
    (_Bilinear, (8,), "weight"),
])
@pytest.mark.filterwarnings("ignore:.torch.nn.utils.weight_norm. is deprecated:FutureWarning")
def test_weight_norm_of_what_has_no_such_field_is_a_one_line_error(build: Callable[[], nn.Module],
                                                                    shape: tuple[int, ...], normed: str) -> None:
    """An embedding's, an LSTM's or a bilinear layer's weight norm, or a linear layer's bias's, would leave
    its magnitudes uncounted (the weights would not be the module's parameters): a one-line error naming
    the parameter and how to remove the normalisation."""
    with pytest.raises(SpecError, match=rf"normalises its {normed} \(weight_norm\), whose magnitudes dnnbench "
                                        r"cannot count.*remove_parametrizations") as err:
        dnnbench.from_torch(build(), shape)
    assert "\n" not in str(err.value)


def test_a_weight_norm_costs_passes_over_its_weights_every_step() -> None:
    """The normalisation runs once per call (per mini-batch): it adds most to the per-sample time at a
    small batch, and nothing else changes (docs/model.md)."""
    def spec(mode: str) -> dnnbench.specs.Network:
        return dnnbench.specs.Network.build({"name": "wn", "layers": [
            {"kind": "input", "shape": [1024]}, {"kind": "fc", "out_features": 1024, "weight_norm": mode},
            {"kind": "fc", "out_features": 10}]})

    cluster, data = presets.cluster("modern-2025"), presets.dataset("mnist")
    for batch in (1.0, 64.0):
        config = Configuration(workers_per_replica=1, replicas=1, ps_machines=1, local_batch_samples=int(batch),
                               fc_update="deltas")
        plain, normed = (evaluate(spec(m), cluster, data, config) for m in ("none", "output"))
        extra = float(normed.breakdown.compute_forward_s - plain.breakdown.compute_forward_s)
        grad = float(normed.breakdown.compute_weight_grad_s - plain.breakdown.compute_weight_grad_s)
        assert extra > 0 and grad > 0 and 1.0 < grad / extra < 3.0  # 5 passes backward, 3 forward
        if batch == 1.0:
            small = extra
    assert small / extra == pytest.approx(64.0)  # once per mini-batch: its share per sample falls as 1/b
    with pytest.raises(SpecError, match=r"weight_norm: 'output'.*must be none for a fixed filter"):
        dnnbench.specs.Network.build({"name": "bad", "layers": [
            {"kind": "input", "shape": [1, 8, 8]},
            {"kind": "conv2d", "out_channels": 2, "kernel": 3, "learned": False, "bias": False,
             "weight_norm": "output"}]})


def test_a_broadcast_add_counts_its_gradient_summed_over_the_spread_positions() -> None:
    net = dnnbench.from_torch(Dueling(), (8,))
    adds = [(layer.kind, shape, c.elem_ops_forward, c.elem_ops_backprop) for layer, shape, c in
            zip(net.layers, net.shapes, net.layer_counts, strict=True) if layer.kind == "add"]
    assert adds == [("add", (4,), 4, 4), ("add", (4,), 4, 4)]  # value (1,) + a; then minus the mean (1,)
    with pytest.raises(SpecError, match=r"add needs \[4\] \(or sizes of 1 where it broadcasts\)"):
        dnnbench.specs.Network.build({"name": "bad", "layers": [
            {"kind": "input", "shape": [8]}, {"kind": "fc", "name": "v", "out_features": 3},
            {"kind": "fc", "name": "a", "inputs": ["input"], "out_features": 4},
            {"kind": "add", "inputs": ["a", "v"]}]})


def test_an_onnx_export_of_f_normalize_imports_as_a_norm_and_a_broadcast_division(tmp_path: Path) -> None:
    """torch exports ``F.normalize`` as ReduceL2, Clip, Expand (of the norm over the values) and Div."""

    class Embedder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(32, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.normalize(self.fc(x), dim=1)

    net = dnnbench.from_onnx(export(Embedder(), (32,), tmp_path / "embedder.onnx"))
    kinds = [(layer.kind, getattr(layer, "mode", None), getattr(layer, "divide", None)) for layer in net.layers]
    assert ("reduce", "l2", None) in kinds and kinds[-1] == ("mul", None, True)
    assert net.shapes[-1] == (16,) and totals(net).weights == 32 * 16 + 16


def test_an_onnx_einsum_that_is_a_batched_product_imports_as_from_torch_imports_it(tmp_path: Path) -> None:
    """torch exports ``torch.einsum`` as one ONNX ``Einsum`` node: the same permutes, views and matmul."""

    class EinsumAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q, self.head = nn.Linear(16, 16), nn.Linear(16, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            scores = torch.einsum("bid,bjd->bij", self.q(x), x).softmax(-1)
            return self.head(torch.einsum("bij,bjd->bid", scores, x)[:, 0])

    module = EinsumAttention()
    net = dnnbench.from_onnx(export(module, (6, 16), tmp_path / "einsum.onnx"))
    assert totals(net) == totals(dnnbench.from_torch(module, (6, 16)))
    assert [layer.kind for layer in net.layers].count("matmul") == 2


def test_a_max_unpool_writes_each_value_at_its_window_and_imports_from_onnx(tmp_path: Path) -> None:
    """The runner's unpool writes each value at its window's first position, zeros elsewhere (what
    max_unpool2d computes for those positions); ONNX's MaxPool with positions and MaxUnpool import as
    from_torch's layers; an output size that no pooling gives is one line."""
    from onnx import TensorProto, helper, save

    net = dnnbench.from_torch(SegNet(), (3, 18, 18))
    unpools = [layer for layer in net.layers if layer.kind == "max_unpool"]
    assert [u.size for u in unpools] == [(9, 9), None]  # 9 -> 4 by the second pooling: the size is named
    layer = unpools[0]
    x = torch.randn(2, 16, 4, 4)
    got = torchnet._max_unpool(layer, (16, 4, 4))(x)
    want = torch.zeros(2, 16, 9, 9)
    want[:, :, 0:8:2, 0:8:2] = x
    assert torch.equal(got, want)

    nodes = [helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("MaxUnpool", ["p", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "unpool.onnx")
    onnx_net = dnnbench.from_onnx(tmp_path / "unpool.onnx")
    assert [(lay.kind, shape) for lay, shape in zip(onnx_net.layers, onnx_net.shapes, strict=True)] == [
        ("input", (3, 8, 8)), ("pool", (3, 4, 4)), ("max_unpool", (3, 8, 8))]
    with pytest.raises(SpecError, match=r"size: \[12, 8\] must lie within a stride of \[8, 8\]") as err:
        dnnbench.specs.Network.build({"name": "u", "layers": [{"kind": "input", "shape": [3, 4, 4]},
                                                              {"kind": "max_unpool", "window": 2, "size": [12, 8]}]})
    assert "\n" not in str(err.value)


class SharedLambda(nn.Module):
    """LambdaNet's content lambda written by hand: one (K, V) summary of the keys and values per sample,
    used by every head's queries (a product whose second operand broadcasts over the heads)."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(8, 32), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.q(x).reshape(x.shape[0], 6, 4, 8).transpose(1, 2)  # (B, heads, S, K)
        lam = (torch.tanh(self.k(x)).transpose(1, 2) @ self.v(x)).unsqueeze(1)  # (B, 1, K, V)
        return (q @ lam).flatten(1)


def test_a_product_that_broadcasts_one_operand_over_the_heads_counts_every_head() -> None:
    """(B, 4, 6, 8) @ (B, 1, 8, 8): 4·6·8·8 MACs per sample forward, twice that backward (FlopCounterMode
    counts the same), the broadcast operand's gradient summed over the 4 heads; the build computes what the
    module does."""
    module = SharedLambda()
    net = imports_like_pytorch(module, (6, 8), torch.randn(2, 6, 8))
    product = next(k for k, layer in enumerate(net.layers) if layer.kind == "matmul" and net.shapes[k][0] == 4)
    counts = net.layer_counts[product]
    assert counts.macs_forward == 4 * 6 * 8 * 8 and counts.elem_ops_backprop == 3 * 8 * 8
    built = torchnet.build_model(net)
    for mine, theirs in zip(built.parameters(), module.parameters(), strict=True):
        mine.data.copy_(theirs.data)
    x = torch.randn(3, 6, 8)
    assert torch.allclose(built(x), module(x), atol=1e-5)
    with pytest.raises(SpecError, match=r"with the same leading axes \(or of size 1 in one of them\)") as err:
        dnnbench.specs.Network.build({"name": "m", "layers": [
            {"kind": "input", "name": "a", "shape": [2, 3, 4]}, {"kind": "input", "name": "b", "shape": [3, 4, 5]},
            {"kind": "matmul", "inputs": ["a", "b"]}]})
    assert "\n" not in str(err.value)


class _OneHot(nn.Module):
    """Token ids one-hot encoded (``F.one_hot(ids, 50).float()``) into a linear layer, averaged over the
    tokens: the dense product PyTorch computes."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(50, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.fc(F.one_hot(ids, 50).float()).mean(1)


def test_one_hot_ids_are_a_fill_the_linear_layer_multiplies() -> None:
    """The ids are traced as ids (one_hot takes them as an embedding does); the one-hot tensor is a
    ``zeros`` layer of its shape (the same fill, no gradient through it); FLOPs equal FlopCounterMode's."""

    module = _OneHot()
    net = dnnbench.from_torch(module, (12,))
    assert [layer.kind for layer in net.layers][:3] == ["input", "zeros", "fc"] and net.shapes[1] == (12, 50)
    t = totals(net)
    forward, backward = step_flops(lambda: module(torch.randint(0, 50, (2, 12))))
    assert forward == 2 * 2 * t.macs_forward and backward == 2 * 2 * (t.macs_backprop + t.macs_weight_grad)
    model = torchnet.build_model(net)
    x, y = torchnet.batch(net, 4)
    torchnet.loss_fn(net)(model(x), y).backward()
