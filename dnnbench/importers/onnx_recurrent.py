"""ONNX ``LSTM``, ``GRU`` and ``RNN`` nodes to recurrent layers (docs/importing.md, "Recurrent layers").

ONNX recurrent nodes are time-major and one layer each: torch's exporter writes ``nn.LSTM(...,
batch_first=True, num_layers=N)`` as a ``Transpose`` to (S, batch, D), N recurrent nodes whose output
``Y`` (S, directions, batch, H) is reshaped to (S, batch, directions·H) between them, and a ``Transpose``
back to (batch, S, directions·H). Those layout nodes carry no layer; the nodes of one stack (same mode,
width, bias and directions, each output used only by the next) become one ``recurrent`` layer, as
``from_torch`` imports the module. The final hidden state ``Y_h`` (``h_n``, a ``Concat`` of every
layer's) is read where it is used: the last layer's state of one direction is a ``select_token`` of the
output (and a ``slice`` for two directions), as in ``from_torch``.

The batch stays axis 0 of every tensor the rest of the importer sees; the time-major tensors in between
are tracked here, and any other use of them is an error naming the node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import SpecError
from ._build import Shape, SpecBuilder

#: ONNX operator -> (spec mode, gates per step); RNN's mode also takes its activation.
_RECURRENT_OPS = {"LSTM": ("lstm", 4), "GRU": ("gru", 3), "RNN": ("rnn", 1)}
#: Nodes that read a time-major tensor for its shape only.
_SHAPE_READERS = {"Shape", "Size"}


@dataclass
class _Stack:
    """Recurrent nodes imported as one layer, until :meth:`RecurrentImport._emit` adds it."""

    source: str  # the spec layer of the batch-major input sequence
    mode: str
    hidden: int
    bias: bool
    directions: int
    steps: int
    name: str
    origin: str
    parameters: set[str] = field(default_factory=set)
    layers: int = 1
    layer: str | None = None  # the spec layer once added: the stack takes no more nodes


@dataclass(frozen=True)
class _State:
    """Final hidden states along axis 0: (stack, layer index, direction) for each."""

    entries: tuple[tuple[_Stack, int, int], ...]


class RecurrentImport:
    """The recurrent nodes of one graph, read in node order beside :func:`from_onnx`'s loop.

    ``layer_of`` is the importer's map from a batch-major data tensor to the spec layer carrying it;
    :meth:`take` handles a node that reads or makes a time-major tensor and returns True, and raises
    for such a node it cannot import.
    """

    def __init__(self, graph: Any, builder: SpecBuilder, layer_of: dict[str, str], shapes: dict[str, Shape | None],
                 weights: dict[str, tuple[int, ...]], constants: dict[str, Any],
                 record: Callable[[int, frozenset[str]], None]) -> None:
        self.b = builder
        self.layer_of = layer_of
        self.shapes = shapes
        self.weights = weights
        self.constants = constants
        self.record = record
        self.sequence: dict[str, str] = {}  # time-major view of a batch-major spec layer
        self.stack_output: dict[str, _Stack] = {}  # (S, 1, directions·H): a stack's output, time-major
        self.raw: dict[str, tuple[_Stack, tuple[int, ...]]] = {}  # Y (S, dirs, 1, H) and its transposes
        self.states: dict[str, _State] = {}  # Y_h (dirs, 1, H) and concatenations of them
        self.cells: set[str] = set()  # LSTM's Y_c
        self.recurrent_inputs = {n.input[0] for n in graph.node if n.op_type in _RECURRENT_OPS and n.input}
        self.readers: dict[str, int] = {}  # data readers of each tensor (shape readers left out)
        for n in graph.node:
            if n.op_type not in _SHAPE_READERS:
                for x in n.input:
                    self.readers[x] = self.readers.get(x, 0) + 1

    # ---- the node loop ------------------------------------------------------------------------------

    def tracked(self, tensor: str) -> bool:
        return (tensor in self.sequence or tensor in self.stack_output or tensor in self.raw
                or tensor in self.states or tensor in self.cells)

    def take(self, node: Any, attrs: dict[str, Any], origin: str, name: str) -> bool:
        """Handle ``node`` if it is a recurrent node or reads a tensor tracked here."""
        op = node.op_type
        if op in _RECURRENT_OPS:
            self._recurrent(node, attrs, origin, name)
            return True
        ins = [x for x in node.input if x]
        if op == "Transpose" and len(ins) == 1 and self._perm(attrs) == [1, 0, 2] and self._enter(ins[0], node):
            return True
        mine = [x for x in ins if self.tracked(x)]
        if not mine:
            return False
        if op in _SHAPE_READERS:
            return True
        first = ins[0]
        if len(mine) == 1 and first == mine[0]:
            if self._layout(node, attrs, origin, first, op):
                return True
        if op == "Concat" and all(x in self.states for x in ins) and int(attrs.get("axis", 0)) == 0:
            self.states[node.output[0]] = _State(tuple(e for x in ins for e in self.states[x].entries))
            return True
        if first in self.states and op in ("Gather", "Squeeze") and len(mine) == 1:
            self._final_state(node, attrs, origin, name, first)
            return True
        if first in self.cells or any(x in self.cells for x in mine):
            raise SpecError.plain(origin, "uses the LSTM's final cell state Y_c, which no layer outputs; dnnbench "
                                  "imports its final hidden state Y_h or its output Y")
        if any(x in self.states for x in mine):
            raise SpecError.plain(origin, "uses a recurrent node's final hidden state Y_h other than as one "
                                  "layer and direction's state (Gather on axis 0, or Squeeze of one)")
        raise SpecError.plain(origin, f"reads a time-major (steps, batch, ...) tensor with {op}; dnnbench imports "
                              "recurrent nodes between a Transpose of a batch-first (batch, steps, features) "
                              "sequence and a Transpose back")

    # ---- layouts --------------------------------------------------------------------------------------

    @staticmethod
    def _perm(attrs: dict[str, Any]) -> list[int] | None:
        perm = attrs.get("perm")
        return [int(p) for p in perm] if perm is not None else None

    def _enter(self, tensor: str, node: Any) -> bool:
        """A batch-first (1, S, D) sequence transposed to time-major for a recurrent node."""
        shape = self.shapes.get(tensor)
        if tensor not in self.layer_of or shape is None or len(shape) != 3 or shape[0] != 1:
            return False
        if node.output[0] not in self.recurrent_inputs:
            return False
        self.sequence[node.output[0]] = self.layer_of[tensor]
        return True

    def _layout(self, node: Any, attrs: dict[str, Any], origin: str, tensor: str, op: str) -> bool:
        """The layout nodes between recurrent nodes and back to batch-first."""
        out = node.output[0]
        shape = self.shapes.get(out)
        if tensor in self.raw:
            stack, dims = self.raw[tensor]
            if op == "Transpose" and dims == (0, 1, 2, 3) and self._perm(attrs) == [0, 2, 1, 3]:
                self.raw[out] = (stack, (0, 2, 1, 3))  # (S, 1, dirs, H)
                return True
            if op in ("Reshape", "Squeeze") and shape == (stack.steps, 1, stack.directions * stack.hidden):
                self.stack_output[out] = stack
                return True
            return False
        if op == "Transpose" and self._perm(attrs) == [1, 0, 2]:
            if tensor in self.stack_output:
                self.layer_of[out] = self._emit(self.stack_output[tensor])
                return True
            if tensor in self.sequence:
                self.layer_of[out] = self.sequence[tensor]
                return True
        return False

    # ---- recurrent nodes ------------------------------------------------------------------------------

    def _recurrent(self, node: Any, attrs: dict[str, Any], origin: str, name: str) -> None:
        names = list(node.input) + [""] * (8 - len(node.input))
        x = names[0]
        if int(attrs.get("layout", 0)) != 0:
            raise SpecError.plain(origin, "has layout=1 (batch-first tensors); dnnbench imports recurrent nodes "
                                  "with ONNX's default time-major layout, as torch exports them")
        mode, gates = _RECURRENT_OPS[node.op_type]
        direction = attrs.get("direction", b"forward")
        direction = direction.decode() if isinstance(direction, bytes) else str(direction)
        if direction not in ("forward", "bidirectional"):
            raise SpecError.plain(origin, f"has direction={direction!r}; dnnbench imports forward and "
                                  "bidirectional recurrent nodes")
        directions = 2 if direction == "bidirectional" else 1
        hidden = int(attrs.get("hidden_size", 0))
        w = self.weights.get(names[1])
        r = self.weights.get(names[2])
        if w is None or r is None or len(w) != 3 or len(r) != 3:
            raise SpecError.plain(origin, "has weights W and R that are not constants; dnnbench imports recurrent "
                                  "nodes with learned (initializer) weights")
        if not hidden:
            hidden = int(r[2])
        if w[0] != directions or w[1] != gates * hidden or tuple(r) != (directions, gates * hidden, hidden):
            raise SpecError.plain(origin, f"has weights W {list(w)} and R {list(r)}; expected "
                                  f"[{directions}, {gates * hidden}, D] and [{directions}, {gates * hidden}, {hidden}]"
                                  f" for {directions} direction(s) of {gates} gate(s) of width {hidden}")
        if node.op_type == "RNN":
            activations = [a.decode() if isinstance(a, bytes) else str(a)
                           for a in attrs.get("activations", [b"Tanh"] * directions)]
            if len(set(activations)) != 1 or activations[0] not in ("Tanh", "Relu"):
                raise SpecError.plain(origin, f"has activations {activations}; dnnbench imports RNN nodes with "
                                      "Tanh or Relu in every direction")
            mode = f"rnn_{activations[0].lower()}"
        elif "activations" in attrs:
            default = ["Sigmoid", "Tanh", "Tanh"] if mode == "lstm" else ["Sigmoid", "Tanh"]
            activations = [a.decode() if isinstance(a, bytes) else str(a) for a in attrs["activations"]]
            if activations != default * directions:
                raise SpecError.plain(origin, f"has activations {activations}; dnnbench imports {node.op_type} "
                                      f"nodes with the default {default}")
        if attrs.get("clip") is not None:
            raise SpecError.plain(origin, "clips its cell input (clip attribute); dnnbench's recurrent layer does not")
        if int(attrs.get("input_forget", 0)):
            raise SpecError.plain(origin, "couples its input and forget gates (input_forget=1); dnnbench's LSTM "
                                  "does not")
        if names[4]:
            raise SpecError.plain(origin, "takes sequence lengths (sequence_lens); dnnbench imports recurrent nodes "
                                  "over whole sequences")
        for k, what in ((5, "initial hidden state"), (6, "initial cell state")):
            if names[k] and (names[k] in self.layer_of or self.tracked(names[k])):
                raise SpecError.plain(origin, f"starts from an {what} computed from the input; dnnbench imports "
                                      "recurrent nodes that start from constant (e.g. zero) states")
        if node.op_type == "LSTM" and names[7]:
            raise SpecError.plain(origin, "has peephole weights P; dnnbench's LSTM has none")
        bias = bool(names[3])
        x_shape = self.shapes.get(x)
        if x_shape is None or len(x_shape) != 3 or x_shape[1] != 1:
            raise SpecError.plain(origin, f"takes X of shape {list(x_shape) if x_shape else '?'}; dnnbench imports "
                                  "recurrent nodes on (steps, batch, features) sequences")
        steps = int(x_shape[0])
        parameters = {p for p in names[1:4] if p}
        previous = self.stack_output.get(x)
        if (previous is not None and previous.layer is None and self.readers.get(x, 0) == 1
                and (previous.mode, previous.hidden, previous.bias, previous.directions)
                == (mode, hidden, bias, directions)):
            stack = previous  # the next layer of the same stack (torch's num_layers)
            stack.layers += 1
            stack.parameters |= parameters
        else:
            if previous is not None:
                source = self._emit(previous)
            elif x in self.sequence:
                source = self.sequence[x]
            else:
                raise SpecError.plain(origin, "reads X that is not a Transpose of a batch-first (batch, steps, "
                                      "features) sequence nor another recurrent node's output; dnnbench imports "
                                      "recurrent layers with batch_first=True")
            stack = _Stack(source, mode, hidden, bias, directions, steps, name, origin, set(parameters))
        outputs = list(node.output) + [""] * 3
        if outputs[0]:
            self.raw[outputs[0]] = (stack, (0, 1, 2, 3))
        if outputs[1]:
            layer = stack.layers - 1
            self.states[outputs[1]] = _State(tuple((stack, layer, d) for d in range(directions)))
        if outputs[2]:
            self.cells.add(outputs[2])

    def _emit(self, stack: _Stack) -> str:
        """The stack's recurrent layer (added once, when its output or final state is first used)."""
        if stack.layer is None:
            layer: dict[str, Any] = {"kind": "recurrent", "mode": stack.mode, "hidden": stack.hidden,
                                     "bias": stack.bias}
            if stack.layers != 1:
                layer["layers"] = stack.layers
            if stack.directions == 2:
                layer["bidirectional"] = True
            before = len(self.b.layers)
            stack.layer = self.b.add(layer, (stack.steps, stack.directions * stack.hidden), stack.name,
                                     stack.origin, [stack.source])
            self.record(before, frozenset(stack.parameters))
        return stack.layer

    def _final_state(self, node: Any, attrs: dict[str, Any], origin: str, name: str, tensor: str) -> None:
        """One layer and direction's final hidden state, (1, H): the last layer's is in the output."""
        entries = self.states[tensor].entries
        if node.op_type == "Gather":
            index = self._constant(node.input[1]) if len(node.input) > 1 else None
            if int(attrs.get("axis", 0)) != 0 or index is None or index.ndim != 0:
                raise SpecError.plain(origin, "gathers from a final hidden state Y_h other than one layer and "
                                      "direction (h_n[i]); dnnbench imports h_n[i] or the output")
            i = int(index)
            if not -len(entries) <= i < len(entries):
                raise SpecError.plain(origin, f"takes h_n[{i}] of {len(entries)} states")
            entry = entries[i % len(entries)]
        else:
            axes = attrs.get("axes")
            if axes is None and len(node.input) > 1 and node.input[1]:
                found = self._constant(node.input[1])
                axes = None if found is None else [int(a) for a in np.atleast_1d(found)]
            if len(entries) != 1 or (axes is not None and list(axes) != [0]):
                raise SpecError.plain(origin, "squeezes final hidden states of several layers or directions; "
                                      "dnnbench imports h_n[i] or the squeeze of one")
            entry = entries[0]
        stack, layer, direction = entry
        if layer != stack.layers - 1:
            raise SpecError.plain(origin, f"uses layer {layer}'s final hidden state, an inner layer's, which no "
                                  "layer outputs; dnnbench imports the last layer's")
        output = self._emit(stack)
        backwards = direction == 1
        h = stack.hidden
        last = self.b.add({"kind": "select_token", "index": 0 if backwards else stack.steps - 1},
                          (h * stack.directions,), f"{name}_step", origin, [output])
        if stack.directions == 2:
            last = self.b.add({"kind": "slice", "axis": 0, "start": h if backwards else 0,
                               "stop": 2 * h if backwards else h}, (h,), name, origin, [last])
        self.layer_of[node.output[0]] = last

    def _constant(self, tensor: str) -> Any:
        from onnx import numpy_helper

        found = self.constants.get(tensor)
        return None if found is None else numpy_helper.to_array(found)


__all__ = ["RecurrentImport"]
