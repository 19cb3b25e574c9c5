"""The network spec: layers in order, starting with an input, each taking earlier layers' outputs (a
directed acyclic graph; a chain when no layer names its inputs), with inferred shapes."""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property

from pydantic import Field, model_validator

from .base import Spec, fail
from .layers import InputLayer, Layer, LayerCounts, Shape


class Network(Spec):
    """A feed-forward network. ``layers[0]`` is its input; a network of several inputs (a translation
    model's source and target, an image and its caption) has one more ``input`` layer for each of the
    others, anywhere after it, each taking no inputs. Shapes are inferred from the inputs through the
    graph.

    A layer takes the output of the layer before it unless its ``inputs`` name earlier layers (by name,
    or ``<kind><index>`` for an unnamed one). Inputs name earlier layers only, so the graph has no
    cycles; every layer's output but the last must be used. An impossible shape is an error naming the
    layer and the field: ``layers[3].kernel: 7 is larger than the input height 5``, ``layers[12].inputs[1]:
    'res3' has shape [256, 14, 14]; add needs [512, 7, 7]``.
    """

    name: str = Field(min_length=1, description="The network's name.")
    description: str = Field(default="", description="What the network is, for people.")
    source: str = Field(default="", description="Where the architecture comes from (a citation), or "
                                                "'reconstructed: ...'.")
    reconstructed: bool = Field(default=False, description="True if the shapes are our reconstruction.")
    layers: tuple[Layer, ...] = Field(min_length=2, description="The layers in order; the first is the input.")

    @model_validator(mode="after")
    def _infer_shapes(self) -> Network:
        _ = self.shapes  # validates the graph and every shape
        _ = self.layer_counts  # ... and tied weights
        return self

    @cached_property
    def layer_names(self) -> tuple[str, ...]:
        """Each layer's name, or ``<kind><index>`` when it has none (``input`` for the input)."""
        return tuple(layer.name or ("input" if i == 0 else f"{layer.kind}{i}") for i, layer in enumerate(self.layers))

    @cached_property
    def input_indices(self) -> tuple[tuple[int, ...], ...]:
        """The indices of each layer's inputs (the input layer has none)."""
        if not isinstance(self.layers[0], InputLayer):
            fail("layers[0].kind", self.layers[0].kind, "must be 'input' (the first layer gives the input shape)")
        index: dict[str, int] = {}
        out: list[tuple[int, ...]] = []
        used: set[int] = set()
        explicit = {layer.name: i for i, layer in enumerate(self.layers) if layer.name}
        for i, layer in enumerate(self.layers):
            where = f"layers[{i}]"
            if layer.name:
                if layer.name in index:
                    fail(f"{where}.name", layer.name, "is used by an earlier layer (names must be unique)")
            if isinstance(layer, InputLayer):
                if layer.inputs:
                    fail(f"{where}.inputs", list(layer.inputs), "must be empty (an input takes no inputs)")
                out.append(())
            else:
                refs = layer.inputs or (self.layer_names[i - 1],)
                ids: list[int] = []
                for j, ref in enumerate(refs):
                    field = f"{where}.inputs[{j}]" if layer.inputs else f"{where}.inputs"
                    k = index.get(ref)
                    if k is None:
                        later = explicit.get(ref, self.layer_names.index(ref) if ref in self.layer_names else None)
                        if later is not None and later >= i:
                            fail(field, ref, f"is layers[{later}], not an earlier layer (inputs name earlier "
                                             "layers, so the graph has no cycles)")
                        fail(field, ref, "names no layer")
                    else:
                        ids.append(k)
                low, high = layer.arity
                if len(ids) < low or (high is not None and len(ids) > high):
                    want = f"{low}" if low == high else f"at least {low}" if high is None else f"{low} to {high}"
                    fail(f"{where}.inputs", list(refs), f"has {len(ids)} input(s); {layer.kind} takes {want}")
                used.update(ids)
                out.append(tuple(ids))
            index[self.layer_names[i]] = i
            if layer.name:
                index[layer.name] = i
        for i in range(len(self.layers) - 1):
            if i not in used:
                fail(f"layers[{i}]", self.layer_names[i], "is never used (only the last layer's output may be "
                                                          "unused; name it in a later layer's inputs)")
        return tuple(out)

    @property
    def is_chain(self) -> bool:
        """True when every layer takes only the layer right before it."""
        return all(ids == (i - 1,) for i, ids in enumerate(self.input_indices) if i)

    @cached_property
    def shapes(self) -> tuple[Shape, ...]:
        """The output shape of every layer (per sample)."""
        out: list[Shape] = []
        for i, (layer, ids) in enumerate(zip(self.layers, self.input_indices, strict=True)):
            where = f"layers[{i}]"
            if isinstance(layer, InputLayer):
                out.append(layer.output_shape((), where))
                continue
            shapes = tuple(out[k] for k in ids)
            if layer.kind == "add":
                for j, shape in enumerate(shapes[1:], start=1):
                    if len(shape) != len(shapes[0]) or any(
                            x != y and 1 not in (x, y) for x, y in zip(shape, shapes[0], strict=True)):
                        fail(f"{where}.inputs[{j}]", self.layer_names[ids[j]],
                             f"has shape {list(shape)}; add needs {list(shapes[0])} (or sizes of 1 where it "
                             "broadcasts)")
            if layer.kind == "concat":
                axis = getattr(layer, "axis", 0)
                for j, shape in enumerate(shapes[1:], start=1):
                    rest = [d for a, d in enumerate(shape) if a != axis % max(len(shape), 1)]
                    want = [d for a, d in enumerate(shapes[0]) if a != axis % max(len(shapes[0]), 1)]
                    if len(shape) != len(shapes[0]) or rest != want:
                        fail(f"{where}.inputs[{j}]", self.layer_names[ids[j]],
                             f"has shape {list(shape)}; concat along axis {axis} needs the other axes of "
                             f"{list(shapes[0])}")
            out.append(layer.graph_output_shape(shapes, where))
        return tuple(out)

    @cached_property
    def call_counts(self) -> tuple[LayerCounts, ...]:
        """Per-sample counts of every layer as one call of it: the weights it reads, shared or its own."""
        return self._counts_and_gradients[0]

    @property
    def needs_gradient(self) -> tuple[bool, ...]:
        """Whether backward computes the gradient of each layer's output (PyTorch's ``requires_grad``): a
        layer with parameters (its own or shared), or one with an input that needs it, unless it makes a
        constant (``zeros``); the input where its ``needs_gradient`` says so."""
        return self._counts_and_gradients[1]

    @cached_property
    def reaches_loss(self) -> tuple[bool, ...]:
        """Whether backward reaches each layer: backward runs from the loss (the last layer's output)
        through layers that pass a gradient, so a layer whose every path to it ends at one that blocks it
        (``x.detach()``, a comparison, zeros) computes neither its input's gradient nor its weights'
        (docs/model.md §3)."""
        reaches = [False] * len(self.layers)
        reaches[-1] = True
        for i in range(len(self.layers) - 1, -1, -1):
            if reaches[i] and not self.layers[i].blocks_gradient:
                for k in self.input_indices[i]:
                    reaches[k] = True
        return tuple(reaches)

    @cached_property
    def _counts_and_gradients(self) -> tuple[tuple[LayerCounts, ...], tuple[bool, ...]]:
        counts: list[LayerCounts] = []
        needs: list[bool] = []
        for i, (layer, ids) in enumerate(zip(self.layers, self.input_indices, strict=True)):
            # A layer none of whose inputs needs a gradient (the network's input, or values computed from it
            # without parameters: a pad, a scaling) sends no error further down (model.md §3).
            source = isinstance(layer, InputLayer)
            first = not source and not any(needs[k] for k in ids)
            in_shapes = tuple(self.shapes[k] for k in ids) or ((),)
            counts.append(layer.graph_counts_needing(in_shapes, self.shapes[i], tuple(needs[k] for k in ids)
                                                     if ids else (not first,)))
            needs.append(bool(getattr(layer, "needs_gradient", False)) if source
                         else (counts[-1].weights > 0 or not first) and not layer.blocks_gradient)
        reaches = self.reaches_loss
        counts = [c if reaches[i] else replace(c, macs_backprop=0, macs_weight_grad=0, elem_ops_backprop=0)
                  for i, c in enumerate(counts)]
        needs = [n and reaches[i] for i, n in enumerate(needs)]
        return tuple(counts), tuple(needs)

    @cached_property
    def layer_counts(self) -> tuple[LayerCounts, ...]:
        """Per-sample counts of every layer (docs/model.md §3); each weight is counted once, at the layer that
        holds it (a layer that ``shares`` another's, or is ``tied_to`` its matrix, holds none of it)."""
        counts = []
        for i, (layer, c) in enumerate(zip(self.layers, self.call_counts, strict=True)):
            if layer.shares:
                c = replace(c, weights=c.weights - self._shared_weights(i))
            if getattr(layer, "tied_to", ""):
                c = replace(c, weights=c.weights - self._tied_weights(i))
            counts.append(c)
        return tuple(counts)

    def parameter_tensors(self, i: int) -> tuple[int, ...]:
        """The sizes of the parameter tensors layer i holds (none where it ``shares`` another's)."""
        if self.layers[i].shares:
            return ()
        c = self.layer_counts[i]
        return self.layers[i].parameter_tensors(c.input_shape, c.weights)

    def _shared_weights(self, i: int) -> int:
        """The values layer i uses again (checked: an earlier layer holding parameter tensors of the same
        sizes itself; usually of the same kind, but one tensor may be used two ways: CaiT's class token)."""
        layer = self.layers[i]
        where = f"layers[{i}].shares"
        ref = layer.shares
        names = self.layer_names
        if ref not in names[:i]:
            fail(where, ref, "names no earlier layer")
        if getattr(layer, "tied_to", ""):
            fail(where, ref, "is set beside tied_to; a layer shares all of another's parameters or ties its matrix")
        k = names.index(ref)
        owner = self.layers[k]
        mine, theirs = self.call_counts[i], self.call_counts[k]
        if not mine.weights:
            fail(where, ref, f"is set on a {layer.kind} layer without parameters")
        if owner.shares or getattr(owner, "tied_to", ""):
            fail(where, ref, f"is a {owner.kind} layer {'that shares' if owner.shares else 'tied to'} another's; "
                             "expected a layer holding its parameters")
        own = layer.parameter_tensors(mine.input_shape, mine.weights)
        held = owner.parameter_tensors(theirs.input_shape, theirs.weights)
        if own != held:
            fail(where, ref, f"holds parameter tensors of {list(held)} values; this layer's are {list(own)}")
        return int(mine.weights)

    def _tied_weights(self, i: int) -> int:
        """The values layer i shares with the layer its ``tied_to`` names (checked: an earlier embedding or
        fc layer with a weight matrix of the same size that is not tied itself)."""
        layer = self.layers[i]
        where = f"layers[{i}].tied_to"
        ref = layer.tied_to  # type: ignore[union-attr]
        names = self.layer_names
        if ref not in names[:i]:
            fail(where, ref, "names no earlier layer")
        k = names.index(ref)
        owner = self.layers[k]
        tied = str(getattr(owner, "tied_to", ""))
        if owner.kind not in ("fc", "embedding") or tied or owner.shares:
            fail(where, ref, f"is a {owner.kind} layer{' tied itself' if tied else ''}; "
                             "expected an embedding or fc layer with a matrix of its own")
        own = layer.matrix_weights(self.shapes[self.input_indices[i][0]])  # type: ignore[union-attr]
        theirs = owner.matrix_weights(self.shapes[self.input_indices[k][0]])  # type: ignore[union-attr]
        if own != theirs:
            fail(where, ref, f"has a weight matrix of {theirs} values; this layer's has {own}")
        return int(own)

    @property
    def input_shape(self) -> Shape:
        """One sample's shape of the (first) input."""
        return self.shapes[0]

    @cached_property
    def input_layers(self) -> tuple[int, ...]:
        """The indices of the network's inputs: 0, and more for a network of several inputs."""
        return tuple(i for i, layer in enumerate(self.layers) if isinstance(layer, InputLayer))
