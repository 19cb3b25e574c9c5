"""Recurrent layers that take or pass on their states (docs/importing.md): a seq2seq encoder's final
states as its decoder's initial ones (GRU's h, LSTM's (h, c), stacked layers), the translation
tutorial's decoder run one step at a time on its own last state (from a start token, teacher-forced or
greedy), a captioner's initial state computed from image features, an LSTM's final cell state used as a
feature. Each imports step by step; its weights are the module's parameters, its forward and backward
FLOPs what FlopCounterMode counts, and the runner's build trains; what cannot be followed is a one-line
error."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dnnbench
from dnnbench.counts import totals
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet

from .import_helpers import counted_like_pytorch, dense_weight_grad, params, step_flops

CELLS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}


class Seq2Seq(nn.Module):
    """Encoder to decoder over the same tokens (a shared embedding), either layout, 1 or 2 layers."""

    def __init__(self, cell: str, layers: int = 1, batch_first: bool = True) -> None:
        super().__init__()
        kind = CELLS[cell]
        extra = {"nonlinearity": "relu"} if cell == "rnn" else {}
        self.emb = nn.Embedding(30, 8)
        self.enc = kind(8, 12, num_layers=layers, batch_first=batch_first, **extra)
        self.dec = kind(8, 12, num_layers=layers, batch_first=batch_first, **extra)
        self.out = nn.Linear(12, 30)
        self.batch_first = batch_first

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.emb(x)
        if not self.batch_first:
            e = e.transpose(0, 1)
        _, state = self.enc(e)
        o, _ = self.dec(e, state)
        if not self.batch_first:
            o = o.transpose(0, 1)
        return self.out(o)


class Unpacked(nn.Module):
    """``_, (h, c) = enc(x)`` then ``dec(y, (h, c))``; the decoder's last h classifies besides."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(30, 8)
        self.enc, self.dec = nn.LSTM(8, 12, batch_first=True), nn.LSTM(8, 12, batch_first=True)
        self.out = nn.Linear(12, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.emb(x)
        _, (h, c) = self.enc(e)
        _, (h2, _) = self.dec(e[:, :3], (h, c))
        return self.out(h2[-1])


class StepDecoder(nn.Module):
    """The translation tutorial's decoder: one token per call, its hidden state carried from the
    encoder's through every call, teacher forcing on the input tokens."""

    def __init__(self, steps: int = 4) -> None:
        super().__init__()
        self.emb, self.enc = nn.Embedding(30, 8), nn.GRU(8, 12, batch_first=True)
        self.demb, self.dec, self.out = nn.Embedding(30, 8), nn.GRU(8, 12, batch_first=True), nn.Linear(12, 30)
        self.steps = steps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, h = self.enc(self.emb(x))
        outs = []
        for i in range(self.steps):
            o, h = self.dec(F.relu(self.demb(x[:, i:i + 1])), h)
            outs.append(self.out(o))
        return torch.cat(outs, 1)


class Captioner(nn.Module):
    """An image captioner: the LSTM's initial (h, c) projected from the image's features."""

    def __init__(self) -> None:
        super().__init__()
        self.cnn = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.init_h, self.init_c = nn.Linear(4, 12), nn.Linear(4, 12)
        self.lstm, self.out = nn.LSTM(8, 12, batch_first=True), nn.Linear(12, 30)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        f = self.cnn(image)
        h0, c0 = torch.tanh(self.init_h(f)).unsqueeze(0), self.init_c(f).unsqueeze(0)
        o, _ = self.lstm(f[:, None, :2].repeat(1, 5, 4), (h0, c0))
        return self.out(o)


class CellFeature(nn.Module):
    """An LSTM's final h and c joined as the features a head classifies."""

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.lstm, self.out = nn.Embedding(30, 8), nn.LSTM(8, 12, batch_first=True), nn.Linear(24, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, (h, c) = self.lstm(self.emb(x))
        return self.out(torch.cat([h[-1], c[-1]], 1))


def _checked(module: nn.Module, shape: tuple[int, ...], example: torch.Tensor) -> dnnbench.Network:
    """Counted as PyTorch counts it (oneDNN off: its LSTM kernel hides its products), rebuilt by the
    runner with the same weights, a training step of the build."""
    net = counted_like_pytorch(module, shape, example, no_onednn=True)
    built = torchnet.build_model(net)
    assert params(built) == totals(net).weights
    out = built(torch.zeros(example.shape[0], *net.layers[0].shape, dtype=example.dtype))
    assert tuple(out.shape[1:]) == net.shapes[-1]
    out.float().sum().backward()
    return net


@pytest.mark.parametrize("cell", sorted(CELLS))
@pytest.mark.parametrize(("layers", "batch_first"), [(1, True), (2, True), (1, False)])
def test_an_encoder_s_final_states_start_its_decoder(cell: str, layers: int, batch_first: bool) -> None:
    torch.manual_seed(0)
    net = _checked(Seq2Seq(cell, layers, batch_first), (6,), torch.randint(0, 30, (3, 6)))
    assert net.shapes[-1] == (6, 30)
    assert not any(layer.kind == "recurrent" for layer in net.layers)


@pytest.mark.parametrize("module", [Unpacked, StepDecoder, CellFeature])
def test_states_unpacked_carried_through_calls_or_used_as_features(module: type[nn.Module]) -> None:
    torch.manual_seed(0)
    _checked(module(), (6,), torch.randint(0, 30, (2, 6)))


@pytest.mark.parametrize("teacher", [True, False])
def test_the_translation_tutorial_s_decoder_imports(teacher: bool) -> None:
    torch.manual_seed(0)
    module = Tutorial(teacher).eval()  # its dropout off, so the counted step is deterministic
    net = _checked(module, (6,), torch.randint(0, 30, (2, 6)))
    assert net.shapes[-1] == (4, 30)


@pytest.mark.parametrize("teacher", [True, False])
def test_the_tutorial_s_attention_decoder_imports(teacher: bool) -> None:
    torch.manual_seed(0)
    net = _checked(Bahdanau(teacher), (6,), torch.randint(0, 30, (2, 6)))
    assert net.shapes[-1] == (3, 30)


@pytest.mark.parametrize("layers", [1, 2])
def test_final_states_moved_batch_first(layers: int) -> None:
    torch.manual_seed(0)
    net = _checked(Queried(layers), (6,), torch.randint(0, 30, (2, 6)))
    assert net.shapes[-1] == (3 * layers,)
    assert (layers == 1) == any(layer.kind == "recurrent" for layer in net.layers)


def test_an_initial_state_computed_from_image_features() -> None:
    torch.manual_seed(0)
    net = _checked(Captioner(), (3, 8, 8), torch.randn(2, 3, 8, 8))
    assert net.shapes[-1] == (5, 30)


def test_a_recurrent_layer_without_states_stays_one_layer() -> None:
    """Only calls that take or pass on states run step by step; h_n[-1] alone is still read off the output."""

    class Classifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.lstm, self.out = nn.Embedding(30, 8), nn.LSTM(8, 12, batch_first=True), nn.Linear(12, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            _, (h, _) = self.lstm(self.emb(x))
            return self.out(h[-1])

    net = dnnbench.from_torch(Classifier(), (6,))
    assert [layer.kind for layer in net.layers].count("recurrent") == 1


class Bidirectional(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(30, 8)
        self.enc = nn.GRU(8, 12, batch_first=True, bidirectional=True)
        self.dec = nn.GRU(8, 12, batch_first=True, bidirectional=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.emb(x)
        _, h = self.enc(e)
        return self.dec(e, h)[0]


class Tutorial(nn.Module):
    """The translation tutorial's encoder and decoder as it writes them: the decoder starts from the
    embedding of a constant start token (``torch.empty(B, 1, dtype=torch.long).fill_(SOS)``) and takes,
    one token per call, either the target's next token (teacher forcing) or its own top-1 prediction
    (``topi.squeeze(-1).detach()``)."""

    def __init__(self, teacher: bool) -> None:
        super().__init__()
        self.emb, self.enc, self.drop = nn.Embedding(30, 8), nn.GRU(8, 8, batch_first=True), nn.Dropout(0.1)
        self.demb, self.dec, self.out = nn.Embedding(30, 8), nn.GRU(8, 8, batch_first=True), nn.Linear(8, 30)
        self.teacher = teacher

    def step(self, token: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        output, hidden = self.dec(F.relu(self.demb(token)), hidden)
        return self.out(output), hidden

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        encoder_outputs, hidden = self.enc(self.drop(self.emb(x)))
        token = torch.empty(encoder_outputs.size(0), 1, dtype=torch.long, device=x.device).fill_(0)
        outputs = []
        for i in range(4):
            output, hidden = self.step(token, hidden)
            outputs.append(output)
            if self.teacher:
                token = x[:, i].unsqueeze(1)
            else:
                _, topi = output.topk(1)
                token = topi.squeeze(-1).detach()
        return F.log_softmax(torch.cat(outputs, dim=1), dim=-1)


class Bahdanau(nn.Module):
    """The translation tutorial's attention decoder: each step's query its hidden state moved batch-first
    (``hidden.permute(1, 0, 2)``), additive attention over the encoder's outputs, the context joined to
    the token's embedding as the GRU's input."""

    def __init__(self, teacher: bool) -> None:
        super().__init__()
        self.emb, self.enc = nn.Embedding(30, 8), nn.GRU(8, 8, batch_first=True)
        self.demb, self.dec, self.out = nn.Embedding(30, 8), nn.GRU(16, 8, batch_first=True), nn.Linear(8, 30)
        self.wa, self.ua, self.va = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 1)
        self.teacher = teacher

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keys, hidden = self.enc(self.emb(x))
        token = torch.empty(x.size(0), 1, dtype=torch.long, device=x.device).fill_(0)
        outputs = []
        for i in range(3):
            query = hidden.permute(1, 0, 2)
            scores = self.va(torch.tanh(self.wa(query) + self.ua(keys))).squeeze(2).unsqueeze(1)
            context = torch.bmm(F.softmax(scores, dim=-1), keys)
            output, hidden = self.dec(torch.cat((self.demb(token), context), dim=2), hidden)
            output = self.out(output)
            outputs.append(output)
            token = x[:, i].unsqueeze(1) if self.teacher else output.topk(1)[1].squeeze(-1).detach()
        return torch.cat(outputs, dim=1)


class Queried(nn.Module):
    """A final state moved batch-first without being passed on: (L, H) per sample, stacked or not."""

    def __init__(self, layers: int) -> None:
        super().__init__()
        self.emb, self.gru, self.out = nn.Embedding(30, 8), nn.GRU(8, 12, layers, batch_first=True), nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, h = self.gru(self.emb(x))
        return self.out(h.transpose(0, 1)).flatten(1)


class PairJoined(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb, self.lstm = nn.Embedding(30, 8), nn.LSTM(8, 12, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat(self.lstm(self.emb(x))[1], -1)[0]


@pytest.mark.parametrize(("module", "says"), [
    (Bidirectional, "enc (torch.nn.GRU): is bidirectional and takes or passes on its states"),
    (PairJoined, "uses an LSTM's final (h_n, c_n) other than as h_n, c_n = state"),
])
def test_states_the_import_cannot_follow_are_one_line_errors(module: type[nn.Module], says: str) -> None:
    with pytest.raises(SpecError) as caught:
        dnnbench.from_torch(module(), (6,))
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)


class WordLanguageModel(nn.Module):
    """PyTorch's word language model example (its RNN branch): ``forward(input, hidden)``, the state
    carried from the last batch (detached: a constant), sequence-first ids, logits folded to (S·N, V)
    and log-softmaxed for an NLL loss outside the forward, the state returned beside them."""

    def __init__(self, rnn_type: str, tie: bool) -> None:
        super().__init__()
        self.drop, self.encoder = nn.Dropout(0.2), nn.Embedding(50, 16)
        self.rnn = getattr(nn, rnn_type)(16, 16, 2, dropout=0.2)
        self.decoder = nn.Linear(16, 50)
        if tie:
            self.decoder.weight = self.encoder.weight
        self.rnn_type = rnn_type

    def forward(self, input: torch.Tensor, hidden: object) -> tuple[torch.Tensor, object]:
        output, hidden = self.rnn(self.drop(self.encoder(input)), hidden)
        decoded = self.decoder(self.drop(output)).view(-1, 50)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, batch: int) -> object:
        weight = next(self.parameters())
        zeros = weight.new_zeros(2, batch, 16)
        return (zeros, zeros.clone()) if self.rnn_type == "LSTM" else zeros


@pytest.mark.parametrize("rnn_type", ["LSTM", "GRU"])
@pytest.mark.parametrize("tie", [False, True])
def test_a_forward_taking_its_carried_state_imports_with_the_state_at_zeros(rnn_type: str, tie: bool) -> None:
    """A recurrent model's required ``hidden`` is traced as None (zeros): a state carried over and
    detached costs the same; the folded log-softmax is the classes' softmax per token."""
    torch.manual_seed(0)
    module = WordLanguageModel(rnn_type, tie).eval()
    net = dnnbench.from_torch(module, (7,), batch_axis=1)
    t = totals(net)
    assert t.weights == params(module)
    assert [layer.kind for layer in net.layers][-2:] == ["fc", "softmax"] and net.shapes[-1] == (7, 50)
    x = torch.randint(0, 50, (7, 3))
    was = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        forward, backward = step_flops(lambda: module(x, module.init_hidden(3))[0])
    finally:
        torch._C._set_mkldnn_enabled(was)
    assert forward == 2 * 3 * t.macs_forward
    assert backward == 2 * 3 * (t.macs_backprop + dense_weight_grad(net))
    built = torchnet.build_model(net)
    built(torch.zeros(3, 7, dtype=torch.long)).float().sum().backward()


def test_another_required_input_of_a_network_without_recurrent_layers_is_still_asked_for() -> None:
    class TwoInputs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return self.fc(x) + y

    with pytest.raises(SpecError, match="takes another input 'y'"):
        dnnbench.from_torch(TwoInputs(), (4,))
