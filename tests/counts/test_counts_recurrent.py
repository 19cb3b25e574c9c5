"""Recurrent layers (``recurrent``: LSTM, GRU, plain RNN; stacked, bidirectional): weights equal PyTorch's,
MACs equal FlopCounterMode's on the cells written out step by step (PyTorch's fused CPU kernels hide
their products from it), imported from ``nn.LSTM``/``nn.GRU``/``nn.RNN`` with their final states read
off the output, trained back by the runner, priced per step (docs/model.md §3, §12)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from importers.import_helpers import step_flops
from importers.onnx_export import export
from torch import nn

import dnnbench
from dnnbench import presets
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet
from dnnbench.model import evaluate
from dnnbench.specs import Configuration, Network

CELLS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn_tanh": nn.RNN, "rnn_relu": nn.RNN}


def _module(mode: str, width: int, hidden: int, layers: int, bidirectional: bool, bias: bool,
            projection: int = 0) -> nn.Module:
    extra = {"nonlinearity": mode[4:]} if mode.startswith("rnn") else {"proj_size": projection} if projection else {}
    return CELLS[mode](width, hidden, num_layers=layers, bidirectional=bidirectional, bias=bias, batch_first=True,
                       **extra)


def _unrolled(module: nn.Module, mode: str, x: torch.Tensor) -> torch.Tensor:
    """The module's output computed step by step from its own parameters, with F.linear products
    FlopCounterMode counts (the initial state is zeros, a constant)."""
    n, steps, _ = x.shape
    h_size, dirs = module.hidden_size, 2 if module.bidirectional else 1
    p_size = getattr(module, "proj_size", 0)
    for layer in range(module.num_layers):
        outs = []
        for d in range(dirs):
            suffix = f"_l{layer}" + ("_reverse" if d else "")
            w_ih, w_hh = getattr(module, "weight_ih" + suffix), getattr(module, "weight_hh" + suffix)
            b_ih = getattr(module, "bias_ih" + suffix) if module.bias else None
            b_hh = getattr(module, "bias_hh" + suffix) if module.bias else None
            h, c = torch.zeros(n, p_size or h_size), torch.zeros(n, h_size)
            hs: list[torch.Tensor] = [h] * steps
            for t in (range(steps) if d == 0 else reversed(range(steps))):
                gi, gh = F.linear(x[:, t], w_ih, b_ih), F.linear(h, w_hh, b_hh)
                if mode == "lstm":
                    i, f, g, o = (gi + gh).chunk(4, 1)
                    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                    h = torch.sigmoid(o) * torch.tanh(c)
                    if p_size:  # LSTMP: the state projected by weight_hr
                        h = F.linear(h, getattr(module, "weight_hr" + suffix))
                elif mode == "gru":
                    (ir, iz, i_n), (hr, hz, h_n) = gi.chunk(3, 1), gh.chunk(3, 1)
                    r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
                    h = (1 - z) * torch.tanh(i_n + r * h_n) + z * h
                else:
                    h = torch.tanh(gi + gh) if mode == "rnn_tanh" else torch.relu(gi + gh)
                hs[t] = h
            outs.append(torch.stack(hs, 1))
        x = torch.cat(outs, 2)
    return x


@given(st.sampled_from(sorted(CELLS)), st.integers(1, 6), st.integers(1, 5), st.integers(1, 6), st.integers(1, 3),
       st.booleans(), st.booleans(), st.booleans(), st.integers(0, 3), st.integers(0, 5))
@settings(max_examples=40, deadline=None)
def test_every_recurrent_layer_counts_as_its_cells_run(mode: str, steps: int, width: int, hidden: int, layers: int,
                                                       bidirectional: bool, bias: bool, trained_input: bool,
                                                       side: int, projection: int) -> None:
    """``side``: 0 one (S, D) sequence per sample; R > 0 an (R, S, D) input, R sequences side by side (in
    PyTorch, folded into the batch). ``projection``: an LSTM's proj_size (below its hidden size)."""
    torch.manual_seed(0)
    projection = projection % hidden if mode == "lstm" else 0
    module = _module(mode, width, hidden, layers, bidirectional, bias, projection)
    rows = max(side, 1)
    x = torch.randn(2 * rows, steps, width, requires_grad=trained_input)
    reference = _unrolled(module, mode, x)
    assert torch.allclose(reference, module(x)[0], atol=1e-5)  # the reference is PyTorch's layer
    layer = {"kind": "recurrent", "mode": mode, "hidden": hidden, "layers": layers, "bidirectional": bidirectional,
             "bias": bias, "projection": projection}
    net = Network.build({"name": "r", "layers": [
        {"kind": "input", "shape": [rows * steps * width], "needs_gradient": trained_input},
        {"kind": "reshape", "shape": [side, steps, width] if side else [steps, width]}, layer]})
    assert net.shapes[-1] == ((side,) if side else ()) + tuple(reference.shape[1:])
    t = totals(net)
    assert t.weights == sum(p.numel() for p in module.parameters())
    assert net.layers[-1].parameter_tensors(net.shapes[1], t.weights) == tuple(p.numel() for p in module.parameters())
    forward, backward = step_flops(lambda: _unrolled(module, mode, x))
    assert forward == 2 * 2 * t.macs_forward
    assert backward == 2 * 2 * (t.macs_backprop + t.macs_weight_grad)
    built = torchnet.build_model(net)
    assert sum(p.numel() for p in built.parameters()) == t.weights
    assert tuple(built(torch.zeros(2, rows * steps * width)).shape[1:]) == net.shapes[-1]
    if side:  # the built layer runs each sample's sequences side by side, as the module on the folded batch
        rnn = next(m for m in built.modules() if isinstance(m, nn.RNNBase))
        rnn.load_state_dict(module.state_dict())
        with torch.no_grad():
            ours = built(x.detach().reshape(2, rows * steps * width))
            assert torch.allclose(ours.reshape(2 * rows, steps, -1), module(x.detach())[0], atol=1e-5)


class Classifier(nn.Module):
    """A text classifier: embedding, a stacked bidirectional recurrent layer, its last layer's final
    states of both directions joined (``torch.cat((h_n[-2], h_n[-1]), 1)``), a head."""

    def __init__(self, cell: type[nn.Module]) -> None:
        super().__init__()
        self.emb = nn.Embedding(500, 32)
        self.rnn = cell(32, 48, num_layers=2, bidirectional=True, batch_first=True, dropout=0.1)
        self.head = nn.Linear(96, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, state = self.rnn(self.emb(x))
        h = state[0] if isinstance(self.rnn, nn.LSTM) else state
        return self.head(torch.cat((h[-2], h[-1]), 1))


@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU, nn.RNN])
def test_a_text_classifier_imports_reads_its_final_states_off_the_output_and_trains_back(cell: Any) -> None:
    module = Classifier(cell)
    net = dnnbench.from_torch(module, (20,))
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    rnn = net.layers[net.layer_names.index("rnn")]
    assert (rnn.kind, rnn.hidden, rnn.layers, rnn.bidirectional) == ("recurrent", 48, 2, True)
    # h_n[-2]: forwards, the last step's first half; h_n[-1]: backwards, the first step's second half.
    picks = [(layer.kind, getattr(layer, "index", None), getattr(layer, "start", None)) for layer in net.layers
             if layer.kind in ("select_token", "slice")]
    assert picks == [("select_token", 19, None), ("slice", None, 0), ("select_token", 0, None), ("slice", None, 48)]
    module.eval()  # the states read off the output equal the module's (no dropout)
    built = torchnet.build_model(net)
    assert sum(p.numel() for p in built.parameters()) == totals(net).weights
    assert totals(dnnbench.from_torch(built, (20,))) == totals(net)


class Misread(Classifier):
    """Final states no layer outputs: the cell state c_n, an inner layer's h_n, h_n rearranged."""

    def __init__(self, use: str) -> None:
        super().__init__(nn.LSTM)
        self.use = use

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, c = self.rnn(self.emb(x))[1]
        if self.use == "cell":
            return self.head(torch.cat((c[-2], c[-1]), 1))
        if self.use == "inner":
            return self.head(torch.cat((h[0], h[1]), 1))
        return self.head(h.permute(1, 0, 2).reshape(-1, 192)[:, :96])


@pytest.mark.parametrize("use,message", [
    ("cell", "is bidirectional and takes or passes on its states"),
    ("inner", r"uses h_n\[0\], an inner layer's final state"),
    ("rearranged", "uses the final hidden state h_n other than as h_n"),
])
def test_final_states_no_layer_outputs_are_one_line_errors(use: str, message: str) -> None:
    with pytest.raises(SpecError, match=message) as err:
        dnnbench.from_torch(Misread(use), (20,))
    assert "\n" not in str(err.value)


class Wrapped(nn.Module):
    def __init__(self, rnn: nn.Module) -> None:
        super().__init__()
        self.rnn = rnn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


@pytest.mark.parametrize("rnn,message", [(nn.LSTM(8, 8), "has batch_first=False")])
def test_recurrent_layers_pytorch_runs_otherwise_are_one_line_errors(rnn: nn.Module, message: str) -> None:
    with pytest.raises(SpecError, match=message) as err:
        dnnbench.from_torch(Wrapped(rnn), (5, 8))
    assert "\n" not in str(err.value)


class Projected(nn.Module):
    """A speech-style LSTMP classifier: a stacked bidirectional LSTM whose states are projected from 48 to
    16 (``proj_size``), its last layer's final states of both directions joined; or (``carried``) a
    second LSTMP started from the first one's final states."""

    def __init__(self, carried: bool = False) -> None:
        super().__init__()
        self.emb = nn.Embedding(500, 32)
        self.rnn = nn.LSTM(32, 48, num_layers=2, bidirectional=not carried, batch_first=True, proj_size=16)
        if carried:
            self.next = nn.LSTM(16, 48, batch_first=True, proj_size=16)
        self.head = nn.Linear(32 if not carried else 16, 4)
        self.carried = carried

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, (h, c) = self.rnn(self.emb(x))
        if self.carried:
            return self.head(self.next(out, (h[-1:], c[-1:]))[0][:, -1])
        return self.head(torch.cat((h[-2], h[-1]), 1))


def test_an_lstm_with_a_projection_imports_with_its_weights_and_trains_back() -> None:
    module = Projected()
    net = dnnbench.from_torch(module, (20,))
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    rnn = net.layers[net.layer_names.index("rnn")]
    assert (rnn.hidden, rnn.projection, net.shapes[net.layer_names.index("rnn")]) == (48, 16, (20, 32))
    picks = [(layer.kind, getattr(layer, "index", None), getattr(layer, "start", None)) for layer in net.layers
             if layer.kind in ("select_token", "slice")]
    assert picks == [("select_token", 19, None), ("slice", None, 0), ("select_token", 0, None), ("slice", None, 16)]
    built = torchnet.build_model(net)
    assert sum(p.numel() for p in built.parameters()) == totals(net).weights
    assert totals(dnnbench.from_torch(built, (20,))) == totals(net)
    assert "projection" not in Network.build({"name": "r", "layers": [
        {"kind": "input", "shape": [4, 3]}, {"kind": "reshape", "shape": [4, 3]},
        {"kind": "recurrent", "hidden": 5}]}).layers[-1].to_dict()


def test_a_projected_lstm_that_passes_on_its_states_and_a_wrong_projection_are_one_line_errors() -> None:
    with pytest.raises(SpecError, match="proj_size=16") as err:
        dnnbench.from_torch(Projected(carried=True), (20,))
    assert "\n" not in str(err.value)
    for layer, field in [({"mode": "gru", "projection": 2}, "projection"), ({"projection": 5}, "projection")]:
        with pytest.raises(SpecError, match=field) as err:
            Network.build({"name": "r", "layers": [{"kind": "input", "shape": [4, 3]},
                                                   {"kind": "reshape", "shape": [4, 3]},
                                                   {"kind": "recurrent", "hidden": 5, **layer}]})
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("cluster,precision", [("adam-2014", "fp32"), ("modern-2025", "fp32"),
                                               ("dgx-a100", "fp16")])
def test_a_recurrent_layer_pays_its_fixed_costs_at_every_step(cluster: str, precision: str) -> None:
    """An LSTM over S steps and fc layers of the same products (the input and state matrices applied
    to every step at once) do the same multiply-adds; the LSTM's S sequential calls cost more."""
    steps, width, hidden = 64, 32, 32
    lstm = Network.build({"name": "lstm", "layers": [
        {"kind": "input", "shape": [steps * width]}, {"kind": "reshape", "shape": [steps, width]},
        {"kind": "recurrent", "hidden": hidden, "bias": False}]})
    fc = Network.build({"name": "fc", "layers": [
        {"kind": "input", "shape": [steps * width]}, {"kind": "reshape", "shape": [steps, width]},
        {"kind": "fc", "out_features": 4 * hidden, "bias": False},
        {"kind": "slice", "axis": 1, "start": 0, "stop": hidden},
        {"kind": "fc", "out_features": 4 * hidden, "bias": False}]})
    assert totals(lstm).macs_forward == totals(fc).macs_forward == 2 * steps * 4 * hidden * width
    cl, ds, config = presets.cluster(cluster), presets.dataset("openwebtext"), Configuration(precision=precision)
    a, b = (float(evaluate(n, cl, ds, config).time_per_sample_s) for n in (lstm, fc))
    assert np.isfinite(a) and a > b > 0


@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU, nn.RNN])
def test_the_onnx_export_of_a_text_classifier_imports_as_the_module_does(cell: Any, tmp_path: Path) -> None:
    """torch writes one ONNX node per layer, time-major between Transposes: one recurrent layer again."""
    module = Classifier(cell)
    module.eval()  # torch exports recurrent layers with dropout in eval mode only
    net = dnnbench.from_onnx(export(module, (20,), tmp_path / "classifier.onnx", training=False, dtype=torch.long))
    assert totals(net) == totals(dnnbench.from_torch(module, (20,)))
    rnn = next(layer for layer in net.layers if layer.kind == "recurrent")
    assert (rnn.mode, rnn.hidden, rnn.layers, rnn.bidirectional, rnn.bias) == (
        {nn.LSTM: "lstm", nn.GRU: "gru", nn.RNN: "rnn_tanh"}[cell], 48, 2, True, True)
    picks = [(layer.kind, getattr(layer, "index", None), getattr(layer, "start", None)) for layer in net.layers
             if layer.kind in ("select_token", "slice")]
    assert picks == [("select_token", 19, None), ("slice", None, 0), ("select_token", 0, None), ("slice", None, 48)]


class Tagger(nn.Module):
    """A recurrent layer's whole output used: per-token logits of the last step, then another recurrent
    layer of another width on the same sequence (two stacks)."""

    def __init__(self, mode: str, layers: int, bidirectional: bool, bias: bool, hidden: int) -> None:
        super().__init__()
        self.first = _module(mode, 6, hidden, layers, bidirectional, bias)
        self.second = nn.GRU(hidden * (2 if bidirectional else 1), 5, batch_first=True)
        self.head = nn.Linear(5, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.second(self.first(x)[0])[0][:, -1])


@given(st.sampled_from(sorted(CELLS)), st.integers(1, 3), st.booleans(), st.booleans(), st.integers(1, 9),
       st.integers(1, 6))
@settings(max_examples=12, deadline=None)
def test_every_exported_recurrent_stack_imports_as_the_module_does(mode: str, layers: int, bidirectional: bool,
                                                                   bias: bool, hidden: int, steps: int) -> None:
    import tempfile

    module = Tagger(mode, layers, bidirectional, bias, hidden)
    with tempfile.TemporaryDirectory() as folder:
        net = dnnbench.from_onnx(export(module, (steps, 6), Path(folder) / "tagger.onnx", training=False))
    assert totals(net) == totals(dnnbench.from_torch(module, (steps, 6)))
    assert [(layer.mode, layer.layers) for layer in net.layers if layer.kind == "recurrent"] == [
        (mode, layers), ("gru", 1)]


@pytest.mark.parametrize("use,message", [
    ("cell", "uses the LSTM's final cell state Y_c"),
    ("inner", "uses layer 0's final hidden state, an inner layer's"),
    ("rearranged", "uses a recurrent node's final hidden state Y_h other than as one layer"),
])
def test_final_states_no_layer_outputs_are_one_line_errors_in_onnx(use: str, message: str, tmp_path: Path) -> None:
    module = Misread(use)
    module.eval()
    path = export(module, (20,), tmp_path / "misread.onnx", training=False, dtype=torch.long)
    with pytest.raises(SpecError, match=message) as err:
        dnnbench.from_onnx(path)
    assert "\n" not in str(err.value)


def test_an_exported_time_major_recurrent_layer_is_a_one_line_error(tmp_path: Path) -> None:
    path = export(Wrapped(nn.LSTM(8, 8)), (5, 8), tmp_path / "time_major.onnx", training=False)
    with pytest.raises(SpecError, match="recurrent nodes on") as err:
        dnnbench.from_onnx(path)
    assert "\n" not in str(err.value)


class RowsAndColumns(nn.Module):
    """Sequencer's block: a bidirectional LSTM along every row of a (H, W, C) map and one along every
    column, the rows and columns folded into the batch, joined and projected."""

    def __init__(self, final_state: bool = False) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.rows, self.cols = (nn.LSTM(8, 6, batch_first=True, bidirectional=True) for _ in range(2))
        self.fc, self.head = nn.Linear(24, 8), nn.Linear(8, 5)
        self.final_state = final_state

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x).permute(0, 2, 3, 1)  # (B, H, W, C)
        b, h, w, c = x.shape
        r, state = self.rows(x.reshape(-1, w, c))
        if self.final_state:
            hn = state[0][-1].reshape(b, h, -1).mean(1)  # (B, 6): each row's last state, averaged
            return self.head(torch.cat((hn, hn[:, :2]), 1))
        v, _ = self.cols(x.permute(0, 2, 1, 3).reshape(-1, h, c))
        y = torch.cat((r.reshape(b, h, w, -1), v.reshape(b, w, h, -1).permute(0, 2, 1, 3)), -1)
        return self.head(self.fc(y).mean((1, 2)))


def test_sequences_folded_into_the_batch_import_as_sequences_side_by_side() -> None:
    module = RowsAndColumns()
    net = dnnbench.from_torch(module, (3, 6, 7))
    assert totals(net).weights == sum(p.numel() for p in module.parameters())
    rnns = [(net.shapes[net.input_indices[i][0]], net.shapes[i]) for i, layer in enumerate(net.layers)
            if layer.kind == "recurrent"]
    assert rnns == [((6, 7, 8), (6, 7, 12)), ((7, 6, 8), (7, 6, 12))]  # (R, S, D): rows, then columns
    built = torchnet.build_model(net)
    y = built(torch.randn(2, 3, 6, 7))
    assert tuple(y.shape) == (2, 5)
    y.sum().backward()  # trains back through both
    # its final states are not read off an output of sequences side by side: a one-line error
    with pytest.raises(SpecError, match="final states of sequences folded into the batch") as err:
        dnnbench.from_torch(RowsAndColumns(final_state=True), (3, 6, 7))
    assert "\n" not in str(err.value)


def test_a_projected_lstm_is_priced_step_by_step_on_a_cpu() -> None:
    """PyTorch's CPU build runs an LSTM with a projection step by step with ATen's kernels (it warns that
    oneDNN does not support it), not as one oneDNN call per layer and direction: the model prices its
    calls per step and its fixed time per step as a GRU's, and the time rises with the projection."""
    from dnnbench.model.arrays import network_arrays
    from dnnbench.model.evaluate import single_machine_time_per_sample

    def network(projection: int) -> Network:
        return Network.build({"name": "r", "layers": [
            {"kind": "input", "shape": [10 * 8]}, {"kind": "reshape", "shape": [10, 8]},
            {"kind": "recurrent", "hidden": 16, "projection": projection}]})

    plain, projected = network_arrays(network(0)), network_arrays(network(4))
    assert (plain.cpu_calls[-1], plain.recurrent_mode[-1]) == (1, 0)  # one oneDNN call; the LSTM's step time
    assert (projected.cpu_calls[-1], projected.recurrent_mode[-1]) == (11, 1)  # per step (and the input's)
    cluster = presets.cluster("modern-2025")
    times = [single_machine_time_per_sample(network(p), cluster, Configuration(local_batch_samples=8))
             for p in (4, 8, 15)]
    assert times == sorted(times)
