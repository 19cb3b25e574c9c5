"""Every network of tests/user_nets.py (written as users write them, in no preset) imports; its weights are
the module's parameters, its forward and backward FLOPs what FlopCounterMode counts for a batch, and the
runner's build of the import trains a step. Where FlopCounterMode and the model differ by design, the
difference is stated here and in docs/importing.md:

- ``torch.cdist``'s forward product runs below the dispatcher's Python mode: FlopCounterMode does not
  see it (its backward it does);
- ``torch.utils.checkpoint`` recomputes the block's forward during backward: the model prices the plain
  call (docs/importing.md), FlopCounterMode counts the recomputation."""

from __future__ import annotations

import pytest
import torch
from user_nets import NETWORKS

import dnnbench
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet

from .import_helpers import dense_weight_grad, params, step_flops

#: name -> (batch, forward MACs per sample FlopCounterMode does not see, backward MACs per sample it adds)
BY_DESIGN: dict[str, tuple[int, int, int]] = {
    "vqvae": (2, 49 * 32 * 16, 0),  # the distances to the 32 codes of 16 values, 49 positions
    "prototypes": (32, 10 * 32, 0),  # 10 centres of 32; 32 rows: ATen's product form, whose backward it sees
    "checkpointed": (2, 0, 16 * 32),  # the block's forward again as far as backward reads it: its first layer
}


def _inputs(shape: object, ids: tuple[int, ...], batch: int) -> list[torch.Tensor]:
    shapes = shape if isinstance(shape, list) else [shape]
    return [torch.randint(0, 20, (batch, *s)) if k in ids else torch.randn(batch, *s)
            for k, s in enumerate(shapes)]


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_a_user_network_imports_with_pytorch_s_weights_and_flops(name: str) -> None:
    factory, shape, ids = NETWORKS[name]
    torch.manual_seed(0)
    module = factory()
    net = dnnbench.from_torch(module, shape)
    t = totals(net)
    assert t.weights == params(module)
    batch, unseen_forward, recomputed = BY_DESIGN.get(name, (2, 0, 0))
    x = _inputs(shape, ids, batch)
    forward, backward = step_flops(lambda: module(*x))
    assert forward == 2 * batch * (t.macs_forward - unseen_forward)
    assert backward == 2 * batch * (t.macs_backprop + dense_weight_grad(net) + recomputed)
    built = torchnet.build_model(net)
    inputs = torchnet.batch(net, 2)[0]
    out = built(*inputs) if isinstance(inputs, (list, tuple)) else built(inputs)
    out.float().sum().backward()


def test_an_unassigned_in_place_activation_is_counted() -> None:
    """``h.relu_()`` whose result is not assigned still changes what follows reads: the activation is in."""
    net = dnnbench.from_torch(NETWORKS["in_place"][0](), (8,))
    assert [getattr(layer, "activation", None) for layer in net.layers if layer.kind == "add"] == ["relu"]


class Written(torch.nn.Module):
    """Writes into buffers: a slice of positions and a buffer read between its writes (not followed); a
    sequence-first buffer's steps (``outputs[t] = o``, whose batch is its axis 1), transposed after."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.fc, self.out, self.how = torch.nn.Linear(8, 4), torch.nn.Linear(12, 2), how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        if self.how == "slice":
            buffer = torch.zeros(x.shape[0], 3, 4, device=x.device)
            buffer[:, :2] = h[:, None].expand(-1, 2, -1)
        elif self.how == "seq_first":
            buffer = torch.zeros(3, x.shape[0], 4, device=x.device)
            for t in range(3):
                buffer[t] = h
            buffer = buffer.transpose(0, 1)
        else:
            buffer = torch.zeros(x.shape[0], 3, 4, device=x.device)
            buffer[:, 0] = h
            buffer[:, 1] = buffer[:, 0] * 2
        return self.out(buffer.flatten(1))


@pytest.mark.parametrize("how", ["slice", "read_between"])
def test_a_write_the_import_does_not_follow_is_one_line(how: str) -> None:
    with pytest.raises(SpecError, match=r"writes into a tensor in place \(buffer\[:, i\] = value\)") as e:
        dnnbench.from_torch(Written(how), (8,))
    assert "\n" not in str(e.value)


def test_a_sequence_first_buffer_s_steps_are_stacked_in_front_of_the_batch() -> None:
    module = Written("seq_first")
    net = dnnbench.from_torch(module, (8,))
    t = totals(net)
    x = torch.randn(2, 8)
    forward, backward = step_flops(lambda: module(x))
    assert forward == 2 * 2 * t.macs_forward and backward == 2 * 2 * (t.macs_backprop + t.macs_weight_grad)
    assert net.layers[-1].kind == "fc" and net.layer_counts[-1].input_shape == (12,)


class SeqFirstDecoder(torch.nn.Module):
    """The seq2seq tutorials' decoder loop: ``outputs = torch.zeros(T, B, V)``, ``outputs[t] = o`` from the
    second step on, the next input the arg-max of the step's logits."""

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.cell, self.out = torch.nn.Embedding(20, 8), torch.nn.GRUCell(8, 16), torch.nn.Linear(16, 20)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        b, steps = ids.shape
        h = ids.new_zeros(b, 16).float()
        outputs = torch.zeros(steps, b, 20)
        token = ids[:, 0]
        for t in range(1, steps):
            h = self.cell(self.emb(token), h)
            o = self.out(h)
            outputs[t] = o
            token = o.argmax(1)
        return outputs


def test_a_sequence_first_decoder_loop_counts_what_pytorch_computes() -> None:
    module = SeqFirstDecoder()
    net = dnnbench.from_torch(module, (6,))
    t = totals(net)
    assert t.weights == params(module) and net.shapes[-1] == (6, 20)
    x = torch.randint(0, 20, (2, 6))
    forward, backward = step_flops(lambda: module(x))
    assert forward == 2 * 2 * t.macs_forward and backward == 2 * 2 * (t.macs_backprop + t.macs_weight_grad)


def test_a_loop_s_writes_into_a_buffer_are_its_values_stacked() -> None:
    """The decoder loop's buffer is the steps' logits stacked along the steps, zeros at the first."""
    net = dnnbench.from_torch(NETWORKS["decoder_loop"][0](), (6,))
    assert net.shapes[-1] == (6, 20)
    assert [layer.kind for layer in net.layers].count("zeros") >= 1 and net.layers[-1].kind == "concat"
