"""A VQ-VAE as the widely copied DeepMind/Sonnet port writes it, and the forms it is made of: values whose
positions a view folded into the batch (``inputs.view(-1, D)``) reduced, searched and normalised along
the axes the forward names; a one-hot written by ``scatter_``; a layer output broadcast up by a learned
or constant operand; regression losses the forward computes and returns; returned metrics no gradient
reaches."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dnnbench
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.importers import torch_import
from dnnbench.measure import torchnet

from .import_helpers import counted_like_pytorch, dense_weight_grad, params, step_flops


class VectorQuantizer(nn.Module):
    """The quantiser of the DeepMind VQ-VAE notebook's PyTorch port, line for line."""

    def __init__(self, num_embeddings: int = 64, embedding_dim: int = 16, commitment_cost: float = 0.25) -> None:
        super().__init__()
        self._embedding_dim = embedding_dim
        self._num_embeddings = num_embeddings
        self._embedding = nn.Embedding(num_embeddings, embedding_dim)
        self._embedding.weight.data.uniform_(-1 / num_embeddings, 1 / num_embeddings)
        self._commitment_cost = commitment_cost

    def forward(self, inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        inputs = inputs.permute(0, 2, 3, 1).contiguous()
        input_shape = inputs.shape
        flat_input = inputs.view(-1, self._embedding_dim)
        distances = (torch.sum(flat_input ** 2, dim=1, keepdim=True)
                     + torch.sum(self._embedding.weight ** 2, dim=1)
                     - 2 * torch.matmul(flat_input, self._embedding.weight.t()))
        encoding_indices = torch.argmin(distances, dim=1).unsqueeze(1)
        encodings = torch.zeros(encoding_indices.shape[0], self._num_embeddings, device=inputs.device)
        encodings.scatter_(1, encoding_indices, 1)
        quantized = torch.matmul(encodings, self._embedding.weight).view(input_shape)
        e_latent_loss = F.mse_loss(quantized.detach(), inputs)
        q_latent_loss = F.mse_loss(quantized, inputs.detach())
        loss = q_latent_loss + self._commitment_cost * e_latent_loss
        quantized = inputs + (quantized - inputs).detach()
        avg_probs = torch.mean(encodings, dim=0)
        perplexity = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-10)))
        return loss, quantized.permute(0, 3, 1, 2).contiguous(), perplexity, encodings


class VQVAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, 32, 4, 2, 1), nn.ReLU(), nn.Conv2d(32, 16, 1))
        self.vq = VectorQuantizer()
        self.decoder = nn.Sequential(nn.ConvTranspose2d(16, 32, 4, 2, 1), nn.ReLU(), nn.Conv2d(32, 3, 3, padding=1))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        loss, quantized, perplexity, _ = self.vq(self.encoder(x))
        return loss, self.decoder(quantized), perplexity


def test_the_notebook_s_vq_vae_imports_with_its_losses_and_without_its_metrics() -> None:
    torch.manual_seed(0)
    model, x = VQVAE(), torch.randn(2, 3, 16, 16)
    net = dnnbench.from_torch(model, (3, 16, 16))
    t = totals(net)
    assert t.weights == params(model)  # the codebook once, though three operations read it

    def step() -> torch.Tensor:
        loss, recon, _ = model(x)
        return loss + recon.sum()  # the loss training adds to its reconstruction loss

    forward, backward = step_flops(step)
    assert forward == 2 * 2 * t.macs_forward
    assert backward == 2 * 2 * (t.macs_backprop + dense_weight_grad(net))
    kinds = [layer.kind for layer in net.layers]
    # the one-hot codes (no gradient), the two MSE losses (difference, square, mean), the outputs joined;
    # the perplexity (exp and log of the codes' mean) is a metric no gradient reaches: not a layer
    assert kinds.count("zeros") == 1 and kinds[-1] == "concat"
    assert [layer.to_dict().get("function") for layer in net.layers if layer.kind == "activation"].count("pow") == 3
    assert not {"exp", "log"} & {layer.to_dict().get("function") for layer in net.layers}
    assert net.shapes[-1] == (1 + 3 * 16 * 16,)
    built = torchnet.build_model(net)
    assert params(built) == t.weights
    out = built(torch.randn(2, 3, 16, 16))
    out.sum().backward()  # the runner's build trains
    assert out.shape == (2, 1 + 3 * 16 * 16)


def test_the_quantiser_alone_counts_what_pytorch_computes() -> None:
    class Quantise(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder, self.vq = nn.Conv2d(3, 8, 1), VectorQuantizer(32, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.vq(self.encoder(x))[1]

    counted_like_pytorch(Quantise(), (3, 4, 4), torch.randn(3, 3, 4, 4))


FOLDED_OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sum kept": lambda y: y.sum(1, keepdim=True),
    "amax kept": lambda y: y.amax(dim=1, keepdim=True),
    "argmin one-hot": lambda y: F.one_hot(y.argmin(1), 12).float(),
    "unsqueeze at the end, cat": lambda y: torch.cat([y.unsqueeze(2), y.unsqueeze(2)], dim=2).flatten(1),
    "top 3": lambda y: y.topk(3, dim=1).values,
    "max kept": lambda y: y.max(1, keepdim=True).values,
    "min and its position": lambda y: torch.stack([y.min(-1)[0], y.min(-1)[1].float()], -1),
    "normalize (dim 1 by default)": lambda y: F.normalize(y),
    "cosine (dim 1 by default)": lambda y: F.cosine_similarity(y, 2.0 * y).unsqueeze(-1),
    "softmin": lambda y: F.softmin(y, dim=1),
    "unflatten, summed": lambda y: y.unflatten(1, (3, 4)).sum(1),
    "windows along the values": lambda y: y.unfold(1, 4, 4).amax(-1),
}


@pytest.mark.parametrize("name", list(FOLDED_OPS))
def test_an_operation_on_folded_values_takes_the_axis_the_forward_names(name: str) -> None:
    op = FOLDED_OPS[name]

    class Folded(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(6, 12)
            self.head = nn.Linear(op(torch.zeros(1, 12)).shape[-1], 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, s, d = x.shape
            y = op(self.fc(x.reshape(-1, d)))  # the tokens folded into the batch
            return self.head(y.view(b, s, -1)).mean(1)

    net = counted_like_pytorch(Folded(), (5, 6), torch.randn(3, 5, 6))
    # every reduction is over the values' own last axes, not over the tokens folded into the batch (axis 0)
    assert all(0 not in [a % len(net.shapes[net.input_indices[i][0]]) for a in layer.axes]
               for i, layer in enumerate(net.layers) if layer.kind == "reduce")
    assert net.shapes[-1] == (4,)


def test_an_axis_of_an_operation_not_known_on_folded_values_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(torch_import._FOLDED_AXES, "softmin")

    class Folded(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(6, 12)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.softmin(self.fc(x.reshape(-1, 6)), dim=1).view(x.shape[0], -1)

    with pytest.raises(SpecError, match="works along an axis of values whose batch axis holds positions") as err:
        dnnbench.from_torch(Folded(), (5, 6))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("kind", ["mse", "l1", "MSELoss", "L1Loss", "none"])
def test_a_reconstruction_loss_the_forward_returns_is_priced_per_sample(kind: str) -> None:
    losses = {"mse": F.mse_loss, "l1": F.l1_loss, "MSELoss": nn.MSELoss(), "L1Loss": nn.L1Loss(),
              "none": lambda a, b: F.mse_loss(a, b, reduction="none")}

    class AutoEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.enc, self.dec = nn.Linear(20, 4), nn.Linear(4, 20)
            self.loss = losses[kind]

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            recon = self.dec(torch.relu(self.enc(x)))
            return self.loss(recon, x), recon

    model, x = AutoEncoder(), torch.randn(4, 20)
    net = dnnbench.from_torch(model, (20,))
    t = totals(net)
    assert t.weights == params(model)
    forward, backward = step_flops(lambda: sum(o.sum() for o in model(x)))
    assert forward == 2 * 4 * t.macs_forward and backward == 2 * 4 * (t.macs_backprop + dense_weight_grad(net))
    # the loss beside the reconstruction; per element, of its shape: the two added (docs/importing.md)
    assert net.shapes[-1] == ((20,) if kind == "none" else (21,))
    assert [layer.kind for layer in net.layers].count("reduce") == (0 if kind == "none" else 1)


def test_a_loss_of_two_shapes_is_one_line() -> None:
    class Odd(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(20, 4), nn.Linear(20, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.mse_loss(self.a(x), self.b(x))  # broadcast, as PyTorch warns

    with pytest.raises(SpecError, match=r"takes a loss of shapes \[4\] and \[1\]") as err, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dnnbench.from_torch(Odd(), (20,))
    assert "\n" not in str(err.value)


def test_returned_metrics_are_dropped_and_a_forward_of_metrics_alone_is_kept() -> None:
    class Classifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(10, 3)

        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
            logits = self.fc(x)
            return {"logits": logits, "confidence": logits.detach().softmax(-1).amax(-1),
                    "prediction": logits.argmax(-1)}

    net = dnnbench.from_torch(Classifier(), (10,))
    assert [layer.kind for layer in net.layers] == ["input", "fc"]

    class Codes(nn.Module):  # only a search's result returned: nothing to drop it for, imported as before
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(10, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x).argmax(-1)

    assert dnnbench.from_torch(Codes(), (10,)).layers[-1].kind == "stop_gradient"


class VAE(nn.Module):
    """pytorch/examples' VAE, with its loss computed in the forward in the ways people write it."""

    def __init__(self, loss: str) -> None:
        super().__init__()
        self.fc1, self.fc21, self.fc22 = nn.Linear(784, 40), nn.Linear(40, 8), nn.Linear(40, 8)
        self.fc3, self.fc4 = nn.Linear(8, 40), nn.Linear(40, 784)
        self.loss = loss

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        h = F.relu(self.fc1(x.view(-1, 784)))
        mu, logvar = self.fc21(h), self.fc22(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        logits = self.fc4(F.relu(self.fc3(z)))
        if self.loss == "bce + kld, summed":  # the example's loss_function, in the forward
            bce = F.binary_cross_entropy(torch.sigmoid(logits), x.view(-1, 784), reduction="sum")
            return bce - 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        if self.loss == "kld per sample, averaged, beside the reconstruction":
            kld = torch.mean(-0.5 * torch.sum(1 + logvar - mu ** 2 - logvar.exp(), dim=1), dim=0)
            return torch.sigmoid(logits), kld
        return F.binary_cross_entropy_with_logits(logits, x.view(-1, 784)) + logvar.exp().mean()


@pytest.mark.parametrize("loss", ["bce + kld, summed", "kld per sample, averaged, beside the reconstruction",
                                  "bce on logits, a mean"])
def test_a_vae_s_loss_computed_in_the_forward_is_priced_per_sample(loss: str) -> None:
    torch.manual_seed(0)
    model, x = VAE(loss), torch.rand(3, 1, 28, 28)
    net = dnnbench.from_torch(model, (1, 28, 28))
    t = totals(net)
    assert t.weights == params(model)

    def step() -> torch.Tensor:
        out = model(x)
        return sum(o.sum() for o in out) if isinstance(out, tuple) else out

    forward, backward = step_flops(step)
    assert forward == 2 * 3 * t.macs_forward and backward == 2 * 3 * (t.macs_backprop + dense_weight_grad(net))
    assert net.shapes[-1] == ((785,) if "beside" in loss else (1,))  # one number per sample for the batch's
    assert "reduce" in [layer.kind for layer in net.layers]
    out = torchnet.build_model(net)(torch.rand(2, 1, 28, 28))
    out.sum().backward()


def test_a_hinge_loss_s_mean_over_the_batch_is_one_number_per_sample() -> None:
    class Critic(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(32, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.relu(1.0 - self.fc(x)).mean()

    net = dnnbench.from_torch(Critic(), (32,))
    # (1,) per sample already: the mean adds no layer
    assert [layer.kind for layer in net.layers] == ["input", "fc", "scale", "activation"]
    assert net.shapes[-1] == (1,)
