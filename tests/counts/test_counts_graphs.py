"""Per-layer counts of graph networks against PyTorch's FlopCounterMode (docs/model.md §3).

torchvision's resnet18, resnet50, mobilenet_v2, vgg16_bn, vit_b_16, googlenet, mnasnet0_5,
efficientnet_b0 and mobilenet_v3_small (built without weights) and GPT-2 small and BERT-base in plain torch.nn
(tests/transformer_nets.py) are imported with ``dnnbench.from_torch`` and run forward and backward with
batch 1 on the meta device under FlopCounterMode: the whole network's forward and backward FLOPs must
equal 2 x dnnbench's MACs. Per layer, FlopCounterMode's attribution of backward work to modules is
unreliable where branches meet, so each layer with multiply-adds is also run alone (its module on an
input of the layer's shape, needing a gradient unless the layer takes the network's input): forward
FLOPs 2 x ``macs_forward``, backward 2 x (``macs_backprop`` + ``macs_weight_grad``). Weights must equal
the module's parameters. FlopCounterMode does not count the fused CPU attention kernel, so the pass runs
PyTorch's math attention backend, whose matrix products it counts; and its formula for a grouped
convolution's weight gradient counts the dense convolution (groups times the work), which the test
allows for explicitly. Element-wise work (normalisation, activations, softmax, additions) is dnnbench's
own count and is not compared.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode
from torchvision_models import models
from transformer_nets import GPT2, Bert, TorchEncoder

import dnnbench
from dnnbench.counts import totals
from dnnbench.specs import Network


def _torchvision(name: str) -> Callable[[], nn.Module]:
    return lambda: getattr(models(), name)(weights=None)


#: name -> (factory, one sample's input shape, input dtype)
NETWORKS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...], torch.dtype]] = {
    "resnet18": (_torchvision("resnet18"), (3, 224, 224), torch.float32),
    "resnet50": (_torchvision("resnet50"), (3, 224, 224), torch.float32),
    "mobilenet_v2": (_torchvision("mobilenet_v2"), (3, 224, 224), torch.float32),
    "vgg16_bn": (_torchvision("vgg16_bn"), (3, 224, 224), torch.float32),
    "vit_b_16": (_torchvision("vit_b_16"), (3, 224, 224), torch.float32),
    # Max pooling with ceil_mode; a mean over height and width.
    "googlenet": (lambda: models().googlenet(weights=None, aux_logits=False, init_weights=False), (3, 224, 224),
                  torch.float32),
    "mnasnet0_5": (_torchvision("mnasnet0_5"), (3, 224, 224), torch.float32),
    # Squeeze-and-excitation gates (a product of two layer outputs) and stochastic depth.
    "efficientnet_b0": (_torchvision("efficientnet_b0"), (3, 224, 224), torch.float32),
    # Hard swish, and gates through a hard sigmoid.
    "mobilenet_v3_small": (_torchvision("mobilenet_v3_small"), (3, 224, 224), torch.float32),
    # Layer norms over permuted maps, Linear layers on channels-last maps, learned layer scales.
    "convnext_tiny": (_torchvision("convnext_tiny"), (3, 224, 224), torch.float32),
    # Pieces of x.chunk, a channel shuffle (a view of one sample with four axes, transposed, viewed back).
    "shufflenet_v2_x0_5": (_torchvision("shufflenet_v2_x0_5"), (3, 224, 224), torch.float32),
    "gpt2-small": (GPT2, (256,), torch.int64),
    "bert-base": (Bert, (128,), torch.int64),
    # nn.TransformerEncoder: post-norm with ReLU; pre-norm, causal, with GELU and a final norm.
    "torch-encoder": (lambda: TorchEncoder(layers=4), (128,), torch.int64),
    "torch-encoder-pre-norm": (lambda: TorchEncoder(layers=4, norm_first=True, activation="gelu", causal=True),
                               (128,), torch.int64),
}


def _flops(module: nn.Module, x: torch.Tensor) -> tuple[dict[str, int], dict[str, int]]:
    """(forward, backward) FLOPs per module path and under "Global"."""
    prefix = type(module).__name__ + "."

    def per_module(counter: FlopCounterMode) -> dict[str, int]:
        return {("Global" if k == "Global" else k.removeprefix(prefix)): sum(v.values())
                for k, v in counter.get_flop_counts().items()}

    with sdpa_kernel(SDPBackend.MATH):
        forward = FlopCounterMode(display=False)
        with forward:
            module(x)
        both = FlopCounterMode(display=False)  # modules are tracked in backward only within one mode
        with both:
            module(x).float().sum().backward()
    fwd, total = per_module(forward), per_module(both)
    return fwd, {k: v - fwd.get(k, 0) for k, v in total.items()}


@pytest.fixture(scope="module")
def counted() -> Callable[[str], tuple[nn.Module, Network, dict[str, int], dict[str, int]]]:
    cache: dict[str, tuple[nn.Module, Network, dict[str, int], dict[str, int]]] = {}

    def get(name: str) -> tuple[nn.Module, Network, dict[str, int], dict[str, int]]:
        if name not in cache:
            factory, shape, dtype = NETWORKS[name]
            with torch.device("meta"):
                module = factory()
            net = dnnbench.from_torch(module, shape)
            x = torch.zeros((1, *shape), dtype=dtype, device="meta")
            cache[name] = (module, net, *_flops(module, x))
        return cache[name]

    return get


def _alone(sub: nn.Module, in_shape: tuple[int, ...], needs_grad: bool) -> tuple[int, int, int]:
    """(forward, input-gradient, weight-gradient) FLOPs of one module run alone on a batch-1 input of
    ``in_shape``; the input gradient from a pass with the module's weights frozen."""
    x = torch.zeros((1, *in_shape), device="meta", requires_grad=needs_grad)

    def run() -> torch.Tensor:
        if isinstance(sub, nn.MultiheadAttention):
            return sub(x, x, x, need_weights=False)[0]
        return sub(x)

    def backward_flops() -> int:
        counter = FlopCounterMode(display=False)
        with counter:
            y = run()
            if y.requires_grad:
                y.sum().backward()
        return counter.get_total_flops() - forward

    with sdpa_kernel(SDPBackend.MATH):
        counter = FlopCounterMode(display=False)
        with counter:
            run()
        forward = counter.get_total_flops()
        both = backward_flops()
        weights = [p for p in sub.parameters() if p.dim() > 1]
        for p in weights:
            p.requires_grad_(False)
        try:
            input_grad = backward_flops() if needs_grad else 0
        finally:
            for p in weights:
                p.requires_grad_(True)
    return forward, input_grad, both - input_grad


@pytest.mark.parametrize("name", list(NETWORKS))
def test_every_layer_with_macs_equals_flop_counter(name: str, counted) -> None:
    module, net, forward, backward = counted(name)
    checked = 0
    for layer_name, c, ids in zip(net.layer_names, net.layer_counts, net.input_indices, strict=True):
        if c.macs_forward == 0:
            continue
        checked += 1
        assert forward.get(layer_name, 0) == 2 * c.macs_forward, (layer_name, "forward in the network")
        sub = module.get_submodule(layer_name)
        fwd, input_grad, weight_grad = _alone(sub, c.input_shape, needs_grad=any(ids))
        assert fwd == 2 * c.macs_forward, (layer_name, "forward")
        assert input_grad == 2 * c.macs_backprop, (layer_name, "input gradient")
        # torch's formula for a convolution's weight gradient ignores groups (it counts the dense
        # convolution); the work is the forward's, as dnnbench counts it.
        groups = getattr(sub, "groups", 1)
        assert weight_grad == 2 * groups * c.macs_weight_grad, (layer_name, "weight gradient")
    assert checked >= 12, "too few layers with multiply-adds were compared"
    t = totals(net)
    assert forward["Global"] == 2 * t.macs_forward
    dense_weight_grad = sum(c.macs_weight_grad * getattr(layer, "groups", 1)
                            for layer, c in zip(net.layers, net.layer_counts, strict=True))
    assert backward["Global"] == 2 * (t.macs_backprop + dense_weight_grad)


@pytest.mark.parametrize("name", list(NETWORKS))
def test_weights_equal_the_module_parameters(name: str, counted) -> None:
    module, net, _, _ = counted(name)
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    # A parameter belongs to the layer whose name is the longest module path above it.
    names = set(net.layer_names)
    owned: dict[str, int] = {}
    for path, p in module.named_parameters():
        parts = path.split(".")
        owner = next((".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1) if ".".join(parts[:i]) in names), None)
        if owner is not None:
            owned[owner] = owned.get(owner, 0) + p.numel()
    assert owned, "no parameter was matched to a layer"
    for layer_name, c in zip(net.layer_names, net.layer_counts, strict=True):
        if layer_name in owned:
            assert c.weights == owned[layer_name], layer_name


def test_graph_kinds_appear_where_the_architectures_have_them(counted) -> None:
    kinds = {name: {layer.kind for layer in counted(name)[1].layers} for name in NETWORKS}
    assert {"add", "batchnorm", "adaptive_pool"} & kinds["resnet50"] >= {"add", "batchnorm"}
    mobilenet = counted("mobilenet_v2")[1]
    assert any(getattr(layer, "groups", 1) > 1 for layer in mobilenet.layers)  # depthwise convolutions
    assert {"attention", "layer_norm", "class_token", "position_embedding", "select_token"} <= kinds["vit_b_16"]
    assert {"embedding", "attention", "layer_norm", "position_embedding"} <= kinds["gpt2-small"]
    gpt2 = counted("gpt2-small")[1]
    assert all(layer.causal for layer in gpt2.layers if layer.kind == "attention")
    assert not counted("resnet50")[1].is_chain and counted("vgg16_bn")[1].is_chain
