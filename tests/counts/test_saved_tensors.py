"""What the memory model keeps for backward against what PyTorch's autograd saves (docs/model.md §11).

Each network is imported with ``dnnbench.from_torch`` and run forward in training mode, in fp32 on the
CPU, under ``torch.autograd.graph.saved_tensors_hooks``: every floating-point tensor autograd saves for
backward is recorded by its storage (a tensor saved by two layers, or a view of another, counts once),
except the parameters. The bytes must equal ``NetworkArrays.kept_values`` (plus the network's input and
the dropout masks, which the CPU keeps as fp32 values and CUDA as bytes) times 4 bytes times the batch,
within 2 %: what is left are mostly the normalisations' per-channel and per-token statistics, which the
model does not count. The networks cover the rules: a ReLU's output kept instead of the batch norm
before it, a ReLU6 (hardtanh) keeping its input, GELU and SiLU keeping their input, fused attention
keeping Q, K, V, its output and a log-sum-exp rather than the probabilities, dense blocks'
concatenations, dropout masks, max and average pooling, a selected token keeping its whole sequence,
squeeze-and-excitation gates (a product keeps both its inputs), the functions of a norm written out
(square roots and reciprocals keeping their results, powers and logarithms their inputs), a spatial
transformer's grid sample (keeping its maps and grid) and its channel dropout (one mask value per map).
Without the ReLU6, attention, fused-GELU and dropout rules the model kept 68 % of what MobileNet-V2
saves, 93 % on ViT-B/16 and 88 % on BERT.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from importers.test_import_stn import TutorialSTN
from torch import nn
from torchvision_models import models
from transformer_nets import GPT2, Bert, HandAttentionGPT, StackedAttentionClassifier, TorchEncoder, TrainingGPT

import dnnbench
from dnnbench.model.arrays import network_arrays

BATCH = 2


def _torchvision(name: str) -> Callable[[], nn.Module]:
    return lambda: getattr(models(), name)(weights=None)


class _Activations(nn.Module):
    """A chain with every activation the importer takes, dropout and both poolings."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.SiLU(),
            nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU6(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3), nn.Sigmoid(), nn.AvgPool2d(2), nn.Flatten(),
            nn.Linear(16 * 6 * 6, 64), nn.Tanh(), nn.Dropout(0.2), nn.Linear(64, 32), nn.GELU(),
            nn.Linear(32, 10), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def _fused_attention(module: nn.Module) -> nn.Module:
    """Attention without dropout on its probabilities. With it, PyTorch on a CPU leaves its fused
    attention for the unfused one, which keeps the S×S probabilities and their mask (1.6 times what the
    model keeps for this encoder); a GPU's flash and memory-efficient kernels apply that dropout inside
    the kernel and keep what the model counts (docs/model.md §11). The encoder's other dropouts stay."""
    for m in module.modules():
        if isinstance(m, nn.MultiheadAttention):
            m.dropout = 0.0
    return module


class _UNet(nn.Module):
    """A small U-Net: group norms and SiLU, a strided convolution down, nearest and bilinear upsampling back,
    a skip joined by concatenation."""

    def __init__(self) -> None:
        super().__init__()
        self.e1 = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.SiLU())
        self.e2 = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.GroupNorm(8, 32), nn.SiLU())
        self.up = nn.Upsample(scale_factor=2)
        self.d1 = nn.Sequential(nn.Conv2d(48, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.SiLU())
        self.out = nn.Conv2d(16, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.e1(x)
        b = self.e2(a)
        u = self.d1(torch.cat([self.up(b), a], 1))
        return self.out(u + F.interpolate(b[:, :16], size=u.shape[-2:], mode="bilinear", align_corners=False))


class _WrittenOut(nn.Module):
    """Functions a norm or an activation written out by hand is made of: a variance, a square root (its
    result kept), a power, a reciprocal square root, 1/x (results kept), a logarithm, an error function,
    CELU, softshrink and threshold (inputs kept)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(32, 64), nn.Linear(64, 64), nn.Linear(64, 10)
        self.rest = nn.Sequential(nn.CELU(), nn.Linear(64, 64), nn.Softshrink(0.1), nn.Linear(64, 64),
                                  nn.Threshold(0.1, -1.0), nn.Linear(64, 64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        h = (h - h.mean(-1, keepdim=True)) / torch.sqrt(h.var(-1, keepdim=True) + 1e-5)
        h = self.fc2(h.pow(3))
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        h = self.rest(torch.erf(torch.log(1.0 / (1.0 + h.abs()))))
        return self.fc3(h)


#: name -> (factory, one sample's input shape, input dtype)
NETWORKS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...], torch.dtype]] = {
    "resnet18": (_torchvision("resnet18"), (3, 224, 224), torch.float32),
    "mobilenet_v2": (_torchvision("mobilenet_v2"), (3, 224, 224), torch.float32),
    "densenet121": (_torchvision("densenet121"), (3, 224, 224), torch.float32),
    "vit_b_16": (_torchvision("vit_b_16"), (3, 224, 224), torch.float32),
    "efficientnet_b0": (_torchvision("efficientnet_b0"), (3, 224, 224), torch.float32),
    "regnet_y_400mf": (_torchvision("regnet_y_400mf"), (3, 224, 224), torch.float32),
    "mobilenet_v3_small": (_torchvision("mobilenet_v3_small"), (3, 224, 224), torch.float32),
    "convnext_tiny": (_torchvision("convnext_tiny"), (3, 224, 224), torch.float32),
    "shufflenet_v2_x0_5": (_torchvision("shufflenet_v2_x0_5"), (3, 224, 224), torch.float32),
    "gpt2-2-layers": (lambda: GPT2(layers=2), (128,), torch.int64),
    "bert-2-layers": (lambda: Bert(layers=2), (64,), torch.int64),
    "activations": (_Activations, (3, 28, 28), torch.float32),
    "unet": (lambda: _UNet(), (3, 32, 32), torch.float32),
    "written-out": (_WrittenOut, (32,), torch.float32),
    "spatial-transformer": (TutorialSTN, (1, 28, 28), torch.float32),
    # Group norms (a U-Net's), and a view (flatten) of a kept output kept again by the fc after it.
    "group-norm": (lambda: nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.SiLU(),
                                         nn.Conv2d(16, 16, 3, padding=1), nn.GroupNorm(16, 16, affine=False),
                                         nn.ReLU(), nn.Flatten(), nn.Linear(16 * 28 * 28, 10)),
                   (3, 28, 28), torch.float32),
    "hand-attention-gpt": (lambda: HandAttentionGPT(vocabulary=1000), (32,), torch.int64),
    "stacked-qkv-fused": (lambda: StackedAttentionClassifier(vocabulary=1000), (32,), torch.int64),
    "stacked-qkv-written-out": (lambda: StackedAttentionClassifier(vocabulary=1000, fused=False, unbind=False),
                                (32,), torch.int64),
    "torch-encoder": (lambda: _fused_attention(TorchEncoder(norm_first=True, activation="gelu")), (64,), torch.int64),
}


def _saved_bytes(module: nn.Module, *inputs: torch.Tensor) -> int:
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if t.dtype.is_floating_point and storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = module(*inputs)
    del out
    return sum(saved.values())


@pytest.mark.parametrize("name", list(NETWORKS))
def test_kept_values_are_what_autograd_saves(name: str) -> None:
    factory, shape, dtype = NETWORKS[name]
    torch.manual_seed(0)
    module = factory().train()
    net = dnnbench.from_torch(module, shape)
    x = (torch.randn((BATCH, *shape)) if dtype.is_floating_point
         else torch.randint(0, 1000, (BATCH, *shape), dtype=dtype))
    measured = _saved_bytes(module, x)
    arr = network_arrays(net)
    modelled = (arr.kept_values.sum() + arr.input_kept_values + arr.mask_values.sum()) * 4 * BATCH
    assert modelled == pytest.approx(measured, rel=0.02), (name, modelled / measured)



@pytest.mark.parametrize("fused", [True, False], ids=["fused", "written-out"])
def test_training_code_keeps_what_autograd_saves(fused: bool) -> None:
    """A GPT as training code writes it, imported with its labels: its loss, its tied head, its attention
    fused or written out (q @ kᵀ, the mask, softmax, @ v: both inputs of each product kept)."""
    torch.manual_seed(0)
    module = TrainingGPT(vocabulary=1000, fused=fused).train()
    net = dnnbench.from_torch(module, (32,), labels="targets")
    x, y = torch.randint(0, 1000, (BATCH, 32)), torch.randint(0, 1000, (BATCH, 32))
    measured = _saved_bytes(module, x, y)
    arr = network_arrays(net)
    modelled = (arr.kept_values.sum() + arr.input_kept_values + arr.mask_values.sum()) * 4 * BATCH
    assert modelled == pytest.approx(measured, rel=0.02), modelled / measured
