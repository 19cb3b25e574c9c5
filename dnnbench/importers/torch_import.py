"""PyTorch modules to network specs, by tracing with torch.fx on the meta device (issue 10).

The module is traced symbolically with torch.fx, by a tracer whose proxies also carry their value on the
meta device (so code that checks shapes traces), then run once on a meta-device input with meta copies
of its weights (``torch.func.functional_call``), so every operation gets its real output shape and no
weight memory is allocated: a 2-billion-weight model imports in milliseconds. The module itself is
never changed. Supported operations and how they map: docs/importing.md.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, get_args

from ..errors import SpecError
from ..specs.layers import MAX_VIEW_AXES, FunctionName
from ._build import (
    WEIGHT_NORMED_KINDS,
    Shape,
    SpecBuilder,
    activation_handler,
    adaptive_pool_handler,
    as_pair,
    broadcast_together,
    einsum_product,
    finite_fill,
    input_shapes,
    layer_handler,
    one_input,
    pad_layer,
    pair_or_int,
    power,
    prelu_layer,
    reduce_layer,
    scale_axis,
)

if TYPE_CHECKING:  # pragma: no cover - types only
    import torch

    from ..specs import Network

#: The activation functions a layer may have (for messages).
ACTIVATIONS = get_args(FunctionName)


@dataclass
class _Op:
    """One traced operation: where it comes from, its constant arguments, its per-sample shapes and the
    spec layers its data inputs come from."""

    name: str  # module path ("features.0") or fx node name ("flatten")
    origin: str  # for error messages: "features.3 (torch.nn.LSTM)"
    in_shape: Shape
    out_shape: Shape
    inputs: list[str]  # spec layer names of the data inputs, in argument order
    in_shapes: list[Shape]
    module: Any = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    params: int = 0  # weights of operands computed from parameters alone (a class token, a position table)
    param_shapes: list[Shape] = field(default_factory=list)  # those operands' shapes, as torch holds them
    const_shapes: list[Shape] = field(default_factory=list)  # tensor operands of constants alone (a mask)
    keep: float | None = None  # such an operand is a random mask kept with this probability (drop_path)
    param_at: tuple[int, ...] = ()  # where those operands stand among the call's tensor operands
    const_at: tuple[int, ...] = ()  # where the constant operands stand among them
    fusable: bool = True  # the data input has no other user (an activation may fuse into it)
    batch_axis: int = 0  # the batch's axis in the data inputs as torch holds them (1: batch_first=False layout)

    def arg(self, index: int, key: str, default: Any = None) -> Any:
        """A call argument by position (counting the data tensor as 0) or keyword."""
        if key in self.kwargs:
            return self.kwargs[key]
        return self.args[index] if index < len(self.args) else default

    @property
    def source(self) -> str:
        return self.inputs[0]


def _fail(op: _Op, text: str) -> SpecError:
    return SpecError.plain(op.origin, text)


# ---- handlers: one per operation family (a registry, not an if-chain; style guide 6) ------------------
# Each returns the spec layer name that carries the operation's output.

def _conv2d(b: SpecBuilder, op: _Op) -> str:
    one_input(op)
    m = op.module
    padding_mode = getattr(m, "padding_mode", "zeros")
    padding = m.padding
    extra = (0, 0)  # 'same' of an even span: the one row and column more below and right (PyTorch's split)
    if isinstance(padding, str):  # 'valid' or 'same' (stride 1)
        if padding == "valid":
            padding = (0, 0)
        else:
            span = [d * (k - 1) for k, d in zip(m.kernel_size, m.dilation, strict=True)]
            padding, extra = tuple(x // 2 for x in span), tuple(x % 2 for x in span)
    inputs = op.inputs
    (top, left), (c, h, w) = as_pair(padding), op.in_shape
    if padding_mode != "zeros" and (any(padding) or any(extra)):
        # reflect, replicate, circular: a pad layer before it (PyTorch pads so, then convolves unpadded)
        inputs = [b.add({"kind": "pad", "padding": [left, left + extra[1], top, top + extra[0]], "mode": padding_mode},
                        (c, h + 2 * top + extra[0], w + 2 * left + extra[1]), f"{op.name}_pad", op.origin, op.inputs)]
        padding = (0, 0)
    elif any(extra):  # ATen pads the extra row and column with zeros, then convolves with the symmetric part
        inputs = [b.add({"kind": "pad", "padding": [0, extra[1], 0, extra[0]]}, (c, h + extra[0], w + extra[1]),
                        f"{op.name}_pad", op.origin, op.inputs)]
    layer = {"kind": "conv2d", "out_channels": int(m.out_channels), "kernel": pair_or_int(m.kernel_size),
             "stride": pair_or_int(m.stride), "padding": pair_or_int(padding), "bias": m.bias is not None}
    if tuple(m.dilation) != (1, 1):
        layer["dilation"] = pair_or_int(m.dilation)
    if m.groups != 1:
        layer["groups"] = int(m.groups)
    return b.add(layer, op.out_shape, op.name, op.origin, inputs)


def _conv_transpose2d(b: SpecBuilder, op: _Op) -> str:
    """``nn.ConvTranspose2d`` and ``F.conv_transpose2d(x, weight, bias, stride, padding, output_padding,
    groups, dilation)`` with a weight of the caller's: a conv_transpose2d layer."""
    m = op.module
    if m is not None:
        one_input(op)
        if getattr(m, "padding_mode", "zeros") != "zeros":  # pragma: no cover - PyTorch allows zeros only
            raise _fail(op, f"has padding_mode={m.padding_mode!r}; dnnbench imports zero padding")
        out_c, kernel, stride, padding = int(m.out_channels), tuple(m.kernel_size), m.stride, m.padding
        extra, groups, dilation, bias = m.output_padding, int(m.groups), tuple(m.dilation), m.bias is not None
    else:
        in_c, per_group, kh, kw = _learned_weight(op, 4, "F.conv_transpose2d(x, weight, ...)")
        groups = int(op.arg(6, "groups", 1))
        out_c, kernel = per_group * groups, (kh, kw)
        stride, padding = op.arg(3, "stride", 1), op.arg(4, "padding", 0)
        extra, dilation, bias = op.arg(5, "output_padding", 0), as_pair(op.arg(7, "dilation", 1)), \
            op.arg(2, "bias") is not None
    layer: dict[str, Any] = {"kind": "conv_transpose2d", "out_channels": out_c, "kernel": pair_or_int(kernel),
                             "stride": pair_or_int(as_pair(stride)), "padding": pair_or_int(as_pair(padding)),
                             "bias": bias}
    if as_pair(extra) != (0, 0):
        layer["output_padding"] = pair_or_int(as_pair(extra))
    if tuple(dilation) != (1, 1):
        layer["dilation"] = pair_or_int(dilation)
    if groups != 1:
        layer["groups"] = groups
    return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)


#: Module attributes of a 1-D layer that are one number per spatial axis: the 2-D layer it runs as has
#: 1 (or 0 for a padding) along the height.
_LIFTED_ATTRS = {"kernel_size": 1, "stride": 1, "padding": 0, "dilation": 1, "output_padding": 0}
_COPIED_ATTRS = ("out_channels", "in_channels", "groups", "bias", "padding_mode", "ceil_mode", "affine",
                 "num_features", "norm_type")


def _lift(value: Any, low: int) -> Any:
    """A 1-D layer's window number (``k`` or ``(k,)``) as the 2-D one's ``(low, k)``; None and padding
    strings ('same', 'valid') as they are."""
    if value is None or isinstance(value, str) or (isinstance(value, (tuple, list)) and len(value) != 1):
        return value
    v = value[0] if isinstance(value, (tuple, list)) else value
    return (low, int(v))


class _Lifted1d:
    """The 2-D module a 1-D one (``nn.Conv1d``, ``nn.MaxPool1d``, ...) runs as: its window attributes
    with 1 along the height."""

    def __init__(self, module: Any) -> None:
        for attr, low in _LIFTED_ATTRS.items():
            if hasattr(module, attr):
                setattr(self, attr, _lift(getattr(module, attr), low))
        for attr in _COPIED_ATTRS:
            if hasattr(module, attr):
                setattr(self, attr, getattr(module, attr))


def _on_maps(handler: Callable[[SpecBuilder, _Op], str], lifted_args: dict[int, tuple[str, int]] | None = None
             ) -> Callable[[SpecBuilder, _Op], str]:
    """A 1-D operation on (C, L) signals (``nn.Conv1d``, ``F.max_pool1d``, ...) as the 2-D ``handler``'s
    on (C, 1, L) maps, between two views: PyTorch runs a 1-D convolution as that 2-D one. A functional
    call's window arguments (``lifted_args``: position -> keyword and the number along the height) and
    its weight (O, I, k) are lifted as a module's attributes are."""
    def handle(b: SpecBuilder, op: _Op) -> str:
        if len(op.in_shape) != 2 or len(op.out_shape) != 2 or len(op.inputs) != 1:
            raise _fail(op, f"takes a {list(op.in_shape)} input; dnnbench imports 1-D layers on (C, L) signals")
        (c, length), (c_out, out_length) = op.in_shape, op.out_shape
        maps = b.maps(op.source, op.in_shape, op.origin)
        args, kwargs = list(op.args), dict(op.kwargs)
        for index, (key, low) in (lifted_args or {}).items():
            if key in kwargs:
                kwargs[key] = _lift(kwargs[key], low)
            elif index < len(args):
                args[index] = _lift(args[index], low)
        lifted = replace(op, in_shape=(c, 1, length), out_shape=(c_out, 1, out_length), inputs=[maps],
                         in_shapes=[(c, 1, length)], args=tuple(args), kwargs=kwargs,
                         module=None if op.module is None else _Lifted1d(op.module),
                         param_shapes=[(*s[:2], 1, s[2]) if len(s) == 3 else s for s in op.param_shapes])
        out = handler(b, lifted)
        if out == maps:  # the operation emitted nothing (a 1-wide window): the signal as it was
            return op.source
        return b.signal(out, op.out_shape, f"{op.name}_signal", op.origin)
    return handle


def _recurrent(b: SpecBuilder, op: _Op) -> str:
    """``nn.LSTM``, ``nn.GRU``, ``nn.RNN`` on an (S, D) sequence (either ``batch_first``): a recurrent layer
    (its output: every step's hidden state of the last layer; the final states are read off it,
    :func:`_final_state`). Dropout between stacked layers is not counted."""
    one_input(op)
    m = op.module
    _check_batch_first(op, bool(m.batch_first))
    if len(op.in_shape) not in (2, 3):
        raise _fail(op, f"takes a {list(op.in_shape)} input; dnnbench's recurrent layer takes (S, D) sequences, or "
                    "(R, S, D): R of them side by side (a map's rows folded into the batch)")
    mode = {"LSTM": "lstm", "GRU": "gru"}.get(m.mode, f"rnn_{getattr(m, 'nonlinearity', 'tanh')}")
    layer: dict[str, Any] = {"kind": "recurrent", "mode": mode, "hidden": int(m.hidden_size), "bias": bool(m.bias)}
    if m.num_layers != 1:
        layer["layers"] = int(m.num_layers)
    if m.bidirectional:
        layer["bidirectional"] = True
    if getattr(m, "proj_size", 0):  # LSTMP: each step's hidden state projected to proj_size
        layer["projection"] = int(m.proj_size)
    return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)


def _cell(b: SpecBuilder, op: _Op) -> str:
    """``nn.LSTMCell``, ``nn.GRUCell``, ``nn.RNNCell`` called on one step ``x`` (B, I) and the state (h, c),
    h or nothing (zeros): the kernels PyTorch's CPU cell runs, as layers (ATen's ``LSTMCell``,
    ``GRUCell``, ``SimpleCell``): the two products (``fc`` of x and of h, their biases b_ih and b_hh), their
    sum, the gates (``slice``, ``activation``) and their products (``mul``, ``add``). A missing or constant
    state is a ``zeros`` layer (no gradient flows into it). An LSTM cell's output is (h, c) (getitem 0 and 1,
    or the pair passed on as the next call's state)."""
    from torch import nn

    m = op.module
    gates = {nn.LSTMCell: 4, nn.GRUCell: 3}.get(type(m), 1)
    hidden, width = int(m.hidden_size), int(m.input_size)
    if op.in_shape != (width,):
        raise _fail(op, f"takes a {list(op.in_shape)} step; dnnbench imports a cell called on a (batch, "
                    f"{width}) step")
    state = list(op.inputs[1:])
    wanted = 2 if gates == 4 else 1
    if wanted == 2 and len(state) == 1 and state[0] in b.outputs:
        state = list(b.outputs[state[0]])  # the (h, c) an earlier call returned, passed on whole
    if state and len(state) != wanted:
        raise _fail(op, f"takes {len(state)} state tensors that are layer outputs; dnnbench imports a cell whose "
                    f"state ({'h, c' if wanted == 2 else 'h'}) is layer outputs, or zeros")
    name, origin, x = op.name, op.origin, op.source
    if not state:
        zeros = b.add({"kind": "zeros", "shape": [hidden]}, (hidden,), f"{name}_state", origin, [x])
        state = [zeros] * wanted
    rows = (gates * hidden,)

    def fc(source: str, suffix: str) -> str:
        return b.add({"kind": "fc", "out_features": gates * hidden, "bias": bool(m.bias)}, rows, name + suffix,
                     origin, [source])

    if gates == 3:  # ATen's GRUCell takes the input's product first
        ih, hh = fc(x, "_ih"), fc(state[0], "_hh")
    else:
        hh, ih = fc(state[0], "_hh"), fc(x, "_ih")
    h, c = _cell_gates(b, gates, hidden, getattr(m, "nonlinearity", "tanh") == "relu", name, origin, ih, hh, state)
    if c:
        b.outputs[h] = (h, c)
    return h


def _cell_gates(b: SpecBuilder, gates: int, hidden: int, relu: bool, name: str, origin: str, ih: str, hh: str,
                state: list[str]) -> tuple[str, str | None]:
    """One step of a cell from its two products ``ih`` (of the input) and ``hh`` (of the state h) of G·H
    rows each, as ATen's ``LSTMCell``, ``GRUCell`` and ``SimpleCell`` compute it: the gates (``slice``,
    ``activation``), their products (``mul``) and sums (``add``). ``state``: (h, c) for an LSTM, (h,)
    otherwise. Returns the new (h, c), c None but for an LSTM; the layer named ``name`` is h."""

    def piece(source: str, k: int, suffix: str) -> str:
        return b.add({"kind": "slice", "axis": 0, "start": k * hidden, "stop": (k + 1) * hidden}, (hidden,),
                     f"{name}_{suffix}", origin, [source])

    def join(kind: str, inputs: list[str], suffix: str, activation: str = "none") -> str:
        layer = {"kind": kind, **({"activation": activation} if activation != "none" else {})}
        return b.add(layer, (hidden,), f"{name}_{suffix}", origin, inputs)

    def act(function: str, source: str, suffix: str) -> str:
        return b.add({"kind": "activation", "function": function}, (hidden,), f"{name}_{suffix}", origin, [source])

    h = state[0]
    if gates == 1:  # tanh(linear_hh(h) + linear_ih(x))
        return b.add({"kind": "add", "activation": "relu" if relu else "tanh"}, (hidden,), name, origin,
                     [hh, ih]), None
    if gates == 3:  # GRU: reset and input gates from the sums, the new gate from x's and the reset h's
        reset = join("add", [piece(hh, 0, "hr"), piece(ih, 0, "ir")], "reset", "sigmoid")
        update = join("add", [piece(hh, 1, "hz"), piece(ih, 1, "iz")], "update", "sigmoid")
        candidate = join("add", [piece(ih, 2, "in"), join("mul", [piece(hh, 2, "hn"), reset], "hn_reset")],
                         "new", "tanh")
        step = join("mul", [join("add", [h, candidate], "change"), update], "gated")  # (h - n) * z
        return b.add({"kind": "add"}, (hidden,), name, origin, [step, candidate]), None
    summed = b.add({"kind": "add"}, (gates * hidden,), f"{name}_gates", origin, [hh, ih])
    i, f, g, o = (act(function, piece(summed, k, part), part + "_gate") for k, (part, function) in
                  enumerate((("in", "sigmoid"), ("forget", "sigmoid"), ("cell", "tanh"), ("out", "sigmoid"))))
    c = join("add", [join("mul", [f, state[1]], "keep"), join("mul", [i, g], "write")], "c")
    return join("mul", [o, act("tanh", c, "c_tanh")], "h"), c


@dataclass(frozen=True)
class _FinalState:
    """A recurrent layer's final states in use: ``output`` the spec layer of its output, ``module`` it,
    ``steps`` S (−1: sequences side by side, whose final states are not imported); ``pair``: LSTM's
    (h_n, c_n) not yet split; ``cell``: c_n (an error where it is used)."""

    output: str
    module: Any
    steps: int
    pair: bool = False
    cell: bool = False


def _final_state(b: SpecBuilder, node: Any, state: _FinalState | _Steps, origin: str) -> str | _FinalState | _Steps:
    """A use of a recurrent layer's final states: LSTM's ``(h, c)[0]`` is h_n; ``h_n[i]`` (``h_n.squeeze(0)``
    of one layer and direction) is the i-th layer-and-direction's last hidden state, which for the last
    layer is in the output: forwards the last step's first H values, backwards the first step's last H
    (a select_token and, for two directions, a slice). Inner layers' states and c_n are not in it."""
    if isinstance(state, _Steps):
        return _steps_use(b, node, state, origin)
    m = state.module
    name = getattr(node.target, "__name__", str(node.target))
    index = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if state.pair and name == "getitem" and index in (0, 1):
        return _FinalState(state.output, m, state.steps, cell=index == 1)  # h, c = state: c may go unused
    if state.steps < 0:
        raise SpecError.plain(origin, "uses the final states of sequences folded into the batch beside each other; "
                              "dnnbench imports their output")
    if state.pair or state.cell:
        raise SpecError.plain(origin, "uses the LSTM's final cell state c_n, which no layer outputs; dnnbench "
                              "imports its final hidden state h_n or its output")
    dirs = 2 if m.bidirectional else 1
    count = m.num_layers * dirs
    if (isinstance(index, tuple) and index and isinstance(index[0], int)
            and all(x == slice(None) for x in index[1:])):  # h_n[-1, :, :]
        index = index[0]
    if count == 1 and _batch_first_states(node):  # h_n.permute(1, 0, 2): the last step, (1, H) per sample
        h = int(getattr(m, "proj_size", 0) or m.hidden_size)  # the state's width: P with a projection
        last = b.add({"kind": "select_token", "index": state.steps - 1}, (h,), f"{node.name}_step", origin,
                     [state.output])
        return b.flatten((h,), (1, h), node.name, origin, last)
    if name == "squeeze" and count == 1 and index in (0, None):
        index = 0
    elif name != "getitem" or not isinstance(index, int) or not -count <= index < count:
        raise SpecError.plain(origin, "uses the final hidden state h_n other than as h_n[i]; dnnbench imports "
                              "h_n[i] (one layer and direction's last state) or the output")
    index %= count
    if index // dirs != m.num_layers - 1:
        raise SpecError.plain(origin, f"uses h_n[{index}], an inner layer's final state, which no layer outputs; "
                              "dnnbench imports the last layer's")
    h = int(getattr(m, "proj_size", 0) or m.hidden_size)  # the state's width: P with a projection
    backwards = index % dirs == 1
    last = b.add({"kind": "select_token", "index": 0 if backwards else state.steps - 1}, (h * dirs,),
                 f"{node.name}_step", origin, [state.output])
    if dirs == 1:
        return last
    return b.add({"kind": "slice", "axis": 0, "start": h if backwards else 0, "stop": 2 * h if backwards else h},
                 (h,), node.name, origin, [last])


@dataclass(frozen=True)
class _Steps:
    """The final states of a recurrent layer imported step by step (:func:`_stepwise`): per stacked layer
    the layer of its last h and, for an LSTM, of its last c. ``part``: None for an LSTM's (h_n, c_n)
    pair, "h" or "c" for one of them (a GRU's or RNN's h_n is "h")."""

    h: tuple[str, ...]
    c: tuple[str, ...] | None
    part: str | None = None


def _is_recurrent_call(gm: Any, node: Any) -> bool:
    """Whether ``node`` calls an ``nn.LSTM``, ``nn.GRU`` or ``nn.RNN``."""
    import torch

    return node.op == "call_module" and isinstance(gm.get_submodule(node.target),
                                                   (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN))


def _state_argument(node: Any) -> Any:
    """A recurrent call's initial state argument (``lstm(x, (h0, c0))``, ``gru(x, h0)``, ``hx=``), or None."""
    return node.kwargs.get("hx", node.args[1] if len(node.args) > 1 else None)


def _stepwise_calls(gm: Any) -> set[Any]:
    """Recurrent calls (``nn.LSTM``, ``nn.GRU``, ``nn.RNN``) that pass on their final states as another
    call's initial state (a seq2seq encoder's to its decoder, a decoder's from one step to the next), or
    whose final cell state c_n or inner layers' final states are used, and the calls that take such
    states: these are imported step by step (:func:`_stepwise`), since a ``recurrent`` layer starts from
    zeros and outputs only its last layer's sequence."""
    import torch

    marked: set[Any] = set()
    for node in gm.graph.nodes:
        if not _is_recurrent_call(gm, node):
            continue
        m = gm.get_submodule(node.target)
        lstm = isinstance(m, torch.nn.LSTM)
        pairs = [u for u in node.users if _fold_name(u) == "getitem" and u.args[1] == 1]  # h_n, or (h_n, c_n)
        h_n = pairs if not lstm else [u for p in pairs for u in p.users if _fold_name(u) == "getitem"
                                      and u.args[1] == 0]
        if m.num_layers > 1 and not m.bidirectional and any(
                not _reads_last_layer(u, m.num_layers) and not _is_recurrent_call(gm, u) and u.op != "output"
                for h in h_n for u in h.users):
            marked.add(node)  # an inner layer's final state is used, which is in no output
        reached, seen = list(pairs), set()
        while reached:
            state = reached.pop()
            if state in seen:
                continue
            seen.add(state)
            for user in state.users:
                if user.op == "output":
                    continue  # returned beside the output (a language model's hidden): no layer reads it
                if _is_recurrent_call(gm, user) and any(a is state for a in _flat_nodes(_state_argument(user))):
                    marked.update((node, user))
                elif lstm and state in pairs and not (_fold_name(user) == "getitem" and user.args[1] == 0):
                    if user.users or _fold_name(user) != "getitem":
                        marked.add(node)  # c_n, which no recurrent layer outputs, or the pair whole is used
                    reached.append(user)
                elif _fold_name(user) == "getitem":
                    reached.append(user)
    return marked


def _stepwise(b: SpecBuilder, m: Any, name: str, origin: str, x: str, x_shape: Shape,
              state: list[tuple[str | None, str | None]] | None) -> tuple[str, _Steps]:
    """``nn.LSTM``, ``nn.GRU``, ``nn.RNN`` on an (S, D) sequence, step by step, as ATen's CPU layer runs
    it: per stacked layer the input's product for every step at once (an ``fc`` of the sequence, with
    b_ih), then per step the state's product (an ``fc`` of h, with b_hh) and the cell's gates
    (:func:`_cell_gates`), from the initial state ``state`` (per layer (h, c); None or a missing part:
    a ``zeros`` layer, no gradient flows into it). Every step's products share the step 0's weights, and
    another call of the same module shares the first call's. The output is every step's h of the last
    layer, (S, H); the final states are returned besides. Dropout between stacked layers is not counted."""
    gates = {"LSTM": 4, "GRU": 3}.get(m.mode, 1)
    hidden = int(m.hidden_size)
    rows = gates * hidden
    if m.bidirectional:
        raise SpecError.plain(origin, "is bidirectional and takes or passes on its states; dnnbench imports such a "
                              "recurrent layer, run step by step, in one direction")
    if getattr(m, "proj_size", 0):
        raise SpecError.plain(origin, f"has proj_size={m.proj_size}; dnnbench's recurrent layer has no projection")
    if len(x_shape) != 2:
        raise SpecError.plain(origin, f"takes a {list(x_shape)} input and takes or passes on its states; dnnbench "
                              "imports such a recurrent layer on (S, D) sequences")
    relu = getattr(m, "nonlinearity", "tanh") == "relu"
    steps = x_shape[0]

    def shared(layer: str, key: tuple[Any, ...]) -> str:
        owner = b.step_weights.setdefault(key, layer)
        if owner != layer:
            b.layers[-1]["shares"] = owner
        return layer

    seq, last_h, last_c = x, [], []
    for depth in range(m.num_layers):
        tag = name if m.num_layers == 1 else f"{name}_l{depth}"
        ih = shared(b.add({"kind": "fc", "out_features": rows, "bias": bool(m.bias)}, (steps, rows), f"{tag}_ih",
                          origin, [seq]), (id(m), depth, "ih"))
        h, c = state[depth] if state else (None, None)
        if h is None or (gates == 4 and c is None):
            zeros = b.add({"kind": "zeros", "shape": [hidden]}, (hidden,), f"{tag}_state", origin, [x])
            h, c = h or zeros, c or zeros
        outs = []
        for t in range(steps):
            step = f"{tag}_t{t}"
            ih_t = b.add({"kind": "select_token", "index": t}, (rows,), f"{step}_ih", origin, [ih])
            hh_t = shared(b.add({"kind": "fc", "out_features": rows, "bias": bool(m.bias)}, (rows,), f"{step}_hh",
                                origin, [h]), (id(m), depth, "hh"))
            h, c = _cell_gates(b, gates, hidden, relu, step, origin, ih_t, hh_t, [h, c] if gates == 4 else [h])
            outs.append(b.flatten((hidden,), (1, hidden), f"{step}_row", origin, h))
        seq = outs[0] if steps == 1 else b.add({"kind": "concat", "axis": 0}, (steps, hidden), f"{tag}_out", origin,
                                               outs)
        last_h.append(h)
        last_c.append(c)
    return seq, _Steps(tuple(last_h), tuple(str(c) for c in last_c) if gates == 4 else None,
                       None if gates == 4 else "h")


def _batch_first_states(node: Any) -> bool:
    """Whether ``node`` moves final states (L, B, H) to (B, L, H): ``h_n.permute(1, 0, 2)``,
    ``h_n.transpose(0, 1)`` (an attention decoder's query from its hidden state)."""
    name, args = _fold_name(node), list(node.args[1:])
    if name == "permute":
        order = list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
        return all(isinstance(a, int) for a in order) and [a % 3 for a in order] == [1, 0, 2]
    return (name in ("transpose", "swapaxes") and len(args) >= 2 and all(isinstance(a, int) for a in args[:2])
            and sorted(a % 3 for a in args[:2]) == [0, 1])


def _steps_use(b: SpecBuilder, node: Any, state: _Steps, origin: str) -> str | _Steps:
    """A use of the final states of a recurrent layer imported step by step: ``h, c = state`` (LSTM),
    ``h_n[i]`` (the i-th stacked layer's last h, or c), ``h_n.squeeze(0)`` of one layer, ``h_n.permute(1,
    0, 2)`` (every stacked layer's, (L, H) per sample: their rows joined); passed whole as another call's
    initial state, they never reach here (:func:`_initial_state`)."""
    name = _fold_name(node)
    index = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if state.part is not None and _batch_first_states(node):
        layers = state.h if state.part == "h" else state.c or ()
        hidden = b.shape_of(layers[0]) or (1,)
        rows = [b.flatten(hidden, (1, *hidden), f"{node.name}_{k}", origin, layer) for k, layer in enumerate(layers)]
        return rows[0] if len(rows) == 1 else b.add({"kind": "concat", "axis": 0}, (len(rows), *hidden), node.name,
                                                    origin, rows)
    if state.part is None:
        if name == "getitem" and index in (0, 1):
            return _Steps(state.h, state.c, "h" if index == 0 else "c")
        raise SpecError.plain(origin, "uses an LSTM's final (h_n, c_n) other than as h_n, c_n = state or as another "
                              "recurrent call's initial state")
    layers = state.h if state.part == "h" else state.c or ()
    if (isinstance(index, tuple) and index and isinstance(index[0], int)
            and all(x == slice(None) for x in index[1:])):  # h_n[-1, :, :]
        index = index[0]
    if name == "squeeze" and len(layers) == 1 and index in (0, None):
        return layers[0]
    if name == "getitem" and isinstance(index, int) and -len(layers) <= index < len(layers):
        return layers[index]
    raise SpecError.plain(origin, f"uses a final state (h_n or c_n, {len(layers)} stacked layer(s)) other than as "
                          "h_n[i], h_n.squeeze(0) or another recurrent call's initial state")


def _initial_state(b: SpecBuilder, node: Any, m: Any, final: dict[Any, Any], layer_of: dict[Any, str],
                   per_sample: Callable[[Any], Shape], origin: str) -> list[tuple[str | None, str | None]] | None:
    """A recurrent call's initial state per stacked layer, (h, c) (c None but for an LSTM; None: zeros):
    from another call's final states (:class:`_Steps`), from layer outputs of (L, H) per sample (``h0 =
    proj(features).unsqueeze(0)``; (H,) for one layer), or constants (zeros). None: no state given."""
    import torch

    arg = _state_argument(node)
    if arg is None:
        return None
    count, hidden, lstm = int(m.num_layers), int(m.hidden_size), m.mode == "LSTM"

    def per_layer(a: Any, what: str) -> list[str | None]:
        if isinstance(a, torch.fx.Node) and a in final:
            held = final[a]
            if not isinstance(held, _Steps) or held.part is None:
                raise SpecError.plain(origin, f"takes as {what} a recurrent layer's final states the import reads off "
                                      "its output; dnnbench imports h_n, c_n = state or the pair passed whole")
            layers = held.h if held.part == "h" else held.c or ()
        elif isinstance(a, torch.fx.Node) and a in layer_of:
            shape = per_sample(a)
            if shape == (count, hidden):
                layers = tuple(b.flatten((1, hidden), (hidden,), f"{node.target}_{what}{k}", origin, b.add(
                    {"kind": "slice", "axis": 0, "start": k, "stop": k + 1}, (1, hidden),
                    f"{node.target}_{what}{k}_row", origin, [layer_of[a]])) for k in range(count))
            elif count == 1 and shape in ((hidden,), (1, hidden)):
                layers = (b.flatten(shape, (hidden,), f"{node.target}_{what}", origin, layer_of[a])
                          if shape != (hidden,) else layer_of[a],)
            else:
                raise SpecError.plain(origin, f"takes an initial {what} of {list(shape)} per sample; it needs "
                                      f"({count}, {hidden}): one state of {hidden} per stacked layer")
        else:  # a constant: torch.zeros(L, B, H)
            return [None] * count
        if len(layers) != count:
            raise SpecError.plain(origin, f"takes {len(layers)} initial {what} states for its {count} stacked layers")
        return list(layers)

    if lstm and isinstance(arg, torch.fx.Node) and isinstance(final.get(arg), _Steps) and final[arg].part is None:
        hs, cs = list(final[arg].h), list(final[arg].c or ())
    elif lstm and isinstance(arg, (tuple, list)) and len(arg) == 2:
        hs, cs = per_layer(arg[0], "h"), per_layer(arg[1], "c")
    elif lstm:
        raise SpecError.plain(origin, "takes an initial state other than a pair (h0, c0); an LSTM's is (h0, c0)")
    else:
        hs, cs = per_layer(arg, "h"), [None] * count
    if all(h is None for h in hs) and all(c is None for c in cs):
        return None
    return list(zip(hs, cs, strict=True))


def _reads_last_layer(node: Any, layers: int) -> bool:
    """Whether ``node`` reads the last stacked layer's final state alone: ``h_n[-1]``, ``h_n[L - 1, :, :]``."""
    if _fold_name(node) != "getitem":
        return False
    index = node.args[1]
    if isinstance(index, tuple) and index:
        index = index[0]
    return isinstance(index, int) and index % layers == layers - 1


def _flat_nodes(arg: Any) -> list[Any]:
    """The fx nodes in a (nested) call argument."""
    import torch

    found: list[Any] = []
    torch.fx.node.map_arg(arg, found.append)
    return found


def _conv3d(b: SpecBuilder, op: _Op) -> str:
    """``nn.Conv3d`` and ``F.conv3d(x, weight, bias, stride, padding, dilation, groups)`` with a weight of
    the caller's, zero padding: a conv3d layer."""
    m = op.module
    if m is not None:
        one_input(op)
        if getattr(m, "padding_mode", "zeros") != "zeros":
            raise _fail(op, f"has padding_mode={m.padding_mode!r}; dnnbench imports 3-D convolutions with zero "
                        "padding")
        out_c, kernel, stride, padding = int(m.out_channels), tuple(m.kernel_size), m.stride, m.padding
        dilation, groups, bias = tuple(m.dilation), int(m.groups), m.bias is not None
    else:
        out_c, _, *kernel = _learned_weight(op, 5, "F.conv3d(x, weight, ...)")
        stride, padding = op.arg(3, "stride", 1), op.arg(4, "padding", 0)
        dilation, groups, bias = op.arg(5, "dilation", 1), int(op.arg(6, "groups", 1)), op.arg(2, "bias") is not None
    triple = [_as_triple(v) for v in (kernel, stride, dilation)]
    if isinstance(padding, str):  # 'valid', or 'same' (stride 1) for odd spans
        spans = [d * (k - 1) for k, d in zip(triple[0], triple[2], strict=True)]
        if padding == "same" and any(x % 2 for x in spans):
            raise _fail(op, "has padding='same' with an even kernel, which pads asymmetrically; dnnbench padding is "
                        "symmetric")
        padding = [0, 0, 0] if padding == "valid" else [x // 2 for x in spans]
    layer: dict[str, Any] = {"kind": "conv3d", "out_channels": int(out_c), "kernel": pair_or_int(triple[0]),
                             "stride": pair_or_int(triple[1]), "padding": pair_or_int(_as_triple(padding)),
                             "bias": bias}
    if triple[2] != (1, 1, 1):
        layer["dilation"] = pair_or_int(triple[2])
    if groups != 1:
        layer["groups"] = groups
    return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)


def _conv_transpose3d(b: SpecBuilder, op: _Op) -> str:
    """``nn.ConvTranspose3d`` and ``F.conv_transpose3d(x, weight, bias, stride, padding, output_padding,
    groups, dilation)`` with a weight of the caller's: a conv_transpose3d layer."""
    m = op.module
    if m is not None:
        one_input(op)
        out_c, kernel, stride, padding = int(m.out_channels), tuple(m.kernel_size), m.stride, m.padding
        extra, groups, dilation, bias = m.output_padding, int(m.groups), m.dilation, m.bias is not None
    else:
        _, per_group, *kernel = _learned_weight(op, 5, "F.conv_transpose3d(x, weight, ...)")
        groups = int(op.arg(6, "groups", 1))
        out_c, stride, padding = per_group * groups, op.arg(3, "stride", 1), op.arg(4, "padding", 0)
        extra, dilation, bias = op.arg(5, "output_padding", 0), op.arg(7, "dilation", 1), op.arg(2, "bias") is not None
    layer: dict[str, Any] = {"kind": "conv_transpose3d", "out_channels": int(out_c),
                             "kernel": pair_or_int(_as_triple(kernel)), "stride": pair_or_int(_as_triple(stride)),
                             "padding": pair_or_int(_as_triple(padding)), "bias": bias}
    if _as_triple(extra) != (0, 0, 0):
        layer["output_padding"] = pair_or_int(_as_triple(extra))
    if _as_triple(dilation) != (1, 1, 1):
        layer["dilation"] = pair_or_int(_as_triple(dilation))
    if groups != 1:
        layer["groups"] = groups
    return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)


def _as_triple(value: Any) -> tuple[int, int, int]:
    if isinstance(value, int):
        return (value, value, value)
    values = [int(v) for v in value]
    return (values[0],) * 3 if len(values) == 1 else (values[0], values[1], values[2])


def _pool3d(mode: str) -> Callable[[SpecBuilder, _Op], str]:
    """``nn.MaxPool3d``/``nn.AvgPool3d`` and ``F.max_pool3d``/``F.avg_pool3d``: a pool3d layer."""
    def handle(b: SpecBuilder, op: _Op) -> str:
        one_input(op)
        m = op.module
        if m is not None:
            window, stride, padding, ceil = m.kernel_size, m.stride, m.padding, bool(m.ceil_mode)
            dilation = getattr(m, "dilation", 1)
        else:
            window, stride, padding = op.arg(1, "kernel_size"), op.arg(2, "stride"), op.arg(3, "padding", 0)
            ceil = bool(op.arg(5 if mode == "max" else 4, "ceil_mode", False))
            dilation = op.arg(4, "dilation", 1) if mode == "max" else 1
        layer: dict[str, Any] = {"kind": "pool3d", "mode": mode, "window": pair_or_int(_as_triple(window)),
                                 "padding": pair_or_int(_as_triple(padding))}
        if _as_triple(dilation) != (1, 1, 1):  # a max pooling's taps apart
            layer["dilation"] = pair_or_int(_as_triple(dilation))
        if stride is not None and (not isinstance(stride, (list, tuple)) or stride):
            layer["stride"] = pair_or_int(_as_triple(stride))
        if ceil:
            layer["ceil_mode"] = True
        return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)
    return handle


def _learned_weight(op: _Op, dims: int, call: str) -> Shape:
    """The shape of the one ``dims``-axis weight a functional layer takes from parameters (or computes
    from them alone), its data from one input."""
    weights = [s for s in op.param_shapes if len(s) == dims]
    if len(op.inputs) != 1 or len(weights) != 1:
        raise _fail(op, f"has no learned {dims}-D weight applied to one input; dnnbench imports {call} with a "
                    "weight of parameters")
    return weights[0]


def _conv2d_function(b: SpecBuilder, op: _Op) -> str:
    """``F.conv2d(x, weight, bias, stride, padding, dilation, groups)`` with a weight of the caller's (a
    parameter, or computed from parameters alone: NFNet's standardised weights), or a fixed filter of
    buffers without a bias (an anti-aliasing blur: ``learned`` false)."""
    fixed = [s for s in op.const_shapes if len(s) == 4]
    learned = not (len(op.inputs) == 1 and not op.param_shapes and len(fixed) == 1 and op.arg(2, "bias") is None)
    out_c, _, kh, kw = _learned_weight(op, 4, "F.conv2d(x, weight, ...)") if learned else fixed[0]
    padding = op.arg(4, "padding", 0)
    dilation = as_pair(op.arg(5, "dilation", 1))
    inputs = op.inputs
    if isinstance(padding, str):
        span = [d * (k - 1) for k, d in zip((kh, kw), dilation, strict=True)]
        padding = (0, 0) if padding == "valid" else tuple(x // 2 for x in span)
        if op.arg(4, "padding", 0) == "same" and any(x % 2 for x in span):
            # an even span: ATen pads the one row and column more below and right with zeros (as _conv2d)
            c, h, w = op.in_shape
            inputs = [b.add({"kind": "pad", "padding": [0, span[1] % 2, 0, span[0] % 2]},
                            (c, h + span[0] % 2, w + span[1] % 2), f"{op.name}_pad", op.origin, op.inputs)]
    layer = {"kind": "conv2d", "out_channels": int(out_c), "kernel": pair_or_int((kh, kw)),
             "stride": pair_or_int(as_pair(op.arg(3, "stride", 1))), "padding": pair_or_int(as_pair(padding)),
             "bias": op.arg(2, "bias") is not None}
    if not learned:  # a fixed filter of the caller's buffers (TResNet's and anti-aliased networks' blur)
        layer["learned"] = False
    if dilation != (1, 1):
        layer["dilation"] = pair_or_int(dilation)
    groups = int(op.arg(6, "groups", 1))
    if groups != 1:
        layer["groups"] = groups
    return b.add(layer, op.out_shape, op.name, op.origin, inputs)


def _batch_norm_function(b: SpecBuilder, op: _Op) -> str:
    """``F.batch_norm(x, running_mean, running_var, weight, bias, ...)`` with the caller's scale and shift
    (timm's BatchNormAct2d), or with none (``affine`` false)."""
    if len(op.inputs) != 1:
        raise _fail(op, "normalises with statistics computed from another layer; dnnbench imports F.batch_norm "
                    "of one input")
    channels = op.in_shape[0]
    if op.params not in (0, 2 * channels):
        raise _fail(op, f"holds {op.params} learned values; dnnbench's batchnorm has a scale and a shift per "
                    f"channel ({2 * channels}) or none")
    return b.add(_batchnorm_layer(bool(op.params)), op.out_shape, op.name, op.origin, op.inputs)


def _batchnorm_layer(affine: bool) -> dict[str, Any]:
    """A batchnorm layer, with a scale and a shift per channel where ``affine`` (nn.BatchNorm2d's)."""
    return {"kind": "batchnorm"} if affine else {"kind": "batchnorm", "affine": False}


def _batch_norm_module(b: SpecBuilder, op: _Op) -> str:
    """``nn.BatchNorm2d``, ``nn.BatchNorm3d``: a batchnorm layer, learning a scale and a shift per channel
    where the module is ``affine``."""
    one_input(op)
    return b.add(_batchnorm_layer(bool(op.module.affine)), op.out_shape, op.name, op.origin, op.inputs)


def _pad(b: SpecBuilder, op: _Op) -> str:
    """``F.pad(x, [left, right(, top, bottom)], mode, value)`` of feature maps: a pad layer (none when it
    adds nothing)."""
    one_input(op)
    pad = [int(p) for p in op.arg(1, "pad")]
    mode, value = op.arg(2, "mode", "constant"), op.arg(3, "value", None)
    if not any(pad):  # Swin pads its maps to whole windows: nothing at most sizes
        return op.source
    if len(op.in_shape) == 2 and len(pad) == 2 and op.in_shape[0] == op.out_shape[0]:
        # A (C, L) signal padded along its length: its maps' width
        kwargs = {k: v for k, v in op.kwargs.items() if k not in ("pad", "mode", "value")}
        return _on_maps(_pad)(b, replace(op, args=(None, [*pad, 0, 0], mode, value), kwargs=kwargs))
    if (len(pad) == 6 and pad[:2] == [0, 0] and len(op.in_shape) == 3 and mode == "constant"
            and value in (None, 0, 0.0) and min(pad) >= 0):
        # (H, W, C) maps (Swin's) padded in height and width: the pad of their (C, H, W) view
        h, w, c = op.in_shape
        maps = b.add({"kind": "permute", "dims": [2, 0, 1]}, (c, h, w), f"{op.name}_maps", op.origin, op.inputs)
        padded = b.add({"kind": "pad", "padding": pad[2:]}, (c, *op.out_shape[:2]), op.name, op.origin, [maps])
        return b.add({"kind": "permute", "dims": [1, 2, 0]}, op.out_shape, f"{op.name}_positions", op.origin,
                     [padded])
    modes = ("constant", "reflect", "replicate", "circular")
    if (mode not in modes or not isinstance(value, (int, float, type(None))) or len(pad) not in (2, 4)
            or len(op.in_shape) != 3 or min(pad) < 0):
        raise _fail(op, f"pads with {pad} (mode={mode!r}, value={value!r}); dnnbench's pad adds values around the "
                    f"height and width of feature maps ({', '.join(modes)})")
    return b.add(pad_layer([*pad, 0, 0][:4], mode, value), op.out_shape, op.name, op.origin, op.inputs)


def _pad_module(b: SpecBuilder, op: _Op) -> str:
    """``nn.ZeroPad2d``, ``nn.ConstantPad2d``, ``nn.ReflectionPad2d``, ``nn.ReplicationPad2d``,
    ``nn.CircularPad2d`` and their 1-D forms (on (C, L) signals): what ``F.pad`` with the module's padding
    and mode is."""
    m = op.module
    kind = type(m).__name__
    mode = next((mode for prefix, mode in (("Reflection", "reflect"), ("Replication", "replicate"),
                                           ("Circular", "circular")) if kind.startswith(prefix)), "constant")
    value = float(getattr(m, "value", 0.0)) if mode == "constant" else None
    return _pad(b, replace(op, args=(op.args[0], [int(p) for p in m.padding], mode, value), kwargs={}))


def _upsample(b: SpecBuilder, op: _Op) -> str:
    """``nn.Upsample``, ``nn.UpsamplingNearest2d``/``Bilinear2d`` or ``F.interpolate`` of feature maps,
    nearest or bilinear (``align_corners`` costs the same): an upsample layer to the traced size."""
    one_input(op)
    m = op.module
    mode = str(m.mode if m is not None else op.arg(3, "mode", "nearest"))
    if mode == "nearest-exact":  # another rounding of the source position: nearest's one read per output
        mode = "nearest"
    if len(op.in_shape) == 2 and mode in ("nearest", "linear"):
        # A (C, L) signal: the maps' one row resized (linear priced as bilinear, reconstructed).
        def resize(b2: SpecBuilder, lifted: _Op) -> str:
            layer = {"kind": "upsample", "size": pair_or_int(lifted.out_shape[1:]),
                     "mode": "bilinear" if mode == "linear" else mode}
            return b2.add(layer, lifted.out_shape, lifted.name, lifted.origin, lifted.inputs)
        return _on_maps(resize)(b, op)
    if len(op.in_shape) == 4 and mode in ("nearest", "trilinear"):  # (C, D, H, W) volumes
        return b.add({"kind": "upsample", "size": pair_or_int(op.out_shape[1:]), "mode": mode}, op.out_shape,
                     op.name, op.origin, op.inputs)
    if mode not in ("nearest", "bilinear", "bicubic"):
        raise _fail(op, f"interpolates with mode={mode!r}; dnnbench's upsample is nearest, bilinear or bicubic "
                    "(linear or nearest of (C, L) signals, nearest or trilinear of volumes)")
    if len(op.in_shape) != 3:
        raise _fail(op, f"resizes a {list(op.in_shape)} input; dnnbench's upsample takes (C, H, W) maps")
    return b.add({"kind": "upsample", "size": pair_or_int(op.out_shape[1:]), "mode": mode}, op.out_shape, op.name,
                 op.origin, op.inputs)


def _pixel_shuffle(unshuffle: bool) -> Callable[[SpecBuilder, _Op], str]:
    """``nn.PixelShuffle``/``nn.PixelUnshuffle`` and ``F.pixel_shuffle``/``F.pixel_unshuffle``: a view, a
    permute and a view (:meth:`SpecBuilder.pixel_shuffle`)."""
    def handle(b: SpecBuilder, op: _Op) -> str:
        one_input(op)
        key = "downscale_factor" if unshuffle else "upscale_factor"
        factor = getattr(op.module, key) if op.module is not None else op.arg(1, key)
        return b.pixel_shuffle(op.in_shape, int(factor), op.name, op.origin, op.source, unshuffle=unshuffle)
    return handle


def _channel_shuffle(b: SpecBuilder, op: _Op) -> str:
    """``nn.ChannelShuffle(g)``, ``F.channel_shuffle``: ShuffleNet's view of the channels as (g, C/g), a
    transpose and a view back (the layers torchvision's ``channel_shuffle`` imports as)."""
    one_input(op)
    groups = int(op.module.groups if op.module is not None else op.arg(1, "groups"))
    if len(op.in_shape) != 3 or op.in_shape[0] % groups:
        raise _fail(op, f"shuffles a {list(op.in_shape)} input in {groups} groups; dnnbench shuffles the channels "
                    "of (C, H, W) maps in groups that divide them")
    c, h, w = op.in_shape
    if groups == 1:
        return op.source
    grouped = b.add({"kind": "reshape", "shape": [groups, c // groups, h, w]}, (groups, c // groups, h, w),
                    f"{op.name}_groups", op.origin, op.inputs)
    swapped = b.add({"kind": "permute", "dims": [1, 0, 2, 3]}, (c // groups, groups, h, w), f"{op.name}_swap",
                    op.origin, [grouped])
    return b.add({"kind": "reshape", "shape": [c, h, w]}, op.out_shape, op.name, op.origin, [swapped])


def _group_norm(b: SpecBuilder, op: _Op) -> str:
    """``nn.GroupNorm`` or ``F.group_norm(x, groups, weight, bias)`` with the caller's scale and shift."""
    m = op.module
    if m is not None or len(op.inputs) != 1:
        one_input(op)
    channels = op.in_shape[0]
    if m is not None:
        groups, affine = int(m.num_groups), bool(m.affine)
    else:
        groups = int(op.arg(1, "num_groups"))
        affine = op.arg(2, "weight") is not None
        if op.params != (2 * channels if affine else 0) or affine != (op.arg(3, "bias") is not None):
            raise _fail(op, f"holds {op.params} learned values; dnnbench's group_norm has a scale and a shift per "
                        f"channel ({2 * channels}) or neither")
    layer: dict[str, object] = {"kind": "group_norm", "groups": groups}
    if not affine:
        layer["affine"] = False
    return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)


def _instance_norm(b: SpecBuilder, op: _Op) -> str:
    """``nn.InstanceNorm2d``: in training each sample's channels are normalised over their positions (the
    running statistics, when tracked, only serve evaluation): a group norm of one channel per group."""
    one_input(op)
    if len(op.in_shape) not in (3, 4):
        raise _fail(op, f"normalises a {list(op.in_shape)} input; dnnbench's group_norm takes (C, H, W) maps "
                    "or (C, D, H, W) volumes")
    layer: dict[str, object] = {"kind": "group_norm", "groups": op.in_shape[0]}
    if not op.module.affine:
        layer["affine"] = False
    return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)


def _linear(b: SpecBuilder, op: _Op) -> str:
    """A Linear on a vector or on every token of an (S, D) sequence is an fc layer; on every position of
    (A, B, D) values (ConvNeXt's channels-last maps; Swin's windows of tokens) it is the same fc on A·B
    tokens, between two views (reshape layers, which cost nothing)."""
    one_input(op)
    return _fc_on(b, op, int(op.module.out_features), op.module.bias is not None)


def _linear_function(b: SpecBuilder, op: _Op) -> str:
    """``F.linear(x, weight, bias)`` with the caller's parameters. A bias only partly learned (BEiT's and
    EVA's attention: a learned query bias, zeros for the keys, a learned value bias) is the fc without its
    bias, then a ``bias`` layer holding the learned part."""
    out, inputs = _learned_weight(op, 2, "F.linear(x, weight, bias)")
    bias = op.arg(2, "bias") is not None
    learned_bias = op.params - out * inputs
    if not bias or learned_bias == out:
        return _fc_on(b, op, out, bias)
    product = _fc_on(b, op, out, False)
    return b.add({"kind": "bias", "weights": learned_bias}, op.out_shape, op.name + "_bias", op.origin, [product])


def _fc_on(b: SpecBuilder, op: _Op, out_features: int, bias: bool) -> str:
    layer = {"kind": "fc", "out_features": out_features, "bias": bias}
    if len(op.in_shape) in (1, 2):
        return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)
    positions, d = math.prod(op.in_shape[:-1]), op.in_shape[-1]
    tokens = b.flatten(op.in_shape, (positions, d), f"{op.name}_tokens", op.origin, op.source)
    out = b.add(layer, (positions, op.out_shape[-1]), op.name, op.origin, [tokens])
    return b.flatten((positions, op.out_shape[-1]), op.out_shape, f"{op.name}_positions", op.origin, out)


#: Functions that return a max pooling's values and the positions of the maxima (for a max unpool).
_WITH_INDICES = ("max_pool2d_with_indices",)


def _with_indices(b: SpecBuilder, pooled: str) -> str:
    """A max pooling that returns its maxima's positions too (``return_indices=True``): its (values,
    positions), the positions standing for the pooling itself (a max unpool reads them)."""
    b.outputs[pooled] = (pooled, pooled)
    return pooled


def _pool_module(mode: str) -> Callable[[SpecBuilder, _Op], str]:
    def handle(b: SpecBuilder, op: _Op) -> str:
        one_input(op)
        m = op.module
        window = as_pair(m.kernel_size)
        stride = as_pair(m.stride if m.stride is not None else m.kernel_size)
        pooled = b.pool(mode, window, stride, as_pair(m.padding), op.out_shape, op.name, op.origin, op.source,
                        ceil_mode=bool(m.ceil_mode), dilation=as_pair(m.dilation) if mode == "max" else (1, 1))
        return _with_indices(b, pooled) if getattr(m, "return_indices", False) else pooled
    return handle


def _fractional_pool(b: SpecBuilder, op: _Op) -> str:
    """``nn.FractionalMaxPool2d``/``3d``, ``F.fractional_max_pool2d``/``3d`` (Graham 2014): maxima over
    pseudo-random windows whose strides average the input's size over the output's, priced as the
    adaptive max pooling of the same output size (a plain max pooling where the output divides the
    input): each input value read once forward, each output's error routed to one input backward. A
    kernel wider than the mean stride reads overlapping windows that price leaves out."""
    one_input(op)
    indices = getattr(op.module, "return_indices", False) if op.module is not None else op.arg(4, "return_indices")
    if indices:
        raise _fail(op, "returns the maxima's positions (return_indices=True); dnnbench imports fractional max "
                        "pooling's values only")
    return b.adaptive_pool("max", op.in_shape, op.out_shape, op.name, op.origin, op.source)


def _lp_pool(b: SpecBuilder, op: _Op) -> str:
    """``nn.LPPool2d`` (and ``nn.LPPool1d`` on maps): PyTorch's own steps, (avg_pool(x ** p) with its
    sign kept, times the window's size) ** (1/p): a power, an average pooling, ``abs`` and ``relu`` of
    the pooled values, their sign and the window's size as two constant factors, the root."""
    one_input(op)
    m = op.module
    p = float(m.norm_type)
    window = as_pair(m.kernel_size)
    stride = as_pair(m.stride if m.stride is not None else m.kernel_size)
    shape = op.out_shape
    x = power(b, p, op.in_shape, f"{op.name}.pow", op.origin, op.source, fusable=False)
    pooled = b.pool("avg", window, stride, (0, 0), shape, f"{op.name}.avg", op.origin, x,
                    ceil_mode=bool(m.ceil_mode))
    kept = b.activation("abs", shape, f"{op.name}.abs", op.origin, pooled, fusable=False)
    kept = b.activation("relu", shape, f"{op.name}.relu", op.origin, kept, fusable=False)
    for name in ("sign", "window"):
        kept = b.add({"kind": "scale", "learned": False}, shape, f"{op.name}.{name}", op.origin, [kept])
    return power(b, 1.0 / p, shape, op.name, op.origin, kept, fusable=False)


def _bilinear(b: SpecBuilder, op: _Op) -> str:
    """``nn.Bilinear`` or ``F.bilinear(x1, x2, weight, bias)`` with the caller's (out, in1, in2) weight:
    y_o = x1ᵀ·A_o·x2 + b_o as PyTorch's ``_trilinear`` computes it, two products: x1 times A (an fc layer
    of width out·in2 without bias: A's out·in1·in2 weights), then, per output, that row times x2 (a
    ``matmul`` of (out, in2) by x2 as (in2, 1)), and the bias."""
    m = op.module
    if m is not None:
        if len(op.inputs) != 2 or op.params:
            raise _fail(op, "needs its two inputs as layer outputs")
        o, j, bias = int(m.out_features), int(m.in2_features), m.bias is not None
    else:
        weights = [s for s in op.param_shapes if len(s) == 3]
        if len(op.inputs) != 2 or len(weights) != 1:
            raise _fail(op, "has no learned (out, in1, in2) weight applied to two layer outputs; dnnbench imports "
                        "F.bilinear(x1, x2, weight, bias) with a weight of parameters")
        o, _, j = (int(v) for v in weights[0])
        bias = op.arg(3, "bias") is not None
        if op.params != math.prod(weights[0]) + (o if bias else 0):
            raise _fail(op, f"holds {op.params} learned values; dnnbench imports F.bilinear with a learned weight "
                        "and a learned bias or none")
    (x1, x2), (s1, s2) = op.inputs, op.in_shapes
    lead = s1[:-1]
    if s2[:-1] != lead or len(lead) > 1:
        raise _fail(op, f"gets inputs {list(s1)} and {list(s2)}; dnnbench imports nn.Bilinear of two vectors or two "
                    "sequences of one length")
    t = b.add({"kind": "fc", "out_features": o * j, "bias": False}, (*lead, o * j), f"{op.name}.weight", op.origin,
              [x1])
    t = b.add({"kind": "reshape", "shape": [*lead, o, j]}, (*lead, o, j), f"{op.name}.rows", op.origin, [t])
    col = b.add({"kind": "reshape", "shape": [*lead, j, 1]}, (*lead, j, 1), f"{op.name}.column", op.origin, [x2])
    y = b.add({"kind": "matmul"}, (*lead, o, 1), f"{op.name}.product", op.origin, [t, col])
    y = b.add({"kind": "reshape", "shape": [*lead, o]}, (*lead, o), f"{op.name}.out" if bias else op.name,
              op.origin, [y])
    if not bias:
        return y
    return b.add({"kind": "bias", "weights": o}, (*lead, o), op.name, op.origin, [y])


def _windows(name: str) -> Callable[[SpecBuilder, _Op], str]:
    """``nn.Unfold``/``F.unfold`` (im2col) and ``nn.Fold``/``F.fold`` (col2im): an ``unfold`` or ``fold``
    layer with the call's window, dilation, padding and stride (and a fold's output size)."""
    positions = {"unfold": ("kernel_size", "dilation", "padding", "stride"),
                 "fold": ("output_size", "kernel_size", "dilation", "padding", "stride")}[name]
    defaults = {"dilation": 1, "padding": 0, "stride": 1}

    def handle(b: SpecBuilder, op: _Op) -> str:
        one_input(op)
        m = op.module
        values = {key: (getattr(m, key) if m is not None else op.arg(i + 1, key, defaults.get(key)))
                  for i, key in enumerate(positions)}
        layer: dict[str, Any] = {"kind": name, "window": pair_or_int(as_pair(values["kernel_size"]))}
        for key in ("stride", "padding", "dilation"):
            if as_pair(values[key]) != as_pair(defaults[key]):
                layer[key] = pair_or_int(as_pair(values[key]))
        if name == "fold":
            layer["size"] = pair_or_int(as_pair(values["output_size"]))
        return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)
    return handle


def _topk(b: SpecBuilder, node_args: tuple[Any, ...], node_kwargs: dict[str, Any], name: str, in_shape: Shape,
          out_shape: Shape, origin: str, source: str) -> str:
    """``torch.topk(x, k, dim, largest)``, ``x.topk(...)`` (its arguments): a ``topk`` layer of its values."""
    args = list(node_args) + [None] * 4
    k = node_kwargs.get("k", args[1])
    dim = node_kwargs.get("dim", -1 if args[2] is None else args[2])
    largest = node_kwargs.get("largest", True if args[3] is None else args[3])
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (k, dim)) or not isinstance(largest, bool):
        raise SpecError.plain(origin, f"takes the top {k!r} along {dim!r}; dnnbench imports topk of a number of "
                              "values along one axis, both given as numbers")
    axis = dim % (len(in_shape) + 1) - 1
    if axis < 0:
        raise SpecError.plain(origin, "takes the top values along the batch axis, which is not one sample's layer")
    layer: dict[str, Any] = {"kind": "topk", "k": k, "axis": axis}
    if not largest:
        layer["largest"] = False
    return b.add(layer, out_shape, name, origin, [source])


def _sort_as_topk(node_args: tuple[Any, ...], node_kwargs: dict[str, Any], in_shape: Shape,
                  origin: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``torch.sort(x, dim, descending)``'s arguments as ``torch.topk``'s of every value along ``dim``:
    the same values in the same order (priced as topk: docs/importing.md)."""
    args = list(node_args) + [None] * 3
    dim = node_kwargs.get("dim", -1 if args[1] is None else args[1])
    descending = node_kwargs.get("descending", False if args[2] is None else args[2])
    if isinstance(dim, bool) or not isinstance(dim, int) or not isinstance(descending, bool):
        raise SpecError.plain(origin, f"sorts along {dim!r}; dnnbench imports sort along one axis given as a number")
    axis = dim % (len(in_shape) + 1) - 1
    if axis < 0:
        raise SpecError.plain(origin, "sorts along the batch axis, which is not one sample's layer")
    return (node_args[0], in_shape[axis], dim, descending), {}


def _running(product: bool) -> Callable[[SpecBuilder, _Op], str]:
    """The handler of ``torch.cumsum(x, dim)``, ``x.cumsum(dim)``: a ``cumsum`` layer along that axis of
    one sample (a dtype argument changes no count); of ``torch.cumprod``, ``x.cumprod(dim)`` (``product``):
    the same with ``product``."""
    return lambda b, op: _running_layer(b, op, product)


def _running_layer(b: SpecBuilder, op: _Op, product: bool) -> str:
    one_input(op)
    what = "multiplies" if product else "sums"
    dim = op.arg(1, "dim")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise _fail(op, f"{what} along {dim!r}; dnnbench imports {'cumprod' if product else 'cumsum'} along one "
                        "axis given as a number")
    axis = dim % (len(op.in_shape) + 1) - 1
    if axis < 0:
        raise _fail(op, f"{what} along the batch axis, which is not one sample's layer")
    layer: dict[str, Any] = {"kind": "cumsum", "axis": axis}
    if product:
        layer["product"] = True
    return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)


def _logcumsumexp(b: SpecBuilder, op: _Op) -> str:
    """``torch.logcumsumexp(x, dim)``, ``x.logcumsumexp(dim)`` (a running log-partition: a CTC or
    monotonic-attention alignment, a running softmax's normaliser): the operations it is made of, an
    ``exp``, a running sum along the axis and a ``log`` (reconstructed: PyTorch's scan adds the running
    maximum back in for stability, a comparison and an add per value more)."""
    one_input(op)
    dim = op.arg(1, "dim")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise _fail(op, f"sums along {dim!r}; dnnbench imports logcumsumexp along one axis given as a number")
    axis = dim % (len(op.in_shape) + 1) - 1
    if axis < 0:
        raise _fail(op, "sums along the batch axis, which is not one sample's layer")
    exp = b.activation("exp", op.in_shape, f"{op.name}_exp", op.origin, op.source, op.fusable)
    summed = b.add({"kind": "cumsum", "axis": axis}, op.out_shape, f"{op.name}_sum", op.origin, [exp])
    return b.activation("log", op.out_shape, op.name, op.origin, summed, True)


def _running_extreme(b: SpecBuilder, shape: Shape, dim: Any, name: str, origin: str, source: str) -> str:
    """The values of ``torch.cummax(x, dim)``, ``x.cummin(dim)`` (a running maximum: a monotone envelope, a
    drawdown) along one axis of a sample: a ``cumsum`` layer along it, which costs what the running
    extreme costs (forward one comparison per value; backward each error added back at the position that
    held the extreme, one op per value). Reconstructed: PyTorch's backward also zeroes the input's
    gradient first."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise SpecError.plain(origin, f"takes running extremes along {dim!r}; dnnbench imports cummax and cummin "
                                      "along one axis given as a number")
    axis = dim % (len(shape) + 1) - 1
    if axis < 0:
        raise SpecError.plain(origin, "takes running extremes along the batch axis, which is not one sample's layer")
    return b.add({"kind": "cumsum", "axis": axis}, shape, name, origin, [source])


def _repeats(b: SpecBuilder, op: _Op, times: Sequence[int], interleave: bool = False) -> str:
    """A ``repeat`` layer per axis of one sample copied ``times[axis] > 1`` times (none: the input)."""
    axes = [a for a, t in enumerate(times) if t > 1]
    if not axes:
        return op.source
    source, shape = op.source, tuple(op.in_shape)
    for k, axis in enumerate(axes):
        shape = (*shape[:axis], shape[axis] * times[axis], *shape[axis + 1:])
        layer: dict[str, Any] = {"kind": "repeat", "axis": axis, "times": int(times[axis])}
        if interleave:
            layer["interleave"] = True
        source = b.add(layer, shape, op.name if k == len(axes) - 1 else f"{op.name}_{axis}", op.origin, [source])
    return source


def _whole_reps(op: _Op, reps: Any, call: str) -> list[int]:
    """Per axis of one sample, the copies a ``repeat``/``tile`` with ``reps`` (the batch's first) makes."""
    if isinstance(reps, int):
        reps = [reps]
    if not all(isinstance(r, int) and not isinstance(r, bool) and r >= 1 for r in reps):
        raise _fail(op, f"repeats by {list(reps)!r}; dnnbench imports {call} by counts given as numbers")
    rank = len(op.in_shape) + 1
    reps = [1] * (rank - len(reps)) + list(reps)  # tile pads on the left; repeat has at least the rank
    if len(reps) > rank:
        raise _fail(op, f"repeats by {reps}, which adds axes in front of the batch's; dnnbench imports {call} "
                    "by one count per axis of the input")
    if reps[0] != 1:
        raise _fail(op, f"repeats the batch axis {reps[0]} times, which changes the batch dimension")
    return reps[1:]


def _repeat(b: SpecBuilder, op: _Op) -> str:
    """``x.repeat(*counts)``: copies of each axis of one sample in turn, a ``repeat`` layer per copied axis."""
    one_input(op)
    first = op.arg(1, "repeats")
    counts = list(first) if isinstance(first, (list, tuple)) else list(op.args[1:])  # repeat((a, b)), repeat(a, b)
    if len(counts) < len(op.in_shape) + 1:
        raise _fail(op, f"repeats by {list(counts)}, fewer counts than the input's {len(op.in_shape) + 1} axes")
    return _repeats(b, op, _whole_reps(op, list(counts), "x.repeat"))


def _tile(b: SpecBuilder, op: _Op) -> str:
    """``torch.tile(x, dims)``, ``x.tile(dims)``: ``x.repeat`` with the counts padded by ones on the left."""
    one_input(op)
    counts = op.arg(1, "dims")
    return _repeats(b, op, _whole_reps(op, list(counts) if isinstance(counts, (list, tuple)) else counts, "tile"))


def _expand(b: SpecBuilder, op: _Op) -> str:
    """``x.expand(*sizes)``, ``x.expand_as(y)``, ``x.broadcast_to(shape)``: every axis of one value grown to
    the output's size, a ``repeat`` layer each (the view's reader gets every value)."""
    if not op.inputs:
        raise _fail(op, "expands no layer output")
    if len(op.out_shape) != len(op.in_shape):
        raise _fail(op, f"expands {[*op.in_shape]} to {[*op.out_shape]}, which adds axes in front of the batch's; "
                    "dnnbench imports expand of the input's own axes")
    times = []
    for axis, (n_in, n_out) in enumerate(zip(op.in_shape, op.out_shape, strict=True)):
        if n_in not in (1, n_out):
            raise _fail(op, f"expands axis {axis + 1} of size {n_in} to {n_out}")
        times.append(n_out // n_in)
    return _repeats(b, op, times)


def _repeat_interleave(b: SpecBuilder, op: _Op) -> str:
    """``x.repeat_interleave(n, dim)``, ``torch.repeat_interleave(x, n, dim)``: each position of an axis of
    one sample copied ``n`` times in turn, a ``repeat`` layer with ``interleave``; along the batch axis,
    once per window of the sample folded into it: the sample viewed with a new axis, copied n times
    along it."""
    one_input(op)
    n, dim = op.arg(1, "repeats"), op.arg(2, "dim")
    if isinstance(n, bool) or not isinstance(n, int):
        raise _fail(op, "repeats by a tensor of counts; dnnbench imports repeat_interleave by one count given as "
                    "a number")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise _fail(op, "repeats the flattened values (no dim); dnnbench imports repeat_interleave along one axis")
    axis = dim % (len(op.in_shape) + 1) - 1
    if axis < 0 and n == 1:  # one copy: the value itself
        return op.source
    if axis < 0 and op.out_shape == (n, *op.in_shape):  # once per window folded into the batch (GC-ViT)
        one = b.flatten(op.in_shape, (1, *op.in_shape), op.name + "_axis", op.origin, op.source)
        return b.add({"kind": "repeat", "axis": 0, "times": n, "interleave": True}, op.out_shape, op.name, op.origin,
                     [one])
    if axis < 0:
        raise _fail(op, "repeats along the batch axis, which changes the batch dimension")
    times = [1] * len(op.in_shape)
    times[axis] = n
    return _repeats(b, op, times, interleave=True)


def _max_unpool(b: SpecBuilder, op: _Op) -> str:
    """``nn.MaxUnpool2d``, ``F.max_unpool2d(x, indices, kernel_size, stride, padding, output_size)`` of a
    max pooling's values and positions (SegNet's decoder): a ``max_unpool`` layer of the values."""
    m = op.module
    window = m.kernel_size if m is not None else op.arg(2, "kernel_size")
    stride = (m.stride if m is not None else op.arg(3, "stride")) or window
    padding = m.padding if m is not None else op.arg(4, "padding", 0)
    if len(op.inputs) != 2 or op.inputs[1] not in b.outputs or len(op.in_shape) != 3:
        raise _fail(op, "unpools values by positions that no max pooling of dnnbench's gave; dnnbench imports "
                    "nn.MaxUnpool2d of a max pooling's values and its positions (return_indices=True)")
    if as_pair(padding) != (0, 0):
        raise _fail(op, f"has padding={padding}; dnnbench's max unpool has none")
    layer: dict[str, Any] = {"kind": "max_unpool", "window": pair_or_int(as_pair(window))}
    if as_pair(stride) != as_pair(window):
        layer["stride"] = pair_or_int(as_pair(stride))
    (kh, kw), (sh, sw) = as_pair(window), as_pair(stride)
    if tuple(op.out_shape[1:]) != ((op.in_shape[1] - 1) * sh + kh, (op.in_shape[2] - 1) * sw + kw):
        layer["size"] = [int(d) for d in op.out_shape[1:]]
    return b.add(layer, op.out_shape, op.name, op.origin, op.inputs[:1])


def _pool_function(mode: str, indices: bool = False) -> Callable[[SpecBuilder, _Op], str]:
    """``F.max_pool2d``, ``F.avg_pool2d``; ``indices``: ``F.max_pool2d_with_indices`` (what
    ``F.max_pool2d(..., return_indices=True)`` calls), which returns the maxima's positions too."""
    def handle(b: SpecBuilder, op: _Op) -> str:
        one_input(op)
        window = op.arg(1, "kernel_size")
        stride = op.arg(2, "stride") or window  # F.max_pool2d's stride defaults to the kernel
        pooled = b.pool(mode, as_pair(window), as_pair(stride), as_pair(op.arg(3, "padding", 0)), op.out_shape,
                        op.name, op.origin, op.source,
                        ceil_mode=bool(op.arg(5 if mode == "max" else 4, "ceil_mode", False)),
                        dilation=as_pair(op.arg(4, "dilation", 1)) if mode == "max" else (1, 1))
        return _with_indices(b, pooled) if indices else pooled
    return handle


def _dropout(b: SpecBuilder, op: _Op, per_channel: bool = False) -> str:
    one_input(op)
    p = float(op.module.p if op.module is not None else op.arg(1, "p", 0.5))
    training = op.module is not None or op.arg(2, "training", True)
    if p == 0.0 or training is False:  # PyTorch returns the input itself: nothing dropped, nothing kept
        return op.source
    layer: dict[str, Any] = {"kind": "dropout", "p": p}
    if per_channel and len(op.in_shape) > 1:
        layer["per_channel"] = True
    return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)


def _channel_dropout(b: SpecBuilder, op: _Op) -> str:
    """``nn.Dropout1d``/``2d``/``3d``, ``F.dropout2d``, ...: whole channels dropped (one mask value each)."""
    return _dropout(b, op, per_channel=True)


def _lrn(b: SpecBuilder, op: _Op) -> str:
    one_input(op)
    size = op.module.size if op.module is not None else op.arg(1, "size")
    return b.add({"kind": "lrn", "size": int(size)}, op.out_shape, op.name, op.origin, op.inputs)


def _layer_norm_fields(affine: bool, bias: bool) -> dict[str, object]:
    layer: dict[str, object] = {"kind": "layer_norm", "affine": affine}
    if affine and not bias:
        layer["bias"] = False
    return layer


def _norm_fields(m: Any) -> dict[str, object]:
    """The layer_norm fields of an ``nn.LayerNorm`` module."""
    return _layer_norm_fields(bool(m.elementwise_affine), m.bias is not None)


def _layer_norm(b: SpecBuilder, op: _Op) -> str:
    """``nn.LayerNorm`` or ``F.layer_norm`` (whose weight and bias are the caller's parameters: a
    LayerNorm2d over the channels of permuted maps, as in ConvNeXt)."""
    m = op.module
    affine = (op.arg(2, "weight") is not None, op.arg(3, "bias") is not None)
    shape = tuple(int(d) for d in (m.normalized_shape if m is not None else op.arg(1, "normalized_shape")))
    k = len(shape)
    if m is None and op.params and len(op.inputs) == 1:
        width = math.prod(shape)
        if op.params != width * sum(affine):
            raise _fail(op, f"takes {op.params} learned values; a layer norm over {width} values holds "
                        f"{width} per learned operand")
    else:
        one_input(op)
    if not k or tuple(op.in_shape[-k:]) != shape:
        raise _fail(op, f"normalises over {list(shape)}; dnnbench layer_norm normalises the last axes of "
                    f"{list(op.in_shape)}")
    layer = _norm_fields(m) if m is not None else _layer_norm_fields(*affine)
    if k == 1:
        return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)
    # nn.LayerNorm([C, H, W]) over a whole map: those axes viewed as one, normalised, viewed back
    flat = (*op.in_shape[:-k], math.prod(shape))
    viewed = b.flatten(op.in_shape, flat, f"{op.name}_values", op.origin, op.source)
    normed = b.add(layer, flat, op.name, op.origin, [viewed])
    return b.flatten(flat, op.out_shape, f"{op.name}_back", op.origin, normed)


def _is_rms_norm(m: Any) -> bool:
    """A hand-written RMS norm (LLaMA's, Mistral's ``RMSNorm``, T5's ``T5LayerNorm``): a module so named
    with no learned values or one vector of them. Traced as one layer (its ``pow`` and ``rsqrt`` are no
    layers of their own)."""
    import re

    name = type(m).__name__
    learned = list(m.parameters())
    return (bool(re.search(r"rms_?norm$", name, re.IGNORECASE)) or name == "T5LayerNorm") and (
        len(learned) <= 1 and all(p.dim() == 1 for p in learned))


def _rms_norm(b: SpecBuilder, op: _Op) -> str:
    """``nn.RMSNorm``, ``F.rms_norm`` and hand-written RMS norms (:func:`_is_rms_norm`) over the last axis:
    a layer norm without its shift (priced as one, reconstructed: the mean it does not subtract is one
    element op of four)."""
    one_input(op)
    m = op.module
    width = op.in_shape[-1]
    if m is not None and hasattr(m, "normalized_shape"):
        shape, affine = tuple(m.normalized_shape), bool(m.elementwise_affine)
    elif m is not None:
        learned = [int(p.numel()) for p in m.parameters()]
        shape, affine = ((learned[0],) if learned else (width,)), bool(learned)
    else:
        shape, affine = tuple(op.arg(1, "normalized_shape")), op.params > 0
    if len(shape) != 1 or int(shape[0]) != width or op.out_shape != op.in_shape:
        raise _fail(op, f"normalises over {list(shape)}; dnnbench imports RMS norms of the last axis ({width} "
                    "features)")
    return b.add(_layer_norm_fields(affine, False), op.out_shape, op.name, op.origin, op.inputs)


def _softsign(b: SpecBuilder, op: _Op) -> str:
    """``nn.Softsign``, ``F.softsign``: ``x / (1 + |x|)``, which PyTorch runs as three kernels (and torch
    exports as Abs, Add, Div): an ``abs`` activation, a bias of the constant 1, a ``mul`` that divides."""
    one_input(op)
    size = b.add({"kind": "activation", "function": "abs"}, op.out_shape, op.name + "_abs", op.origin, op.inputs)
    size = b.add({"kind": "bias", "weights": 0}, op.out_shape, op.name + "_plus_one", op.origin, [size])
    return b.add({"kind": "mul", "divide": True}, op.out_shape, op.name, op.origin, [op.source, size])


def _glu(b: SpecBuilder, op: _Op) -> str:
    """``nn.GLU(dim)``, ``F.glu(x, dim)``: the first half of ``dim`` times the sigmoid of the second (two
    slices, a sigmoid and a product, as its ONNX export writes it)."""
    one_input(op)
    dim = op.module.dim if op.module is not None else op.arg(1, "dim", -1)
    axis = int(dim) % (len(op.in_shape) + 1) - 1
    if axis < 0:
        raise _fail(op, "halves the batch axis; dnnbench halves an axis of one sample")
    half = op.in_shape[axis] // 2
    cut = (*op.in_shape[:axis], half, *op.in_shape[axis + 1:])
    value = b.add({"kind": "slice", "axis": axis, "start": 0, "stop": half}, cut, op.name + "_value", op.origin,
                  op.inputs)
    gate = b.add({"kind": "slice", "axis": axis, "start": half, "stop": 2 * half}, cut, op.name + "_gate",
                 op.origin, op.inputs)
    gate = b.activation("sigmoid", cut, op.name + "_sigmoid", op.origin, gate, fusable=False)
    return b.add({"kind": "mul"}, op.out_shape, op.name, op.origin, [value, gate])


def _embedding_bag(b: SpecBuilder, op: _Op) -> str:
    """``nn.EmbeddingBag`` on (S,) token ids per sample (a bag of S tokens, no offsets): the embedding of
    every token and their mean, sum or maximum (a reduce over the tokens; PyTorch runs both in one
    kernel). With ``per_sample_weights`` (mode sum, a weight per token): the embeddings times their
    weights (viewed as (S, 1)) before the sum."""
    m = op.module
    offsets, weights = op.arg(1, "offsets"), op.arg(2, "per_sample_weights")
    if offsets is not None or len(op.in_shape) != 1 or set(op.kwargs) - {"offsets", "per_sample_weights"}:
        raise _fail(op, "takes offsets (bags of varying length laid end to end); dnnbench imports nn.EmbeddingBag "
                    "on (S,) token ids per sample, one bag each (a (B, S) batch), with per-sample weights or "
                    "without")
    s, d = op.in_shape[0], int(m.embedding_dim)
    table = b.add({"kind": "embedding", "vocabulary": int(m.num_embeddings), "dim": d}, (s, d), op.name + "_tokens",
                  op.origin, op.inputs[:1])
    if weights is not None:
        column = b.flatten((s,), (s, 1), op.name + "_weights", op.origin, op.inputs[1])
        table = b.add({"kind": "mul"}, (s, d), op.name + "_weighted", op.origin, [table, column])
    return b.add({"kind": "reduce", "axes": [0], "mode": str(m.mode), "keepdim": False}, op.out_shape, op.name,
                 op.origin, [table])


def _embedding(b: SpecBuilder, op: _Op) -> str:
    """``nn.Embedding``; of one id per sample (a recommender's ``sparse[:, i]``: a (1,) axis in the
    spec), the embedding of that id viewed as one vector."""
    one_input(op)
    m = op.module
    d = int(m.embedding_dim)
    layer = {"kind": "embedding", "vocabulary": int(m.num_embeddings), "dim": d}
    if tuple(op.out_shape) == (d,) and b.shape_of(op.source) == (1,):
        table = b.add(layer, (1, d), op.name, op.origin, op.inputs)
        return b.flatten((1, d), (d,), op.name + "_vector", op.origin, table)
    return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)


def _one_hot(b: SpecBuilder, op: _Op) -> str:
    """``F.one_hot(ids, V)``: a (..., V) tensor written from the ids, through which no gradient flows, as a
    ``zeros`` layer of that shape (the same fill; the runner writes zeros)."""
    one_input(op)
    return b.add({"kind": "zeros", "shape": list(op.out_shape)}, op.out_shape, op.name, op.origin, op.inputs)


def _check_batch_first(op: _Op, batch_first: bool) -> None:
    """A one-line error unless the layer's ``batch_first`` is where its input holds the batch: axis 0 for
    ``batch_first=True``, axis 1 for ``batch_first=False`` (a sequence (S, N, D), made by a transpose or
    taken as the input with ``batch_axis=1``)."""
    want = 0 if batch_first else 1
    if op.batch_axis != want:
        raise _fail(op, f"has batch_first={batch_first}, so it takes the batch on axis {want}, but its input holds "
                    f"the batch on axis {op.batch_axis}: it would mix samples; transpose the input (x.transpose(0, 1)) "
                    "or import with batch_axis=1 (--batch-axis 1) if the forward takes (S, N, ...) inputs")


def _check_attention(op: _Op, m: Any, what: str = "nn.MultiheadAttention") -> None:
    _check_batch_first(op, bool(m.batch_first))
    if not m._qkv_same_embed_dim:
        raise _fail(op, "has kdim or vdim unlike embed_dim; dnnbench attention projects from the width D")
    if m.bias_k is not None:
        raise _fail(op, "has add_bias_kv=True, which dnnbench attention does not model")
    if m.add_zero_attn:
        raise _fail(op, "has add_zero_attn=True (a key and value of zeros more), which dnnbench attention does not "
                    "model")


def _attention(b: SpecBuilder, op: _Op) -> str:
    """``nn.MultiheadAttention`` (either ``batch_first``): self-attention (query, key and value one tensor) as one
    ``attention`` layer; cross-attention (a query attending to another sequence) as its projections and
    ``sdpa`` (:func:`_cross_attention`)."""
    m = op.module
    _check_attention(op, m)
    learned = _learned_queries(b, op)
    if learned is not None:
        query, (key, value) = learned, op.inputs
        op = replace(op, in_shapes=[b.shape_of(learned), *op.in_shapes])
    elif op.params or len(op.inputs) != 3:
        raise _fail(op, "needs its query, key and value as layer outputs, or learned queries (a parameter of (S, D) "
                    "or (1, S, D), expanded over the batch) attending to one layer output")
    else:
        query, key, value = op.inputs
    if query == key == value:
        causal = bool(op.kwargs.get("is_causal", False)) or op.kwargs.get("attn_mask") is not None
        return b.add({"kind": "attention", "heads": int(m.num_heads), "bias": m.in_proj_bias is not None,
                      "causal": causal}, op.out_shape, op.name, op.origin, [query])
    q_shape, k_shape, v_shape = op.in_shapes
    if len(q_shape) != 2 or len(k_shape) != 2 or k_shape != v_shape:
        raise _fail(op, f"attends from {list(q_shape)} to keys {list(k_shape)} and values {list(v_shape)}; "
                    "dnnbench imports a query (S, D) attending to keys and values of one shape (S_k, D)")
    return _cross_attention(b, op, m, op.name, query, key, value, q_shape[0], k_shape[0])


def _learned_queries(b: SpecBuilder, op: _Op) -> str | None:
    """Perceiver's latents, a set transformer's seeds, DETR's object queries: a query (or a decoder's
    target) computed from one parameter alone (``latents.expand(B, -1, -1)``, (S, D) or (1, S, D)) attending
    to keys and values (a memory) that are one layer output, as a layer: zeros of the query's shape per
    sample plus the learned table (``position_embedding``), whose gradient PyTorch also sums over the
    batch. None for any other call."""
    others = len(op.inputs)  # the keys and values (one tensor), or a decoder's memory
    if not (others in (1, 2) and len(set(op.inputs)) == 1 and len(op.param_shapes) == 1 and len(op.args) > others
            and all(a is op.args[1] for a in op.args[1:others + 1]) and op.args[0] is not op.args[1]):
        return None
    shape = op.param_shapes[0]
    if len(shape) == 3 and shape[0] == 1:
        shape = shape[1:]
    if len(shape) != 2 or op.params != shape[0] * shape[1]:
        return None
    zeros = b.add({"kind": "zeros", "shape": list(shape)}, shape, op.name + ".queries_zeros", op.origin,
                  [op.inputs[0]])
    return b.add({"kind": "position_embedding", "rows": shape[0]}, shape, op.name + ".queries", op.origin, [zeros])


def _cross_attention(b: SpecBuilder, op: _Op, m: Any, prefix: str, query: str, key: str, value: str,
                     s_q: int, s_k: int) -> str:
    """Attention of a query sequence (s_q, D) to keys and values (s_k, D) of another layer, as the layers
    ``F.multi_head_attention_forward`` runs: the query's projection, the keys' and values' (one product
    of width 2·D when key and value are one tensor, as PyTorch packs them), the heads split off,
    ``sdpa`` and the output projection. A mask on it changes no count (the products are computed whole)."""
    d, h = int(m.embed_dim), int(m.num_heads)
    dh, bias = d // h, m.in_proj_bias is not None

    def fc(width: int, seq: int, name: str, source: str) -> str:
        return b.add({"kind": "fc", "out_features": width, "bias": bias}, (seq, width), f"{prefix}.{name}",
                     op.origin, [source])

    def heads(x: str, seq: int, name: str) -> str:
        x = b.add({"kind": "reshape", "shape": [seq, h, dh]}, (seq, h, dh), f"{prefix}.{name}_heads", op.origin, [x])
        return b.add({"kind": "permute", "dims": [1, 0, 2]}, (h, seq, dh), f"{prefix}.{name}_by_head", op.origin,
                     [x])

    q = fc(d, s_q, "q_proj", query)
    if key == value:
        kv = fc(2 * d, s_k, "kv_proj", key)
        k = b.add({"kind": "slice", "axis": -1, "start": 0, "stop": d}, (s_k, d), f"{prefix}.k", op.origin, [kv])
        v = b.add({"kind": "slice", "axis": -1, "start": d, "stop": 2 * d}, (s_k, d), f"{prefix}.v", op.origin,
                  [kv])
    else:
        k, v = fc(d, s_k, "k_proj", key), fc(d, s_k, "v_proj", value)
    o = b.add({"kind": "sdpa"}, (h, s_q, dh), f"{prefix}.attend", op.origin,
              [heads(q, s_q, "q"), heads(k, s_k, "k"), heads(v, s_k, "v")])
    o = b.add({"kind": "permute", "dims": [1, 0, 2]}, (s_q, h, dh), f"{prefix}.by_token", op.origin, [o])
    o = b.add({"kind": "reshape", "shape": [s_q, d]}, (s_q, d), f"{prefix}.merged", op.origin, [o])
    return b.add({"kind": "fc", "out_features": d, "bias": m.out_proj.bias is not None}, (s_q, d),
                 f"{prefix}.out_proj", op.origin, [o])


def _activation_name(fn: Any) -> str | None:
    """The spec activation of a callable or module (``F.relu``, ``nn.GELU()``, "gelu"), None if none."""
    if isinstance(fn, str):
        return fn if fn in ("relu", "gelu") else None
    functions, modules = _activation_names()
    return functions.get(fn) or modules.get(type(fn))


class _Block:
    """The pieces of a ``nn.TransformerEncoderLayer``'s or ``DecoderLayer``'s training forward, as layers
    named after its submodules."""

    def __init__(self, b: SpecBuilder, op: _Op, m: Any, prefix: str, shape: Shape) -> None:
        self.b, self.op, self.m, self.prefix, self.shape = b, op, m, prefix, shape

    def add(self, fields: dict[str, Any], shape: Shape, name: str, inputs: list[str]) -> str:
        return self.b.add(fields, shape, f"{self.prefix}.{name}", self.op.origin, inputs)

    def norm(self, name: str, x: str) -> str:
        return self.add(_norm_fields(getattr(self.m, name)), self.shape, name, [x])

    def dropout(self, name: str, x: str, at: Shape | None = None) -> str:
        p = float(getattr(self.m, name).p)
        return self.add({"kind": "dropout", "p": p}, at or self.shape, name, [x]) if p > 0 else x

    def residual(self, name: str, x: str, y: str) -> str:
        return self.add({"kind": "add"}, self.shape, name, [x, y])

    def self_attention(self, x: str, causal: bool, after: str) -> str:
        attn = self.m.self_attn
        a = self.add({"kind": "attention", "heads": int(attn.num_heads), "bias": attn.in_proj_bias is not None,
                      "causal": causal}, self.shape, "self_attn", [x])
        return self.dropout(after, a)

    def feed_forward(self, x: str, function: str, after: str) -> str:
        m = self.m
        hidden = (*self.shape[:-1], int(m.linear1.out_features))
        h = self.add({"kind": "fc", "out_features": int(m.linear1.out_features), "bias": m.linear1.bias is not None,
                      "activation": function}, hidden, "linear1", [x])
        h = self.dropout("dropout", h, hidden)
        y = self.add({"kind": "fc", "out_features": int(m.linear2.out_features), "bias": m.linear2.bias is not None},
                     self.shape, "linear2", [h])
        return self.dropout(after, y)


def _block_activation(op: _Op, m: Any) -> str:
    function = _activation_name(m.activation)
    if function is None:
        raise _fail(op, f"has the activation {getattr(m.activation, '__name__', type(m.activation).__name__)}; "
                    f"dnnbench imports {', '.join(ACTIVATIONS)}")
    return function


def _encoder_block(b: SpecBuilder, op: _Op, m: Any, prefix: str, source: str, shape: Shape, causal: bool) -> str:
    """One ``nn.TransformerEncoderLayer`` as the layers its training forward runs (post-norm, or pre-norm
    with ``norm_first``): self-attention, dropout, residual add, layer norm, and the feed-forward block
    (fc with its activation, dropout, fc, dropout, residual add). Named after the submodules."""
    _check_batch_first(op, bool(m.self_attn.batch_first))
    attn = m.self_attn
    if attn.bias_k is not None or not attn._qkv_same_embed_dim:
        raise _fail(op, "has an attention with add_bias_kv or kdim/vdim, which dnnbench attention does not model")
    function = _block_activation(op, m)
    k = _Block(b, op, m, prefix, shape)
    x = source
    if m.norm_first:
        x = k.residual("residual1", x, k.self_attention(k.norm("norm1", x), causal, "dropout1"))
        return k.residual("residual2", x, k.feed_forward(k.norm("norm2", x), function, "dropout2"))
    x = k.norm("norm1", k.residual("residual1", x, k.self_attention(x, causal, "dropout1")))
    return k.norm("norm2", k.residual("residual2", x, k.feed_forward(x, function, "dropout2")))


def _decoder_block(b: SpecBuilder, op: _Op, m: Any, prefix: str, source: str, memory: str, shape: Shape,
                   memory_tokens: int, causal: bool) -> str:
    """One ``nn.TransformerDecoderLayer``: the encoder layer's self-attention and feed-forward blocks with
    cross-attention to ``memory`` (``memory_tokens`` × D) between them, each with its dropout, residual add
    and norm (before it with ``norm_first``)."""
    for attn in (m.self_attn, m.multihead_attn):
        _check_attention(op, attn, "nn.TransformerDecoderLayer")
    function = _block_activation(op, m)
    k = _Block(b, op, m, prefix, shape)

    def cross(x: str) -> str:
        a = _cross_attention(b, op, m.multihead_attn, f"{prefix}.multihead_attn", x, memory, memory, shape[0],
                             memory_tokens)
        return k.dropout("dropout2", a)

    x = source
    if m.norm_first:
        x = k.residual("residual1", x, k.self_attention(k.norm("norm1", x), causal, "dropout1"))
        x = k.residual("residual2", x, cross(k.norm("norm2", x)))
        return k.residual("residual3", x, k.feed_forward(k.norm("norm3", x), function, "dropout3"))
    x = k.norm("norm1", k.residual("residual1", x, k.self_attention(x, causal, "dropout1")))
    x = k.norm("norm2", k.residual("residual2", x, cross(x)))
    return k.norm("norm3", k.residual("residual3", x, k.feed_forward(x, function, "dropout3")))


def _encoder_causal(op: _Op, mask_key: str) -> bool:
    """Whether an encoder call masks attention: a mask argument or ``is_causal`` (as for attention)."""
    return op.arg(1, mask_key) is not None or bool(op.arg(3, "is_causal", False))


def _check_sequence(op: _Op) -> None:
    if len(op.inputs) != 1 or op.params:
        raise _fail(op, "takes a second data tensor (a memory); "
                    "dnnbench imports an encoder over one (S, D) sequence")
    if len(op.in_shape) != 2:
        raise _fail(op, f"gets a per-sample input of shape {list(op.in_shape)}; dnnbench imports an encoder over "
                    "an (S, D) sequence")


def _encoder_layer(b: SpecBuilder, op: _Op) -> str:
    """``nn.TransformerEncoderLayer`` (either ``batch_first``): its training forward, layer by layer."""
    _check_sequence(op)
    return _encoder_block(b, op, op.module, op.name, op.source, op.out_shape, _encoder_causal(op, "src_mask"))


def _encoder(b: SpecBuilder, op: _Op) -> str:
    """``nn.TransformerEncoder``: its layers one after the other, then its ``norm`` if it has one."""
    _check_sequence(op)
    causal = _encoder_causal(op, "mask")
    x = op.source
    for i, layer in enumerate(op.module.layers):
        x = _encoder_block(b, op, layer, f"{op.name}.layers.{i}", x, op.out_shape, causal)
    return _final_norm(b, op, op.module.norm, x, f"{op.name}.norm")


def _final_norm(b: SpecBuilder, op: _Op, norm: Any, x: str, name: str) -> str:
    """An encoder's or decoder's final ``norm`` (an nn.LayerNorm over the width), or ``x`` without one."""
    if norm is None:
        return x
    from torch import nn

    if not isinstance(norm, nn.LayerNorm) or tuple(norm.normalized_shape) != op.out_shape[-1:]:
        raise _fail(op, f"has the final norm {norm!r}; dnnbench imports an nn.LayerNorm over the width there")
    return b.add(_norm_fields(norm), op.out_shape, name, op.origin, [x])


def _decoder_inputs(b: SpecBuilder, op: _Op) -> tuple[str, str, int]:
    """(target, memory, memory tokens) of a decoder call: two (S, D) sequences that are layer outputs, or
    learned queries (:func:`_learned_queries`) as the target."""
    learned = _learned_queries(b, op)
    if learned is not None:
        op = replace(op, inputs=[learned, op.inputs[0]], in_shapes=[b.shape_of(learned), *op.in_shapes])
    elif op.params or len(op.inputs) != 2:
        raise _fail(op, "needs its target and its memory as layer outputs (or learned queries as its target), "
                    "and masks (of constants, or padding masks computed from the data)")
    (tgt, memory), (t_shape, m_shape) = op.inputs, op.in_shapes
    if len(t_shape) != 2 or len(m_shape) != 2 or t_shape[1] != m_shape[1]:
        raise _fail(op, f"gets a target {list(t_shape)} and a memory {list(m_shape)}; dnnbench imports (S, D) and "
                    "(S_m, D) sequences of one width")
    return tgt, memory, m_shape[0]


def _decoder_layer(b: SpecBuilder, op: _Op) -> str:
    """``nn.TransformerDecoderLayer`` (either ``batch_first``) of a target and a memory, layer by layer."""
    tgt, memory, tokens = _decoder_inputs(b, op)
    causal = op.arg(2, "tgt_mask") is not None or bool(op.arg(6, "tgt_is_causal", False))
    return _decoder_block(b, op, op.module, op.name, tgt, memory, op.out_shape, tokens, causal)


def _decoder_stack(b: SpecBuilder, op: _Op, m: Any, prefix: str, tgt: str, memory: str, tokens: int,
                   causal: bool) -> str:
    for i, layer in enumerate(m.layers):
        tgt = _decoder_block(b, op, layer, f"{prefix}.layers.{i}", tgt, memory, op.out_shape, tokens, causal)
    return _final_norm(b, op, m.norm, tgt, f"{prefix}.norm")


def _decoder(b: SpecBuilder, op: _Op) -> str:
    """``nn.TransformerDecoder``: its decoder layers, each attending to the one memory, then its norm."""
    tgt, memory, tokens = _decoder_inputs(b, op)
    causal = op.arg(2, "tgt_mask") is not None or bool(op.arg(6, "tgt_is_causal", False))
    return _decoder_stack(b, op, op.module, op.name, tgt, memory, tokens, causal)


def _transformer(b: SpecBuilder, op: _Op) -> str:
    """``nn.Transformer`` (either ``batch_first``) of a source and a target that are layer outputs: its encoder over
    the source (then its norm), its decoder over the target attending to the encoder's output."""
    from torch import nn

    m = op.module
    if not (isinstance(m.encoder, nn.TransformerEncoder) and isinstance(m.decoder, nn.TransformerDecoder)):
        raise _fail(op, "has a custom encoder or decoder; dnnbench imports nn.Transformer's own")
    src, tgt, _ = _decoder_inputs(b, op)  # (source, target) where a decoder has (target, memory)
    tokens = op.in_shapes[0][0]
    if op.arg(2, "src_mask") is not None or op.arg(8, "src_is_causal"):
        raise _fail(op, "masks its encoder's attention; dnnbench imports nn.Transformer with a target mask alone")
    enc = replace(op, inputs=[src], in_shapes=[op.in_shapes[0]], in_shape=op.in_shapes[0],
                  out_shape=op.in_shapes[0], args=(), kwargs={})
    memory = src
    for i, layer in enumerate(m.encoder.layers):
        memory = _encoder_block(b, enc, layer, f"{op.name}.encoder.layers.{i}", memory, enc.out_shape, False)
    memory = _final_norm(b, enc, m.encoder.norm, memory, f"{op.name}.encoder.norm")
    causal = op.arg(3, "tgt_mask") is not None or bool(op.arg(9, "tgt_is_causal", False))
    return _decoder_stack(b, op, m.decoder, f"{op.name}.decoder", tgt, memory, tokens, causal)


def _expanded_to_output(b: SpecBuilder, op: _Op) -> _Op:
    """``op`` of one layer output that the other operand broadcasts up (a VQ-VAE's distances:
    ``(z ** 2).sum(1, keepdim=True) + (codebook ** 2).sum(1)``, (N, 1) + (K,) -> (N, K)): its input first
    copied along each axis of size 1 (``repeat``: the values PyTorch's broadcast reads), so that the
    operation keeps its input's shape; ``op`` itself where it does."""
    src, out = op.in_shape, op.out_shape
    if src == out or len(src) != len(out) or any(s not in (1, o) for s, o in zip(src, out, strict=True)):
        return op
    source, shape = op.inputs[0], list(src)
    for axis, o in enumerate(out):
        if shape[axis] != o:
            shape[axis] = o
            source = b.add({"kind": "repeat", "axis": axis, "times": o}, tuple(shape), f"{op.name}_expand{axis}",
                           op.origin, [source])
    return replace(op, inputs=[source], in_shapes=[out], in_shape=out)


def _add(b: SpecBuilder, op: _Op) -> str:
    if len(op.inputs) == 1 and (op.params or op.const_shapes):
        added = [*op.param_shapes, *op.const_shapes]
        op = _expanded_to_output(b, op)
        if (op.params and not op.const_shapes and len(op.out_shape) == 2 and len(added) == 1
                and added[0][-1:] == op.out_shape[-1:] and not op.params % op.out_shape[1]):
            return b.add({"kind": "position_embedding", "rows": op.params // op.out_shape[1]}, op.out_shape,
                         op.name, op.origin, op.inputs)
        if op.in_shape != op.out_shape or not all(_broadcasts(shape, op.out_shape) for shape in added):
            raise _fail(op, f"adds a tensor of shape {list(added[0])} that is no layer's output to shape "
                        f"{list(op.in_shape)}; dnnbench imports such additions when the tensor broadcasts over "
                        "the input (a position table, a relative-position bias, a mask)")
        return b.add({"kind": "bias", "weights": op.params}, op.out_shape, op.name, op.origin, op.inputs)
    if len(op.inputs) == 1 and _number_operand(op):  # x + c: a bias of constants
        return b.add({"kind": "bias", "weights": 0}, op.out_shape, op.name, op.origin, op.inputs)
    if len(op.inputs) < 2:
        raise _fail(op, "adds something that is no tensor or number to a tensor; dnnbench imports additions of "
                    "layer outputs (residuals), numbers and tensors computed from parameters or constants "
                    "(position tables, biases, masks)")
    if not broadcast_together(op.in_shapes, op.out_shape):
        raise _fail(op, f"adds shapes {[list(s) for s in op.in_shapes]} of different lengths; dnnbench's add takes "
                    "inputs of one length whose sizes are equal or 1 on every axis")
    return b.add({"kind": "add"}, op.out_shape, op.name, op.origin, op.inputs)


def _broadcasts(shape: Shape, onto: Shape) -> bool:
    """A tensor of ``shape`` (as torch holds it, a batch axis of 1 allowed) broadcasts onto per-sample
    values of shape ``onto`` without changing their shape."""
    lead = len(shape) - len(onto)
    if lead > 0 and any(d != 1 for d in shape[:lead]):
        return False
    trail = shape[max(lead, 0):]
    return all(d in (1, o) for d, o in zip(trail, onto[len(onto) - len(trail):], strict=True))


def _sub(b: SpecBuilder, op: _Op) -> str:
    """``x - y`` of two layer outputs of one shape (PoolFormer's ``pool(x) - x``) or broadcast over each
    other (a dueling network's advantages less their mean): counted as an add (one element op per output
    forward; its gradients are the error and its negation). ``x - c`` of a number or a learned shift: a
    bias, as ``x + c``; ``c - x`` (``1 - torch.sigmoid(z)``): a constant factor (one op each way)."""
    if len(op.inputs) == 1 and _number_operand(op, position=0):  # c - x: PyTorch's rsub, one kernel each way
        return b.add({"kind": "scale", "learned": False}, op.out_shape, op.name, op.origin, op.inputs)
    if len(op.inputs) == 1 and (_number_operand(op, position=1) or op.params or op.const_shapes):
        return _add(b, op)  # x - c, x - a learned shift: a bias, as x + c is
    if len(op.inputs) != 2 or op.params or not broadcast_together(op.in_shapes, op.out_shape):
        raise _fail(op, "subtracts a constant or a tensor of another length; dnnbench imports x - y of two layer "
                    "outputs whose sizes are equal or 1 on every axis, and x - c, c - x of a number c")
    return b.add({"kind": "add"}, op.out_shape, op.name, op.origin, op.inputs)


def _number_operand(op: _Op, position: int | None = None) -> bool:
    """The operation has two operands, one of them a Python number (``x * 2``, ``x / math.sqrt(d)``), at
    ``position`` when given."""
    values = (*op.args, *op.kwargs.values())
    numbers = [i for i, a in enumerate(values) if isinstance(a, (int, float)) and not isinstance(a, bool)]
    return len(values) == 2 and len(numbers) == 1 and position in (None, numbers[0])


def _div(b: SpecBuilder, op: _Op) -> str:
    """``x / c`` of a number c: a constant factor (a scale that learns nothing); ``c / x``: a reciprocal
    and a constant factor (PyTorch computes ``x.reciprocal() * c``); ``x / y`` of two layer outputs (a
    normalisation by a sum): a ``mul`` that divides."""
    if len(op.inputs) == 1 and not op.params and _number_operand(op, position=1):
        return b.add({"kind": "scale", "learned": False}, op.out_shape, op.name, op.origin, op.inputs)
    if len(op.inputs) == 1 and not op.params and _number_operand(op, position=0):
        # c / x: PyTorch's x.reciprocal() * c, two kernels and two tensors
        inverse = b.activation("reciprocal", op.out_shape, op.name + "_reciprocal", op.origin, op.source,
                               op.fusable)
        return b.add({"kind": "scale", "learned": False}, op.out_shape, op.name, op.origin, [inverse])
    if len(op.inputs) == 2 and not op.params and not op.const_shapes:
        return b.add({"kind": "mul", "divide": True}, op.out_shape, op.name, op.origin, op.inputs)
    if (len(op.inputs) == 1 and not op.params and op.keep is None and len(op.const_shapes) == 1
            and op.const_at == (1,) and _broadcasts(op.const_shapes[0], op.out_shape) and op.in_shape == op.out_shape):
        # (x - mean) / std of buffers (an input's standardisation): one constant factor per value
        return b.add({"kind": "scale", "learned": False}, op.out_shape, op.name, op.origin, op.inputs)
    if len(op.inputs) == 1 and op.params and len(op.param_shapes) == 1 and op.param_at == (1,):
        # x / self.temperature, x / self.scale of a learned factor per channel: a scale that learns it
        axis = scale_axis(op.param_shapes[0], op.in_shape)
        if axis is not None:
            return b.add({"kind": "scale", "axis": axis}, op.out_shape, op.name, op.origin, op.inputs)
        if op.params == 1 and math.prod(op.param_shapes[0]) == 1 and op.in_shape == op.out_shape:
            return b.add({"kind": "scale", "shared": True}, op.out_shape, op.name, op.origin, op.inputs)
    raise _fail(op, "divides by a tensor that is no layer output; dnnbench imports x / c and c / x of a number c, "
                "x / t of constants or of a learned factor per channel, and x / y of two layer outputs")


def _mul(b: SpecBuilder, op: _Op) -> str:
    """The product of two layer outputs (a gate: squeeze-and-excitation, a gated unit), or of one with a
    learned factor per channel (a layer scale)."""
    if len(op.inputs) == 1 and op.params and len(op.param_shapes) == 1:
        axis = scale_axis(op.param_shapes[0], op.in_shape)
        if axis is not None:
            return b.add({"kind": "scale", "axis": axis}, op.out_shape, op.name, op.origin, op.inputs)
        if op.params == 1 and math.prod(op.param_shapes[0]) == 1 and op.in_shape == op.out_shape:
            # one learned number times x (a learned temperature, ReZero's α, HGNet's affine block)
            return b.add({"kind": "scale", "shared": True}, op.out_shape, op.name, op.origin, op.inputs)
    if len(op.inputs) == 1 and not op.params and _number_operand(op):
        return b.add({"kind": "scale", "learned": False}, op.out_shape, op.name, op.origin, op.inputs)
    if len(op.inputs) == 1 and not op.params and op.keep is not None and len(op.const_shapes) == 1:
        # x * x.new_empty((B, 1, ...)).bernoulli_(keep) / keep: timm's drop_path, a dropout of whole samples
        # (a mask of x's shape: of single values)
        per_sample = math.prod(op.const_shapes[0][1:]) == 1 < math.prod(op.out_shape)
        if op.keep >= 1.0:
            return op.source
        return b.add({"kind": "dropout", "p": 1.0 - op.keep, "per_sample": per_sample}, op.out_shape, op.name,
                     op.origin, op.inputs)
    if (len(op.inputs) == 1 and not op.params and op.keep is None and len(op.const_shapes) == 1
            and _broadcasts(op.const_shapes[0], op.out_shape) and op.in_shape == op.out_shape):
        # x * t of a tensor of constants (EVA's rotary cos and sin tables): one constant factor per value
        return b.add({"kind": "scale", "learned": False}, op.out_shape, op.name, op.origin, op.inputs)
    if (len(op.inputs) == 1 and not op.params and op.keep is None and len(op.const_shapes) == 1
            and _broadcasts(op.const_shapes[0], op.out_shape)):
        # x[..., None] * freqs (NeRF's and a Fourier feature's frequencies): the constants spread the values
        # over a new axis, a product with a fixed table of the constants' shape
        table = _constant_per_sample(op.const_shapes[0], len(op.out_shape))
        if table is not None:
            constant = b.add({"kind": "zeros", "shape": list(table)}, table, f"{op.name}_constant", op.origin,
                             op.inputs)
            return b.add({"kind": "mul"}, op.out_shape, op.name, op.origin, [op.source, constant])
    if len(op.inputs) == 1 and op.params and len(op.param_shapes) == 1 and not op.const_shapes:
        # x * t of a learned tensor of another form than one factor per channel (a state space model's
        # exp(A), a learned mask): the tensor as a layer of its own (zeros plus the learned table), times x
        shape = _per_sample_table(op.param_shapes[0], op.out_shape)
        if shape is not None and math.prod(shape) == op.params:
            table = _learned_table(b, op, shape)
            return b.add({"kind": "mul"}, op.out_shape, op.name, op.origin, [op.source, table])
    if len(op.inputs) != 2 or op.params:
        raise _fail(op, "multiplies a tensor by a constant or by a learned tensor that is not computed value for "
                    "value from its parameters; dnnbench imports products of two layer outputs (a gate), learned "
                    "per-channel scales and learned tensors that broadcast over the values")
    return b.add({"kind": "mul"}, op.out_shape, op.name, op.origin, op.inputs)


def _per_sample_table(shape: Shape, onto: Shape) -> Shape | None:
    """A learned tensor of ``shape`` (as torch holds it, leading axes of 1 allowed) as one sample's factor
    of the values ``onto``: the same number of axes, each of its size or 1; None where it does not
    broadcast so."""
    shape = tuple(shape)
    while len(shape) > len(onto) and shape[0] == 1:
        shape = shape[1:]
    if len(shape) > len(onto):
        return None
    shape = (1,) * (len(onto) - len(shape)) + shape
    return shape if all(d in (1, o) for d, o in zip(shape, onto, strict=True)) else None


def _learned_table(b: SpecBuilder, op: _Op, shape: Shape) -> str:
    """A learned tensor of per-sample ``shape`` as a layer: a ``zeros`` of (rows, last axis) plus a learned
    table of that shape (``position_embedding``, as for learned queries), viewed as ``shape``; its
    weights are the tensor's values."""
    rows, width = (math.prod(shape[:-1]), shape[-1]) if len(shape) > 1 else (1, shape[0])
    zeros = b.add({"kind": "zeros", "shape": [rows, width]}, (rows, width), f"{op.name}_zeros", op.origin,
                  [op.source])
    table = b.add({"kind": "position_embedding", "rows": rows}, (rows, width), f"{op.name}_table", op.origin, [zeros])
    return table if (rows, width) == tuple(shape) else b.flatten((rows, width), shape, f"{op.name}_factors",
                                                                  op.origin, table)


def _gumbel_softmax(b: SpecBuilder, op: _Op) -> str:
    """``F.gumbel_softmax(logits, tau, hard, dim)`` (a discrete latent's relaxed sample): Gumbel noise added
    (a ``bias`` of constants), divided by tau (a constant factor), a softmax along ``dim``. ``hard``'s
    one-hot and its straight-through sum are a few element operations per value more, not priced."""
    one_input(op)
    dim = op.arg(4, "dim", -1)
    if dim % (len(op.in_shape) + 1) != len(op.in_shape):
        raise _fail(op, f"samples along axis {dim}; dnnbench imports F.gumbel_softmax along the last axis")
    noisy = b.add({"kind": "bias", "weights": 0}, op.out_shape, f"{op.name}_noise", op.origin, op.inputs)
    tempered = b.add({"kind": "scale", "learned": False}, op.out_shape, f"{op.name}_tau", op.origin, [noisy])
    return b.add({"kind": "softmax"}, op.out_shape, op.name, op.origin, [tempered])


def _stochastic_depth(b: SpecBuilder, op: _Op) -> str:
    """torchvision's ``stochastic_depth`` (EfficientNet, ConvNeXt): a residual branch dropped for a whole
    sample ("row") or the whole batch ("batch"), a dropout of p with one mask value per sample; p = 0 is
    nothing (torchvision returns the input)."""
    one_input(op)
    p = float(op.arg(1, "p", 0.0))
    if p == 0.0 or op.arg(3, "training", True) is False:
        return op.source
    return b.add({"kind": "dropout", "p": p, "per_sample": True}, op.out_shape, op.name, op.origin, op.inputs)


def _own_layer(b: SpecBuilder, op: _Op) -> str:
    """A module that carries its spec layer (``dnnbench_layer``, set by the runner on modules whose
    forward does more than the layer's kind shows, such as a dropout of whole samples, or holds constants
    of the layer's, such as a gather's positions)."""
    from ..specs.layers import LAYER_TYPES

    layer = dict(op.module.dnnbench_layer)
    if LAYER_TYPES[layer["kind"]].arity == (1, 1):
        one_input(op)
    return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)


#: Functions of other packages by (module, name), so that importing them is never needed here.
_NAMED_FUNCTIONS: dict[tuple[str, str], Callable[[SpecBuilder, _Op], str]] = {
    ("torchvision.ops.stochastic_depth", "stochastic_depth"): _stochastic_depth,
}


def _cat(b: SpecBuilder, op: _Op) -> str:
    dim = op.arg(1, "dim", 0)
    rank = len(op.out_shape) + 1
    axis = (int(dim) % rank) - 1
    if axis < 0:
        raise _fail(op, "concatenates along the batch axis, which is not one sample's layer")
    if op.params:
        if len(op.inputs) != 1 or len(op.out_shape) != 2 or axis != 0 or op.params % op.out_shape[1]:
            raise _fail(op, "concatenates a learned tensor with data; dnnbench imports this only as class tokens "
                        "put in front of an (S, D) sequence")
        return b.add({"kind": "class_token", "tokens": op.params // op.out_shape[1]}, op.out_shape, op.name,
                     op.origin, op.inputs)
    # torch.cat([x, torch.zeros(B, H, h, w)]): a recurrent cell's first step, a zero channel
    inputs = _with_constants(b, op, len(op.out_shape), "concatenates")
    if len(inputs) < 2:  # torch.cat([x]) is a copy
        return op.source
    return b.add({"kind": "concat", "axis": axis}, op.out_shape, op.name, op.origin, inputs)


def _with_constants(b: SpecBuilder, op: _Op, rank: int, what: str) -> list[str]:
    """The layers of a join's operands in argument order, each constant operand (``torch.zeros_like(h)``)
    a ``zeros`` layer of its per-sample shape of ``rank`` axes."""
    if not op.const_shapes:
        return list(op.inputs)
    data = iter(op.inputs)
    inputs = []
    for k in range(len(op.inputs) + len(op.const_at)):
        if k not in op.const_at:
            inputs.append(next(data))
            continue
        shape = op.const_shapes[op.const_at.index(k)]
        table = _constant_per_sample(shape, rank)
        if table is None:
            raise _fail(op, f"{what} a constant of shape {list(shape)} that is not one per sample; dnnbench imports "
                        "constants of one sample's shape")
        inputs.append(b.add({"kind": "zeros", "shape": list(table)}, table, f"{op.name}_constant{k}", op.origin,
                            [op.source]))
    return inputs


def _reshape(b: SpecBuilder, op: _Op) -> str:
    one_input(op)
    if len(op.out_shape) > MAX_VIEW_AXES:
        raise _fail(op, f"views one sample with {len(op.out_shape)} axes {list(op.out_shape)}; dnnbench's views "
                    f"have at most {MAX_VIEW_AXES} per-sample axes")
    return b.flatten(op.in_shape, op.out_shape, op.name, op.origin, op.source)


def _mean(b: SpecBuilder, op: _Op) -> str:
    """``x.mean((2, 3))``, ``x.mean([-2, -1], keepdim=True)`` or ``torch.mean(x, dim=...)`` over a map's
    height and width: global average pooling (then a flatten unless ``keepdim``); ``x.mean(1)`` over a
    sequence's tokens."""
    one_input(op)
    dims = op.arg(1, "dim")
    rank = len(op.in_shape) + 1
    axes = sorted({int(d) % rank for d in ([dims] if isinstance(dims, int) else dims or ())})
    if len(op.in_shape) == 2 and axes == [1] and not op.arg(2, "keepdim", False):
        return _mean_of_tokens(b, op)
    if len(op.in_shape) == 3 and axes == [1, 2]:  # channels-last (H, W, C) maps (timm's Swin head)
        h, w, c = op.in_shape
        maps = b.add({"kind": "permute", "dims": [2, 0, 1]}, (c, h, w), op.name + "_maps", op.origin, op.inputs)
        pooled = b.adaptive_pool("avg", (c, h, w), (c, 1, 1), op.name, op.origin, maps)
        return b.flatten((c, 1, 1), op.out_shape, op.name + "_flatten", op.origin, pooled)
    if len(op.in_shape) != 3 or axes != [2, 3]:
        return _reduce(b, op, "mean")
    c = op.in_shape[0]
    pooled = b.adaptive_pool("avg", op.in_shape, (c, 1, 1), op.name, op.origin, op.source)
    if op.arg(2, "keepdim", False):
        return pooled
    return b.flatten((c, 1, 1), op.out_shape, op.name + "_flatten", op.origin, pooled)


def _extreme(b: SpecBuilder, in_shape: Shape, out_shape: Shape, dims: Any, keepdim: bool, mode: str, name: str,
             origin: str, source: str) -> str:
    """The maximum or minimum over axes of one sample (``x.amax(dim)``, ``torch.max(x, dim)[0]``): over a
    map's height and width global max pooling (then a flatten unless ``keepdim``), as ONNX's ReduceMax
    imports; else a reduce layer."""
    rank = len(in_shape) + 1
    axes = sorted({int(d) % rank for d in ([dims] if isinstance(dims, int) else dims or ())})
    if mode == "max" and len(in_shape) == 3 and axes == [2, 3]:
        c = in_shape[0]
        pooled = b.adaptive_pool("max", in_shape, (c, 1, 1), name, origin, source)
        return pooled if keepdim else b.flatten((c, 1, 1), out_shape, name + "_flatten", origin, pooled)
    # of a vector: one number per sample, kept as a (1,) axis
    return b.add(reduce_layer(dims, in_shape, mode, keepdim or not out_shape, origin), out_shape, name,
                 origin, [source])


def _amax(mode: str) -> Callable[[SpecBuilder, _Op], str]:
    """``x.amax(dim, keepdim)``, ``torch.amax``, ``x.amin``, ``torch.amin``: :func:`_extreme`."""
    def handle(b: SpecBuilder, op: _Op) -> str:
        one_input(op)
        return _extreme(b, op.in_shape, op.out_shape, op.arg(1, "dim"), bool(op.arg(2, "keepdim", False)), mode,
                        op.name, op.origin, op.source)
    return handle


def _arg_extreme(mode: str) -> Callable[[SpecBuilder, _Op], str]:
    """``x.argmax(dim, keepdim)``, ``torch.argmin``, ...: the positions of the extremes along one axis of a
    sample (a vector quantiser's nearest code, a prediction's class), used as values (the ids of a lookup,
    a comparison with the labels): the extremes' search (:func:`_extreme`, one operation per value) and a
    ``stop_gradient``, since positions take no gradient. (An arg-max over every axis, the batch's too,
    changes the batch dimension: a one-line error before it.)"""
    def handle(b: SpecBuilder, op: _Op) -> str:
        one_input(op)
        found = _extreme(b, op.in_shape, op.out_shape, op.arg(1, "dim"), bool(op.arg(2, "keepdim", False)), mode,
                         f"{op.name}_extremes", op.origin, op.source)
        return b.add({"kind": "stop_gradient"}, op.out_shape, op.name, op.origin, [found])
    return handle


def _reduce(b: SpecBuilder, op: _Op, mode: str = "sum") -> str:
    """``x.sum(dim, keepdim)``, ``torch.sum``, and a mean over axes that are not global pooling: a reduce
    layer over those per-sample axes (over a vector's only axis: one number per sample, kept as (1,))."""
    one_input(op)
    keepdim = bool(op.arg(2, "keepdim", False)) or not op.out_shape  # of a vector: kept as a (1,) axis
    layer = reduce_layer(op.arg(1, "dim"), op.in_shape, mode, keepdim, op.origin)
    return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)


def _spread(mode: str) -> Callable[[SpecBuilder, _Op], str]:
    """``x.var(dim, keepdim=...)``, ``x.std``, ``torch.var``, ``torch.std`` (a normalisation written out):
    a reduce layer of mode var or std; the correction (``unbiased``) changes no cost."""
    def handle(b: SpecBuilder, op: _Op) -> str:
        one_input(op)
        # torch.var(x, dim, unbiased, keepdim) in the old order, else keepdim by keyword only
        keepdim = op.kwargs.get("keepdim", op.args[3] if len(op.args) > 3 else False)
        layer = reduce_layer(op.arg(1, "dim"), op.in_shape, mode, bool(keepdim), op.origin)
        return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)
    return handle


def _logsumexp(b: SpecBuilder, op: _Op) -> str:
    """``x.logsumexp(dim, keepdim)``, ``torch.logsumexp``: a reduce layer of mode logsumexp."""
    return _reduce(b, op, "logsumexp")


def _power(b: SpecBuilder, op: _Op, exponent: Any) -> str:
    """``x ** p`` of a constant number p: :func:`~._build.power`."""
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float)):
        raise _fail(op, "raises to a power that is no constant number (a tensor's values, or a number to a "
                    "tensor's power); dnnbench imports x ** p of a constant number p (torch.exp for e ** x)")
    one_input(op)
    return power(b, float(exponent), op.out_shape, op.name, op.origin, op.source, op.fusable)


def _pow(b: SpecBuilder, op: _Op) -> str:
    """``x ** p``, ``x.pow(p)``, ``torch.pow(x, p)`` (a square in a hand-written norm, GPT-2's ``x ** 3``
    in its GELU): :func:`_power`."""
    return _power(b, op, op.arg(1, "exponent"))


def _square(b: SpecBuilder, op: _Op) -> str:
    """``torch.square(x)``, ``x.square()``: :func:`_power` of 2."""
    return _power(b, replace(op, args=(*op.args[:1], 2.0), kwargs={}), 2.0)


def _norm(b: SpecBuilder, op: _Op) -> str:
    """``x.norm(p=2, dim, keepdim)``, ``torch.norm``, ``torch.linalg.vector_norm(x, 2, dim, keepdim)``: a
    reduce layer of mode l2 (ConvNeXt-V2's global response norm)."""
    p = op.kwargs.get("p", op.kwargs.get("ord", op.args[1] if len(op.args) > 1 else 2))  # (ord: vector_norm's)
    dims = op.kwargs.get("dim", op.args[2] if len(op.args) > 2 else None)
    keepdim = op.kwargs.get("keepdim", op.args[3] if len(op.args) > 3 else False)
    if p not in (2, 2.0, "fro"):
        raise _fail(op, f"takes the {p!r}-norm; dnnbench's reduce takes the Euclidean (2-)norm")
    return _reduce(b, replace(op, args=(op.args[0], dims, keepdim), kwargs={}), "l2")


def _two_vectors(op: _Op, what: str) -> None:
    if len(op.inputs) != 2 or op.params or not broadcast_together(op.in_shapes, op.in_shapes[0]):
        raise _fail(op, f"takes the {what} of {[list(s) for s in op.in_shapes]}; dnnbench imports it between two "
                    "layer outputs of one shape")


def _cosine_similarity(b: SpecBuilder, op: _Op) -> str:
    """``F.cosine_similarity(a, b, dim)`` (a Siamese network's, a contrastive loss's score) as ATen computes
    it: each input over its Euclidean norm along ``dim`` (a ``reduce`` l2 kept, a dividing ``mul``), their
    product, its sum along ``dim`` (of vectors: one number per sample, kept as a (1,) axis)."""
    _two_vectors(op, "cosine similarity")
    dim = op.arg(2, "dim", 1)
    shape = op.in_shapes[0]
    normed = []
    for k, (source, s) in enumerate(zip(op.inputs, op.in_shapes, strict=True)):
        layer = reduce_layer(dim, s, "l2", True, op.origin)
        kept = tuple(1 if i == layer["axes"][0] % len(s) else d for i, d in enumerate(s))
        norm = b.add(layer, kept, f"{op.name}_norm{k}", op.origin, [source])
        normed.append(b.add({"kind": "mul", "divide": True}, s, f"{op.name}_unit{k}", op.origin, [source, norm]))
    product = b.add({"kind": "mul"}, shape, f"{op.name}_product", op.origin, normed)
    return b.add(reduce_layer(dim, shape, "sum", not op.out_shape, op.origin), op.out_shape, op.name,
                 op.origin, [product])


def _pairwise_distance(b: SpecBuilder, op: _Op) -> str:
    """``F.pairwise_distance(a, b)`` of p = 2 (a Siamese network's distance) as ATen computes it:
    ``(a - b + eps).norm(dim=-1)``: a difference, a bias of the constant, a ``reduce`` l2 of the last axis
    (of vectors: one number per sample, kept as a (1,) axis)."""
    _two_vectors(op, "distance")
    p = op.arg(2, "p", 2.0)
    if p not in (2, 2.0):
        raise _fail(op, f"takes the {p!r}-norm distance; dnnbench imports the Euclidean (2-norm) distance")
    shape = op.in_shapes[0]
    difference = b.add({"kind": "add"}, shape, f"{op.name}_difference", op.origin, op.inputs)
    shifted = b.add({"kind": "bias", "weights": 0}, shape, f"{op.name}_eps", op.origin, [difference])
    return b.add(reduce_layer(-1, shape, "l2", bool(op.arg(4, "keepdim", False)) or not op.out_shape, op.origin),
                 op.out_shape, op.name, op.origin, [shifted])


def _cdist(b: SpecBuilder, op: _Op) -> str:
    """``torch.cdist(a, c)`` of p = 2, every row of ``a`` against every row of ``c`` (a prototype or RBF
    head's distances to learned centres, a point cloud's pairwise distances), priced as ATen's product
    form computes it (``|a|² + |c|² - 2 a·c``, its default beyond 25 rows): the product (of a learned
    ``c`` of (R, M): an fc layer of R outputs without a bias; of another layer output of (R, M): a matmul
    with its transpose), the rows' squared norms (``reduce`` l2) added to it, and the square root (fused). The
    norms of a learned ``c`` are once per step, not per sample, and are left out. Below 26 rows ATen takes
    the differences directly (a few element operations per product term instead of one multiply-add),
    priced here as the product form."""
    p = op.arg(2, "p", 2.0)
    if p not in (2, 2.0):
        raise _fail(op, f"takes the {p!r}-norm distance; dnnbench imports the Euclidean (p = 2) distance")
    a = op.in_shape
    learned = op.param_shapes[0] if op.param_shapes else ()
    while len(learned) > 2 and learned[0] == 1:  # centres.unsqueeze(0).expand(B, -1, -1): one matrix for all
        learned = learned[1:]
    if len(op.inputs) == 1 and op.params and op.param_at == (1,) and len(learned) == 2 and a and a[-1] == learned[1]:
        rows = int(learned[0])
        product = _fc_along(b, replace(op, name=f"{op.name}_product", out_shape=(*a[:-1], rows)), len(a) - 1, rows)
        terms = [product, b.add(reduce_layer(-1, a, "l2", True, op.origin), (*a[:-1], 1), f"{op.name}_norm0",
                                op.origin, op.inputs)]
    elif len(op.inputs) == 2 and not op.params and len(a) >= 2 and len(op.in_shapes[1]) == len(a) \
            and a[-1] == op.in_shapes[1][-1] and a[:-2] == op.in_shapes[1][:-2]:
        c = op.in_shapes[1]
        dims = [*range(len(c) - 2), len(c) - 1, len(c) - 2]
        turned = b.add({"kind": "permute", "dims": dims}, (*c[:-2], c[-1], c[-2]), f"{op.name}_turned", op.origin,
                       [op.inputs[1]])
        product = b.add({"kind": "matmul"}, op.out_shape, f"{op.name}_product", op.origin, [op.inputs[0], turned])
        terms = [product, b.add(reduce_layer(-1, a, "l2", True, op.origin), (*a[:-1], 1), f"{op.name}_norm0",
                                op.origin, [op.inputs[0]])]
        norm = b.add(reduce_layer(-1, c, "l2", True, op.origin), (*c[:-1], 1), f"{op.name}_norm1", op.origin,
                     [op.inputs[1]])
        terms.append(b.add({"kind": "permute", "dims": dims}, (*c[:-2], 1, c[-2]), f"{op.name}_norm1_row",
                           op.origin, [norm]))
    else:
        shapes = [list(s) for s in op.in_shapes] + [list(s) for s in op.param_shapes]
        raise _fail(op, f"takes the distances between {shapes} (per sample); dnnbench imports torch.cdist of a layer "
                    "output against a learned (R, M) matrix, or of two layer outputs of (..., P, M) and (..., R, M) "
                    "(distances between the samples of a batch are not one sample's layer)")
    if len(terms) == 3:  # two broadcast terms: added one at a time, as the runner adds them
        terms = [b.add({"kind": "add"}, op.out_shape, f"{op.name}_row_norms", op.origin, terms[:2]), terms[2]]
    return b.add({"kind": "add", "activation": "sqrt"}, op.out_shape, op.name, op.origin, terms)


def _unfold_view(b: SpecBuilder, op: _Op) -> str:
    """``x.unfold(d, k, k)``: the positions along axis d cut into windows of k, the window's axis last
    (a ViT's patches written by hand: ``x.unfold(2, p, p).unfold(3, p, p)``). Without overlap it is a
    view: a ``slice`` of the whole windows where k does not divide the axis, a ``reshape`` and a
    ``permute``; overlapping or spaced windows (a signal's frames) are a ``windows`` layer."""
    one_input(op)
    dim, size, step = op.arg(1, "dimension"), op.arg(2, "size"), op.arg(3, "step")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (dim, size, step)):
        raise _fail(op, f"unfolds with ({dim!r}, {size!r}, {step!r}); dnnbench imports x.unfold(d, k, k) of numbers")
    rank = len(op.in_shape) + 1
    axis = dim % rank - 1
    if axis < 0:
        raise _fail(op, "unfolds the batch axis, which is not one sample's layer")
    if size > op.in_shape[axis] or size < 1 or step < 1:
        raise _fail(op, f"takes windows of {size} every {step} positions of an axis of {op.in_shape[axis]}")
    if step != size:
        return b.add({"kind": "windows", "axis": axis, "size": size, "step": step}, op.out_shape, op.name, op.origin,
                     op.inputs)
    shape = op.in_shape
    count = (shape[axis] - size) // step + 1
    source = op.source
    if count * size != shape[axis]:  # the positions past the last whole window are left out
        shape = (*shape[:axis], count * size, *shape[axis + 1:])
        source = b.add({"kind": "slice", "axis": axis, "start": 0, "stop": count * size}, shape,
                       f"{op.name}_whole", op.origin, [source])
    split = (*shape[:axis], count, size, *shape[axis + 1:])
    source = b.add({"kind": "reshape", "shape": list(split)}, split, f"{op.name}_windows", op.origin, [source])
    order = [d for d in range(len(split)) if d != axis + 1] + [axis + 1]
    return b.add({"kind": "permute", "dims": order}, op.out_shape, op.name, op.origin, [source])


def _affine_grid(b: SpecBuilder, op: _Op) -> str:
    """``F.affine_grid(theta, size)`` of a spatial transformer: θ (2, 3) per sample to an (H, W, 2) grid of
    positions, ``size`` the (N, C, H, W) maps it will sample."""
    one_input(op)
    if op.in_shape != (2, 3) or len(op.out_shape) != 3:
        raise _fail(op, f"makes a grid from {list(op.in_shape)} matrices; dnnbench imports the 2-D affine grid of "
                    "a (2, 3) matrix per sample")
    layer: dict[str, Any] = {"kind": "affine_grid", "size": [int(d) for d in op.out_shape[:2]]}
    if op.arg(2, "align_corners", False):
        layer["align_corners"] = True
    return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)


def _grid_sample(b: SpecBuilder, op: _Op) -> str:
    """``F.grid_sample(maps, grid, mode, padding_mode, align_corners)`` of (C, H, W) maps at an (H', W', 2)
    grid (a spatial transformer's warp)."""
    if len(op.inputs) != 2 or op.params or len(op.in_shapes[0]) != 3:
        raise _fail(op, f"samples {[list(s) for s in op.in_shapes]}; dnnbench imports the sampling of (C, H, W) maps "
                    "(layer outputs) at a grid that is a layer output")
    layer: dict[str, Any] = {"kind": "grid_sample"}
    for index, key, default in ((2, "mode", "bilinear"), (3, "padding_mode", "zeros"), (4, "align_corners", False)):
        value = op.arg(index, key, default)
        if value not in (default, None):
            layer[key] = value
    return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)


def _addcmul(b: SpecBuilder, op: _Op) -> str:
    """``torch.addcmul(beta, alpha, x)``: a learned factor per channel times x, plus a learned value per
    channel (ResMLP's affine layer, ConvNeXt-V2's response norm): a ``scale`` and a ``bias``."""
    if len(op.inputs) == 3 and not op.params and not op.const_shapes:
        return _addcmul_of_outputs(b, op)
    shapes = op.param_shapes
    axis = scale_axis(shapes[0], op.in_shape) if len(shapes) == 2 and shapes[0] == shapes[1] else None
    if len(op.inputs) != 1 or axis is None or op.kwargs.get("value", 1) != 1:
        raise _fail(op, "is not a learned factor per channel times one layer output plus a learned value per "
                    "channel, nor of three layer outputs; dnnbench imports addcmul(beta, alpha, x) and "
                    "addcmul(t, a, b) so")
    scaled = b.add({"kind": "scale", "axis": axis}, op.out_shape, op.name + "_scale", op.origin, op.inputs)
    return b.add({"kind": "bias", "weights": math.prod(shapes[1])}, op.out_shape, op.name, op.origin, [scaled])


def _broadcast(*shapes: Shape) -> Shape:
    """The per-sample shape values of ``shapes`` broadcast to (PyTorch's rule)."""
    import torch

    return tuple(int(d) for d in torch.broadcast_shapes(*shapes))


def _addcmul_of_outputs(b: SpecBuilder, op: _Op) -> str:
    """``torch.addcmul(t, a, b, value=v)``, ``t.addcmul(a, b, value=v)`` of three layer outputs (broadcast
    over each other): t + v·a·b as a ``mul``, a constant factor (v ≠ 1) and an ``add``."""
    t, x, y = op.inputs
    value = op.arg(3, "value", 1)
    shape = _broadcast(op.in_shapes[1], op.in_shapes[2])
    product = b.add({"kind": "mul"}, shape, op.name + "_product", op.origin, [x, y])
    if value != 1:
        product = b.add({"kind": "scale", "learned": False}, shape, op.name + "_value", op.origin, [product])
    return b.add({"kind": "add"}, op.out_shape, op.name, op.origin, [t, product])


def _lerp(b: SpecBuilder, op: _Op) -> str:
    """``torch.lerp(a, b, w)``, ``a.lerp(b, w)`` of two layer outputs: a + w·(b − a), w a number (a
    constant factor) or a third layer output (a ``mul``) broadcast over them (reconstructed: ATen's one
    kernel priced as its three steps)."""
    weight = op.arg(2, "weight")
    if len(op.inputs) not in (2, 3) or op.params or op.const_shapes or (
            len(op.inputs) == 2 and not isinstance(weight, (int, float))):
        raise _fail(op, "interpolates between tensors that are not two layer outputs, or by a weight that is "
                        "neither a number nor a layer output; dnnbench imports lerp(a, b, w) so")
    start, end = op.inputs[:2]
    gap_shape = _broadcast(*op.in_shapes[:2])
    gap = b.add({"kind": "add"}, gap_shape, op.name + "_gap", op.origin, [end, start])  # b − a, priced as an add
    if len(op.inputs) == 3:
        step = b.add({"kind": "mul"}, _broadcast(gap_shape, op.in_shapes[2]), op.name + "_step", op.origin,
                     [gap, op.inputs[2]])
    else:
        step = b.add({"kind": "scale", "learned": False}, gap_shape, op.name + "_step", op.origin, [gap])
    return b.add({"kind": "add"}, op.out_shape, op.name, op.origin, [start, step])


def _baddbmm(b: SpecBuilder, op: _Op) -> str:
    """``torch.baddbmm(t, x, y, beta=, alpha=)`` of three layer
    outputs: beta·t + alpha·(x @ y) as a ``matmul``, constant factors where beta or alpha is not 1, and an
    ``add``; beta = 0 drops t (PyTorch ignores it then)."""
    beta, alpha = op.arg(3, "beta", 1), op.arg(4, "alpha", 1)
    if len(op.inputs) != 3 or op.params or op.const_shapes:
        raise _fail(op, "adds a product to a tensor that is not a layer output, or multiplies one; dnnbench imports "
                        "baddbmm(t, x, y) of three layer outputs")
    t, x, y = op.inputs
    product = b.add({"kind": "matmul"}, op.out_shape, op.name + "_product", op.origin, [x, y])
    if alpha != 1:
        product = b.add({"kind": "scale", "learned": False}, op.out_shape, op.name + "_alpha", op.origin, [product])
    if beta == 0:
        return product
    if beta != 1:
        t = b.add({"kind": "scale", "learned": False}, op.in_shapes[0], op.name + "_beta", op.origin, [t])
    return b.add({"kind": "add"}, op.out_shape, op.name, op.origin, [t, product])


def _diff(b: SpecBuilder, op: _Op) -> str:
    """``torch.diff(x, n, dim)``, ``x.diff(...)``: x[..., 1:] − x[..., :-1] along one axis of a sample, n
    times (two slices and a subtraction each: PyTorch's own composition)."""
    one_input(op)
    n, dim = op.arg(1, "n", 1), op.arg(2, "dim", -1)
    if op.arg(3, "prepend") is not None or op.arg(4, "append") is not None or not isinstance(n, int) or n < 1 \
            or not isinstance(dim, int):
        raise _fail(op, "takes differences with prepend or append, or along an axis or order not given as a "
                        "number; dnnbench imports diff(x, n, dim)")
    axis = dim % (len(op.in_shape) + 1) - 1
    if axis < 0:
        raise _fail(op, "takes differences along the batch axis, which is not one sample's layer")
    shape, source = list(op.in_shape), op.source
    for k in range(n):
        size = shape[axis]
        if size < 2:
            raise _fail(op, f"takes {n} differences along an axis of {op.in_shape[axis]} positions")
        shape[axis] = size - 1
        cut = tuple(shape)
        later = b.add({"kind": "slice", "axis": axis, "start": 1, "stop": size}, cut, f"{op.name}_{k}_later",
                      op.origin, [source])
        earlier = b.add({"kind": "slice", "axis": axis, "start": 0, "stop": size - 1}, cut, f"{op.name}_{k}_earlier",
                        op.origin, [source])
        source = b.add({"kind": "add"}, cut, op.name if k == n - 1 else f"{op.name}_{k}", op.origin, [later, earlier])
    return source


def _index_select(b: SpecBuilder, op: _Op) -> str:
    """``torch.index_select(x, dim, idx)``, ``x.index_select(dim, idx)`` of constant positions (a buffer,
    a constant): as ``x[:, ..., idx]`` (:func:`_gathered`)."""
    one_input(op)
    dim, index = op.arg(1, "dim"), op.arg(2, "index")
    if not isinstance(dim, int) or not _is_positions(index) and not (
            hasattr(index, "dim") and index.dim() == 1 and not index.is_floating_point()):
        raise _fail(op, "selects positions that are not constants along an axis given as a number; dnnbench "
                        "imports index_select(x, dim, idx) of an index buffer or constant")
    dim %= len(op.in_shape) + 1
    if index.numel() == 1:  # one position: a slice of one
        start = int(index.reshape(-1)[0]) % op.in_shape[dim - 1] if dim else 0
        if dim:
            return b.add({"kind": "slice", "axis": dim - 1, "start": start, "stop": start + 1}, op.out_shape,
                         op.name, op.origin, op.inputs)
    return _gathered(b, op, (*([slice(None)] * dim), index))


def _index_add(b: SpecBuilder, op: _Op) -> str:
    """``torch.index_add(base, dim, idx, values, alpha=)``, ``base.index_add(...)``, ``base.index_add_(...)``
    of two layer outputs (``base`` may be ``torch.zeros_like(x)``) and constant positions: a
    ``scatter_add`` (a graph's messages summed at their target nodes), the values scaled first where alpha
    is not 1."""
    index = op.arg(2, "index")
    positions = hasattr(index, "dim") and index.dim() == 1 and not index.is_floating_point()
    expected = "dnnbench imports index_add(base, dim, idx, values) of layer outputs and an index buffer or constant"
    return _scatter_layer(b, op, index.tolist() if positions else None, "sum", True, op.arg(4, "alpha", 1),
                          expected)


#: The scatters whose index the importer reads as constant positions.
_SCATTERS = ("scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_")

#: The reductions of ``scatter_reduce`` and ``index_reduce`` a ``scatter_add`` layer has.
_SCATTER_REDUCTIONS = ("sum", "mean", "amax", "amin", "prod")


def _index_reduce(b: SpecBuilder, op: _Op) -> str:
    """``base.index_reduce(dim, idx, values, reduce, include_self=)`` (and ``index_reduce_``) of layer
    outputs and constant positions: a ``scatter_add`` layer with that ``reduce`` (a graph's messages
    averaged or maximised at their target nodes)."""
    index, reduce = op.arg(2, "index"), op.arg(4, "reduce")
    positions = hasattr(index, "dim") and index.dim() == 1 and not index.is_floating_point()
    expected = ("dnnbench imports index_reduce(dim, idx, values, reduce) of layer outputs, an index buffer or "
                "constant and a reduction of " + ", ".join(_SCATTER_REDUCTIONS[1:]))
    return _scatter_layer(b, op, index.tolist() if positions else None, reduce, op.arg(5, "include_self", True), 1,
                          expected)


def _scatter_positions(op: _Op) -> list[int] | None:
    """The positions along the scatter's axis of a ``scatter_add``/``scatter_reduce`` index that is a
    constant of the values' shape (batch included) and the same at every other coordinate
    (``idx.view(1, -1, 1).expand_as(values)``), as a list; None for any other index."""
    import torch

    index, dim = op.arg(2, "index"), op.arg(1, "dim")
    if (not isinstance(index, torch.Tensor) or index.is_floating_point() or index.device.type == "meta"
            or isinstance(dim, bool) or not isinstance(dim, int) or not op.in_shapes
            or index.dim() != len(op.in_shapes[-1]) + 1 or tuple(index.shape[1:]) != tuple(op.in_shapes[-1])):
        return None
    rows = index.movedim(dim % index.dim(), -1).reshape(-1, index.shape[dim % index.dim()])
    return rows[0].tolist() if bool((rows == rows[0]).all()) else None


def _scatter(reduced: bool) -> Callable[[SpecBuilder, _Op], str]:
    """The handler of ``base.scatter_add(dim, index, values)`` (``scatter_add_``, ``torch.scatter_add``)
    and, ``reduced``, of ``scatter_reduce(dim, index, values, reduce, include_self=)``: a ``scatter_add``
    layer where the index is a constant that, like an ``index_add``'s, names one position along the axis
    for each of the values' positions there (``idx.view(1, -1, 1).expand_as(values)``: a graph's edges'
    target nodes)."""
    def handle(b: SpecBuilder, op: _Op) -> str:
        call = "scatter_reduce(dim, index, values, reduce)" if reduced else "scatter_add(dim, index, values)"
        expected = (f"dnnbench imports {call} of layer outputs and a constant index of the values' shape that "
                    "is the same at every position but along the axis (one target per position there)")
        if reduced:
            reduce, include_self = op.arg(4, "reduce"), op.arg(5, "include_self", True)
        else:
            reduce, include_self = "sum", True
        return _scatter_layer(b, op, _scatter_positions(op), reduce, include_self, 1, expected, per_value=True)
    return handle


def _scatter_layer(b: SpecBuilder, op: _Op, positions: list[int] | None, reduce: Any, include_self: Any,
                   alpha: Any, expected: str, per_value: bool = False) -> str:
    """A ``scatter_add`` layer of the base (argument 0; a ``zeros`` layer where it is a constant:
    ``torch.zeros_like(h)``) and the values (argument 3) at ``positions`` along the axis ``dim`` (argument
    1), reduced by ``reduce``, the values scaled first where ``alpha`` is not 1; ``per_value``: by
    PyTorch's kernel that reads an index per value (``index_per_value``)."""
    dim = op.arg(1, "dim")
    zeros = 0 in op.const_at  # the base a constant (torch.zeros_like(h)): a zeros layer of its shape
    if (len(op.inputs) != (1 if zeros else 2) or op.params or positions is None or isinstance(dim, bool)
            or not isinstance(dim, int)):
        raise _fail(op, "takes values that are not a layer output, or positions that are not constants; " + expected)
    if reduce not in _SCATTER_REDUCTIONS or not isinstance(include_self, bool):
        raise _fail(op, f"reduces by {reduce!r} (include_self={include_self!r}); " + expected)
    axis = dim % (len(op.out_shape) + 1) - 1
    if axis < 0:
        raise _fail(op, "adds along the batch axis, which is not one sample's layer")
    if zeros:
        base = b.add({"kind": "zeros", "shape": list(op.out_shape)}, op.out_shape, f"{op.name}_base", op.origin,
                     [op.source])
        values = op.source
        op = replace(op, in_shapes=[op.out_shape, op.in_shape])
    else:
        base, values = op.inputs
    if alpha != 1:
        values = b.add({"kind": "scale", "learned": False}, op.in_shapes[1], op.name + "_alpha", op.origin, [values])
    size = op.out_shape[axis]
    layer: dict[str, Any] = {"kind": "scatter_add", "axis": axis, "index": [int(p) % size for p in positions]}
    if reduce != "sum":
        layer["reduce"] = reduce
    if not include_self:
        layer["include_self"] = False
    if per_value:
        layer["index_per_value"] = True
    return b.add(layer, op.out_shape, op.name, op.origin, [base, values])


def _mean_of_tokens(b: SpecBuilder, op: _Op) -> str:
    """``x.mean(1)`` of an (S, D) sequence (MLP-Mixer's head): global average pooling over the tokens,
    as a view of the tokens as the map of each feature (permute, reshape (D, S, 1)), then a pool."""
    s, d = op.in_shape
    tokens = b.add({"kind": "permute", "dims": [1, 0]}, (d, s), op.name + "_features", op.origin, op.inputs)
    maps = b.flatten((d, s), (d, s, 1), op.name + "_maps", op.origin, tokens)
    pooled = b.adaptive_pool("avg", (d, s, 1), (d, 1, 1), op.name, op.origin, maps)
    return b.flatten((d, 1, 1), op.out_shape, op.name + "_flatten", op.origin, pooled)


def _reorder(b: SpecBuilder, op: _Op, dims: list[int]) -> str:
    if dims[0] != 0:
        raise _fail(op, "moves the batch axis; dnnbench permutes one sample's axes only")
    per_sample = [d - 1 for d in dims[1:]]
    if per_sample == list(range(len(per_sample))):
        return op.source
    return b.add({"kind": "permute", "dims": per_sample}, op.out_shape, op.name, op.origin, op.inputs)


def _permute(b: SpecBuilder, op: _Op) -> str:
    """``x.permute(0, 2, 1)``, ``x.permute((0, 2, 1))`` or ``torch.permute(x, (0, 2, 1))``."""
    one_input(op)
    rank = len(op.in_shape) + 1
    dims = op.kwargs.get("dims", op.args[1] if len(op.args) == 2 else op.args[1:])
    return _reorder(b, op, [int(d) % rank for d in dims])


def _transpose(b: SpecBuilder, op: _Op) -> str:
    """``x.transpose(1, 2)`` or ``torch.transpose(x, 1, 2)``."""
    one_input(op)
    rank = len(op.in_shape) + 1
    i, j = (int(op.arg(1, "dim0")) % rank, int(op.arg(2, "dim1")) % rank)
    order = list(range(rank))
    order[i], order[j] = order[j], order[i]
    return _reorder(b, op, order)


def _picks(index: Any, in_shape: Shape) -> tuple[int, Any] | None:
    """(per-sample axis, what it takes) of ``x[:, ..., pick, ...]`` that takes part of one axis and all of
    the others (the batch axis whole), else None."""
    if not isinstance(index, tuple) or not index:
        return None
    full = list(index)
    if full.count(Ellipsis) == 1:
        at = full.index(Ellipsis)
        full[at:at + 1] = [slice(None)] * (len(in_shape) + 2 - len(full))
    if Ellipsis in full or len(full) > len(in_shape) + 1 or full[0] != slice(None):
        return None
    rest = full[1:]
    picked = [(i, r) for i, r in enumerate(rest) if r != slice(None)]
    if len(picked) != 1:
        return None
    return picked[0]


#: The most runs of consecutive positions an index of constant positions is imported as, each a slice
#: layer joined by a concat; more (a graph's edges' nodes) are one ``gather`` layer of every position.
SLICED_RUNS = 16


def _is_positions(p: Any) -> bool:
    """Whether an index entry is constant positions: a tensor of integers, or a list of several."""
    import torch

    return (isinstance(p, torch.Tensor) and p.dim() > 0 and not p.is_floating_point() and p.dtype != torch.bool
            or isinstance(p, list) and len(p) > 1 and all(isinstance(v, int) for v in p))


def _gathered(b: SpecBuilder, op: _Op, index: tuple[Any, ...]) -> str:
    """``x[:, li, lj]`` with constant positions (index tensors the forward builds from constants, such
    as DLRM's pairs ``torch.tril_indices``, or holds as buffers; a list of positions) on adjacent axes
    after the batch: those axes viewed as one, each run of consecutive positions a slice of it, the runs joined
    (a concat: one copy of every value picked, as PyTorch's gather makes), viewed as the result; more than
    SLICED_RUNS runs, one ``gather`` layer of the positions."""
    import numpy as np
    import torch

    shape = op.in_shape
    full = list(index)
    if full.count(Ellipsis) == 1:
        at = full.index(Ellipsis)
        full[at:at + 1] = [slice(None)] * (len(shape) + 2 - len(full))
    if not full or not isinstance(full[0], slice) or full[0] != slice(None):
        raise _fail(op, "indexes the batch axis with positions; dnnbench imports positions of one sample's axes "
                    "(x[:, idx], x[:, li, lj])")
    rest = full[1:] + [slice(None)] * (len(shape) - len(full) + 1)
    arrays: list[Any] = []
    axes: list[int] = []
    for a, p in enumerate(rest):
        if _is_positions(p):
            values = np.asarray(p.detach().cpu().numpy() if isinstance(p, torch.Tensor) else p)
            arrays.append(values.astype(np.int64) % shape[a])
            axes.append(a)
        elif not (isinstance(p, slice) and p == slice(None)):
            raise _fail(op, f"indexes a tensor with {index!r}; dnnbench imports positions (index tensors, lists) "
                        "beside whole axes only")
    if axes != list(range(axes[0], axes[0] + len(axes))):
        raise _fail(op, f"picks positions of axes {axes} that are not next to each other; dnnbench imports "
                    "positions of adjacent axes (x[:, li, lj])")
    picked = np.broadcast_arrays(*arrays)
    dims = tuple(int(shape[a]) for a in axes)
    flat = np.ravel_multi_index(tuple(picked), dims).reshape(-1)
    k = axes[0]
    pre, post = tuple(shape[:k]), tuple(shape[k + len(axes):])
    if tuple(op.out_shape) != (*pre, *picked[0].shape, *post) or flat.size == 0:
        raise _fail(op, f"indexes a tensor with {index!r}, a result of shape {list(op.out_shape)} dnnbench does not "
                    "import")
    breaks = np.flatnonzero(np.diff(flat) != 1) + 1
    runs = [(int(r[0]), int(r[-1]) + 1) for r in np.split(flat, breaks)]
    merged = (*pre, math.prod(dims), *post)
    source = b.flatten(shape, merged, op.name + "_positions", op.origin, op.source)
    joined_shape = (*pre, int(flat.size), *post)
    if len(runs) > SLICED_RUNS:
        gathered = b.add({"kind": "gather", "axis": k, "index": [int(p) for p in flat]}, joined_shape, op.name,
                         op.origin, [source])
        return b.flatten(joined_shape, op.out_shape, op.name + "_view", op.origin, gathered)
    pieces = [source if (start, stop) == (0, merged[k]) else
              b.add({"kind": "slice", "axis": k, "start": start, "stop": stop}, (*pre, stop - start, *post),
                    f"{op.name}_{start}", op.origin, [source]) for start, stop in runs]
    joined = pieces[0] if len(pieces) == 1 else b.add({"kind": "concat", "axis": k}, joined_shape, op.name,
                                                      op.origin, pieces)
    return b.flatten(joined_shape, op.out_shape, op.name + "_view", op.origin, joined)


def _getitem(b: SpecBuilder, op: _Op) -> str:
    """``x[:, i]`` on an (S, D) sequence (one token); ``x[:, a:b]``, ``x[:, [-1], :]``, ``x[..., a:b]``: the
    positions of one axis (a slice layer; an integer index also drops the axis)."""
    one_input(op)
    index = op.args[1] if len(op.args) > 1 else None
    if index is None or isinstance(index, tuple) and any(p is None for p in index):
        return _new_axes(b, op, index if isinstance(index, tuple) else (index,))
    if (isinstance(index, tuple) and len(index) == 2 and index[0] == slice(None) and isinstance(index[1], int)
            and len(op.in_shape) == 2):
        return b.add({"kind": "select_token", "index": int(index[1])}, op.out_shape, op.name, op.origin, op.inputs)
    if _is_positions(index) or isinstance(index, tuple) and any(_is_positions(p) for p in index):
        return _gathered(b, op, index if isinstance(index, tuple) else (index,))
    picked = _picks(index, op.in_shape)
    if picked is not None:
        axis, pick = picked
        size = op.in_shape[axis]
        if isinstance(pick, list) and len(pick) == 1 and isinstance(pick[0], int):
            pick = slice(pick[0] % size, pick[0] % size + 1)
        if isinstance(pick, int):
            start = pick % size
            sliced = b.add({"kind": "slice", "axis": axis, "start": start, "stop": start + 1},
                           (*op.in_shape[:axis], 1, *op.in_shape[axis + 1:]), op.name, op.origin, op.inputs)
            return b.flatten((*op.in_shape[:axis], 1, *op.in_shape[axis + 1:]), op.out_shape, op.name + "_view",
                             op.origin, sliced)
        if isinstance(pick, slice) and pick.step in (None, 1):
            start, stop, _ = pick.indices(size)
            if stop <= start:
                raise _fail(op, f"takes no positions of axis {axis} ({index!r})")
            if (start, stop) == (0, size):
                return op.source
            return b.add({"kind": "slice", "axis": axis, "start": start, "stop": stop}, op.out_shape, op.name,
                         op.origin, op.inputs)
    slices = _slices(index, op.in_shape)
    if slices is not None:
        return _sliced(b, op, slices)
    raise _fail(op, f"indexes a tensor with {index!r}; dnnbench imports x[:, i] on an (S, D) sequence (one token), "
                "contiguous positions of one axis (x[:, a:b], x[:, [-1], :], x[..., a:b]) and slices of several "
                "axes, every k-th position of an axis whose size k divides (x[..., 0::2, 1::2, :])")


def _new_axes(b: SpecBuilder, op: _Op, index: tuple[Any, ...]) -> str:
    """``x[:, :, None, None]``, ``x[..., None]``, ``x[None]`` on what the batch axis is not: the indexing
    without its new axes (as :func:`_getitem` takes it), then a view that inserts them."""
    import torch

    if index and index[0] is None:
        raise _fail(op, f"indexes a tensor with {index!r}, a new axis before the batch; dnnbench imports new "
                    "axes after it (x[:, None], x[..., None])")
    rest = tuple(p for p in index if p is not None)
    picked = tuple(torch.empty((1, *op.in_shape), device="meta")[rest].shape[1:])
    source = op.source
    if rest and not all(p == slice(None) or p is Ellipsis for p in rest):
        source = _getitem(b, replace(op, args=(op.args[0], rest if len(rest) > 1 else rest[0]),
                                     out_shape=picked))
    if picked == op.out_shape:
        return source
    return b.flatten(picked, op.out_shape, op.name + "_axes", op.origin, source)


def _slices(index: Any, in_shape: Shape) -> list[slice] | None:
    """One slice per per-sample axis of ``x[:, s1, s2, ...]`` (an Ellipsis allowed) when every entry is a
    slice and the batch axis is taken whole, else None."""
    if not isinstance(index, tuple):
        return None
    full = list(index)
    if full.count(Ellipsis) == 1:
        at = full.index(Ellipsis)
        full[at:at + 1] = [slice(None)] * (len(in_shape) + 2 - len(full))
    full += [slice(None)] * (len(in_shape) + 1 - len(full))
    if len(full) != len(in_shape) + 1 or full[0] != slice(None) or not all(isinstance(p, slice) for p in full):
        return None
    return full[1:]


def _sliced(b: SpecBuilder, op: _Op, slices: list[slice]) -> str:
    """``x[..., a:b, c::k, :]``: contiguous positions of any axes (a slice layer each), and every k-th
    position of an axis whose size k divides (a view that splits the axis into (size / k, k), a slice of
    one position of k, a view without it: PatchMerging's and YOLO's space-to-depth ``x[..., 0::2, 1::2, :]``,
    a view forward as in torch); of any other axis by :func:`_every_kth`."""
    shape, source, split, picks = list(op.in_shape), op.source, [], []
    for axis, (size, pick) in enumerate(zip(op.in_shape, slices, strict=True)):
        start, stop, step = pick.indices(size)
        if step == 1:
            if stop <= start:
                raise _fail(op, f"takes no positions of axis {axis}")
            if (start, stop) != (0, size):
                source = b.add({"kind": "slice", "axis": axis, "start": start, "stop": stop},
                               (*shape[:axis], stop - start, *shape[axis + 1:]), f"{op.name}_{axis}", op.origin,
                               [source])
                shape[axis] = stop - start
            split.append((shape[axis],))
            continue
        if step < 1:
            raise _fail(op, f"takes positions of axis {axis} with step {step}")
        if size % step or start >= step or stop < size:  # LeViT's x[:, ::2] of 7 positions
            if len(shape) + 1 > MAX_VIEW_AXES:
                raise _fail(op, f"takes every {step} positions of a sample with {len(shape)} axes; dnnbench's views "
                            f"have at most {MAX_VIEW_AXES}")
            source = _every_kth(b, op, source, tuple(shape), axis, start, stop, step)
            shape[axis] = len(range(start, stop, step))
            split.append((shape[axis],))
            continue
        split.append((size // step, step))
        picks.append((len([d for part in split for d in part]) - 1, start))
    if not picks:
        return source
    views = tuple(d for part in split for d in part)
    if len(views) > MAX_VIEW_AXES:
        raise _fail(op, f"views one sample with {len(views)} axes to take every k-th position; dnnbench's views "
                    f"have at most {MAX_VIEW_AXES}")
    source = b.flatten(tuple(shape), views, f"{op.name}_split", op.origin, source)
    cut = list(views)
    for axis, start in picks:
        cut[axis] = 1
        source = b.add({"kind": "slice", "axis": axis, "start": start, "stop": start + 1}, tuple(cut),
                       f"{op.name}_every_{axis}", op.origin, [source])
    return b.flatten(tuple(cut), op.out_shape, op.name, op.origin, source)


def _every_kth(b: SpecBuilder, op: _Op, source: str, shape: Shape, axis: int, start: int, stop: int,
               step: int) -> str:
    """Positions ``start``, ``start + step``, … below ``stop`` of one axis of any size: the whole groups of
    ``step`` positions (a slice, a view that splits them off, a slice of each group's first, a view
    without the groups' axis), and the first position of a last, incomplete group (a slice), joined to
    them (a concat)."""
    size, count = shape[axis], len(range(start, stop, step))

    def with_axis(*sizes: int) -> Shape:
        return (*shape[:axis], *sizes, *shape[axis + 1:])

    whole = count if start + step * count <= size else count - 1  # groups whose every position exists
    pieces = []
    if whole:
        span = source
        if (start, start + step * whole) != (0, size):
            span = b.add({"kind": "slice", "axis": axis, "start": start, "stop": start + step * whole},
                         with_axis(step * whole), f"{op.name}_{axis}_groups", op.origin, [source])
        grouped = b.flatten(with_axis(step * whole), with_axis(whole, step), f"{op.name}_{axis}_split", op.origin,
                            span)
        first = b.add({"kind": "slice", "axis": axis + 1, "start": 0, "stop": 1}, with_axis(whole, 1),
                      f"{op.name}_{axis}_every", op.origin, [grouped])
        pieces.append(b.flatten(with_axis(whole, 1), with_axis(whole), f"{op.name}_{axis}_picked", op.origin, first))
    if whole < count:
        last = start + step * whole
        pieces.append(b.add({"kind": "slice", "axis": axis, "start": last, "stop": last + 1}, with_axis(1),
                            f"{op.name}_{axis}_last", op.origin, [source]))
    if len(pieces) == 1:
        return pieces[0]
    return b.add({"kind": "concat", "axis": axis}, with_axis(count), f"{op.name}_{axis}", op.origin, pieces)


def _roll(b: SpecBuilder, op: _Op) -> str:
    """``torch.roll(x, shifts, dims)`` (Swin's shifted windows): per rolled axis, its two pieces (slices)
    joined in the other order (a concat): one copy of every value each way, as torch.roll."""
    one_input(op)
    shifts, dims = op.arg(1, "shifts"), op.arg(2, "dims")
    if dims is None or dims == ():
        raise _fail(op, "rolls the flattened tensor; dnnbench imports rolls along a sample's axes (dims=...)")
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    rank = len(op.in_shape) + 1
    shape, source = op.in_shape, op.source
    for shift, dim in zip(shifts, dims, strict=True):
        axis = int(dim) % rank - 1
        if axis < 0:
            raise _fail(op, "rolls the batch axis, which is not one sample's layer")
        size = shape[axis]
        cut = size - int(shift) % size  # the output starts at position cut of the input
        if cut == size:
            continue
        head = b.add({"kind": "slice", "axis": axis, "start": cut, "stop": size},
                     (*shape[:axis], size - cut, *shape[axis + 1:]), f"{op.name}_{axis}_head", op.origin, [source])
        tail = b.add({"kind": "slice", "axis": axis, "start": 0, "stop": cut},
                     (*shape[:axis], cut, *shape[axis + 1:]), f"{op.name}_{axis}_tail", op.origin, [source])
        source = b.add({"kind": "concat", "axis": axis}, shape, f"{op.name}_{axis}", op.origin, [head, tail])
    return source


def _written(b: SpecBuilder, op: _Op) -> str:
    """A buffer of zeros after writes at constant positions of one axis (:func:`_written_buffer`: a loop's
    ``outputs[:, t] = o``): each written value viewed with that axis of one position, zeros at the
    positions no write reached, joined along it (a concat), as ``torch.stack`` of the values."""
    axis, positions = int(op.args[1]) - 1, list(op.args[2])
    one = (*op.out_shape[:axis], 1, *op.out_shape[axis + 1:])
    value_shape = (*op.out_shape[:axis], *op.out_shape[axis + 1:])
    if any(tuple(s) != value_shape for s in op.in_shapes) or len(op.inputs) != len(positions):
        raise _fail(op, f"writes values of {[list(s) for s in op.in_shapes]} into positions of axis {axis + 1} of a "
                    f"{list(op.out_shape)} buffer; dnnbench imports writes of whole positions (outputs[:, t] = o)")
    by_position = dict(zip(positions, op.inputs, strict=True))
    pieces = []
    for p in range(op.out_shape[axis]):
        if p in by_position:
            pieces.append(b.flatten(value_shape, one, f"{op.name}_{p}", op.origin, by_position[p]))
        else:
            pieces.append(b.add({"kind": "zeros", "shape": list(one)}, one, f"{op.name}_zeros{p}", op.origin,
                                [op.source]))
    if len(pieces) == 1:
        return pieces[0]
    return b.add({"kind": "concat", "axis": axis}, op.out_shape, op.name, op.origin, pieces)


def _stack(b: SpecBuilder, op: _Op) -> str:
    """``torch.stack([a, b], dim)`` of layer outputs of one shape: each viewed with a new axis of one
    position (a reshape), joined along it (a concat)."""
    if op.params:
        raise _fail(op, "stacks a learned tensor; dnnbench imports stacks of layer outputs (and of constants)")
    rank = len(op.out_shape) + 1
    axis = int(op.arg(1, "dim", 0)) % rank - 1
    if axis < 0:
        raise _fail(op, "stacks along the batch axis, which is not one sample's layer")
    shape = op.in_shapes[0]
    one = (*shape[:axis], 1, *shape[axis:])
    sources = _with_constants(b, op, len(shape), "stacks")  # torch.stack([h, torch.zeros_like(h)], 1)
    pieces = [b.flatten(shape, one, f"{op.name}_{i}", op.origin, source) for i, source in enumerate(sources)]
    if len(pieces) == 1:
        return pieces[0]
    return b.add({"kind": "concat", "axis": axis}, op.out_shape, op.name, op.origin, pieces)


def _neg(b: SpecBuilder, op: _Op) -> str:
    """``-x``, ``torch.neg(x)`` (rotary embeddings' rotate_half): a constant factor of -1."""
    one_input(op)
    return b.add({"kind": "scale", "learned": False}, op.out_shape, op.name, op.origin, op.inputs)


def _batch_norm_1d(b: SpecBuilder, op: _Op) -> str:
    """``nn.BatchNorm1d`` of (C,) vectors or (C, L) sequences; of (N, C) values whose N positions a view
    folded into the batch (LeViT's ``bn(x.flatten(0, 1))``), the same between two permutes, so that the
    channels are the layer's first axis."""
    one_input(op)
    c = int(op.module.num_features)
    if len(op.in_shape) == 2 and op.in_shape[0] != c and op.in_shape[1] == c:
        n = op.in_shape[0]
        channels = b.add({"kind": "permute", "dims": [1, 0]}, (c, n), op.name + "_channels", op.origin, op.inputs)
        normed = b.add(_batchnorm_layer(bool(op.module.affine)), (c, n), op.name, op.origin, [channels])
        return b.add({"kind": "permute", "dims": [1, 0]}, op.out_shape, op.name + "_positions", op.origin, [normed])
    return b.add(_batchnorm_layer(bool(op.module.affine)), op.out_shape, op.name, op.origin, op.inputs)


def _flip(b: SpecBuilder, op: _Op) -> str:
    """``torch.flip(x, dims)``, ``x.flip(dims)``, ``torch.fliplr``, ``torch.flipud``: the values copied in
    reverse order along axes of one sample (one copy whatever the axes): a ``repeat`` of one copy along
    the first of them, which costs that copy each way."""
    one_input(op)
    dims = op.arg(1, "dims", None)
    if dims is None:  # fliplr: axis 1; flipud: axis 0 (of the value with the batch in front)
        dims = [1] if "fliplr" in op.origin else [0]
    dims = [dims] if isinstance(dims, int) else list(dims)
    rank = len(op.in_shape) + 1
    axes = sorted({int(d) % rank for d in dims}) if all(isinstance(d, int) for d in dims) else []
    if not axes or axes[0] == 0:
        raise _fail(op, f"flips axes {dims!r}; dnnbench imports flips of a sample's axes, not the batch's")
    return b.add({"kind": "repeat", "axis": axes[0] - 1, "times": 1}, op.out_shape, op.name, op.origin, op.inputs)


def _piecewise_constant(b: SpecBuilder, op: _Op) -> str:
    """``torch.round``, ``floor``, ``ceil``, ``trunc``, ``sign`` (a quantiser, before its straight-through
    ``.detach()``): one operation per value, and a gradient of zeros: priced as a ``compare`` (one
    operation per value forward, no gradient back through it)."""
    one_input(op)
    if op.arg(1, "decimals", 0):
        raise _fail(op, "rounds to decimals; dnnbench imports torch.round of whole numbers")
    return b.add({"kind": "compare", "op": "ne", "value": 0.0}, op.out_shape, op.name, op.origin, op.inputs)


def _triangle(b: SpecBuilder, op: _Op) -> str:
    """``torch.tril(x, diagonal)``, ``x.triu(...)`` (and the in-place forms) of layer outputs: the values
    outside the triangle zeroed, which is a product with a constant mask (a causal mask applied to scores):
    priced as ``masked_fill`` by a constant mask is, a constant factor (one op per value each way)."""
    one_input(op)
    if len(op.in_shape) + 1 - op.batch_axis < 3:
        raise _fail(op, f"keeps a triangle of a {list(op.in_shape)} value, whose last two axes include the batch; "
                        "dnnbench imports tril and triu of each sample's matrices")
    return b.add({"kind": "scale", "learned": False}, op.out_shape, op.name, op.origin, op.inputs)


def _detach(b: SpecBuilder, op: _Op) -> str:
    """``x.detach()``, ``torch.detach(x)``: the same values, no gradient back through them (a
    straight-through estimator, a stopped branch): a ``stop_gradient`` layer."""
    one_input(op)
    return b.add({"kind": "stop_gradient"}, op.out_shape, op.name, op.origin, op.inputs)


def _reshape_as(b: SpecBuilder, op: _Op) -> str:
    """``x.reshape_as(y)``, ``x.view_as(y)``: a view of x to y's shape (y itself is not read)."""
    return b.flatten(op.in_shape, op.out_shape, op.name, op.origin, op.source)


def _normalize(b: SpecBuilder, op: _Op) -> str:
    """``F.normalize(x, dim=-1)`` (Swin-V2's cosine attention, L2 by default): a normalisation over the last
    axis without a scale and shift, counted as a layer norm without its affine part."""
    one_input(op)
    dim = int(op.arg(2, "dim", 1))
    if dim % (len(op.in_shape) + 1) != len(op.in_shape):
        raise _fail(op, f"normalises along axis {dim}; dnnbench imports F.normalize over the last axis")
    return b.add({"kind": "layer_norm", "affine": False}, op.out_shape, op.name, op.origin, op.inputs)


def _matmul(b: SpecBuilder, op: _Op) -> str:
    """``a @ b``, ``torch.matmul(a, b)``, ``torch.bmm(a, b)`` of two layer outputs (attention written by hand:
    ``q @ k.transpose(-2, -1)``, ``att @ v``); or of one layer output and a learned matrix, an fc layer
    without a bias along the axis the product sums over: ``x @ W`` (W of (in, out): the last axis) and
    ``W @ x`` (W of (out, in): the last axis but one)."""
    if len(op.inputs) == 1 and op.params and len(op.param_shapes) == 1 and len(op.param_shapes[0]) == 2 \
            and op.param_at in ((0,), (1,)):
        rows, cols = op.param_shapes[0]
        if op.param_at == (1,) and op.in_shape[-1] == rows:
            return _fc_along(b, op, len(op.in_shape) - 1, cols)
        if op.param_at == (0,) and len(op.in_shape) >= 2 and op.in_shape[-2] == cols:
            return _fc_along(b, op, len(op.in_shape) - 2, rows)
    if len(op.inputs) == 1 and not op.params and len(op.const_shapes) == 1 and op.const_at in ((0,), (1,)):
        table = _constant_per_sample(op.const_shapes[0], len(op.in_shape))
        if table is not None and len(table) >= 2:  # a fixed matrix (a graph's adjacency, A @ x): no weights
            constant = b.add({"kind": "zeros", "shape": list(table)}, table, f"{op.name}_constant", op.origin,
                             op.inputs)
            return b.add({"kind": "matmul"}, op.out_shape, op.name, op.origin,
                         [constant, op.source] if op.const_at == (0,) else [op.source, constant])
    if len(op.inputs) != 2 or op.params:
        raise _fail(op, "multiplies a layer output by a tensor that is neither another layer output, a learned "
                    "matrix (x @ W, W @ x) nor a matrix of constants; dnnbench imports products of two layer "
                    "outputs, of one layer output and a 2-D parameter, and of one and a buffer (A @ x)")
    return b.add({"kind": "matmul"}, op.out_shape, op.name, op.origin, op.inputs)


def _constant_per_sample(shape: Shape, rank: int) -> Shape | None:
    """The per-sample shape, of ``rank`` axes, a constant of torch ``shape`` broadcasts as beside a layer
    output of that many axes per sample (leading axes of 1 added, or a leading 1 in front of the batch
    taken off); None where it would broadcast over the batch."""
    shape = tuple(int(d) for d in shape)
    if len(shape) <= rank:
        return (1,) * (rank - len(shape)) + shape
    if len(shape) == rank + 1 and shape[0] == 1:
        return shape[1:]
    return None


def _fc_along(b: SpecBuilder, op: _Op, axis: int, out_features: int) -> str:
    """An fc layer without a bias over ``axis`` of the input (a product with a learned matrix): the axis
    moved last (a permute), the fc on every position, and moved back."""
    last = len(op.in_shape) - 1
    if axis == last:
        return _fc_on(b, op, out_features, False)
    dims = [d for d in range(len(op.in_shape)) if d != axis] + [axis]
    moved = tuple(op.in_shape[d] for d in dims)
    source = b.add({"kind": "permute", "dims": dims}, moved, f"{op.name}_in", op.origin, op.inputs)
    product = (*moved[:-1], out_features)
    fc = _fc_on(b, replace(op, in_shape=moved, in_shapes=[moved], out_shape=product, inputs=[source]),
                out_features, False)
    back = [dims.index(d) for d in range(len(dims))]
    return b.add({"kind": "permute", "dims": back}, op.out_shape, f"{op.name}_out", op.origin, [fc])


def _einsum(b: SpecBuilder, op: _Op) -> str:
    """``torch.einsum`` of two layer outputs that is a batched matrix product (MaxViT's
    ``einsum("B G H I D, B G H J D -> B G H I J", q, k)``): :func:`einsum_product`; or of one layer output
    and a learned matrix that sums one of its axes into a new one in its place (``"bni,io->bno"``,
    ``"...i,oi->...o"``): an fc layer without a bias along that axis."""
    if op.params:
        return _einsum_learned(b, op)
    equation = str(op.args[0]).replace(" ", "")
    if "->" in equation and "." not in equation and len(op.inputs) >= 2:
        ins, out = equation.split("->")
        terms = ins.split(",")
        if (len(terms) == len(op.inputs) and all(i in out for t in terms for i in t) and len(set(out)) == len(out)
                and all(t and t[0] == out[0] and len(t) == len(s) + 1 for t, s in zip(terms, op.in_shapes,
                                                                                   strict=True))):
            # nothing summed (a state space model's 'bld,bln,bld->bldn'): PyTorch multiplies the operands,
            # broadcast over each other, one pair at a time
            product = op.inputs[0]
            order = [i for i in out[1:] if i in terms[0][1:]]
            shape = tuple(op.in_shapes[0][terms[0][1:].index(i)] for i in order)
            for k in range(1, len(terms)):
                last = k == len(terms) - 1
                seen = set("".join(terms[:k + 1]))
                sub = "".join(i for i in out[1:] if i in seen)
                step = replace(op, name=op.name if last else f"{op.name}_{k}",
                               out_shape=op.out_shape if last else tuple(
                                   max([op.in_shapes[j][terms[j][1:].index(i)] for j in range(k + 1)
                                        if i in terms[j][1:]]) for i in sub))
                product = _broadcast_product(b, step, [("".join(order), product, shape),
                                                       (terms[k][1:], op.inputs[k], op.in_shapes[k])], sub)
                order, shape = list(sub), step.out_shape
            return product
    return einsum_product(b, equation, op.inputs, op.in_shapes, op.out_shape, op.name, op.origin)


def _einsum_learned(b: SpecBuilder, op: _Op) -> str:
    """:func:`_einsum` with a learned operand: an fc layer where it is a matrix that sums one axis of the
    layer output's into a new one in its place, else :func:`_einsum_with_table`."""
    equation = str(op.args[0]).replace(" ", "")
    try:
        return _einsum_fc(b, op, equation)
    except SpecError:
        made = _einsum_with_table(b, op, equation)
        if made is None:
            raise
        return made


def _einsum_with_table(b: SpecBuilder, op: _Op, equation: str) -> str | None:
    """``torch.einsum`` of a layer output and a learned tensor of any other form that is a product of the
    two ('bld,dn->bldn': a state space model's input spread over its states by a learned matrix;
    'bld,d->bl', 'bld,ld->bd'): the tensor as a layer of its own (:func:`_learned_table`), given the
    batch's index, and the product of the two layer outputs (:func:`einsum_product`); None where the
    equation is not of that form (an ellipsis, the batch's index in the learned operand)."""
    if "->" not in equation or "." in equation or len(op.inputs) != 1 or len(op.param_shapes) != 1:
        return None
    ins, out = equation.split("->")
    terms = ins.split(",")
    shape = tuple(op.param_shapes[0])
    if len(terms) != 2 or op.param_at not in ((0,), (1,)) or math.prod(shape) != op.params:
        return None
    learned, data = terms[op.param_at[0]], terms[1 - op.param_at[0]]
    if len(learned) != len(shape) or len(data) != len(op.in_shape) + 1 or not data or data[0] in learned:
        return None
    table = _learned_table(b, op, shape)
    if all(i in out for i in data + learned) and len(out) == len(set(data + learned)):
        # nothing summed (an outer product): PyTorch multiplies the two, broadcast over each other
        return _broadcast_product(b, op, [(data[1:], op.source, op.in_shape), (learned, table, shape)], out[1:])
    inputs, in_shapes = [op.source, table], [op.in_shape, shape]
    pair = [data, data[0] + learned]
    if op.param_at[0] == 0:
        inputs, in_shapes, pair = inputs[::-1], in_shapes[::-1], pair[::-1]
    return einsum_product(b, f"{pair[0]},{pair[1]}->{out}", inputs, in_shapes, op.out_shape, op.name, op.origin)


def _broadcast_product(b: SpecBuilder, op: _Op, operands: list[tuple[str, str, Shape]], out: str) -> str:
    """The element-wise product of operands (indices, layer, per-sample shape), each permuted into the
    order of ``out`` (one sample's indices) and viewed with an axis of 1 for each index it lacks: a ``mul``
    that broadcasts them over each other."""
    spread = []
    for k, (term, source, shape) in enumerate(operands):
        order = [i for i in out if i in term]
        dims = [term.index(i) for i in order]
        moved = tuple(shape[d] for d in dims)
        if dims != list(range(len(dims))):
            source = b.add({"kind": "permute", "dims": dims}, moved, f"{op.name}_order{k}", op.origin, [source])
        full = tuple(moved[order.index(i)] if i in order else 1 for i in out)
        spread.append(b.flatten(moved, full, f"{op.name}_spread{k}", op.origin, source) if full != moved else source)
    return b.add({"kind": "mul"}, op.out_shape, op.name, op.origin, spread)


def _einsum_fc(b: SpecBuilder, op: _Op, equation: str) -> str:
    expected = (f"is einsum {equation!r} with a learned operand; dnnbench imports einsum of a layer output and a "
                "learned matrix that sums one axis of the output's into a new one in its place ('bni,io->bno', "
                "'...i,oi->...o'), and einsum of a layer output and a learned tensor that is a batched product "
                "of the two ('bld,dn->bldn')")
    if (len(op.inputs) != 1 or len(op.param_shapes) != 1 or len(op.param_shapes[0]) != 2
            or op.param_at not in ((0,), (1,)) or equation.count("->") != 1):
        raise _fail(op, expected)
    ins, out = equation.split("->")
    terms = ins.split(",")
    if len(terms) != 2:
        raise _fail(op, expected)
    data, learned = terms[1 - op.param_at[0]], terms[op.param_at[0]]
    rank = len(op.in_shape) + 1  # the batch's axis too
    if "..." in data:  # the ellipsis's axes named by letters of their own
        spare = [chr(c) for c in range(ord("A"), ord("z") + 1) if chr(c).isalpha() and chr(c) not in equation]
        fill = "".join(spare[:rank - (len(data) - 3)])
        data, out = data.replace("...", fill), out.replace("...", fill)
    if (len(learned) != 2 or "." in learned + out or len(data) != rank or len(set(data)) != rank
            or learned[0] == learned[1]):
        raise _fail(op, expected)
    summed = [i for i in learned if i in data and i not in out]
    new = [i for i in learned if i not in data and i in out]
    if len(summed) != 1 or len(new) != 1 or out != data.replace(summed[0], new[0]) or data[0] == summed[0]:
        raise _fail(op, expected)
    return _fc_along(b, op, data.index(summed[0]) - 1, op.param_shapes[0][learned.index(new[0])])


def _masked_fill(b: SpecBuilder, op: _Op) -> str:
    """``x.masked_fill(mask, value)`` by a constant mask (attention's causal mask, a buffer): one element
    op per value each way, as a constant factor (a scale that learns nothing); by a mask computed from
    data (a ``compare``): a ``where`` of the mask, the value and x."""
    if len(op.inputs) == 2 and not op.params and not op.const_shapes:
        value = op.arg(2, "value")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise _fail(op, f"fills with {value!r}; dnnbench imports masked_fill with a number")
        layer = {"kind": "where", "value": finite_fill(float(value)), "value_first": True}
        return b.add(layer, op.out_shape, op.name, op.origin, [op.inputs[1], op.inputs[0]])
    if len(op.inputs) != 1 or op.params:
        raise _fail(op, "fills by a mask computed from parameters; dnnbench imports masked_fill by a constant mask "
                    "or by a mask computed from data")
    return b.add({"kind": "scale", "learned": False}, op.out_shape, op.name, op.origin, op.inputs)


#: A comparison with its operands swapped (``c < x`` is ``x > c``).
_SWAPPED = {"gt": "lt", "lt": "gt", "ge": "le", "le": "ge", "eq": "eq", "ne": "ne"}


def _compare(kind: str) -> Callable[[SpecBuilder, _Op], str]:
    """``x > c``, ``torch.gt(x, c)``, ``x.ge(y)``, ... of layer outputs and numbers: a ``compare`` layer (a
    mask through which no gradient flows)."""
    def handle(b: SpecBuilder, op: _Op) -> str:
        if op.params or op.const_shapes:
            raise _fail(op, "compares with a tensor that is no layer output; dnnbench imports comparisons of layer "
                        "outputs with each other or with a number")
        if len(op.inputs) == 2:
            return b.add({"kind": "compare", "op": kind}, op.out_shape, op.name, op.origin, op.inputs)
        if len(op.inputs) != 1 or not _number_operand(op):
            raise _fail(op, "compares something that is no tensor or number; dnnbench imports comparisons of layer "
                        "outputs with each other or with a number")
        values = (*op.args, *op.kwargs.values())
        first = isinstance(values[0], (int, float)) and not isinstance(values[0], bool)
        number = float(values[0] if first else values[1])
        return b.add({"kind": "compare", "op": _SWAPPED[kind] if first else kind, "value": number}, op.out_shape,
                     op.name, op.origin, op.inputs)
    return handle


def _extremum(kind: str) -> Callable[[SpecBuilder, _Op], str]:
    """``torch.maximum(a, b)``, ``torch.minimum``, ``torch.max(a, b)``, ``torch.min(a, b)`` of two layer
    outputs (broadcast), or of one and a number (``torch.clamp`` of a number is an activation): the mask
    ``a >= b`` (``a <= b``) and the ``where`` it chooses by, which compute the same values (each input's
    gradient where it was chosen)."""
    def handle(b: SpecBuilder, op: _Op) -> str:
        if op.params or op.const_shapes:
            raise _fail(op, "takes the extremum with a tensor that is no layer output; dnnbench imports it of two "
                        "layer outputs or of one and a number")
        if len(op.inputs) == 2:
            mask = b.add({"kind": "compare", "op": kind}, op.out_shape, f"{op.name}_mask", op.origin, op.inputs)
            return b.add({"kind": "where"}, op.out_shape, op.name, op.origin, [mask, *op.inputs])
        if len(op.inputs) == 1 and _number_operand(op):
            number = float(next(v for v in (*op.args, *op.kwargs.values())
                                if isinstance(v, (int, float)) and not isinstance(v, bool)))
            mask = b.add({"kind": "compare", "op": kind, "value": number}, op.out_shape, f"{op.name}_mask", op.origin,
                         op.inputs)
            return b.add({"kind": "where", "value": finite_fill(number)}, op.out_shape, op.name, op.origin,
                         [mask, *op.inputs])
        if len(op.inputs) == 1 and len(op.args) + len(op.kwargs) == 1:  # x.max(): over the batch too
            reduce_layer(None, op.in_shape, "max" if kind == "ge" else "min", False, op.origin)
        raise _fail(op, "takes the extremum of something that is no tensor or number; dnnbench imports it of two "
                    "layer outputs or of one and a number")
    return handle


def _where(b: SpecBuilder, op: _Op) -> str:
    """``torch.where(mask, a, b)`` of a mask computed from data (a ``compare``) and branches that are layer
    outputs or a number: a ``where`` layer; of a constant mask (a buffer) between a layer output and a
    number: a constant factor, as ``masked_fill`` by a constant mask. A branch of constants
    (``torch.zeros_like(h)``) costs what a number does."""
    args = [op.arg(i, key) for i, key in ((0, "condition"), (1, "input"), (2, "other"))]
    numbers = [i for i, a in enumerate(args) if isinstance(a, (int, float)) and not isinstance(a, bool)]
    if op.params:
        raise _fail(op, "selects by or between tensors computed from parameters; dnnbench imports torch.where of a "
                    "mask and branches that are layer outputs or numbers")
    if len(op.inputs) == 3:
        return b.add({"kind": "where"}, op.out_shape, op.name, op.origin, op.inputs)
    if len(op.inputs) == 2 and numbers in ([1], [2]) and not op.const_shapes and not math.isnan(args[numbers[0]]):
        layer = {"kind": "where", "value": finite_fill(float(args[numbers[0]])), "value_first": numbers == [1]}
        return b.add(layer, op.out_shape, op.name, op.origin, op.inputs)
    if len(op.inputs) == 1 and numbers in ([1], [2]) and len(op.const_shapes) == 1:
        return b.add({"kind": "scale", "learned": False}, op.out_shape, op.name, op.origin, op.inputs)
    branches = [k for k in op.const_at if k in (1, 2)]  # a branch of constants (torch.zeros_like(h)): as a number
    if (not numbers and len(branches) == 1 and len(op.const_shapes) == len(op.const_at)
            and _broadcasts(op.const_shapes[op.const_at.index(branches[0])], op.out_shape)):
        if len(op.inputs) == 2 and 0 not in op.const_at:  # a mask computed from data
            return b.add({"kind": "where", "value": 0.0, "value_first": branches == [1]}, op.out_shape, op.name,
                         op.origin, op.inputs)
        if len(op.inputs) == 1 and 0 in op.const_at:  # a constant mask: a constant factor
            return b.add({"kind": "scale", "learned": False}, op.out_shape, op.name, op.origin, op.inputs)
    raise _fail(op, "selects in a way dnnbench does not import; it imports torch.where of a mask computed from data "
                "between layer outputs or a layer output and a number, and of a constant mask between a layer "
                "output and a number")


def _narrow(b: SpecBuilder, op: _Op) -> str:
    """``x.narrow(dim, start, length)``: a slice."""
    one_input(op)
    rank = len(op.in_shape) + 1
    axis = int(op.arg(1, "dim")) % rank - 1
    if axis < 0:
        raise _fail(op, "takes part of the batch axis, which is not one sample's layer")
    start = int(op.arg(2, "start")) % op.in_shape[axis]
    return b.add({"kind": "slice", "axis": axis, "start": start, "stop": start + int(op.arg(3, "length"))},
                 op.out_shape, op.name, op.origin, op.inputs)


def _sdpa(b: SpecBuilder, op: _Op) -> str:
    """``F.scaled_dot_product_attention(q, k, v)``: attention without its projections (a mask of constants
    or ``is_causal`` makes it causal, as for nn.MultiheadAttention; a mask computed from parameters is a
    learned bias on the scores, ``bias_weights``)."""
    if len(op.inputs) != 3:
        raise _fail(op, f"takes {len(op.inputs)} data tensors; dnnbench imports scaled_dot_product_attention of "
                    "queries, keys and values computed from the input (and a mask)")
    if op.arg(6, "enable_gqa", False):
        raise _fail(op, "has enable_gqa=True (grouped queries), which dnnbench's sdpa layer does not model")
    if op.params:  # a mask computed from parameters: a learned bias on the scores (BEiT, TinyViT)
        return b.add({"kind": "sdpa", "causal": bool(op.arg(5, "is_causal", False)), "bias_weights": op.params},
                     op.out_shape, op.name, op.origin, op.inputs)
    causal = bool(op.arg(5, "is_causal", False)) or op.arg(3, "attn_mask") is not None
    return b.add({"kind": "sdpa", "causal": causal}, op.out_shape, op.name, op.origin, op.inputs)


def _identity(b: SpecBuilder, op: _Op) -> str:
    if op.in_shape != op.out_shape:  # pragma: no cover - identities keep the shape
        raise _fail(op, f"changes the shape {list(op.in_shape)} to {list(op.out_shape)}")
    return op.source


SUPPORTED = ("Conv2d (groups, dilation), ConvTranspose2d, Conv1d and the 1-D layers, Conv3d, Max/AvgPool3d, "
             "BatchNorm3d, ConvTranspose3d, InstanceNorm3d, LSTM, GRU, RNN, Linear, "
             "MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, AdaptiveMaxPool2d, FractionalMaxPool2d/3d, ReLU, "
             "ReLU6, GELU, SiLU, Hardswish, Hardsigmoid, Tanh, Sigmoid, Dropout, LocalResponseNorm, BatchNorm1d/2d, "
             "GroupNorm, InstanceNorm2d, LayerNorm, ZeroPad2d, PReLU, ELU, SELU, Mish, Softplus, Hardtanh, "
             "Embedding, MultiheadAttention (self- and cross-attention), TransformerEncoderLayer, "
             "TransformerEncoder, TransformerDecoderLayer, TransformerDecoder and Transformer of layer outputs "
             "(batch first or not), Flatten, Softmax, F.conv2d, F.conv_transpose2d, F.linear, F.bilinear, F.prelu, "
             "F.batch_norm, "
             "F.group_norm, F.layer_norm on the caller's parameters, + and - of layer outputs, "
             "torch.cat, reshape, permute, transpose, unsqueeze, squeeze, x[:, i] and slices of one axis, mean "
             "over a map's height and width or a sequence's tokens, x * y of two layer outputs (a gate), a learned "
             "per-channel scale times x, x * c and x / c of a number c, a @ b of two layer outputs, masked_fill "
             "by a constant mask, x.split/x.chunk/x.narrow (pieces of a tensor), F.scaled_dot_product_attention, "
             "F.cross_entropy with labels=, torchvision's StochasticDepth, exp, abs, torch.max/min/amax/amin over "
             "axes, RMSNorm, GLU, PixelShuffle/PixelUnshuffle, Unflatten, randn_like noise, weight_norm and "
             "spectral_norm modules, LSTMCell/GRUCell/RNNCell in a loop, CELU, LogSigmoid, Tanhshrink, Softshrink, "
             "Hardshrink, Threshold, RReLU, Softmin, AlphaDropout, ChannelShuffle, x ** p of a number p, sqrt, "
             "rsqrt, reciprocal, log, erf, sin, cos, x.var/x.std over axes, c / x, c - x, F.affine_grid and "
             "F.grid_sample, F.cosine_similarity, F.pairwise_distance, "
             "LPPool1d/2d, Bilinear, Unfold/Fold (im2col, col2im), cumsum, cumprod, repeat, tile, expand, "
             "repeat_interleave, "
             "topk values, x.unfold(d, k, k) (patches), "
             "comparisons "
             "(x > c, a < b), torch.where and masked_fill by masks computed from data, torch.maximum/minimum, "
             "MaxUnpool2d of a MaxPool2d(return_indices=True)")


def _threshold(b: SpecBuilder, op: _Op) -> str:
    """``nn.Threshold(t, v)``/``F.threshold``: x where x > t, else v; ReLU for t = v = 0."""
    one_input(op)
    m = op.module
    t = float(m.threshold) if m is not None else float(op.arg(1, "threshold"))
    v = float(m.value) if m is not None else float(op.arg(2, "value"))
    function = "relu" if t == v == 0.0 else "threshold"
    return b.activation(function, op.out_shape, op.name, op.origin, op.source, op.fusable)


def _rrelu(b: SpecBuilder, op: _Op) -> str:
    """``nn.RReLU``/``F.rrelu``: in training a leaky ReLU whose slopes are drawn at random (rrelu), in
    evaluation (``F.rrelu(..., training=False)``) a leaky ReLU."""
    one_input(op)
    training = op.module is not None or op.arg(3, "training", False)
    return b.activation("rrelu" if training else "leaky_relu", op.out_shape, op.name, op.origin, op.source,
                        op.fusable)


def _prelu(b: SpecBuilder, op: _Op) -> str:
    """``nn.PReLU`` and ``F.prelu(x, weight)``: a prelu layer; ``F.prelu`` by constant slopes is a leaky
    ReLU."""
    if len(op.inputs) != 1:
        raise _fail(op, f"takes {len(op.inputs)} data tensors; dnnbench's prelu takes one and its slopes")
    if op.module is None and not op.params:
        return b.activation("leaky_relu", op.out_shape, op.name, op.origin, op.source, op.fusable)
    slopes = op.module.num_parameters if op.module is not None else op.params
    return b.add(prelu_layer(int(slopes), op.in_shape, op.origin), op.out_shape, op.name, op.origin, op.inputs)


def _hardtanh(b: SpecBuilder, op: _Op) -> str:
    """``nn.Hardtanh``/``F.hardtanh``: ReLU6 between 0 and 6 (what ``nn.ReLU6`` is), else hardtanh."""
    one_input(op)
    m = op.module
    low = float(m.min_val) if m is not None else float(op.arg(1, "min_val", -1.0))
    high = float(m.max_val) if m is not None else float(op.arg(2, "max_val", 1.0))
    function = "relu6" if (low, high) == (0.0, 6.0) else "hardtanh"
    return b.activation(function, op.out_shape, op.name, op.origin, op.source, op.fusable)


def _clamp(b: SpecBuilder, op: _Op) -> str:
    """``x.clamp(min, max)`` with constant bounds: ReLU from ``min=0`` alone, hardtanh between two."""
    one_input(op)
    low, high = op.arg(1, "min"), op.arg(2, "max")
    if not all(v is None or isinstance(v, (int, float)) for v in (low, high)) or (low is None and high is None):
        raise _fail(op, f"clamps to [{low}, {high}]; dnnbench imports clamp between constant numbers")
    function = "relu" if high is None and low == 0 else "relu6" if (low, high) == (0, 6) else "hardtanh"
    return b.activation(function, op.out_shape, op.name, op.origin, op.source, op.fusable)


def _clamp_side(side: str) -> Callable[[SpecBuilder, _Op], str]:
    """``x.clamp_min(c)``, ``torch.clamp_max(x, c)``: ``x.clamp(min=c)``, ``x.clamp(max=c)``."""
    def handle(b: SpecBuilder, op: _Op) -> str:
        bound = op.arg(1, side)
        return _clamp(b, replace(op, args=(None,), kwargs={side: bound}))
    return handle


def _addmm(b: SpecBuilder, op: _Op) -> str:
    """``torch.addmm(bias, x, weight)`` of the caller's parameters (an FC layer in ATen's own form,
    ``x @ weight + bias``, the weight (in, out)): an ``fc``."""
    _, out = _learned_weight(op, 2, "torch.addmm(bias, x, weight)")
    if op.inputs != [op.inputs[0]] or len(op.param_shapes) != 2:
        raise _fail(op, "adds to a product other than of one input and a learned weight; dnnbench imports "
                    "torch.addmm(bias, x, weight) of parameters")
    return _fc_on(b, op, out, True)


def _activation_names() -> tuple[dict[Any, str], dict[type, str]]:
    """(functions, module types) -> the spec activation they compute."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    functions = {torch.relu: "relu", F.relu: "relu", F.relu6: "relu6", torch.tanh: "tanh", F.tanh: "tanh",
                 torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", F.gelu: "gelu", F.silu: "silu",
                 F.hardswish: "hardswish", F.hardsigmoid: "hardsigmoid", F.leaky_relu: "leaky_relu", F.elu: "elu",
                 F.selu: "selu", torch.selu: "selu", F.mish: "mish", F.softplus: "softplus", F.hardtanh: "hardtanh",
                 torch.exp: "exp", torch.abs: "abs", F.celu: "celu", torch.celu: "celu", F.logsigmoid: "log_sigmoid",
                 F.tanhshrink: "tanhshrink", F.softshrink: "softshrink", F.hardshrink: "hardshrink",
                 torch.sqrt: "sqrt", torch.rsqrt: "rsqrt", torch.reciprocal: "reciprocal", torch.log: "log",
                 torch.log1p: "log", torch.expm1: "exp", torch.special.expm1: "exp",
                 torch.special.expit: "sigmoid", torch.erf: "erf", torch.special.erf: "erf", torch.sin: "sin",
                 torch.cos: "cos", torch.nan_to_num: "nan_to_num"}
    modules = {nn.ReLU: "relu", nn.ReLU6: "relu6", nn.Tanh: "tanh", nn.Sigmoid: "sigmoid", nn.GELU: "gelu",
               nn.SiLU: "silu", nn.Hardswish: "hardswish", nn.Hardsigmoid: "hardsigmoid", nn.LeakyReLU: "leaky_relu",
               nn.ELU: "elu", nn.SELU: "selu", nn.Mish: "mish", nn.Softplus: "softplus", nn.Hardtanh: "hardtanh",
               nn.CELU: "celu", nn.LogSigmoid: "log_sigmoid", nn.Tanhshrink: "tanhshrink", nn.Softshrink: "softshrink",
               nn.Hardshrink: "hardshrink"}
    return functions, modules


#: Tensor methods (and their in-place forms) that are one element-wise function.
_METHOD_FUNCTIONS = {f"{name}{suffix}": function for name, function in (
    ("sqrt", "sqrt"), ("rsqrt", "rsqrt"), ("reciprocal", "reciprocal"), ("log", "log"), ("log1p", "log"),
    ("erf", "erf"), ("exp", "exp"), ("abs", "abs"), ("sigmoid", "sigmoid"), ("tanh", "tanh"), ("sin", "sin"),
    ("cos", "cos"), ("expm1", "exp"), ("nan_to_num", "nan_to_num"))
    for suffix in ("", "_")}


def _registries() -> tuple[dict[type, Any], dict[Any, Any], dict[str, Any]]:
    """(module types, functions, tensor methods) -> handler; built on first use (torch loads lazily)."""
    import operator

    import torch
    import torch.nn.functional as F
    from torch import nn

    act_functions, act_modules = _activation_names()
    modules: dict[type, Any] = {
        nn.Conv2d: _conv2d, nn.ConvTranspose2d: _conv_transpose2d, nn.Linear: _linear,
        nn.LSTM: _recurrent, nn.GRU: _recurrent, nn.RNN: _recurrent, nn.LSTMCell: _cell, nn.GRUCell: _cell,
        nn.RNNCell: _cell,
        nn.Conv1d: _on_maps(_conv2d), nn.ConvTranspose1d: _on_maps(_conv_transpose2d),
        nn.MaxPool1d: _on_maps(_pool_module("max")), nn.AvgPool1d: _on_maps(_pool_module("avg")),
        nn.AdaptiveAvgPool1d: _on_maps(adaptive_pool_handler("avg")),
        nn.AdaptiveMaxPool1d: _on_maps(adaptive_pool_handler("max")), nn.InstanceNorm1d: _on_maps(_instance_norm),
        nn.MaxPool2d: _pool_module("max"), nn.AvgPool2d: _pool_module("avg"),
        nn.FractionalMaxPool2d: _fractional_pool, nn.FractionalMaxPool3d: _fractional_pool,
        nn.AdaptiveAvgPool2d: adaptive_pool_handler("avg"), nn.AdaptiveMaxPool2d: adaptive_pool_handler("max"),
        **{cls: activation_handler(function) for cls, function in act_modules.items()},
        nn.Dropout: _dropout, nn.Dropout1d: _channel_dropout, nn.Dropout2d: _channel_dropout,
        nn.Dropout3d: _channel_dropout,
        nn.AlphaDropout: _dropout, nn.FeatureAlphaDropout: _dropout, nn.Threshold: _threshold, nn.RReLU: _rrelu,
        nn.Softmin: layer_handler("softmax"),
        nn.LocalResponseNorm: _lrn, nn.BatchNorm2d: _batch_norm_module,
        nn.BatchNorm3d: _batch_norm_module, nn.Conv3d: _conv3d, nn.MaxPool3d: _pool3d("max"),
        nn.AvgPool3d: _pool3d("avg"), nn.AdaptiveAvgPool3d: adaptive_pool_handler("avg"),
        nn.AdaptiveMaxPool3d: adaptive_pool_handler("max"), nn.ConvTranspose3d: _conv_transpose3d,
        nn.InstanceNorm3d: _instance_norm,
        nn.BatchNorm1d: _batch_norm_1d, nn.GroupNorm: _group_norm, nn.InstanceNorm2d: _instance_norm,
        nn.Hardtanh: _hardtanh, nn.PReLU: _prelu, nn.Upsample: _upsample, nn.ChannelShuffle: _channel_shuffle,
        nn.MaxUnpool2d: _max_unpool, nn.LPPool2d: _lp_pool, nn.LPPool1d: _on_maps(_lp_pool), nn.Bilinear: _bilinear,
        nn.Unfold: _windows("unfold"), nn.Fold: _windows("fold"),
        **{getattr(nn, f"{kind}Pad{d}d"): _pad_module for kind in ("Zero", "Constant", "Reflection", "Replication",
                                                                    "Circular") for d in (1, 2)
           if hasattr(nn, f"{kind}Pad{d}d")},
        nn.UpsamplingNearest2d: _upsample, nn.UpsamplingBilinear2d: _upsample,
        nn.LayerNorm: _layer_norm, nn.Embedding: _embedding, nn.EmbeddingBag: _embedding_bag,
        nn.MultiheadAttention: _attention,
        nn.Flatten: _reshape, nn.Unflatten: _reshape, nn.GLU: _glu, nn.Softsign: _softsign,
        **({nn.RMSNorm: _rms_norm} if hasattr(nn, "RMSNorm") else {}), nn.Softmax: layer_handler("softmax"),
        nn.Softmax2d: layer_handler("softmax"),
        nn.LogSoftmax: layer_handler("softmax"),
        nn.Identity: _identity, nn.PixelShuffle: _pixel_shuffle(False), nn.PixelUnshuffle: _pixel_shuffle(True),
        nn.TransformerEncoderLayer: _encoder_layer, nn.TransformerEncoder: _encoder,
        nn.TransformerDecoderLayer: _decoder_layer, nn.TransformerDecoder: _decoder, nn.Transformer: _transformer,
    }
    functions: dict[Any, Any] = {
        torch.flatten: _reshape, torch.unflatten: _reshape, F.glu: _glu, F.softsign: _softsign,
        **({F.rms_norm: _rms_norm} if hasattr(F, "rms_norm") else {}), torch.reshape: _reshape,
        torch.permute: _permute, torch.transpose: _transpose, torch.addmm: _addmm,
        torch.clamp_min: _clamp_side("min"), torch.clamp_max: _clamp_side("max"),
        **{fn: activation_handler(function) for fn, function in act_functions.items()},
        F.max_pool2d: _pool_function("max"), F.avg_pool2d: _pool_function("avg"),
        F.fractional_max_pool2d: _fractional_pool, F.fractional_max_pool3d: _fractional_pool,
        F.adaptive_avg_pool2d: adaptive_pool_handler("avg"), F.adaptive_max_pool2d: adaptive_pool_handler("max"),
        F.dropout: _dropout, F.dropout1d: _channel_dropout, F.dropout2d: _channel_dropout,
        F.dropout3d: _channel_dropout,
        F.alpha_dropout: _dropout, F.feature_alpha_dropout: _dropout, F.threshold: _threshold, F.rrelu: _rrelu,
        F.softmin: layer_handler("softmax"), torch.pow: _pow, operator.pow: _pow, torch.square: _square,
        torch.var: _spread("var"), torch.std: _spread("std"), torch.logsumexp: _logsumexp,
        F.local_response_norm: _lrn, F.layer_norm: _layer_norm,
        torch.softmax: layer_handler("softmax"), F.softmax: layer_handler("softmax"),
        torch.log_softmax: layer_handler("softmax"),
        F.log_softmax: layer_handler("softmax"),
        operator.add: _add, operator.iadd: _add, torch.add: _add, torch.cat: _cat, torch.concat: _cat,
        operator.getitem: _getitem, torch.mean: _mean, operator.mul: _mul, operator.imul: _mul, torch.mul: _mul,
        operator.truediv: _div, operator.itruediv: _div, torch.div: _div, torch.narrow: _narrow,
        F.scaled_dot_product_attention: _sdpa, operator.matmul: _matmul, torch.matmul: _matmul, torch.bmm: _matmul,
        torch.masked_fill: _masked_fill, torch.where: _where, torch.maximum: _extremum("ge"),
        torch.minimum: _extremum("le"), torch.fmax: _extremum("ge"), torch.fmin: _extremum("le"),
        torch.max: _extremum("ge"), torch.min: _extremum("le"), F.linear: _linear_function,
        F.bilinear: _bilinear, torch.bilinear: _bilinear,
        **{getattr(operator, kind): _compare(kind) for kind in ("gt", "ge", "lt", "le", "eq", "ne")},
        **{getattr(torch, kind): _compare(kind) for kind in ("gt", "ge", "lt", "le", "eq", "ne")},
        torch.greater: _compare("gt"), torch.less: _compare("lt"), F.conv2d: _conv2d_function,
        torch.conv2d: _conv2d_function, F.conv_transpose2d: _conv_transpose2d,
        torch.conv_transpose2d: _conv_transpose2d, F.conv3d: _conv3d, torch.conv3d: _conv3d,
        F.max_pool3d: _pool3d("max"), F.avg_pool3d: _pool3d("avg"), F.conv_transpose3d: _conv_transpose3d,
        torch.conv_transpose3d: _conv_transpose3d,
        F.adaptive_avg_pool3d: adaptive_pool_handler("avg"), F.adaptive_max_pool3d: adaptive_pool_handler("max"),
        F.conv1d: _on_maps(_conv2d_function, {3: ("stride", 1), 4: ("padding", 0), 5: ("dilation", 1)}),
        torch.conv1d: _on_maps(_conv2d_function, {3: ("stride", 1), 4: ("padding", 0), 5: ("dilation", 1)}),
        F.conv_transpose1d: _on_maps(_conv_transpose2d, {3: ("stride", 1), 4: ("padding", 0),
                                                         5: ("output_padding", 0), 7: ("dilation", 1)}),
        F.max_pool1d: _on_maps(_pool_function("max"), {1: ("kernel_size", 1), 2: ("stride", 1),
                                                        3: ("padding", 0), 4: ("dilation", 1)}),
        F.avg_pool1d: _on_maps(_pool_function("avg"), {1: ("kernel_size", 1), 2: ("stride", 1),
                                                        3: ("padding", 0)}),
        F.adaptive_avg_pool1d: _on_maps(adaptive_pool_handler("avg")),
        F.adaptive_max_pool1d: _on_maps(adaptive_pool_handler("max")), F.batch_norm: _batch_norm_function,
        F.group_norm: _group_norm,
        F.interpolate: _upsample, F.pad: _pad,
        operator.sub: _sub, torch.sub: _sub,
        torch.unsqueeze: _reshape, torch.squeeze: _reshape, torch.roll: _roll, F.normalize: _normalize,
        torch.einsum: _einsum, torch.swapaxes: _transpose, torch.swapdims: _transpose, operator.neg: _neg,
        torch.neg: _neg, torch.stack: _stack, torch.sum: _reduce, torch.norm: _norm, torch.addcmul: _addcmul,
        torch.lerp: _lerp, torch.baddbmm: _baddbmm, torch.diff: _diff, torch.index_select: _index_select,
        torch.tril: _triangle, torch.triu: _triangle, torch.logcumsumexp: _logcumsumexp,
        torch.index_add: _index_add, torch.index_reduce: _index_reduce, torch.scatter_add: _scatter(False),
        torch.scatter_reduce: _scatter(True),
        torch.linalg.vector_norm: _norm, torch.amax: _amax("max"), torch.amin: _amax("min"), torch.clamp: _clamp,
        torch.clip: _clamp,
        F.hardtanh: _hardtanh,
        F.channel_shuffle: _channel_shuffle, torch.channel_shuffle: _channel_shuffle,
        F.max_pool2d_with_indices: _pool_function("max", indices=True), F.max_unpool2d: _max_unpool,
        F.cosine_similarity: _cosine_similarity, torch.cosine_similarity: _cosine_similarity,
        F.affine_grid: _affine_grid, F.grid_sample: _grid_sample, F.unfold: _windows("unfold"),
        F.fold: _windows("fold"), torch.cumsum: _running(False), torch.cumprod: _running(True),
        torch.tile: _tile, torch.repeat_interleave: _repeat_interleave,
        torch.broadcast_to: _expand, torch.clone: _identity, torch.detach: _detach, torch.flip: _flip,
        torch.fliplr: _flip, torch.flipud: _flip, torch.argmax: _arg_extreme("max"), torch.argmin: _arg_extreme("min"),
        torch.round: _piecewise_constant, torch.floor: _piecewise_constant, F.gumbel_softmax: _gumbel_softmax,
        _written_buffer: _written,
        torch.ceil: _piecewise_constant, torch.trunc: _piecewise_constant, torch.sign: _piecewise_constant,
        F.pairwise_distance: _pairwise_distance, torch.pairwise_distance: _pairwise_distance, torch.cdist: _cdist,
        F.prelu: _prelu, torch.prelu: _prelu, F.pixel_shuffle: _pixel_shuffle(False),
        F.pixel_unshuffle: _pixel_shuffle(True), torch.pixel_shuffle: _pixel_shuffle(False), F.one_hot: _one_hot,
        torch.pixel_unshuffle: _pixel_shuffle(True),
    }
    methods: dict[str, Any] = {
        "cumsum": _running(False), "cumprod": _running(True), "repeat": _repeat, "tile": _tile, "expand": _expand,
        "expand_as": _expand,
        "broadcast_to": _expand, "repeat_interleave": _repeat_interleave,
        "flatten": _reshape, "unflatten": _reshape, "view": _reshape, "reshape": _reshape, "permute": _permute,
        "transpose": _transpose,
        "relu": activation_handler("relu"), "relu_": activation_handler("relu"), "tanh": activation_handler("tanh"),
        "sigmoid": activation_handler("sigmoid"), "softmax": layer_handler("softmax"), "clamp": _clamp,
        "clamp_min": _clamp_side("min"), "clamp_max": _clamp_side("max"),
        "clamp_": _clamp, "clip": _clamp, "sum": _reduce, "norm": _norm, "addcmul": _addcmul,
        "lerp": _lerp, "baddbmm": _baddbmm, "diff": _diff, "index_select": _index_select,
        "index_add": _index_add, "index_add_": _index_add, "index_reduce": _index_reduce,
        "index_reduce_": _index_reduce, "scatter_add": _scatter(False), "scatter_add_": _scatter(False),
        "scatter_reduce": _scatter(True), "scatter_reduce_": _scatter(True),
        **dict.fromkeys(("tril", "triu", "tril_", "triu_"), _triangle), "logcumsumexp": _logcumsumexp,
        "log_softmax": layer_handler("softmax"),
        "contiguous": _identity, "narrow": _narrow, "add": _add, "add_": _add, "mean": _mean, "mul": _mul,
        "mul_": _mul, "div": _div, "div_": _div, "matmul": _matmul, "bmm": _matmul, "masked_fill": _masked_fill,
        "masked_fill_": _masked_fill, "sub": _sub, "unsqueeze": _reshape, "squeeze": _reshape, "roll": _roll,
        "swapaxes": _transpose, "swapdims": _transpose, "reshape_as": _reshape_as, "view_as": _reshape_as,
        "amax": _amax("max"), "amin": _amax("min"),
        "neg": _neg, "to": _identity,
        **{name: activation_handler(function) for name, function in _METHOD_FUNCTIONS.items()},
        **{kind: _compare(kind) for kind in ("gt", "ge", "lt", "le", "eq", "ne")},
        "unfold": _unfold_view, "maximum": _extremum("ge"), "minimum": _extremum("le"), "max": _extremum("ge"),
        "min": _extremum("le"), "pow": _pow, "pow_": _pow, "square": _square, "square_": _square, "var": _spread("var"),
        "std": _spread("std"), "logsumexp": _logsumexp,
        "type_as": _identity, "float": _identity, "clone": _identity, "detach": _detach, "flip": _flip,
        "fliplr": _flip, "flipud": _flip, "argmax": _arg_extreme("max"), "argmin": _arg_extreme("min"),
        **dict.fromkeys(("round", "floor", "ceil", "trunc", "sign"), _piecewise_constant),
    }
    return modules, functions, methods


# ---- tracing -------------------------------------------------------------------------------------

def _meta(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor) and value.device.type != "meta":
        return torch.empty_like(value, device="meta")
    return value


def _meta_state(module: Any) -> dict[str, Any]:
    """Meta copies of a module's parameters and buffers, but a batch norm's count of batches seen: a
    number its forward divides by (``momentum=None``: a cumulative average), so it stays a real one."""
    import torch

    return {name: torch.ones_like(value, device="cpu") if name.endswith("num_batches_tracked") else _meta(value)
            for name, value in (*module.named_parameters(), *module.named_buffers())}


def _shaped_tracer(inputs: dict[str, Any]) -> Any:
    """A torch.fx tracer whose proxies know their value on the meta device while tracing, so that
    ``x.size()``, ``x.shape``, ``x.dim()`` and ``len(x)`` are numbers: code that checks or branches on
    shapes (``assert t <= block_size``, ``if x.dim() == 3``) traces as it runs, at the traced input's
    shape. ``inputs`` maps the forward's parameter names to their meta values. A value that cannot be
    computed leaves the proxy as fx makes it."""
    import torch
    from torch import fx
    from torch.func import functional_call

    class _Unknown(Exception):
        pass

    # fx patches nn.Module.__call__ and __getattr__ while it traces; a module is run on meta values
    # with the originals, so that its children do not enter the graph a second time.
    module_call, module_getattr = torch.nn.Module.__call__, torch.nn.Module.__getattr__

    class ShapedProxy(fx.Proxy):
        def _value(self) -> Any:
            return self.tracer.values.get(self.node)  # type: ignore[attr-defined]

        def _tensor(self, what: str) -> Any:
            value = self._value()
            if not isinstance(value, torch.Tensor):
                raise _Unknown(what)
            return value

        def size(self, dim: int | None = None) -> Any:
            try:
                value = self._tensor("size")
            except _Unknown:
                method = fx.Proxy.__getattr__(self, "size")
                return method() if dim is None else method(dim)
            return value.size() if dim is None else value.size(dim)

        @property
        def shape(self) -> Any:  # type: ignore[override]
            try:
                return self._tensor("shape").shape
            except _Unknown:
                return fx.Proxy.__getattr__(self, "shape")

        def dim(self) -> Any:
            try:
                return self._tensor("dim").dim()
            except _Unknown:
                return fx.Proxy.__getattr__(self, "dim")()

        @property
        def ndim(self) -> Any:
            return self.dim()

        @property
        def is_cuda(self) -> Any:  # if x.is_cuda: iden = iden.cuda(), PointNet's T-Net: traced as on a CPU
            if isinstance(self._value(), torch.Tensor):
                return False
            return fx.Proxy.__getattr__(self, "is_cuda")

        def __len__(self) -> int:
            value = self._value()
            if isinstance(value, (torch.Tensor, tuple, list)):
                return len(value)
            return fx.Proxy.__len__(self)

        def __iter__(self) -> Any:
            value = self._value()
            if isinstance(value, (tuple, list)):  # the pieces of a split, iterated (a loop, a generator)
                return iter([self[i] for i in range(len(value))])
            if isinstance(value, torch.Tensor) and value.dim() > 0:  # q, k, v = qkv (its first axis)
                return iter([self[i] for i in range(value.shape[0])])
            return fx.Proxy.__iter__(self)

        def __setitem__(self, key: Any, item: Any) -> None:  # mask[a:b, c:d] = n on a constant the code made
            import operator

            self.tracer.create_proxy("call_function", operator.setitem, (self, key, item), {})

        def __bool__(self) -> bool:
            value = self._value()
            if isinstance(value, (bool, int, float)):
                return bool(value)
            return fx.Proxy.__bool__(self)

    F_batch_norm = torch.nn.functional.batch_norm
    F_embedding = torch.nn.functional.embedding
    F_one_hot = torch.nn.functional.one_hot

    class Tracer(fx.Tracer):
        def __init__(self) -> None:
            super().__init__()
            self.values: dict[Any, Any] = {}
            self.tokens: frozenset[str] = frozenset()  # the inputs an nn.Embedding takes: token ids

        def is_leaf_module(self, m: torch.nn.Module, qualname: str) -> bool:
            return (isinstance(getattr(m, "dnnbench_layer", None), dict) or _is_rms_norm(m)
                    or super().is_leaf_module(m, qualname))

        def proxy(self, node: fx.Node) -> fx.Proxy:
            return ShapedProxy(node, self)

        def _arg(self, a: Any) -> Any:
            if isinstance(a, fx.Proxy):
                if a.node not in self.values:
                    raise _Unknown(a.node.name)
                return self.values[a.node]
            return _meta(a)  # a constant tensor the code made (a mask): its meta copy

        def create_proxy(self, kind: str, target: Any, args: Any, kwargs: Any, name: str | None = None,
                         type_expr: Any = None, proxy_factory_fn: Any = None) -> fx.Proxy:
            proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
            try:
                value = self._evaluate(kind, target, args, kwargs)
            except Exception:  # what the meta device cannot run stays a plain proxy
                return proxy
            self.values[proxy.node] = value
            return proxy

        def _evaluate(self, kind: str, target: Any, args: Any, kwargs: Any) -> Any:
            if kind == "placeholder":
                if target not in inputs:
                    raise _Unknown(target)
                return inputs[target]
            if kind == "get_attr":
                obj: Any = self.root
                for part in str(target).split("."):
                    obj = module_getattr(obj, part) if isinstance(obj, torch.nn.Module) else getattr(obj, part)
                return _meta(obj)
            a = fx.node.map_aggregate(args, self._arg)
            k = fx.node.map_aggregate(kwargs, self._arg)
            if kind == "call_function" and target in (F_embedding, F_one_hot):
                self.tokens = self.tokens | _inputs_behind(args[:1])
            with torch.no_grad(), _on_meta_values() as batch_norm:
                if kind == "call_function":
                    return (batch_norm if target is F_batch_norm else target)(*a, **k)
                if kind == "call_method":
                    return getattr(a[0], target)(*a[1:], **k)
                if kind == "call_module":
                    sub = self.root.get_submodule(target)
                    if isinstance(sub, (torch.nn.Embedding, torch.nn.EmbeddingBag)):
                        self.tokens = self.tokens | _inputs_behind(args[:1])
                    patched = torch.nn.Module.__call__, torch.nn.Module.__getattr__
                    torch.nn.Module.__call__, torch.nn.Module.__getattr__ = module_call, module_getattr  # type: ignore[method-assign]
                    try:
                        state = _meta_state(sub)
                        return functional_call(sub, state, a, k)
                    finally:
                        torch.nn.Module.__call__, torch.nn.Module.__getattr__ = patched  # type: ignore[method-assign]
            raise _Unknown(kind)

    return Tracer()


#: Operations that pick or view part of a tensor: token ids reach an embedding through them
#: (``sparse[:, i]``, ``ids.view(-1)``).
_ID_VIEWS = frozenset({"getitem", "select", "narrow", "view", "reshape", "flatten", "squeeze", "unsqueeze",
                       "contiguous", "t", "transpose", "permute", "long", "int", "to", "clone"})


def _inputs_behind(args: Any) -> frozenset[str]:
    """The forward's inputs that values in ``args`` are, or are picked or viewed from (:data:`_ID_VIEWS`):
    the inputs an embedding takes token ids from."""
    from torch import fx

    found = set()
    for a in args:
        node = a.node if isinstance(a, fx.Proxy) else a
        while isinstance(node, fx.Node) and node.op in ("call_function", "call_method") and node.args:
            name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
            if name not in _ID_VIEWS:
                break
            node = node.args[0]
        if isinstance(node, fx.Node) and node.op == "placeholder":
            found.add(str(node.target))
    return frozenset(found)


def _batch_norm_shapes(original: Any) -> Any:
    """``F.batch_norm`` for meta values: training on one value per channel, which a trace of one sample
    meets at a 1x1 map (LeViT, ReXNet, MobileNet-V4), cannot run (PyTorch refuses it, its meta kernel
    divides by n - 1); its output has the input's shape, which is all a meta value tells."""
    import torch

    def batch_norm(input: Any, *args: Any, **kwargs: Any) -> Any:
        training = kwargs.get("training", args[4] if len(args) > 4 else False)
        if training and input.dim() > 1 and input.numel() <= input.size(1):
            return torch.empty_like(input)
        return original(input, *args, **kwargs)
    return batch_norm


@contextlib.contextmanager
def _on_meta_values() -> Iterator[Any]:
    """While meta values are computed: ``F.batch_norm`` (modules call it) as :func:`_batch_norm_shapes`,
    and a transformer's check whether its mask is causal (it reads the mask's values) answered by its
    ``is_causal`` for a mask on the meta device (the importer reads causality off the mask's presence);
    yields the batch norm to call in place of the original."""
    import torch.nn.functional as F
    from torch.nn.modules import transformer

    original, detect = F.batch_norm, transformer._detect_is_causal_mask

    def is_causal(mask: Any, is_causal: bool | None = None, size: int | None = None) -> bool:
        if mask is not None and mask.device.type == "meta":
            return bool(is_causal)
        return bool(detect(mask, is_causal, size))

    F.batch_norm = _batch_norm_shapes(original)
    transformer._detect_is_causal_mask = is_causal
    try:
        yield F.batch_norm
    finally:
        F.batch_norm, transformer._detect_is_causal_mask = original, detect


def _forward_parameters(module: torch.nn.Module) -> list[Any]:
    import inspect

    try:
        return list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):  # pragma: no cover - a forward without a signature
        return []


@contextlib.contextmanager
def _traced_through_wrapped() -> Iterator[None]:
    """Functions marked with ``torch.fx.wrap`` traced through, but those the importer maps by name
    (:data:`_NAMED_FUNCTIONS`): code is wrapped because plain fx cannot trace its shape arithmetic
    (torchvision's ``shifted_window_attention`` and ``_patch_merging_pad``), which this tracer can."""
    from torch.fx import _symbolic_trace as st

    table = st._wrapped_fns_to_patch
    saved = dict(table)
    for key, frame in saved.items():
        fn = frame.get(key[1])
        if (callable(fn) and getattr(fn, "__code__", None) is not None
                and (getattr(fn, "__module__", ""), getattr(fn, "__name__", "")) not in _NAMED_FUNCTIONS
                and not str(getattr(fn, "__module__", "")).startswith("torch.")):
            del table[key]
    try:
        yield
    finally:
        table.clear()
        table.update(saved)


def _holds_recurrent(module: torch.nn.Module) -> bool:
    """Whether the module holds a recurrent layer or cell, whose forward may take its state."""
    from torch import nn

    return any(isinstance(m, (nn.RNNBase, nn.RNNCellBase)) for m in module.modules())


def _trace(module: torch.nn.Module, input_shapes: list[Shape], labels: str | None = None,
           label_shape: Shape | None = None, batch_axis: int = 0) -> tuple[Any, dict[Any, Any], Any, list[str]]:
    """The fx graph module, the meta value of every node (weights are meta copies: no memory), the
    labels' placeholder (None without ``labels``) and the names of the forward's inputs.

    The forward's first parameters are the inputs, one per shape of ``input_shapes``. An input that an
    ``nn.Embedding`` takes gets token ids (int64). ``labels`` names the parameter that takes the
    training labels (class ids of ``label_shape`` per sample: one per token for token ids, one per
    sample otherwise); every other parameter keeps its default (a parameter without one is an error).
    Each input (and the labels) holds the batch on ``batch_axis``."""
    import inspect

    import torch
    from torch import fx

    params = [p for p in _forward_parameters(module)
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    names = [p.name for p in params]
    n_in = len(input_shapes)
    if n_in > max(1, len(names)):
        raise SpecError("input_shape", [list(s) for s in input_shapes],
                        f"gives {n_in} inputs; {type(module).__name__}.forward takes {len(names)} "
                        f"({', '.join(names) or 'none'})")
    inputs_named = names[:n_in]
    if labels is not None and labels not in names[n_in:]:
        raise SpecError("labels", labels, f"is not a parameter of {type(module).__name__}.forward after its "
                                          f"input{'s' if n_in > 1 else ''}; expected one of "
                                          f"{', '.join(names[n_in:]) or '(none)'}")
    concrete: dict[str, Any] = {}
    for p in params[n_in:]:
        if p.name == labels:
            continue
        if p.default is inspect.Parameter.empty and _holds_recurrent(module):
            concrete[p.name] = None  # a recurrent model's carried state (forward(input, hidden)): zeros
            continue
        if p.default is inspect.Parameter.empty:
            raise SpecError.plain(f"{type(module).__name__}.forward",
                                  f"takes another input {p.name!r}; give one shape per input (input_shape="
                                  f"[{', '.join('(...)' for _ in range(n_in + 1))}]), or name it as the labels "
                                  f"if it takes them: labels={p.name!r}")
        concrete[p.name] = p.default

    def batched(shape: Shape) -> tuple[int, ...]:
        at = min(batch_axis, len(shape))
        return (*shape[:at], 1, *shape[at:])

    def attempt(tokens: frozenset[str]) -> tuple[Any, Any, list[Any]]:
        xs = [torch.zeros(batched(shape), dtype=torch.int64, device="meta") if name in tokens
              else torch.empty(batched(shape), dtype=torch.float32, device="meta")
              for name, shape in zip(inputs_named, input_shapes, strict=False)]
        inputs: dict[str, Any] = dict(zip(inputs_named, xs, strict=False))
        if labels is not None:
            ids = bool(inputs_named) and inputs_named[0] in tokens
            shape = label_shape if label_shape is not None else (tuple(input_shapes[0]) if ids else ())
            inputs[labels] = torch.zeros(batched(shape), dtype=torch.int64, device="meta")
        tracer = _shaped_tracer(inputs)
        try:
            with _traced_through_wrapped(), _packing_as_padding(module), warnings.catch_warnings():
                # PyTorch's note that it runs an LSTM with a projection without oneDNN: not the user's concern
                warnings.filterwarnings("ignore", message="LSTM with projections", category=UserWarning)
                graph = tracer.trace(module, concrete_args=concrete or None)
        except Exception:
            if tracer.tokens <= tokens:
                raise
            graph = None  # an nn.Embedding took an input: traced again with token ids
        return tracer, graph, xs

    try:
        tokens: frozenset[str] = frozenset()
        tracer, graph, xs = attempt(tokens)
        while tracer.tokens - tokens:  # each time an embedding takes one more input
            tokens = tokens | tracer.tokens
            tracer, graph, xs = attempt(tokens)
        gm = fx.GraphModule(tracer.root, graph, type(module).__name__)
        _writes_as_values(gm)
        _in_place_as_values(gm)
        _drop_metric_outputs(gm)
        live = _leading_to_output(gm)
        for node in reversed(list(gm.graph.nodes)):  # computed and never used: not run on meta values
            if node.op.startswith("call_") and node not in live and not node.users and not _mutates(node):
                gm.graph.erase_node(node)
        gm.recompile()
    except SpecError:
        raise
    except Exception as exc:  # fx raises many types for data-dependent control flow and the like
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise SpecError.plain(type(module).__name__, f"cannot be traced with torch.fx ({type(exc).__name__}: "
                              f"{first[:160]}); dnnbench imports graphs of supported layers") from None
    from torch.func import functional_call

    values: dict[Any, Any] = {}

    class MetaRun(fx.Interpreter):
        def run_node(self, n: fx.Node) -> Any:
            out = super().run_node(n)
            values[n] = out
            return out

        def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
            sub = self.fetch_attr(target)
            state = _meta_state(sub)
            return functional_call(sub, state, args, kwargs)

        def get_attr(self, target: Any, args: Any, kwargs: Any) -> Any:
            return _meta(super().get_attr(target, args, kwargs))

        def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
            return super().call_function(batch_norm if target is original_batch_norm else target, args, kwargs)

    label_node = None
    run_args = []
    given = dict(zip(inputs_named, xs, strict=False))
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        if n.target == labels:
            label_node = n
            run_args.append(tracer.values[n])
        elif n.target in given:
            run_args.append(given[n.target])
        else:  # a parameter held at its default (fx keeps the default as the placeholder's argument)
            run_args.append(n.args[0] if n.args else None)
    original_batch_norm = torch.nn.functional.batch_norm
    try:
        with torch.no_grad(), _on_meta_values() as batch_norm:
            MetaRun(gm).run(*run_args)
    except SpecError:
        raise
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        shown = list(input_shapes[0]) if n_in == 1 else [list(x) for x in input_shapes]
        raise SpecError(f"{type(module).__name__} input_shape", shown,
                        f"does not fit the module ({type(exc).__name__}: {first[:200]})") from None
    return gm, values, label_node, inputs_named


def _copies_per_window(node: Any, data_nodes: list[Any]) -> bool:
    """``q.repeat_interleave(n, dim=0)`` of one layer output, once a view has folded windows into the batch:
    each sample's value copied once per window of the sample (GC-ViT's global query beside its windows,
    image-major)."""
    dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim")
    return _fold_name(node) == "repeat_interleave" and len(data_nodes) == 1 and dim == 0


def _averaged_over_batch_axis(node: Any, data_nodes: list[Any]) -> bool:
    """``torch.stack([a, b, ...], dim=0)`` of layer outputs (a new axis before the batch) whose every use
    is its mean or sum over that axis (CrossViT's ``torch.mean(torch.stack([head(x) for ...], 0), 0)``)."""
    listed = node.args[0] if node.args else node.kwargs.get("tensors")
    if not isinstance(listed, (list, tuple)) or len(listed) != len(data_nodes) or not node.users:
        return False
    if (node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)) != 0:
        return False
    for user in node.users:
        dim = user.args[1] if len(user.args) > 1 else user.kwargs.get("dim")
        keep = user.args[2] if len(user.args) > 2 else user.kwargs.get("keepdim", False)
        if _fold_name(user) not in ("mean", "sum") or dim not in (0, (0,), [0]) or keep:
            return False
    return True


def _heads_averaged(b: SpecBuilder, node: Any, sources: list[str], shape: Shape, origin: str) -> str:
    """The mean (or sum) over a stack of layer outputs in front of the batch: their sum (an ``add``
    layer), then a constant factor 1/n for the mean."""
    total = sources[0] if len(sources) == 1 else b.add({"kind": "add"}, shape, node.name + "_sum", origin, sources)
    if _fold_name(node) == "sum" or len(sources) == 1:
        return total
    return b.add({"kind": "scale", "learned": False}, shape, node.name, origin, [total])


def _outputs_summed(b: SpecBuilder, outs: list[Any], layer_of: dict[Any, str], per_sample: Any, owner: str) -> str:
    """Several outputs (GoogLeNet's and Inception-v3's auxiliary classifiers beside the logits in training
    mode; a multi-task network's heads) joined into one output that the loss's gradient reaches, so that
    each output's layers are priced forward and backward. Outputs of one shape: their sum, an ``add``
    layer. Outputs of different shapes: each flattened to one vector per sample, then joined, a ``concat``
    layer (one copy of every output value more than training makes). The loss's own arithmetic (one
    loss over the joined output where training takes one per output) is not the same."""
    shapes = [tuple(per_sample(o)) for o in outs]
    if len(set(shapes)) == 1:
        return b.add({"kind": "add"}, shapes[0], "outputs", "the forward's outputs", [layer_of[o] for o in outs])
    flat = []
    for o, shape in zip(outs, shapes, strict=True):
        size = math.prod(shape)
        flat.append(layer_of[o] if len(shape) <= 1 else
                    b.add({"kind": "flatten"}, (size,), f"{layer_of[o]}_flat", "the forward's outputs", [layer_of[o]]))
    total = sum(math.prod(shape) for shape in shapes)
    return b.add({"kind": "concat", "axis": 0}, (total,), "outputs", "the forward's outputs", flat)


def _pieces(node: Any, value: Any, data_nodes: list[Any], layer_of: dict[Any, str], describe: Any,
            per_sample: Any, folded: bool = False) -> tuple[str, int, list[tuple[int, int]], Shape]:
    """(source layer, per-sample axis, [(start, stop), ...], the source's per-sample shape) of
    ``x.split``/``x.chunk``/``torch.split``/``x.unbind``."""
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    if name not in ("split", "chunk", "tensor_split", "unbind") or len(data_nodes) != 1:
        raise SpecError.plain(describe(node), "makes several tensors in a way dnnbench's importer does not "
                              "support (it imports x.split, x.chunk and x.unbind along one sample's axis)")
    args = list(node.args) + [None] * 3
    dim = node.kwargs.get("dim", (args[1] if name == "unbind" else args[2]) or 0)
    source = data_nodes[0]
    offset = 0 if folded else 1  # folded values: the batch axis also holds the sample's first axis
    rank = len(per_sample(source)) + offset
    axis = int(dim) % rank - offset
    if axis < 0 or (folded and axis == 0):
        raise SpecError.plain(describe(node), "splits the batch axis, which is not one sample's layer")
    bounds, start = [], 0
    for piece in value:
        size = 1 if name == "unbind" else int(piece.shape[axis + offset])
        bounds.append((start, start + size))
        start += size
    return layer_of[source], axis, bounds, per_sample(source)


def _parameter_owner(path: str) -> str:
    """A layer's name from the parameter it is computed with: the module's path for its ``weight`` or
    ``bias`` (``F.linear(x, self.qkv.weight, ...)`` is ``attn.qkv``), the parameter's path otherwise."""
    for suffix in (".weight", ".bias"):
        if path.endswith(suffix):
            return path.removesuffix(suffix)
    return path


def _type_name(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    mod = cls.__module__
    if mod.startswith("torch.nn.modules"):
        mod = "torch.nn"
    return f"{mod}.{cls.__qualname__}"


def _target_name(node: Any) -> str:
    target = node.target
    if isinstance(target, str):
        return f"Tensor.{target}" if node.op == "call_method" else target
    mod = getattr(target, "__module__", None) or "torch"
    return f"{mod}.{getattr(target, '__name__', repr(target))}"


def _rank(value: Any) -> int:
    """The axes of a traced value (of its first tensor, for a tuple such as an LSTM's output)."""
    t = value[0] if isinstance(value, (tuple, list)) and value else value
    return int(t.dim()) if hasattr(t, "dim") else 0


def _numel(value: Any) -> int:
    return int(value.numel()) if hasattr(value, "numel") else 0


def _tensor_args(args: Any) -> list[Any]:
    """The nodes among ``args`` (lists such as torch.cat's included), in order, repeats kept."""
    import torch

    if isinstance(args, (list, tuple)):
        return [n for a in args for n in _tensor_args(a)]
    return [args] if isinstance(args, torch.fx.Node) else []


def _constant_value(gm: Any, node: Any) -> Any:
    """The value of a constant tensor (``get_attr`` of a buffer, or of a tensor the forward made from
    constants alone) the module holds, or the node where it holds none (a module on the meta device)."""
    obj: Any = gm
    for part in str(node.target).split("."):
        obj = getattr(obj, part, None)
    return obj if obj is not None and getattr(obj, "device", None) is not None and obj.device.type != "meta" else node


def _computed_constant(gm: Any, node: Any, values: dict[Any, Any], layer_of: dict[Any, str],
                       params: dict[Any, Any]) -> Any:
    """The value of a tensor the forward computes from buffers and sizes alone (``idx.view(1, -1,
    1).expand_as(values)``): the trace's meta values hold none, so its operations run again on the
    module's buffers, sizes taken from the trace. The node itself where any operand is data, a parameter
    or a buffer on the meta device."""
    import torch

    memo: dict[Any, Any] = {}

    def value(n: Any) -> Any:
        if not isinstance(n, torch.fx.Node):
            return n
        if n in memo:
            return memo[n]
        traced = values.get(n)
        if n in layer_of or params.get(n) or n.op == "placeholder" or n.op not in (
                "get_attr", "call_function", "call_method"):
            if traced is None:
                raise LookupError(n.name)
            result = traced  # a size (x.size(0)), or data on the meta device whose shape alone counts (expand_as)
        elif n.op == "get_attr":
            result = _constant_value(gm, n)
            if isinstance(result, torch.fx.Node):
                raise LookupError(n.name)
        else:
            a = torch.fx.node.map_aggregate(n.args, value)
            k = torch.fx.node.map_aggregate(n.kwargs, value)
            with torch.no_grad():
                result = n.target(*a, **k) if n.op == "call_function" else getattr(a[0], n.target)(*a[1:], **k)
        memo[n] = result
        return result

    try:
        result = value(node)
    except Exception:  # data behind it, or an operation that cannot run again: left as the node
        return node
    return result if isinstance(result, torch.Tensor) and result.device.type != "meta" else node


def _data_args(args: Any, layer_of: dict[Any, str]) -> list[Any]:
    """The data nodes among ``args`` (lists such as torch.cat's included), in order, repeats kept."""
    import torch

    if isinstance(args, (list, tuple)):
        return [n for a in args for n in _data_args(a, layer_of)]
    return [args] if isinstance(args, torch.fx.Node) and args in layer_of else []


_LOSS_FUNCTIONS = ("cross_entropy", "nll_loss")
_LOSS_MODULES = ("CrossEntropyLoss", "NLLLoss")
_FOLDS = ("view", "reshape", "flatten")


#: Operations that may fold positions of a sample into the batch axis (Swin's windows: (B, H, W, C) to
#: (B·windows, w·w, C)) or take them out again.
_VIEWS = ("view", "reshape", "flatten", "unflatten")
#: Tensors made from another one's dtype and device alone: constants, whatever its values (random ones
#: too: a VAE's noise ``torch.randn_like(mu)``).
#: Tensor makers whose size may be the batch's (``torch.zeros(x.shape[0], H)``).
_BATCH_MAKERS = ("zeros", "ones", "empty", "full", "rand", "randn")


def _sized_by(node: Any, layer_of: dict[Any, str]) -> Any:
    """The data node whose shape sizes ``node`` (``torch.zeros(x.size(0), H)``: x), through ``x.shape``,
    ``x.size()`` and their items; None where no size comes from data."""
    todo = [a for a in node.all_input_nodes]
    seen: set[Any] = set()
    while todo:
        a = todo.pop()
        if a in seen:
            continue
        seen.add(a)
        if a in layer_of:
            return a
        if a.op in ("call_function", "call_method") and _fold_name(a) in ("getattr", "getitem", "size"):
            todo.extend(a.all_input_nodes)
    return None


_CONSTANT_MAKERS = ("new_zeros", "new_ones", "new_full", "new_empty", "zeros_like", "ones_like", "full_like",
                    "empty_like", "randn_like", "rand_like", "randint_like")
#: Where an operation takes its axis argument: name -> (position counting the tensor as 0, keyword).
_AXIS_ARGS = {"softmax": (1, "dim"), "log_softmax": (1, "dim"), "cat": (1, "dim"), "concat": (1, "dim"),
              "mean": (1, "dim"), "narrow": (1, "dim"), "roll": (2, "dims"), "normalize": (2, "dim")}


#: Where operations take their axes, for values folded into the batch (:func:`_unfolded_args`):
#: (position, keyword, default), the default an axis the operation works along when none is given.
_FOLDED_AXES: dict[str, tuple[tuple[int, str, Any], ...]] = {
    **{name: ((position, key, None),) for name, (position, key) in _AXIS_ARGS.items()},
    **{name: ((1, "dim", None),) for name in (
        "sum", "amax", "amin", "argmax", "argmin", "max", "min", "var", "std", "prod", "logsumexp", "cumsum",
        "cumprod", "unsqueeze", "squeeze", "sort", "argsort", "gather", "index_select", "select", "count_nonzero",
        "any", "all", "nansum", "nanmean", "median", "glu", "softmin")},
    **{name: ((1, "dim", 0),) for name in ("cat", "concat", "stack", "unbind")},
    **{name: ((2, "dim", 0),) for name in ("split", "chunk", "tensor_split")},
    "norm": ((2, "dim", None),), "repeat_interleave": ((2, "dim", None),), "topk": ((2, "dim", -1),),
    "flip": ((1, "dims", None),), "unflatten": ((1, "dim", None),), "take_along_dim": ((2, "dim", None),),
    "unfold": ((1, "dimension", None),),  # Tensor.unfold's (F.unfold, of maps, has no axis: left as it is)
    "normalize": ((2, "dim", 1),), "cosine_similarity": ((2, "dim", 1),), "gumbel_softmax": ((4, "dim", -1),),
    "flatten": ((1, "start_dim", 0), (2, "end_dim", -1)),
    **{name: ((1, "source", None), (2, "destination", None)) for name in ("movedim", "moveaxis")},
}
#: Keywords of an axis: an operation outside :data:`_FOLDED_AXES` given one is not imported on folded values.
_AXIS_KEYWORDS = ("dim", "axis", "start_dim", "end_dim")


def _unfolded_args(node: Any, rank: int, where: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments of an operation on folded values (the batch axis also holds positions of a sample:
    Swin's windows), with their axes counted as on the unfolded values (batch, positions, ...), as the
    handlers count them: axis d of the folded tensor is d + 1. An axis 0, the batch's and the positions'
    together, is an error unless a permute keeps it first or an index takes it whole."""
    args, kwargs, name = list(node.args), dict(node.kwargs), _fold_name(node)

    def shift(d: Any) -> int:
        d = int(d) % (rank + 1 if name in ("unsqueeze", "stack") else rank)  # (a new axis: one more place)
        if d == 0:
            raise SpecError.plain(where, "works along the batch axis, which holds positions of one sample here "
                                  "(folded into it by a view); dnnbench imports such values' other axes")
        return d + 1

    if name == "permute":
        dims = kwargs.pop("dims", None)
        if dims is None:
            dims = args[1] if len(args) == 2 and isinstance(args[1], (list, tuple)) else args[1:]
        full = [int(d) % rank for d in dims]
        if not full or full[0] != 0:
            raise SpecError.plain(where, "moves the batch axis, which holds positions of one sample here")
        return (args[0], [0, 1, *(d + 1 for d in full[1:])]), kwargs
    if name in ("transpose", "swapaxes", "swapdims"):
        dims = [kwargs.pop(k) if k in kwargs else args[i] for i, k in ((1, "dim0"), (2, "dim1"))]
        return (args[0], *(shift(d) for d in dims)), kwargs
    if name == "getitem":
        index = args[1] if isinstance(args[1], tuple) else (args[1],)
        if index and index[0] is Ellipsis:
            return tuple(args), kwargs
        if not index or index[0] != slice(None):
            raise SpecError.plain(where, "indexes the batch axis, which holds positions of one sample here")
        return (args[0], (slice(None), *index)), kwargs
    if name not in _FOLDED_AXES or (name == "unfold" and node.op != "call_method"):
        if any(k in kwargs for k in _AXIS_KEYWORDS):
            raise SpecError.plain(where, "works along an axis of values whose batch axis holds positions of one "
                                  "sample (folded into it by a view), an operation dnnbench does not import on them")
        return tuple(args), kwargs
    for position, key, default in _FOLDED_AXES[name]:
        given = key in kwargs or position < len(args)
        value = kwargs[key] if key in kwargs else (args[position] if position < len(args) else default)
        if not (isinstance(value, int) or (isinstance(value, (list, tuple)) and value
                                           and all(isinstance(d, int) for d in value))):
            continue  # no axis (a reduction of every axis, torch.max of two tensors): the handler's to judge
        value = shift(value) if isinstance(value, int) else type(value)(shift(d) for d in value)
        if key in kwargs or not given:
            kwargs[key] = value
        else:
            args[position] = value
    return tuple(args), kwargs



#: Where a reduction takes its axes, for values whose batch is not axis 0 (keepdim follows the axes).
_MOVED_AXIS_ARGS = {**_AXIS_ARGS, "sum": (1, "dim"), "amax": (1, "dim"), "amin": (1, "dim")}
_MOVED_REDUCTIONS = ("mean", "sum", "amax", "amin")
_MOVED_PERMUTES = ("permute", "transpose", "swapaxes", "swapdims")
_MOVED_TEXT = ("dnnbench imports transposes, permutes, views that keep the batch an axis of its own, indexing of "
               "other axes, element-wise and linear layers, layer norms, softmax, comparisons, reductions over other "
               "axes, embeddings and batch_first=False attention and recurrent layers of such values; transpose the "
               "batch to axis 0 first")


def _batch_first(module: Any) -> bool | None:
    """The ``batch_first`` of a module that has one (attention, transformer and recurrent layers; a
    transformer's from its first layer's attention), else None."""
    if hasattr(module, "batch_first"):
        return bool(module.batch_first)
    attn = getattr(module, "self_attn", None)
    layers = getattr(module, "layers", None)
    if attn is None and layers is not None and len(layers):
        attn = getattr(layers[0], "self_attn", None)
    return bool(attn.batch_first) if attn is not None and hasattr(attn, "batch_first") else None


def _batch_first_shape(shape: Shape, rank: int, axis: int) -> Shape:
    """A constant operand's ``shape`` (as torch holds it, broadcast onto values of ``rank`` axes whose batch is
    ``axis``) as it broadcasts onto the same values with the batch first."""
    full = (1,) * (rank - len(shape)) + tuple(shape)
    if len(full) <= axis:
        return tuple(shape)
    return (full[axis], *full[:axis], *full[axis + 1:])


def _batch_after_view(node: Any, before: Shape, after: Shape, b: int, where: str) -> int:
    """The batch's axis after a view (``view``, ``reshape``, ``flatten``, ``unflatten``, ``unsqueeze``,
    ``squeeze``) of a value of torch shape ``before`` whose batch is axis ``b`` (size 1, traced at batch
    1) to ``after``: where ``unsqueeze``/``squeeze`` put it, else the axis of size 1 with as many values
    before it as before the batch (the one nearest ``b``). A view that merges the batch with other axes is
    a one-line error."""
    name = _fold_name(node)
    dims = [a for a in (*node.args[1:], *node.kwargs.values()) if isinstance(a, int) and not isinstance(a, bool)]
    if name == "unsqueeze" and dims:
        d = dims[0] % len(after)
        return b + 1 if d <= b else b
    if name == "squeeze" and dims:
        d = dims[0] % len(before)
        if d == b:
            raise SpecError.plain(where, f"squeezes the batch axis (axis {b} of this value), which is not one "
                                  "sample's layer")
        return b - 1 if d < b else b
    lead, tail = math.prod(before[:b]), math.prod(before[b + 1:])
    fits = [k for k, size in enumerate(after)
            if size == 1 and math.prod(after[:k]) == lead and math.prod(after[k + 1:]) == tail]
    if not fits:
        raise SpecError.plain(where, f"views a value whose batch is axis {b} as {list(after)}, merging the batch with "
                              "one sample's axes; transpose the batch to axis 0 first")
    return min(fits, key=lambda k: abs(k - b))


def _batch_moved_call(node: Any, handler: Any, args: tuple[Any, ...], kwargs: dict[str, Any], axes: list[int],
                      rank: int, module: Any, where: str,
                      shapes: tuple[Shape, Shape] = ((), ())) -> tuple[Any, tuple[Any, ...], dict[str, Any], int]:
    """An operation on values whose batch is not axis 0 (the layout of ``batch_first=False`` layers: a
    sequence (S, N, D)) as the handlers take it, counted with the batch first: (handler, arguments, keyword
    arguments, the batch's axis in its output). Each sample's values are the same either way; only the
    axes of the arguments are counted anew. ``axes`` holds the batch's axis in each data input, ``rank``
    the first's axes, ``shapes`` the torch shapes of the first data input and of the output (for views).
    An operation that works along the batch, or that dnnbench cannot count anew, is a one-line error."""
    import torch

    if len(set(axes)) > 1:
        raise SpecError.plain(where, f"combines values whose batch is on different axes ({sorted(set(axes))}); "
                              "transpose them to one layout first")
    b = axes[0]
    first = _batch_first(module) if module is not None else None
    if first is not None:  # the layer checks that its batch_first fits (_check_batch_first)
        return handler, args, kwargs, 0 if first else 1
    name = _fold_name(node)
    held = f"works on a value whose batch is axis {b} (batch_first=False layout)"

    def batch_first_axis(d: Any) -> int:
        d = int(d) % rank
        if d == b:
            raise SpecError.plain(where, f"works along the batch axis (axis {b} of this value), which is not one "
                                  "sample's layer")
        return d + 1 if d < b else d

    if name in _MOVED_PERMUTES:
        if name == "permute":
            dims = kwargs.get("dims", args[1] if len(args) == 2 and isinstance(args[1], (list, tuple)) else args[1:])
            order = [int(d) % rank for d in dims]
        else:
            i, j = (int(kwargs[k]) if k in kwargs else int(args[position])
                    for position, k in ((1, "dim0"), (2, "dim1")))
            order = list(range(rank))
            order[i % rank], order[j % rank] = order[j % rank], order[i % rank]
        out = order.index(b)
        dims = [0, *(batch_first_axis(order[k]) for k in range(rank) if k != out)]
        return _permute, (args[0], dims), {}, out
    if name == "getitem":
        index = args[1] if isinstance(args[1], tuple) else (args[1],)
        if not all(i is None or i is Ellipsis or (isinstance(i, (int, slice)) and not isinstance(i, bool))
                   for i in index):
            raise SpecError.plain(where, f"{held} and indexes it with positions or a mask; {_MOVED_TEXT}")
        real = sum(1 for i in index if i is not None and i is not Ellipsis)
        if Ellipsis in index:
            k = index.index(Ellipsis)
            index = (*index[:k], *(slice(None),) * (rank - real), *index[k + 1:])
        else:
            index = (*index, *(slice(None),) * (rank - real))
        axis = out = batch_out = 0
        rest: list[Any] = []
        for i in index:
            if i is not None and axis == b:
                if not (isinstance(i, slice) and i == slice(None)):
                    raise SpecError.plain(where, f"indexes the batch axis (axis {b} of this value), which is not "
                                          "one sample's layer")
                batch_out = out
            else:
                rest.append(i)
            if i is not None:
                axis += 1
            out += 0 if isinstance(i, int) else 1
        return handler, (args[0], (slice(None), *rest)), kwargs, batch_out
    if name in _MOVED_AXIS_ARGS:
        position, key = _MOVED_AXIS_ARGS[name]
        value = kwargs[key] if key in kwargs else (args[position] if position < len(args) else None)
        if value is None:
            raise SpecError.plain(where, f"{held} and works along all its axes, the batch's too, which is not one "
                                  "sample's layer")
        dims = [value] if isinstance(value, int) else list(value)
        moved = batch_first_axis(value) if isinstance(value, int) else type(value)(batch_first_axis(d) for d in value)
        listed = list(args)
        if key in kwargs:
            kwargs = {**kwargs, key: moved}
        else:
            listed[position] = moved
        keepdim = kwargs.get("keepdim", listed[position + 1] if position + 1 < len(listed) else False)
        out = b
        if name in _MOVED_REDUCTIONS and not keepdim:
            out -= sum(1 for d in dims if int(d) % rank < b)
        return handler, tuple(listed), kwargs, out
    if name in _VIEWS or name in ("unsqueeze", "squeeze"):
        return handler, args, kwargs, _batch_after_view(node, shapes[0], shapes[1], b, where)
    last_axis = handler in (_linear, _linear_function, _layer_norm, _rms_norm)
    if last_axis and b >= rank - 1:
        raise SpecError.plain(where, f"works along the last axis, which holds the batch here; {_MOVED_TEXT}")
    layout_free = (handler in (_linear, _linear_function, _layer_norm, _rms_norm, _dropout, _add, _sub, _mul, _div,
                               _neg, _identity, _clamp, _hardtanh, _threshold, _rrelu, _softsign, _embedding)
                   or getattr(handler, "__qualname__", "").startswith(("activation_handler.", "_compare."))
                   or name in ("softmax", "log_softmax")
                   or isinstance(module, (torch.nn.Softmax, torch.nn.LogSoftmax)))
    if not layout_free:
        raise SpecError.plain(where, f"{held}; {_MOVED_TEXT}")
    return handler, args, kwargs, b


def _mask_use(gm: Any, node: Any, user: Any) -> bool:
    """Whether ``user`` takes ``node`` as a mask argument alone (``key_padding_mask``, ``attn_mask``,
    ``src_key_padding_mask``, ... of ``nn.MultiheadAttention`` and the transformer modules; ``attn_mask``
    of ``F.scaled_dot_product_attention``). Masking changes no count, as for a causal mask."""
    import inspect

    import torch
    from torch import nn

    if user.op == "call_module":
        sub = gm.get_submodule(user.target)
        if not isinstance(sub, (nn.MultiheadAttention, nn.TransformerEncoderLayer, nn.TransformerEncoder,
                                nn.TransformerDecoderLayer, nn.TransformerDecoder, nn.Transformer)):
            return False
        try:
            named = list(inspect.signature(sub.forward).bind(*user.args, **user.kwargs).arguments.items())
        except TypeError:
            return False
    elif user.op == "call_function" and user.target is torch.nn.functional.scaled_dot_product_attention:
        named = [("attn_mask" if k == 3 else f"operand{k}", a) for k, a in enumerate(user.args)]
        named += list(user.kwargs.items())
    else:
        return False

    def holds(value: Any) -> bool:
        found: list[Any] = []
        torch.fx.node.map_arg(value, found.append)
        return node in found

    uses = [name for name, value in named if holds(value)]
    return bool(uses) and all("mask" in name for name in uses)


def _gather_kept(b: SpecBuilder, dim: Any, in_shape: Shape, out_shape: Shape, name: str, origin: str,
                 source: str, moved: bool) -> str:
    """A gather along one axis by positions the data chose (token pruning: the k tokens of a top k
    of their scores, ``x.gather(1, idx[..., None].expand(-1, -1, D))``): a ``slice`` of k of the axis's
    positions, which costs what the gather costs (a copy of the kept values; backward, their gradients
    written back among zeros) whichever positions are kept."""
    rank = len(in_shape) + 1
    axis = dim % rank - 1 if isinstance(dim, int) and not isinstance(dim, bool) else None
    expected = ("dnnbench imports a gather along one axis of a sample's values that keeps whole positions "
                "(x.gather(1, idx.unsqueeze(-1).expand(-1, -1, D)) of the indices of a top k)")
    if moved:
        raise SpecError.plain(origin, "gathers positions of a value whose batch is not its first axis; " + expected)
    if axis is None or axis < 0:
        raise SpecError.plain(origin, f"gathers along axis {dim!r}, which is not one sample's; " + expected)
    if (len(out_shape) != len(in_shape) or out_shape[axis] > in_shape[axis]
            or any(o != i for k, (o, i) in enumerate(zip(out_shape, in_shape, strict=True)) if k != axis)):
        raise SpecError.plain(origin, f"gathers {list(out_shape)} from {list(in_shape)} along axis {axis + 1}; "
                              + expected)
    return b.add({"kind": "slice", "axis": axis, "start": 0, "stop": int(out_shape[axis])}, out_shape, name, origin,
                 [source])


def _used_only_for(gm: Any, use: Callable[[Any, Any], bool]) -> set[Any]:
    """The nodes whose every use, directly or through other such nodes, is one ``use(node, user)`` allows."""
    found: set[Any] = set()
    for node in reversed(list(gm.graph.nodes)):
        if node.users and all(u in found or use(node, u) for u in node.users):
            found.add(node)
    return found


def _mask_only(gm: Any) -> set[Any]:
    """The nodes whose every use, directly or through other such nodes, is a mask argument of attention
    (:func:`_mask_use`): a padding mask computed from the token ids (``ids == pad``), or taken as an
    input of its own. They are no layers."""
    return _used_only_for(gm, lambda node, user: _mask_use(gm, node, user))


def _picks_per_sample(gm: Any, node: Any) -> bool:
    """``x[torch.arange(B), positions]``: one position of each sample's first axis, chosen per sample by
    positions computed from the data (CLIP's end-of-text token ``text.argmax(-1)``; an RNN's last
    non-padding step ``lengths - 1``), the other axes whole. Traced at batch 1, ``torch.arange(B)`` is
    the constant ``[0]``."""
    import operator

    import torch

    if node.op != "call_function" or node.target is not operator.getitem or not isinstance(node.args[1], tuple):
        return False
    index = node.args[1]
    if len(index) < 2 or not hasattr(index[0], "op") or not hasattr(index[1], "op"):
        return False
    first = index[0]
    if (first.op in ("call_function", "call_method") and first.target in (operator.getitem, "unsqueeze", "view",
                                                                          "reshape") and first.args
            and hasattr(first.args[0], "op")):  # torch.arange(B)[:, None]: k positions per sample
        first = first.args[0]
    if first.op == "call_function" and first.target is torch.arange:
        return True
    value = _constant_value(gm, first) if first.op == "get_attr" else None
    return (isinstance(value, torch.Tensor) and value.dim() in (1, 2) and not value.is_floating_point()
            and value.flatten().tolist() == [0])


def _gather_operands(node: Any) -> tuple[Any, Any, Any] | None:
    """(data, dim, index) of ``torch.gather(x, dim, index)``, ``x.gather(dim, index)`` or
    ``torch.take_along_dim(x, index, dim)``; None for any other node."""
    import torch

    if (node.op == "call_method" and node.target == "gather"
            or node.op == "call_function" and node.target is torch.gather):
        args = [*node.args, *[node.kwargs[k] for k in ("dim", "index") if k in node.kwargs]]
        return (args[0], args[1], args[2]) if len(args) >= 3 else None
    if node.op == "call_function" and node.target is torch.take_along_dim or (
            node.op == "call_method" and node.target == "take_along_dim"):
        args = [*node.args, *[node.kwargs[k] for k in ("indices", "dim") if k in node.kwargs]]
        return (args[0], args[2], args[1]) if len(args) >= 3 else None
    return None


def _scatter_args(node: Any) -> list[Any] | None:
    """[target, dim, index, src or value, ...] of ``target.scatter(dim, index, ...)``, ``torch.scatter(...)``
    or the in-place ``scatter_`` (keywords in that order); None for any other node or fewer operands."""
    import torch

    if not (node.op == "call_method" and node.target in ("scatter", "scatter_")
            or node.op == "call_function" and node.target is torch.scatter):
        return None
    args = [*node.args, *[node.kwargs[k] for k in ("dim", "index", "src", "value") if k in node.kwargs]]
    return args if len(args) >= 4 else None


def _scatter_operands(node: Any) -> tuple[Any, Any, Any, Any] | None:
    """(target, dim, index, src) of a scatter of a tensor (:func:`_scatter_args`); None for any other node,
    or a scatter of a number (``value=``)."""
    import torch

    args = _scatter_args(node)
    if args is None or not isinstance(args[3], torch.fx.Node):
        return None
    return args[0], args[1], args[2], args[3]


def _reduce_operands(node: Any) -> tuple[Any, Any, Any, Any] | None:
    """(target, dim, index, src) of ``target.scatter_add(dim, index, src)``, ``scatter_reduce(...)``, their
    in-place forms and ``torch.scatter_add``/``torch.scatter_reduce``; None for any other node."""
    import torch

    if not (node.op == "call_method" and node.target in _SCATTERS or node.op == "call_function"
            and node.target in (torch.scatter_add, torch.scatter_reduce)):
        return None
    args = [*node.args, *[node.kwargs[k] for k in ("dim", "index", "src") if k in node.kwargs]]
    return (args[0], args[1], args[2], args[3]) if len(args) >= 4 else None


def _filled_operands(node: Any) -> tuple[Any, Any, Any] | None:
    """(target, dim, index) of a scatter of a number (:func:`_scatter_args`): ``target.scatter_(dim, index, 1)``
    (a one-hot of the positions: a VQ-VAE's encodings), ``scatter(..., value=1)``; None for any other node."""
    import torch

    args = _scatter_args(node)
    if args is None or isinstance(args[3], torch.fx.Node) or not isinstance(args[2], torch.fx.Node):
        return None
    return args[0], args[1], args[2]


def _scattered(b: SpecBuilder, dim: Any, src_shape: Shape, out_shape: Shape, name: str, origin: str,
               source: str) -> str:
    """A scatter of k values per position along one axis into a constant of n there, at positions the
    data chose (a mixture of experts' noisy top-k gating: ``zeros.scatter(-1, top_idx, gates)``): the k
    values and zeros for the other n − k, joined (a ``concat``), which costs what the scatter costs (a
    write of the n values; backward, the k values' gradients), whichever positions it writes."""
    expected = ("dnnbench imports a scatter along one axis of a sample's values into a constant of their shape "
                "but for that axis")
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise SpecError.plain(origin, f"scatters along axis {dim!r}; " + expected)
    axis = dim % (len(out_shape) + 1) - 1
    if axis < 0 or len(src_shape) != len(out_shape) or src_shape[axis] > out_shape[axis] or any(
            s != o for k, (s, o) in enumerate(zip(src_shape, out_shape, strict=True)) if k != axis):
        raise SpecError.plain(origin, f"scatters {list(src_shape)} into {list(out_shape)} along axis {dim}; "
                              + expected)
    if src_shape == out_shape:
        return source  # every position written: the values, permuted
    rest = (*out_shape[:axis], out_shape[axis] - src_shape[axis], *out_shape[axis + 1:])
    zeros = b.add({"kind": "zeros", "shape": list(rest)}, rest, f"{name}_rest", origin, [source])
    return b.add({"kind": "concat", "axis": axis}, out_shape, name, origin, [source, zeros])


def _positions_only(gm: Any) -> set[Any]:
    """The nodes whose every use, directly or through other such nodes, is the positions of a pick per
    sample (:func:`_picks_per_sample`) or the index of a gather (:func:`_gather_operands`: the tokens a
    top k kept): no layers (a pick costs the same whichever positions it takes; positions are never
    differentiated)."""
    def use(node: Any, user: Any) -> bool:
        gathered = _gather_operands(user)
        if gathered is not None:
            return gathered[2] is node and gathered[0] is not node
        scattered = _scatter_operands(user) or _reduce_operands(user)
        if scattered is not None:
            return scattered[2] is node and node is not scattered[0] and node is not scattered[3]
        return _picks_per_sample(gm, user) and user.args[1][1] is node and user.args[0] is not node

    return _used_only_for(gm, use)


def _mutates(node: Any) -> bool:
    """Whether ``node`` changes a tensor in place: ``h.relu_()``, ``torch.relu_(h)``, ``h.mul_(g)`` (a method
    or function whose name ends in one underscore) or ``buffer[i] = value`` (``operator.setitem``)."""
    if _is_write(node):
        return True
    name = _fold_name(node)
    return node.op in ("call_method", "call_function") and name.endswith("_") and not name.endswith("__")


def _is_write(node: Any) -> bool:
    """``buffer[index] = value``: ``operator.setitem``, or ``__setitem__`` of a tensor the forward made from
    constants alone (``torch.zeros(T, B, V)`` of numbers)."""
    import operator

    return (node.op == "call_function" and node.target is operator.setitem) or (
        node.op == "call_method" and node.target == "__setitem__")


def _written_buffer(target: Any, axis: int, positions: tuple[int, ...], *values: Any) -> Any:
    """What ``buffer[:, p] = value`` for each position leaves in ``target`` (the writes of a loop into a
    buffer of zeros), as one value: traced as one call (:func:`_writes_as_values`)."""
    out = target.clone()
    for p, v in zip(positions, values, strict=True):
        out.select(axis, p).copy_(v)
    return out


def _writes_as_values(gm: Any) -> None:
    """``outputs = torch.zeros(B, T, V)`` then ``outputs[:, t] = o`` at constant positions of one axis (a
    decoder's loop collecting its steps; ``outputs[t] = o`` of a sequence-first buffer too): every use after
    the last write reads one :func:`_written_buffer` call of the writes, as if the values had been stacked.
    Other writes stay ``__setitem__`` nodes, which the import names in a one-line error."""
    def key(target: Any) -> Any:  # a constant tensor is a new get_attr node at every use: its attribute
        return ("attr", str(target.target)) if target.op == "get_attr" else target

    writes: dict[Any, list[tuple[Any, int, int, Any]]] = {}
    bad: set[Any] = set()
    for node in gm.graph.nodes:
        if not _is_write(node) or len(node.args) != 3:
            continue
        target, index, value = node.args
        idx = index if isinstance(index, tuple) else (index,)
        lead = 0
        while lead < len(idx) and idx[lead] == slice(None):
            lead += 1
        ok = (hasattr(target, "op") and hasattr(value, "op") and lead < len(idx) and isinstance(idx[lead], int)
              and not isinstance(idx[lead], bool) and idx[lead] >= 0 and all(i == slice(None) for i in idx[lead + 1:])
              and (_fold_name(target) in _CONSTANT_MAKERS or _fold_name(target) in _BATCH_MAKERS
                   or target.op == "get_attr" and str(target.target).startswith("_tensor_constant")))
        if not ok:
            if hasattr(target, "op"):
                bad.add(key(target))
            continue
        writes.setdefault(key(target), []).append((node, lead, int(idx[lead]), value))
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for k, found in writes.items():
        axes = {axis for _, axis, _, _ in found}
        positions = [p for _, _, p, _ in found]
        if k in bad or len(axes) != 1 or len(set(positions)) != len(positions):
            continue
        first, last = found[0][0], found[-1][0]
        written = {w for w, _, _, _ in found}
        holders = [n for n in gm.graph.nodes if key(n) == k] if isinstance(k, tuple) else [k]
        readers = [(h, u) for h in holders for u in h.users if u not in written]
        if any(order[first] < order[u] < order[last] for _, u in readers):
            continue  # read between the writes: left for the one-line error
        with gm.graph.inserting_after(last):
            joined = gm.graph.call_function(_written_buffer, (found[0][0].args[0], axes.pop(), tuple(positions),
                                                              *[v for _, _, _, v in found]))
        for holder, user in readers:
            if order[user] > order[last]:
                user.replace_input_with(holder, joined)
        for w in written:
            gm.graph.erase_node(w)


def _in_place_as_values(gm: Any) -> None:
    """What follows an in-place operation on a tensor reads its result: every later use of the tensor
    (``h.relu_(); return fc(h)``) takes the operation's node instead, as if written ``h = h.relu_()``
    (``buffer[i] = value``, whose node is no tensor, is left for the import to name)."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for node in list(gm.graph.nodes):
        if not _mutates(node) or _is_write(node) or not node.args or not hasattr(node.args[0], "op"):
            continue
        target = node.args[0]
        for user in list(target.users):
            if user is not node and order[user] > order[node]:
                user.replace_input_with(target, node)


def _leading_to_output(gm: Any) -> set[Any]:
    """The nodes the forward's output is computed from (the output node included)."""
    live: set[Any] = set()
    todo = [n for n in gm.graph.nodes if n.op == "output"]
    while todo:
        node = todo.pop()
        if node not in live:
            live.add(node)
            todo.extend(node.all_input_nodes)
    return live


def _padded_pack(input: Any, lengths: Any, batch_first: bool = False, enforce_sorted: bool = True) -> Any:
    """``pack_padded_sequence`` while tracing: the padded sequence itself (the recurrent layer priced over
    every step, an upper bound: packing skips the padding, which depends on the data)."""
    return input


def _padded_unpack(sequence: Any, batch_first: bool = False, padding_value: float = 0.0,
                   total_length: Any = None) -> tuple[Any, None]:
    """``pad_packed_sequence`` while tracing: the sequence, and no lengths."""
    return sequence, None


@contextlib.contextmanager
def _packing_as_padding(module: Any) -> Iterator[None]:
    """While tracing: ``torch.nn.utils.rnn.pack_padded_sequence`` and ``pad_packed_sequence`` as the padded
    sequence itself (:func:`_padded_pack`), where torch holds them and where the module's code imported
    them (the globals of its modules' Python modules)."""
    import sys

    from torch.nn.utils import rnn

    swaps = {rnn.pack_padded_sequence: _padded_pack, rnn.pad_packed_sequence: _padded_unpack}
    spaces = [vars(rnn)] + [vars(sys.modules[m]) for m in {type(sub).__module__ for sub in module.modules()}
                            if m in sys.modules and m != rnn.__name__]
    saved = [(space, name, value) for space in spaces for name, value in list(space.items())
             if any(value is original for original in swaps)]
    for space, name, value in saved:
        space[name] = next(stand_in for original, stand_in in swaps.items() if value is original)
    try:
        yield
    finally:
        for space, name, value in saved:
            space[name] = value


def _is_loss(gm: Any, node: Any) -> bool:
    """A classification loss: ``F.cross_entropy``/``F.nll_loss`` or ``nn.CrossEntropyLoss``/``nn.NLLLoss``."""
    if node.op == "call_function":
        return getattr(node.target, "__name__", "") in _LOSS_FUNCTIONS and (
            getattr(node.target, "__module__", "") or "").startswith("torch")
    if node.op == "call_module":
        return type(gm.get_submodule(node.target)).__name__ in _LOSS_MODULES
    return False


def _fold_name(node: Any) -> str:
    if node.op == "call_method":
        return str(node.target)
    if node.op == "call_function":
        return getattr(node.target, "__name__", "")
    return ""


def _loss_folds(gm: Any, values: dict[Any, Any]) -> dict[Any, Any]:
    """Reshapes between the logits and a loss that fold tokens into the batch
    (``logits.view(-1, logits.size(-1))``): node -> the node it views, so the loss takes the logits."""
    folds: dict[Any, Any] = {}
    for node in gm.graph.nodes:
        if not _is_loss(gm, node) or not node.args:
            continue
        arg = node.args[0]
        while (hasattr(arg, "op") and _fold_name(arg) in _FOLDS and len(arg.users) == 1 and arg.args
               and hasattr(arg.args[0], "op")):
            folds[arg] = arg.args[0]
            arg = arg.args[0]
    return folds


def _output_folds(gm: Any, values: dict[Any, Any]) -> dict[Any, Any]:
    """A (log-)softmax over the classes that the forward returns, taken on logits whose tokens a reshape
    folded into the batch (PyTorch's word language model: ``F.log_softmax(decoded.view(-1, ntoken),
    dim=1)``, for a loss outside the forward): the softmax node -> the logits before the fold."""
    import torch

    found: dict[Any, Any] = {}
    out = next((n for n in gm.graph.nodes if n.op == "output"), None)
    if out is None:
        return found
    for node in _flat_nodes(out.args):
        if _fold_name(node) not in ("softmax", "log_softmax") or not node.args or not hasattr(node.args[0], "op"):
            continue
        fold = node.args[0]
        dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
        folded, source = values.get(fold), values.get(fold.args[0]) if fold.args else None
        if (_fold_name(fold) in _FOLDS and len(fold.users) == 1 and hasattr(fold.args[0], "op")
                and isinstance(folded, torch.Tensor) and isinstance(source, torch.Tensor)
                and folded.dim() == 2 and isinstance(dim, int) and dim % 2 == 1 and source.dim() > 2
                and source.shape[-1] == folded.shape[-1] and len(node.users) == 1):
            found[node] = fold.args[0]
    return found


#: Losses between two values of one shape that a forward may compute and return (a VQ-VAE's codebook and
#: commitment losses, an autoencoder's or a VAE's reconstruction loss): name -> the element function that
#: prices it (of the difference).
_REGRESSION_LOSSES = {"mse_loss": "square", "l1_loss": "abs", "MSELoss": "square", "L1Loss": "abs",
                      "binary_cross_entropy": "log", "BCELoss": "log",
                      "binary_cross_entropy_with_logits": "softplus", "BCEWithLogitsLoss": "softplus"}
#: Where the functional forms take ``reduction`` positionally (after the deprecated size_average, reduce).
_REDUCTION_POSITION = {"mse_loss": 4, "l1_loss": 4, "binary_cross_entropy": 5, "binary_cross_entropy_with_logits": 5}


def _regression_loss_name(gm: Any, node: Any) -> str:
    """``F.mse_loss``/``F.l1_loss`` or ``nn.MSELoss``/``nn.L1Loss``: its key in :data:`_REGRESSION_LOSSES`, else ''."""
    if node.op == "call_function" and (getattr(node.target, "__module__", "") or "").startswith("torch"):
        name = getattr(node.target, "__name__", "")
    elif node.op == "call_module":
        name = type(gm.get_submodule(node.target)).__name__
    else:
        return ""
    return name if name in _REGRESSION_LOSSES else ""


def _regression_loss(b: SpecBuilder, node: Any, kind: str, gm: Any, layer_of: dict[Any, str], describe: Any,
                     per_sample: Any) -> tuple[str, Shape]:
    """A loss the forward computes of a layer output against another or a constant, element by element
    (:data:`_REGRESSION_LOSSES`): their difference (an ``add``, as a subtraction; a ``bias`` of constants
    against a constant), one element function of it (the square, the absolute value; a logarithm for
    binary cross-entropy, a softplus for it on logits), and with ``reduction`` mean or sum
    :func:`_batch_reduced`: one number per sample (shape (1,)), where PyTorch's takes one for the batch.
    (The layer and the per-sample shape of its value.)"""
    where = describe(node)
    if node.op == "call_module":
        reduction = gm.get_submodule(node.target).reduction
    else:
        at = _REDUCTION_POSITION[kind]
        reduction = node.kwargs.get("reduction", node.args[at] if len(node.args) > at else "mean")
    pred = node.args[0] if node.args else node.kwargs.get("input")
    target = node.args[1] if len(node.args) > 1 else node.kwargs.get("target")
    if pred not in layer_of and target in layer_of:
        pred, target = target, pred
    if pred not in layer_of or reduction not in ("mean", "sum", "none"):
        raise SpecError.plain(where, f"takes a loss of {'no layer output' if pred not in layer_of else reduction!r}; "
                              "dnnbench imports a mean, sum or per-element loss of a layer output against another "
                              "or a constant")
    shape = per_sample(pred)
    if target in layer_of:
        if per_sample(target) != shape:
            raise SpecError.plain(where, f"takes a loss of shapes {list(shape)} and {list(per_sample(target))}; "
                                  "dnnbench imports it between values of one shape")
        diff = b.add({"kind": "add"}, shape, f"{node.name}_difference", where, [layer_of[pred], layer_of[target]])
    else:
        diff = b.add({"kind": "bias", "weights": 0}, shape, f"{node.name}_difference", where, [layer_of[pred]])
    function = _REGRESSION_LOSSES[kind]
    each = b.add({"kind": "activation", "function": "pow", "exponent": 2.0} if function == "square"
                 else {"kind": "activation", "function": function}, shape, f"{node.name}_elements", where, [diff])
    if reduction == "none":
        return each, shape
    return _batch_reduced(b, reduction, shape, node.name, where, each)


#: Reductions that, given no axis, take one number for the whole batch: their reduce mode.
_BATCH_REDUCTIONS = {"sum": "sum", "mean": "mean", "amax": "max", "amin": "min", "max": "max", "min": "min"}


def _batch_reduced(b: SpecBuilder, mode: str, shape: Shape, name: str, origin: str, source: str) -> tuple[str, Shape]:
    """A reduction of every axis, the batch's too (``kld.sum()``, ``F.relu(1 - s).mean()``: a loss the forward
    computes), priced per sample: a ``reduce`` over the sample's axes to one number (shape (1,)); a value
    of one number per sample already is that number. (The layer and its per-sample shape.)"""
    if all(d == 1 for d in shape):
        return source, shape
    kept = tuple(1 for _ in shape)
    total = b.add({"kind": "reduce", "axes": list(range(len(shape))), "mode": mode, "keepdim": True}, kept, name,
                  origin, [source])
    return (b.flatten(kept, (1,), f"{name}_value", origin, total) if len(kept) > 1 else total), (1,)


def _gradient_free(gm: Any) -> set[Any]:
    """The nodes no parameter's gradient flows back from: computed from constants and the inputs alone,
    or through ``detach``, an index of a search (``argmax``, ``argmin``), a comparison or a one-hot."""
    import torch

    cut = ("detach", "argmax", "argmin", "eq", "ne", "lt", "gt", "le", "ge", "one_hot", "sign", "round", "floor",
           "ceil", "isnan", "isinf", "bucketize", "searchsorted")
    carries: set[Any] = set()
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            attr = gm
            for part in str(node.target).split("."):
                attr = getattr(attr, part, None)
            if isinstance(attr, torch.nn.Parameter) and attr.requires_grad:
                carries.add(node)
        elif node.op == "call_module":
            if any(p.requires_grad for p in gm.get_submodule(node.target).parameters()) or any(
                    a in carries for a in node.all_input_nodes):
                carries.add(node)
        elif node.op in ("call_function", "call_method") and _fold_name(node) not in cut and not (
                _filled_operands(node) is not None):
            if any(a in carries for a in node.all_input_nodes):
                carries.add(node)
    return {n for n in gm.graph.nodes if n.op not in ("placeholder", "output") and n not in carries}


def _drop_metric_outputs(gm: Any) -> None:
    """Of a returned tuple, list or dict, the values no parameter's gradient flows back from (a VQ-VAE's
    perplexity and codes, an accuracy) are metrics: dropped, as training does not back-propagate them;
    the values the loss reaches stay. A forward whose every returned value is such is left as it is."""
    out = next((n for n in gm.graph.nodes if n.op == "output"), None)
    if out is None or not out.args or not isinstance(out.args[0], (tuple, list, dict)):
        return
    free = _gradient_free(gm)
    returned = out.args[0]
    items = list(returned.items()) if isinstance(returned, dict) else list(enumerate(returned))
    kept = [(k, v) for k, v in items if not (hasattr(v, "op") and v in free)]
    if len(kept) == len(items) or not any(hasattr(v, "op") for _, v in kept):
        return
    out.args = (dict(kept) if isinstance(returned, dict) else type(returned)(v for _, v in kept),)


def _loss(b: SpecBuilder, node: Any, gm: Any, layer_of: dict[Any, str], folds: dict[Any, Any], describe: Any,
          per_sample: Any) -> str:
    """The loss on the logits: a softmax layer over the classes (cross-entropy), nothing after a
    log-softmax (the NLL of its output)."""
    logits = node.args[0] if node.args else node.kwargs.get("input")
    while logits in folds:
        logits = folds[logits]
    if logits not in layer_of:
        raise SpecError.plain(describe(node), "takes a loss of something not computed from the input")
    source = layer_of[logits]
    shape = per_sample(logits)
    name = _fold_name(node) if node.op == "call_function" else str(node.target)
    if name == "nll_loss" or (node.op == "call_module" and type(gm.get_submodule(node.target)).__name__ == "NLLLoss"):
        return source  # its input is a log-softmax already
    return b.add({"kind": "softmax"}, shape, str(node.target) if node.op == "call_module" else node.name,
                 describe(node), [source])


def _stacked_by_batch_move(node: Any, values: dict[Any, Any], folded: bool = False) -> tuple[int, list[int]] | None:
    """A permute that puts one per-sample axis in front of the batch (timm's
    ``qkv.reshape(B, N, 3, H, D).permute(2, 0, 3, 1, 4)``), whose every use takes one position of that
    axis (``qkv[0]``, or ``q, k, v = qkv.unbind(0)``): (that per-sample axis, the order of the other
    per-sample axes in each piece), else None."""
    if _fold_name(node) != "permute" or not node.args:
        return None
    source = values.get(node.args[0]) if hasattr(node.args[0], "op") else None
    if source is None or not hasattr(source, "dim"):
        return None
    rank = source.dim()
    dims = node.kwargs.get("dims", node.args[1] if len(node.args) == 2 else node.args[1:])
    if not isinstance(dims, (tuple, list)) or len(dims) != rank:
        return None
    full = [int(d) % rank for d in dims]
    if full[0] == 0 or full[1] != 0:
        return None

    def takes_one(user: Any) -> bool:
        return getattr(user.target, "__name__", "") == "getitem" and isinstance(user.args[1], int)

    for user in node.users:
        unbind = _fold_name(user) == "unbind" and (user.args[1:] or [user.kwargs.get("dim", 0)])[0] in (0, None)
        if not (takes_one(user) or (unbind and all(takes_one(u) for u in user.users))):
            return None
    if folded:  # the batch axis also holds the sample's first axis (Swin's windows): it stays first
        axis, rest, remaining = full[0], [0, *full[2:]], [d for d in range(rank) if d != full[0]]
        return axis, [remaining.index(d) for d in rest]
    axis = full[0] - 1
    rest = [d - 1 for d in full[2:]]
    remaining = [d for d in range(rank - 1) if d != axis]
    return axis, [remaining.index(d) for d in rest]


def _stacked_piece(b: SpecBuilder, source: str, axis: int, order: list[int], shape: Shape, index: int, name: str,
                   origin: str) -> str:
    """Position ``index`` of ``axis`` of ``source`` (per-sample ``shape``), that axis dropped and the
    others in ``order``: a slice, a view without the axis, and a permute unless the order is kept."""
    size = shape[axis]
    start = index % size
    one = (*shape[:axis], 1, *shape[axis + 1:])
    dropped = (*shape[:axis], *shape[axis + 1:])
    piece = b.add({"kind": "slice", "axis": axis, "start": start, "stop": start + 1}, one, name, origin, [source])
    piece = b.flatten(one, dropped, name + "_view", origin, piece)
    if order == list(range(len(order))):
        return piece
    return b.add({"kind": "permute", "dims": order}, tuple(dropped[d] for d in order), name + "_heads", origin,
                 [piece])


def _parameter_key(module: Any, held: list[Any], sources: dict[Any, frozenset[tuple[str, int]]],
                   parts: dict[Any, str]) -> Any:
    """What identifies the parameters an operation uses (None: none): a module's parameter objects (one
    module called twice, or two modules holding the same ones), or the parameters a functional call's
    arguments are computed from, and which parts of them (``parts``: ``a[:F]`` apart from ``a[F:]``)."""
    if module is not None:
        return tuple(sorted(id(p) for p in module.parameters())) or None
    used = frozenset().union(*(sources[a] for a in held))
    return (used | {(parts[a], 0) for a in held if a in parts}) or None


def _weight_norms(module: Any) -> dict[str, int]:
    """The parameters of ``module`` (its own, not its children's) PyTorch's weight normalisation computes,
    each with the axis it keeps (-1: the whole tensor): ``nn.utils.parametrizations.weight_norm`` (a
    ``_WeightNorm`` parametrization) or the older ``nn.utils.weight_norm`` (a ``WeightNorm`` forward
    pre-hook), of the weight or of any other parameter (an LSTM's ``weight_hh_l0``)."""
    import torch

    found: dict[str, int] = {}
    if torch.nn.utils.parametrize.is_parametrized(module):
        for name, chain in module.parametrizations.items():
            dims = [int(p.dim) for p in chain if type(p).__name__ == "_WeightNorm"]
            if dims:
                found[name] = dims[0]
    for hook in getattr(module, "_forward_pre_hooks", {}).values():
        if type(hook).__name__ == "WeightNorm":
            found[str(getattr(hook, "name", "weight"))] = int(hook.dim)
    return found


def _mark_weight_norm(added: list[dict[str, Any]], module: Any, origin: str) -> None:
    """The layer a weight-normalised module imports as gets its ``weight_norm``: g per output channel or
    neuron, per input channel, or one for the whole weight (the axis of PyTorch's weight tensor, which a
    transposed convolution holds input channels first). Weight normalisation of another module (an
    embedding, an LSTM, a bilinear layer), or of a parameter other than a convolution's or a linear
    layer's weight, is a one-line error: its magnitudes would go uncounted."""
    import torch.nn as nn

    norms = _weight_norms(module)
    if not norms:
        return
    normed = [entry for entry in added if entry["kind"] in WEIGHT_NORMED_KINDS]
    own = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
    if len(normed) != 1 or list(norms) != ["weight"] or not isinstance(module, own):
        raise SpecError.plain(origin, f"normalises its {', '.join(norms)} (weight_norm), whose magnitudes dnnbench "
                                      "cannot count on this module; it imports weight_norm of the weight of "
                                      "convolutions and nn.Linear (remove it before importing: "
                                      "torch.nn.utils.parametrize.remove_parametrizations, or "
                                      "torch.nn.utils.remove_weight_norm)")
    dim, rank = norms["weight"], module.weight.dim()
    dim = dim + rank if -rank < dim < 0 and dim != -1 else dim
    # a kernel axis: of a 2-D convolution's (.., .., K_h, K_w) weight, or of a 1-D one's (.., .., K), whose
    # kernel is the 2-D layer's one row
    kernel = {(4, 2): "kernel_rows", (4, 3): "kernel_columns", (3, 2): "kernel_columns"}.get((rank, dim))
    if dim not in (-1, 0, 1) and kernel is None:
        raise SpecError.plain(origin, f"normalises its weight along axis {dim}; dnnbench imports weight_norm with "
                                      "dim 0, 1 or None, or along a kernel axis of a 1-D or 2-D convolution")
    transposed = isinstance(module, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d))
    normed[0]["weight_norm"] = kernel or ("whole" if dim == -1 else ("output" if (dim == 0) != transposed else
                                                                      "input"))


def _held_weight(module: Any) -> Any:
    """The tensor that holds ``module``'s weight: the weight, or where a parametrization computes it anew
    at every access (weight norm, spectral norm), the parameters it computes it from (a new tensor's
    identity would be no identity at all)."""
    import torch

    if torch.nn.utils.parametrize.is_parametrized(module, "weight"):
        holder = module.parametrizations.weight
        return getattr(holder, "original", None) if hasattr(holder, "original") else holder.original0
    return getattr(module, "weight_v", None) if hasattr(module, "weight_v") else getattr(module, "weight", None)


def _record_tied(added: list[dict[str, Any]], module: Any, owners: dict[int, str], weight: Any = None) -> None:
    """Tied weights (``lm_head.weight = wte.weight``): the second module of an nn.Embedding or nn.Linear
    to use the same weight matrix is ``tied_to`` the first, so the matrix is counted once; so is a
    functional product with that matrix (``weight``: a vector quantiser's distances to an embedding's
    codes, ``torch.cdist(z, codebook.weight)``)."""
    weight = _held_weight(module) if module is not None else weight
    if weight is None:
        return
    for entry in added:
        if entry["kind"] in ("fc", "embedding"):
            if module is None and entry.get("shares"):
                return  # the same call on the same parameters again: counted once already
            owner = owners.setdefault(id(weight), str(entry["name"]))
            if owner != entry["name"]:
                entry["tied_to"] = owner
                if module is None:  # a call on the parameters again: the build keeps shares where they are the same
                    entry["shares"] = owner
            return


def _one_parameter(gm: Any, paths: list[str]) -> Any:
    """The parameter a functional call's operands are computed from, where they come from exactly one
    (its object: the identity tied weights are recognised by); None otherwise."""
    if len(set(paths)) != 1 or not paths[0]:
        return None
    try:
        return gm.get_parameter(paths[0])
    except AttributeError:
        return None


def _unsupported(node: Any, gm: Any, registries: tuple[dict[Any, Any], ...]) -> str:
    """The one-line reason an operation has no handler: the close names the importer does support (a
    module class, a function or a method), and where the whole list is."""
    import difflib

    if node.op == "call_module":
        name = type(gm.get_submodule(node.target)).__name__
    else:
        name = str(node.target if isinstance(node.target, str) else getattr(node.target, "__name__", node.target))
    known: dict[str, str] = {}
    for registry in registries:
        for key in registry:
            label = key if isinstance(key, str) else getattr(key, "__name__", "")
            if label:
                known.setdefault(label.lower(), label if isinstance(key, str) or isinstance(key, type)
                                 else f"{getattr(key, '__module__', '') or ''}.{label}".lstrip("."))
    close = difflib.get_close_matches(name.lower(), list(known), n=3, cutoff=0.75)
    hint = f"; it imports {', '.join(dict.fromkeys(known[c] for c in close))}" if close else ""
    return (f"is not supported by dnnbench's importer{hint} (docs/importing.md lists every module and operation it "
            "imports)")


def from_torch(module: torch.nn.Module, input_shape: Any, name: str | None = None,
               description: str | None = None, labels: str | None = None,
               label_shape: tuple[int, ...] | list[int] | None = None, batch_axis: int = 0) -> Network:
    """A network spec from a PyTorch module, by tracing it (docs/importing.md).

    ``input_shape`` is one sample's shape: ``(C, H, W)``, ``(N,)``, or ``(S,)`` token ids for a module
    that starts with an ``nn.Embedding``, ``()`` for one number per sample (a class id, a diffusion
    step). A forward of several inputs (``forward(self, src, tgt)``) takes one shape per input, in its
    parameters' order: ``[(S,), (T,)]``; each becomes an ``input`` layer named after its parameter.
    Branches and skip connections become layers that name their ``inputs``. Layer names are module
    paths (``features.0``); ``name`` defaults to the class name in lower case. An unsupported operation
    is a :class:`SpecError` naming the node, its op and what is supported. The module is not modified
    and no weight memory is allocated (meta device).

    A forward that takes the training labels beside its input (nanoGPT's ``forward(idx, targets=None)``)
    is traced with them when ``labels`` names that parameter (class ids, ``label_shape`` per sample:
    one per token for token ids, one per sample otherwise), so its training branch is what is imported:
    the loss it computes (``F.cross_entropy``, ``nn.CrossEntropyLoss``) becomes the network's last
    layer, a softmax, and it may return ``(logits, loss)``. Without ``labels`` every parameter after the
    input keeps its default. Code that checks or branches on shapes traces at ``input_shape``.

    ``batch_axis`` is where the forward's inputs hold the batch: 0 (``(N, ...)``, the default) or 1 for a
    forward that takes sequences first (``(S, N)`` token ids or ``(S, N, D)``, as ``batch_first=False``
    layers take them). Values whose batch is on another axis, inside any forward, are imported as one
    sample's values all the same (their axes counted with the batch first).
    """
    at: list[str] = []  # the operation being imported
    try:
        return _from_torch(module, input_shape, name, description, labels, label_shape, batch_axis, at)
    except SpecError:
        raise
    except Exception as exc:  # a form the importer does not expect: one line that names it, not a traceback
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
        raise SpecError.plain(at[0] if at else type(module).__name__,
                              f"is a form dnnbench's importer fails on ({type(exc).__name__}: {first}); "
                              "docs/importing.md lists what it imports") from None


def _from_torch(module: torch.nn.Module, input_shape: Any, name: str | None, description: str | None,
                labels: str | None, label_shape: tuple[int, ...] | list[int] | None, batch_axis: int,
                at: list[str]) -> Network:
    """:func:`from_torch`'s work; ``at`` holds the origin of the operation being imported."""
    import torch

    if not isinstance(module, torch.nn.Module):
        raise SpecError("module", type(module).__name__, "is not a torch.nn.Module")
    shapes = input_shapes(input_shape)
    if label_shape is not None:
        label_shape = tuple(int(d) for d in label_shape)
    if isinstance(batch_axis, bool) or not isinstance(batch_axis, int) or not 0 <= batch_axis <= min(map(len, shapes)):
        raise SpecError("batch_axis", batch_axis, f"expected a whole number from 0 to {min(map(len, shapes))} (the "
                        "inputs' axis that holds the batch: 0 for (N, ...), 1 for (S, N, ...))")
    gm, values, label_node, input_names = _trace(module, shapes, labels, label_shape, batch_axis)
    # A network of several inputs names each after its parameter (one input is "input", as always).
    builder = SpecBuilder(shapes[0], input_names[0] if len(shapes) > 1 else "input")
    modules, functions, methods = _registries()

    def describe(node: Any) -> str:
        if node.op == "call_module":
            return f"{node.target} ({_type_name(gm.get_submodule(node.target))})"
        return f"{node.name} ({_target_name(node)})"

    folded: set[Any] = set()  # data nodes whose batch axis also holds positions of a sample (windows)
    moved: dict[Any, int] = {}  # data nodes whose batch is not axis 0 (batch_first=False layout) -> its axis
    returned: str | None = None  # the layer whose output forward returns

    sample_shapes: dict[Any, Shape] = {}  # a loss's value (one number for the batch) and what follows from it

    def per_sample(node: Any, value: Any = None) -> Shape:
        if node in sample_shapes:
            return sample_shapes[node]
        t = values[node] if value is None else value
        if isinstance(t, (tuple, list)) and t and isinstance(t[0], torch.Tensor):
            t = t[0]  # an LSTM cell's (h, c) passed on whole: h's shape
        if t.dim() and t.shape[0] != 1 and node in folded:  # traced at batch 1: the positions alone
            return tuple(int(d) for d in t.shape)
        axis = moved.get(node, 0)
        if axis:  # the batch on another axis (batch_first=False layout): the sample's axes are the others
            if t.dim() <= axis or t.shape[axis] != 1:
                raise SpecError.plain(describe(node), f"changes the batch dimension (output shape {list(t.shape)}, "
                                      f"the batch on axis {axis})")
            return tuple(int(d) for k, d in enumerate(t.shape) if k != axis)
        if t.dim() == 0 or t.shape[0] != 1:
            raise SpecError.plain(describe(node), f"changes the batch dimension (output shape {list(t.shape)})")
        return tuple(int(d) for d in t.shape[1:])

    def lead(value: Any) -> int:
        t = value[0] if isinstance(value, (tuple, list)) and value else value
        return int(t.shape[0]) if isinstance(t, torch.Tensor) and t.dim() else 1

    learned = {name for name, _ in gm.named_parameters()}
    param_names: dict[Any, str] = {}  # node computed from parameters alone -> the parameter's path
    layer_of: dict[Any, str] = {}  # data node -> the spec layer that carries its value
    params: dict[Any, int] = {}  # node computed from parameters alone -> the weights it holds
    sources: dict[Any, frozenset[tuple[str, int]]] = {}  # such a node -> (parameter path, values) it uses
    parts: dict[Any, str] = {}  # a part of one parameter taken by constant positions -> what names the part
    keeps: dict[Any, float] = {}  # a random mask of constants (x.new_empty(...).bernoulli_(keep)) -> keep
    pieces: dict[Any, tuple[str, int, list[tuple[int, int]], Shape]] = {}  # split -> (layer, axis, bounds, shape)
    stacked: dict[Any, tuple[str, int, list[int], Shape]] = {}  # see _stacked_by_batch_move
    final: dict[Any, _FinalState | _Steps] = {}  # a recurrent layer's final states (h_n; LSTM's (h_n, c_n)) in use
    stepwise = _stepwise_calls(gm)  # recurrent calls that pass on their final states: run step by step
    extremes: set[Any] = set()  # torch.max(x, dim) and x.min(dim): (values, indices), the values a layer
    batch_constants: dict[Any, Any] = {}  # constants with the batch's size (x.new_zeros(B, H)) -> the data node
    owners: dict[int, str] = {}  # id of a weight matrix -> the spec layer that holds it
    folds = _loss_folds(gm, values)  # reshapes that fold tokens into the batch for the loss alone
    out_folds = _output_folds(gm, values)  # a returned softmax of logits folded so: -> the logits
    folds.update({n.args[0]: out_folds[n] for n in out_folds})  # the fold itself: no layer
    masks = _mask_only(gm)  # padding masks: each use a mask argument of attention
    positions = _positions_only(gm)  # positions picked per sample (x[torch.arange(B), text.argmax(-1)])
    packed: dict[Any, list[Any]] = {}  # a named tuple of outputs the forward returns -> its data nodes
    heads: dict[Any, list[Any]] = {}  # outputs stacked in front of the batch to be averaged -> those outputs
    for node in gm.graph.nodes:
        at[:] = [describe(node)]
        if node.op == "placeholder":
            if node is label_node or node.target not in input_names:
                continue  # the labels, or a parameter held at its default
            k = input_names.index(node.target)
            if k and node in masks:
                continue  # a padding mask taken as an input: no layer (see _mask_only)
            layer_of[node] = builder.last if k == 0 else builder.add_input(shapes[k], str(node.target))
            if batch_axis:
                moved[node] = batch_axis
            continue
        if node.op == "output":
            returned_nodes = [b for a in node.all_input_nodes for b in packed.get(a, [a])]
            outs = list(dict.fromkeys(a for a in returned_nodes if a in layer_of))
            losses = [a for a in outs if _is_loss(gm, a)]
            if not outs:
                raise SpecError.plain("output", f"{type(module).__name__} must return a tensor computed from its "
                                      "input")
            if len(outs) > 1 and not losses:
                returned = _outputs_summed(builder, outs, layer_of, per_sample, type(module).__name__)
            else:
                returned = layer_of[(losses or outs)[0]]
            break
        if node in folds:
            layer_of[node] = layer_of[folds[node]]
            continue
        if node in out_folds and out_folds[node] in layer_of:  # the classes' softmax of folded tokens' logits
            logits = out_folds[node]
            layer_of[node] = builder.add({"kind": "softmax"}, per_sample(logits), node.name, describe(node),
                                         [layer_of[logits]])
            continue
        if _is_loss(gm, node):
            layer_of[node] = _loss(builder, node, gm, layer_of, folds, describe, per_sample)
            continue
        regression = _regression_loss_name(gm, node)
        if regression:
            layer_of[node], shape = _regression_loss(builder, node, regression, gm, layer_of, describe, per_sample)
            if values[node].dim() == 0:
                sample_shapes[node] = shape  # one number for the batch: one per sample here
            continue
        if node.op == "get_attr":  # a learned parameter holds weights; a buffer (a mask) holds none
            sources[node] = frozenset({(str(node.target), _numel(values.get(node)))} if node.target in learned
                                      else ())
            params[node] = sum(n for _, n in sources[node])
            param_names[node] = str(node.target)
            continue
        if _is_write(node) and not any(a in layer_of for a in node.all_input_nodes):
            continue  # constants written into a constant (Swin's shifted-window mask): no layer, no count
        if _is_write(node):
            raise SpecError.plain(describe(node), "writes into a tensor in place (buffer[:, i] = value) in a way the "
                                  "import cannot follow; dnnbench imports writes of whole positions of one axis of a "
                                  "buffer of zeros (outputs[:, t] = o, outputs[t] = o), and values computed out of "
                                  "place: torch.stack or torch.cat them, or F.pad one")
        if _is_recurrent_call(gm, node) and (node in stepwise or any(
                a in layer_of or a in final for a in _flat_nodes(_state_argument(node)))):
            # it takes or passes on states: step by step
            sub, x_node = gm.get_submodule(node.target), node.args[0]
            if x_node not in layer_of:
                raise SpecError.plain(describe(node), "runs on a value computed from parameters alone (an embedding of "
                                      "a constant start token); dnnbench imports recurrent calls on values computed "
                                      "from the input: take the start token from the input")
            if moved.get(x_node, 0) != (0 if sub.batch_first else 1):
                raise SpecError.plain(describe(node), f"has batch_first={sub.batch_first}, and its input holds the "
                                      f"batch on axis {moved.get(x_node, 0)}: it would mix samples; transpose the "
                                      "input (x.transpose(0, 1))")
            state = _initial_state(builder, node, sub, final, layer_of, per_sample, describe(node))
            out, last = _stepwise(builder, sub, str(node.target), describe(node), layer_of[x_node],
                                  per_sample(x_node), state)
            layer_of[node], builder.states[out] = out, last
            if not sub.batch_first:
                moved[node] = 1
            continue
        held = [a for a in node.all_input_nodes if a in final]
        if held:  # a use of a recurrent layer's final states
            picked = _final_state(builder, node, final[held[0]], describe(node))
            if isinstance(picked, str):
                layer_of[node] = picked
            else:
                final[node] = picked
            continue
        data_nodes = [a for a in node.all_input_nodes if a in layer_of]
        value = values.get(node)
        if (isinstance(value, torch.Tensor) and value.dim() == 0 and data_nodes
                and all(a in sample_shapes for a in data_nodes)):
            sample_shapes[node] = sample_shapes[data_nodes[0]]  # losses added up, scaled
        elif (isinstance(value, torch.Tensor) and value.dim() == 0 and len(data_nodes) == 1
              and _fold_name(node) in _BATCH_REDUCTIONS and data_nodes[0] not in moved):
            # x.sum(), x.mean(): one number for the batch (a KL divergence, a hinge loss): one per sample
            layer_of[node], sample_shapes[node] = _batch_reduced(builder, _BATCH_REDUCTIONS[_fold_name(node)],
                                                                 per_sample(data_nodes[0]), node.name, describe(node),
                                                                 layer_of[data_nodes[0]])
            continue
        if data_nodes and (node in masks or node in positions):
            continue  # a padding mask, or positions, computed from the data: no layer; what it makes is a constant
        if data_nodes and _picks_per_sample(gm, node) and node.args[1][1] in positions:
            shape, out = per_sample(data_nodes[0]), per_sample(node, value)
            if (len(shape) != 2 or data_nodes[0] in moved or data_nodes[0] in folded
                    or any(i != slice(None) for i in node.args[1][2:]) or out[-1:] != shape[1:]
                    or len(out) == 2 and out[0] > shape[0] or len(out) not in (1, 2)):
                raise SpecError.plain(describe(node), f"picks {list(out)} per sample of a {list(shape)} value; "
                                      "dnnbench imports such a pick of one token of an (S, D) sequence (CLIP's "
                                      "x[torch.arange(B), text.argmax(-1)]) or of k tokens "
                                      "(x[torch.arange(B)[:, None], scores.topk(k).indices])")
            layer = {"kind": "select_token", "index": 0} if len(out) == 1 else \
                {"kind": "slice", "axis": 0, "start": 0, "stop": int(out[0])}  # k tokens: a copy of k
            layer_of[node] = builder.add(layer, out, node.name, describe(node), [layer_of[data_nodes[0]]])
            continue
        if (node.op == "call_function" and node.target is _written_buffer and node.args[1] == 0 and data_nodes
                and not any(a in moved for a in data_nodes)):
            # outputs[t] = o into a sequence-first buffer (T, B, V): the steps stacked in front, the batch on axis 1
            moved[node] = 1
            op = _Op(name=node.name, origin=describe(node), in_shape=per_sample(data_nodes[0]),
                     out_shape=per_sample(node), inputs=[layer_of[a] for a in node.args[3:]],
                     in_shapes=[per_sample(a) for a in node.args[3:]], args=(None, 1, node.args[2]))
            layer_of[node] = _written(builder, op)
            continue
        gathered = _gather_operands(node)
        if data_nodes and gathered is not None and gathered[2] in positions and gathered[0] in layer_of:
            layer_of[node] = _gather_kept(builder, gathered[1], per_sample(gathered[0]), per_sample(node, value),
                                          node.name, describe(node), layer_of[gathered[0]],
                                          gathered[0] in moved or gathered[0] in folded)
            continue
        filled = _filled_operands(node)
        if data_nodes and filled is not None and filled[0] not in layer_of and filled[2] in layer_of:
            # a number written at positions the data chose into a constant (a one-hot): zeros of its shape,
            # as F.one_hot (no gradient through it; the same fill and writes)
            if filled[2] in moved:
                raise SpecError.plain(describe(node), "scatters at positions whose batch is not their first axis; "
                                      "transpose the batch to axis 0 first")
            if filled[2] in folded:
                folded.add(node)
            layer_of[node] = _one_hot(builder, _Op(
                name=node.name, origin=describe(node), in_shape=per_sample(filled[2]),
                out_shape=per_sample(node, value), inputs=[layer_of[filled[2]]],
                in_shapes=[per_sample(filled[2])]))
            continue
        scattered = _scatter_operands(node)
        if data_nodes and scattered is not None and scattered[2] in positions:
            target, dim, _, src = scattered
            if target in layer_of or src not in layer_of or src in moved or src in folded:
                raise SpecError.plain(describe(node), "scatters into a layer output, or values whose batch is not "
                                      "their first axis; dnnbench imports a scatter of layer outputs into a "
                                      "constant (zeros.scatter(-1, top_idx, gates): a mixture's top-k gates) at "
                                      "positions the data chose")
            layer_of[node] = _scattered(builder, dim, per_sample(src), per_sample(node, value), node.name,
                                        describe(node), layer_of[src])
            continue
        moved_in = any(a in moved for a in data_nodes)  # each such operation goes to _batch_moved_call
        if (_fold_name(node) == "stack" and data_nodes and not moved_in
                and _averaged_over_batch_axis(node, data_nodes)):
            heads[node] = data_nodes  # torch.stack([head(x) for ...], 0), then its mean over that axis
            continue
        stacked_heads = [a for a in node.all_input_nodes if a in heads]
        if stacked_heads:
            layer_of[node] = _heads_averaged(builder, node, [layer_of[h] for h in heads[stacked_heads[0]]],
                                             per_sample(node), describe(node))
            continue
        if data_nodes and _fold_name(node) in _CONSTANT_MAKERS:  # x.new_zeros(...): a constant
            batch_constants[node] = data_nodes[0]
            data_nodes = []
        elif not data_nodes and _fold_name(node) in _BATCH_MAKERS and lead(value) == 1:
            sized_by = _sized_by(node, layer_of)  # torch.zeros(x.shape[0], H): a constant per sample
            if sized_by is not None:
                batch_constants[node] = sized_by
        elif (not data_nodes and node.op != "call_module" and node.all_input_nodes
              and all(a in batch_constants for a in node.all_input_nodes) and isinstance(value, torch.Tensor)
              and value.dim() and lead(value) == 1):
            # computed from such constants alone: torch.empty(B, 1, dtype=torch.long).fill_(SOS), a start token
            batch_constants[node] = batch_constants[node.all_input_nodes[0]]
        if not data_nodes and node.op == "call_module" and any(a in batch_constants for a in node.all_input_nodes):
            # a module run on a state of zeros per sample (a cell's h = x.new_zeros(B, H), then hh(h)): PyTorch
            # computes it as on data, so the zeros are a layer, and so is this call
            for a in node.all_input_nodes:
                if a in batch_constants and a not in layer_of:
                    layer_of[a] = builder.add({"kind": "zeros", "shape": list(per_sample(a))}, per_sample(a),
                                              a.name, describe(a), [layer_of[batch_constants[a]]])
            data_nodes = [a for a in node.all_input_nodes if a in layer_of]
        if not moved_in and lead(value) != 1 and (_fold_name(node) in _VIEWS or any(a in folded for a in data_nodes)
                                 or (bool(folded) and _copies_per_window(node, data_nodes))):
            folded.add(node)  # x.view(B * windows, w * w, C) and what is computed from it
        if not data_nodes:  # computed from parameters and constants alone (class tokens, position tables)
            # The parameters it is computed from, each once however many paths lead to it.
            used = frozenset().union(*(sources.get(a, frozenset()) for a in node.all_input_nodes))
            if _fold_name(node) in _CONSTANT_MAKERS or (node.op == "call_function" and node.target is getattr
                                                        and node.args[1:2] in (("device",), ("dtype",))):
                used = frozenset()  # w.new_zeros(...), w.device: not w's values
            if node.op == "call_module":
                used |= {(f"{node.target}.{path}", p.numel())
                         for path, p in gm.get_submodule(node.target).named_parameters()}
                param_names[node] = str(node.target)
            else:
                param_names[node] = next((param_names[a] for a in node.all_input_nodes if a in param_names), "")
            if (_fold_name(node) == "getitem" and len(used) == 1 and isinstance(value, torch.Tensor)
                    and not isinstance(node.args[1], torch.fx.Node)):
                # a part of a parameter (GAT's a[:F] and a[F:]): an operation on it shares no other part's
                (path, whole), = used
                if int(value.numel()) < whole:  # (cls[:1] of a one-row table is the whole of it)
                    parts[node] = f"{path}[{node.args[1]!r}]"
                    param_names[node] = ""  # not the whole parameter: no product with it is tied to another
            sources[node] = used
            params[node] = sum(n for _, n in used)
            if _fold_name(node) in ("bernoulli", "bernoulli_"):  # timm's drop_path: a random mask, kept with p
                keeps[node] = float(node.kwargs.get("p", node.args[1] if len(node.args) > 1 else 0.5))
            elif any(a in keeps for a in node.all_input_nodes):  # ... divided by its keep probability
                keeps[node] = next(keeps[a] for a in node.all_input_nodes if a in keeps)
            continue
        if not moved_in and (node in stacked
                             or _stacked_by_batch_move(node, values, data_nodes[0] in folded) is not None):
            if node not in stacked:  # timm's qkv.reshape(B, N, 3, H, D).permute(2, 0, 3, 1, 4)
                axis, order = _stacked_by_batch_move(node, values, data_nodes[0] in folded)  # type: ignore[misc]
                stacked[node] = (layer_of[data_nodes[0]], axis, order, per_sample(data_nodes[0]))
            for user in node.users:  # its unbind(0): the same pieces
                if _fold_name(user) == "unbind":
                    stacked[user] = stacked[node]
            layer_of[node] = layer_of[data_nodes[0]]
            continue
        if (node.op == "call_function" and getattr(node.target, "__name__", "") == "getitem"
                and data_nodes[0] in stacked):
            source, axis, order, shape = stacked[data_nodes[0]]
            layer_of[node] = _stacked_piece(builder, source, axis, order, shape, int(node.args[1]), node.name,
                                            describe(node))
            continue
        if (_fold_name(node) == "getitem" and node.args[1] == 1 and data_nodes
                and layer_of[data_nodes[0]] in builder.states and _is_recurrent_call(gm, data_nodes[0])):
            final[node] = builder.states[layer_of[data_nodes[0]]]  # run step by step: its final states
            continue
        if (node.op == "call_function" and getattr(node.target, "__name__", "") == "getitem" and node.args[1] == 1
                and data_nodes and data_nodes[0].op == "call_module"
                and isinstance(gm.get_submodule(data_nodes[0].target), (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN))):
            # (output, h_n) or (output, (h_n, c_n)): the final states, read off the output where they are in it
            source = data_nodes[0]
            sub = gm.get_submodule(source.target)
            seq = per_sample(source, values[source][0])  # (S, D), or (R, S, D): R sequences side by side
            final[node] = _FinalState(layer_of[source], sub, seq[0] if len(seq) == 2 else -1,
                                      isinstance(sub, torch.nn.LSTM))
            continue
        searched = (_fold_name(node) in ("max", "min", "topk", "sort", "cummax", "cummin") and isinstance(value, tuple)
                    and len(value) == 2 and len(data_nodes) == 1 and not moved_in)
        if searched and data_nodes[0] in folded:  # of values folded into the batch: along the axis named
            folded.add(node)
            node_args, node_kwargs = _unfolded_args(node, values[data_nodes[0]].dim(), describe(node))
        elif searched:
            node_args, node_kwargs = tuple(node.args), dict(node.kwargs)
        if searched and _fold_name(node) in ("max", "min"):
            # torch.max(x, dim) / x.min(dim): (values, indices); the values a reduce layer, read by [0] or .values
            dim = node_kwargs.get("dim", node_args[1] if len(node_args) > 1 else None)
            keepdim = node_kwargs.get("keepdim", node_args[2] if len(node_args) > 2 else False)
            layer_of[node] = _extreme(builder, per_sample(data_nodes[0]), per_sample(node, value[0]), dim,
                                      bool(keepdim), _fold_name(node), node.name, describe(node),
                                      layer_of[data_nodes[0]])
            extremes.add(node)
            continue
        if searched and _fold_name(node) in ("cummax", "cummin"):
            # torch.cummax(x, dim): (values, indices); the values priced as a running sum (_running_extreme)
            dim = node_kwargs.get("dim", node_args[1] if len(node_args) > 1 else None)
            layer_of[node] = _running_extreme(builder, per_sample(data_nodes[0]), dim, node.name, describe(node),
                                              layer_of[data_nodes[0]])
            extremes.add(node)
            continue
        if searched and _fold_name(node) == "sort":
            # torch.sort(x, dim, descending): (values, indices); the values a topk of every value along dim
            node_args, node_kwargs = _sort_as_topk(node_args, node_kwargs, per_sample(data_nodes[0]),
                                                   describe(node))
        if searched:
            # torch.topk(x, k, dim): (values, indices); the values a topk layer, read by [0] or .values
            layer_of[node] = _topk(builder, node_args, node_kwargs, node.name, per_sample(data_nodes[0]),
                                   per_sample(node, value[0]), describe(node), layer_of[data_nodes[0]])
            extremes.add(node)
            continue
        if (node.op == "call_function" and getattr(node.target, "__name__", "") in ("getitem", "getattr")
                and data_nodes and data_nodes[0] in extremes):
            if data_nodes[0] in folded:
                folded.add(node)
            if node.args[1] not in (0, "values"):
                if not node.users:
                    continue  # v, i = x.max(1) with i unused
                if node.args[1] not in (1, "indices"):
                    raise SpecError.plain(describe(node), "uses a third output of a maximum, a minimum or a top k; "
                                          "they have two, values and indices")
                # the positions used as values (a greedy decoder's next token ids): the same search, and no
                # gradient through them, as for argmax (_arg_extreme)
                layer_of[node] = builder.add({"kind": "stop_gradient"}, per_sample(node), node.name, describe(node),
                                             [layer_of[data_nodes[0]]])
                continue
            layer_of[node] = layer_of[data_nodes[0]]
            continue
        is_module = node.op == "call_module"
        tensor_out = isinstance(value, torch.Tensor) or (
            (is_module or _fold_name(node) in _WITH_INDICES) and isinstance(value, tuple) and value
            and isinstance(value[0], torch.Tensor))
        if not tensor_out:
            if node.op == "call_function" and node.target.__name__ == "getitem" and data_nodes:
                continue  # the attention weights of (output, weights), None with need_weights=False
            if moved_in and isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in value):
                raise SpecError.plain(describe(node), f"splits a value whose batch is axis "
                                      f"{moved[next(a for a in data_nodes if a in moved)]} (batch_first=False "
                                      f"layout) into several; {_MOVED_TEXT}")
            if (node.op == "call_function" and isinstance(node.target, type) and issubclass(node.target, tuple)
                    and data_nodes and all(u.op == "output" for u in node.users)):
                packed[node] = data_nodes  # GoogLeNetOutputs(x, aux2, aux1) returned: several outputs
                continue
            if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in value):
                # x.chunk(3, -1), x.split(d, dim=2), torch.split(...): pieces taken by getitem below
                pieces[node] = _pieces(node, value, data_nodes, layer_of, describe, per_sample,
                                       data_nodes[0] in folded)
                layer_of[node] = pieces[node][0]  # a data node: its getitems take the pieces
            continue  # x.size(0), x.dim(), x.shape: no layer
        if (node.op == "call_function" and getattr(node.target, "__name__", "") == "getitem"
                and data_nodes[0] in pieces):
            source, axis, bounds, shape = pieces[data_nodes[0]]
            start, stop = bounds[int(node.args[1])]
            if len(bounds) == 1:  # one piece: the whole tensor
                layer_of[node] = source
                continue
            cut = (*shape[:axis], stop - start, *shape[axis + 1:])
            piece = builder.add({"kind": "slice", "axis": axis, "start": start, "stop": stop}, cut, node.name,
                                describe(node), [source])
            # x.unbind(axis): the piece without the axis, a view
            layer_of[node] = builder.flatten(cut, per_sample(node), node.name + "_view", describe(node), piece)
            continue
        if (node.op == "call_function" and getattr(node.target, "__name__", "") == "getitem"
                and layer_of.get(data_nodes[0]) in builder.outputs and isinstance(node.args[1], int)):
            layer_of[node] = builder.outputs[layer_of[data_nodes[0]]][node.args[1]]  # an LSTM cell's (h, c)
            continue
        if node.op == "call_function" and getattr(node.target, "__name__", "") == "getitem" and isinstance(
                values.get(data_nodes[0]), tuple):
            if node.args[1] != 0 and not node.users:  # out, _ = attn(q, k, v): unpacked, never used
                continue
            if node.args[1] != 0:
                raise SpecError.plain(describe(node), "uses a second output of a layer; dnnbench layers have one")
            layer_of[node] = layer_of[data_nodes[0]]
            if data_nodes[0] in moved:
                moved[node] = moved[data_nodes[0]]
            continue
        if is_module:
            sub = gm.get_submodule(node.target)
            handler = modules.get(type(sub)) or (_own_layer if isinstance(getattr(sub, "dnnbench_layer", None), dict)
                                                 else None)
            if handler is None and torch.nn.utils.parametrize.is_parametrized(sub):
                # weight_norm, spectral_norm: the layer of the module class they parametrize (docs/importing.md)
                handler = modules.get(type(sub).__mro__[1])
            if handler is None and _is_rms_norm(sub):
                handler = _rms_norm
        elif node.op == "call_function":
            handler = functions.get(node.target) or _NAMED_FUNCTIONS.get(
                (getattr(node.target, "__module__", ""), getattr(node.target, "__name__", "")))
        else:
            handler = methods.get(node.target)
        if handler is None:
            raise SpecError.plain(describe(node), _unsupported(node, gm, (modules, functions, methods)))
        out_value = value[0] if isinstance(value, tuple) else value
        # Data inputs in argument order (torch.cat's list included), repeated ones kept (x + x).
        ordered = _data_args((*node.args, *node.kwargs.values()), layer_of)
        ordered = [a for a in ordered if not _mask_use(gm, a, node)]  # a padding mask also used elsewhere
        single = len({id(a) for a in ordered}) == 1
        producer = ordered[0]
        held = [a for a in node.all_input_nodes if a not in layer_of and params.get(a)]
        constants = [a for a in node.all_input_nodes if a not in layer_of and a in params and not params[a]
                     and isinstance(values.get(a), torch.Tensor)]
        args, kwargs = tuple(node.args), dict(node.kwargs)
        if _fold_name(node) in ("getitem", "index_select", "index_add", "index_add_", "index_reduce",
                                "index_reduce_"):  # constant positions:
            args = torch.fx.node.map_arg(args, lambda a: _constant_value(gm, a) if a.op == "get_attr"
                                         and a not in layer_of and not params.get(a) else a)
        if _fold_name(node) in _SCATTERS:  # a constant index, computed from buffers (idx.expand_as(values))
            args, kwargs = torch.fx.node.map_arg((args, kwargs), lambda a: _computed_constant(
                gm, a, values, layer_of, params) if a not in layer_of and not params.get(a) else a)
        if producer in folded:
            args, kwargs = _unfolded_args(node, values[producer].dim(), describe(node))
        axes = [moved.get(a, 0) for a in ordered]
        rank = _rank(values[producer])
        if any(axes) or (_fold_name(node) in _MOVED_PERMUTES and producer not in folded):
            handler, args, kwargs, out_axis = _batch_moved_call(
                node, handler, args, kwargs, axes, rank, gm.get_submodule(node.target) if is_module else None,
                describe(node), (tuple(values[producer].shape) if rank else (), tuple(out_value.shape)))
            if out_axis:
                moved[node] = out_axis
        op = _Op(name=node.target if is_module else (_parameter_owner(param_names.get(held[0], "")) or node.name
                                                     if held else node.name),
                 origin=describe(node),
                 in_shape=per_sample(producer), out_shape=per_sample(node, out_value),
                 inputs=[layer_of[a] for a in ordered], in_shapes=[per_sample(a) for a in ordered],
                 module=gm.get_submodule(node.target) if is_module else None,
                 args=args, kwargs=kwargs,
                 params=sum(n for _, n in frozenset().union(*(sources[a] for a in held))),
                 param_shapes=[tuple(int(d) for d in values[a].shape) for a in held
                               if isinstance(values.get(a), torch.Tensor)],
                 const_shapes=[tuple(int(d) for d in values[a].shape) for a in constants],
                 keep=next((keeps[a] for a in constants if a in keeps), None),
                 param_at=tuple(k for k, a in enumerate(_tensor_args((*node.args, *node.kwargs.values())))
                                if a in held),
                 const_at=tuple(k for k, a in enumerate(_tensor_args((*node.args, *node.kwargs.values())))
                                if a in constants),
                 fusable=single and len([u for u in producer.users
                                         if isinstance(values.get(u), (torch.Tensor, tuple))]) == 1,
                 batch_axis=axes[0])
        if axes[0] and (op.param_shapes or op.const_shapes):  # constants broadcast onto the batch-first values
            op = replace(op, param_shapes=[_batch_first_shape(x, rank, axes[0]) for x in op.param_shapes],
                         const_shapes=[_batch_first_shape(x, rank, axes[0]) for x in op.const_shapes])
        before = len(builder.layers)
        layer_of[node] = handler(builder, op)
        if is_module:
            _mark_weight_norm(builder.layers[before:], op.module, describe(node))
        builder.record_parameters(before, _parameter_key(op.module, held, sources, parts))
        _record_tied(builder.layers[before:], op.module, owners,
                     _one_parameter(gm, [param_names.get(a, "") for a in held]) if op.module is None else None)

    cls = type(module)
    qual = f"{cls.__module__}.{cls.__qualname__}"
    return builder.build(
        name or cls.__name__.lower(),
        description if description is not None else f"Imported from the PyTorch module {qual}.",
        f"Imported by dnnbench.from_torch from {qual} (torch.fx trace on the meta device, "
        f"input {list(shapes[0]) if len(shapes) == 1 else [list(x) for x in shapes]}).",
        output=returned,
    )


def load_module(path: str) -> torch.nn.Module:
    """The module made by ``package.module:factory`` (a function or a class), built on the meta device.

    Building under ``torch.device("meta")`` allocates no weights, so the 2-billion-weight study network
    costs nothing; a factory that loads weights from a file does not work this way (and need not: counts
    only need the shapes).
    """
    import torch

    if path.count(":") != 1 or not all(path.split(":")):
        raise SpecError("source", path, "is not a module path of the form package.module:factory")
    mod_name, attr = path.split(":")
    try:
        obj: Any = importlib.import_module(mod_name)
    except ImportError as exc:
        raise SpecError("source", path, f"cannot be imported: {exc}") from None
    except Exception as exc:
        raise SpecError("source", path, f"fails when imported: {type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise SpecError("source", path, f"has no attribute {part!r} in {mod_name}")
        obj = getattr(obj, part)
    if not isinstance(obj, torch.nn.Module):
        if not callable(obj):
            raise SpecError("source", path, "is neither a torch.nn.Module nor a callable that makes one")
        try:
            with torch.device("meta"):
                obj = obj()
        except Exception as exc:
            raise SpecError("source", path, f"fails when called: {type(exc).__name__}: {exc}") from None
    if not isinstance(obj, torch.nn.Module):
        raise SpecError("source", path, f"made a {type(obj).__name__}, not a torch.nn.Module")
    return obj


__all__ = ["from_torch", "load_module"]
