"""Recurrent cells called in a loop (``nn.LSTMCell``, ``nn.GRUCell``, ``nn.RNNCell``: an image captioner's
decoder, a reinforcement-learning agent's memory, the unrolled RNN of a teaching notebook) import as the
kernels PyTorch's CPU cells run: two products, their sum, the gates. Their weights are counted once, and
the FLOPs of a whole unrolled sequence forward and backward equal FlopCounterMode's, with no state (zeros),
a state of ``torch.zeros``, and states passed on whole or unpacked (docs/importing.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from importers.import_helpers import params, step_flops
from torch import nn

import dnnbench
from dnnbench import presets
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet
from dnnbench.model import evaluate
from dnnbench.specs import Configuration, Network

CELLS = {"lstm": nn.LSTMCell, "gru": nn.GRUCell, "rnn": nn.RNNCell}


class Unrolled(nn.Module):
    """A cell over every step of a (T, I) sequence, its last state classified. ``start``: no state at
    the first step (None), or ``torch.zeros``; ``unpack``: ``h, c = cell(x, (h, c))`` rather than the state
    passed on whole."""

    def __init__(self, kind: str, start: str = "none", unpack: bool = False, nonlinearity: str = "tanh") -> None:
        super().__init__()
        extra = {"nonlinearity": nonlinearity} if kind == "rnn" else {}
        self.cell, self.head = CELLS[kind](8, 16, **extra), nn.Linear(16, 3)
        self.kind, self.start, self.unpack = kind, start, unpack

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        state = None
        if self.start == "zeros":
            h = torch.zeros(x.size(0), 16)
            state = (h, torch.zeros_like(h)) if self.kind == "lstm" else h
        for t in range(x.shape[1]):
            if self.unpack and self.kind == "lstm" and state is not None:
                h, c = self.cell(x[:, t], (state[0], state[1]))
                state = (h, c)
            else:
                state = self.cell(x[:, t], state)
        return self.head(state[0] if self.kind == "lstm" else state)


CASES = [(kind, start, unpack) for kind in CELLS for start in ("none", "zeros") for unpack in (False, True)
         if not (unpack and kind != "lstm")]


@pytest.mark.parametrize("kind,start,unpack", CASES)
def test_an_unrolled_cell_imports_with_pytorch_s_weights_and_flops(kind: str, start: str, unpack: bool) -> None:
    module = Unrolled(kind, start, unpack)
    net = dnnbench.from_torch(module, (5, 8))
    t = totals(net)
    assert t.weights == params(module)
    forward, backward = step_flops(lambda: module(torch.randn(2, 5, 8)))
    assert forward == 2 * 2 * t.macs_forward
    assert backward == 2 * 2 * (t.macs_backprop + t.macs_weight_grad)
    kinds = [layer.kind for layer in net.layers]
    assert kinds.count("fc") == 2 * 5 + 1 and kinds.count("zeros") == 1
    built = torchnet.build_model(net)
    assert params(built) == t.weights
    assert tuple(built(torch.randn(2, 5, 8)).shape[1:]) == (3,)
    again = totals(dnnbench.from_torch(built, (5, 8)))
    # The last step's c feeds its tanh alone in the built network, so the tanh fuses into c's add there:
    # one output of H values fewer, the same work.
    assert replace(again, activations=t.activations) == t and t.activations - again.activations in (0, 16)
    pred = evaluate(net, presets.cluster("modern-2025"), presets.dataset("mnist"), Configuration())
    assert float(pred.time_per_sample_s) > 0


def test_an_rnn_cell_s_nonlinearity_is_its_sum_s_activation() -> None:
    net = dnnbench.from_torch(Unrolled("rnn", nonlinearity="relu"), (2, 8))
    assert {layer.activation for layer in net.layers if layer.kind == "add"} == {"relu"}


def test_the_zero_state_sends_no_gradient_back() -> None:
    """The first step's product of the zero state computes its weights' gradient but no input gradient,
    as PyTorch does (the zeros do not require one)."""
    net = dnnbench.from_torch(Unrolled("gru"), (3, 8))
    zeros = [i for i, layer in enumerate(net.layers) if layer.kind == "zeros"][0]
    first_hh = next(i for i, ids in enumerate(net.input_indices) if zeros in ids and net.layers[i].kind == "fc")
    counts = net.layer_counts[first_hh]
    assert counts.macs_backprop == 0 and counts.macs_weight_grad == 3 * 16 * 16
    assert not net.needs_gradient[zeros]


def test_a_zeros_layer_builds_zeros_and_validates_its_shape() -> None:
    net = Network.build({"name": "z", "layers": [{"kind": "input", "shape": [4]},
                                                 {"kind": "zeros", "shape": [2, 3]}]})
    assert net.shapes[-1] == (2, 3) and net.layer_counts[-1].elem_ops_forward == 6
    assert torch.equal(torchnet.build_model(net)(torch.randn(5, 4)), torch.zeros(5, 2, 3))
    with pytest.raises(SpecError, match="shape"):
        Network.build({"name": "z", "layers": [{"kind": "input", "shape": [4]}, {"kind": "zeros", "shape": [0]}]})


def test_a_cell_on_a_step_of_another_width_is_one_line() -> None:
    class Wrong(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cell = nn.GRUCell(8, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.cell(x.flatten(1))

    with pytest.raises(SpecError, match="does not fit the module") as err:
        dnnbench.from_torch(Wrong(), (2, 8))
    assert "\n" not in str(err.value)
