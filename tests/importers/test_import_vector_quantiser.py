"""A vector quantiser (VQ-VAE) as users write it: each position's encoding replaced by its nearest code,
``codebook(torch.cdist(z, codebook.weight).argmin(-1))``, passed on straight through
(``z + (zq - z).detach()``).

The distances are a product with the codebook, the nearest code an arg-min (the extremes' search and a
``stop_gradient``: positions take no gradient), the lookup an embedding of those ids sharing the codebook's
table; nothing of the quantiser reaches the loss, so backward is the encoder's and the decoder's alone."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import dnnbench
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet

from .import_helpers import params, step_flops


class VQVAE(nn.Module):
    def __init__(self, codes: int = 32, width: int = 16, functional: bool = False) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 32, 4, 2, 1), nn.ReLU(), nn.Conv2d(32, width, 4, 2, 1))
        self.codebook = nn.Embedding(codes, width)
        self.dec = nn.Sequential(nn.ConvTranspose2d(width, 32, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(32, 1, 4, 2, 1))
        self.functional = functional

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.enc(x).permute(0, 2, 3, 1)  # (N, 7, 7, D)
        flat = z.reshape(z.shape[0], -1, z.shape[-1])  # (N, 49, D)
        if self.functional:
            ids = torch.argmin(torch.cdist(flat, self.codebook.weight), dim=-1)
        else:
            ids = torch.cdist(flat, self.codebook.weight.unsqueeze(0).expand(flat.shape[0], -1, -1)).argmin(-1)
        zq = self.codebook(ids).view_as(z)
        zq = z + (zq - z).detach()
        return self.dec(zq.permute(0, 3, 1, 2))


@pytest.mark.parametrize("functional", [False, True])
def test_a_vector_quantiser_prices_its_search_and_trains_the_rest(functional: bool) -> None:
    module = VQVAE(functional=functional)
    net = dnnbench.from_torch(module, (1, 28, 28))
    t = totals(net)
    assert t.weights == params(module)  # the codebook once: the distances' product shares it
    kinds = [layer.kind for layer in net.layers]
    assert kinds.count("stop_gradient") == 2 and "embedding" in kinds
    x = torch.randn(2, 1, 28, 28)
    forward, backward = step_flops(lambda: module(x))
    distances = 49 * 32 * 16  # cdist's product, which FlopCounterMode does not see forward
    assert forward == 2 * 2 * (t.macs_forward - distances)
    assert backward == 2 * 2 * (t.macs_backprop + t.macs_weight_grad)
    ids = net.layer_names.index(next(n for n, layer in zip(net.layer_names, net.layers, strict=True)
                                     if layer.kind == "embedding"))
    assert not net.reaches_loss[ids]
    built = torchnet.build_model(net)
    built(x).sum().backward()  # the runner's lookup takes the computed ids into the table


class ArgMaxEverywhere(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.emb = nn.Linear(4, 6), nn.Embedding(24, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.emb(self.fc(x).argmax())


def test_an_arg_max_over_every_axis_is_one_line() -> None:
    with pytest.raises(SpecError, match="changes the batch dimension") as e:
        dnnbench.from_torch(ArgMaxEverywhere(), (4,))
    assert "\n" not in str(e.value)
