"""The network spec: an ordered list of layers, starting with an input, with inferred shapes."""

from __future__ import annotations

from functools import cached_property

from pydantic import Field, model_validator

from .base import Spec, fail
from .layers import InputLayer, Layer, LayerCounts, Shape


class Network(Spec):
    """A feed-forward network. ``layers[0]`` is the input; shapes are inferred from it.

    An impossible shape (a kernel larger than its input, a pooling window past the edge) is an error
    naming the layer and the field: ``layers[3].kernel: 7 is larger than the input height 5``.
    """

    name: str = Field(min_length=1, description="The network's name.")
    description: str = Field(default="", description="What the network is, for people.")
    source: str = Field(default="", description="Where the architecture comes from (a citation), or "
                                                "'reconstructed: ...'.")
    reconstructed: bool = Field(default=False, description="True if the shapes are our reconstruction.")
    layers: tuple[Layer, ...] = Field(min_length=2, description="The layers in order; the first is the input.")

    @model_validator(mode="after")
    def _infer_shapes(self) -> Network:
        if not isinstance(self.layers[0], InputLayer):
            fail("layers[0].kind", self.layers[0].kind, "must be 'input' (the first layer gives the input shape)")
        names: set[str] = set()
        shape: Shape = ()
        for i, layer in enumerate(self.layers):
            where = f"layers[{i}]"
            if i > 0 and isinstance(layer, InputLayer):
                fail(f"{where}.kind", "input", "is only allowed as the first layer")
            shape = layer.output_shape(shape, where)
            if layer.name:
                if layer.name in names:
                    fail(f"{where}.name", layer.name, "is used by an earlier layer (names must be unique)")
                names.add(layer.name)
        return self

    @cached_property
    def layer_names(self) -> tuple[str, ...]:
        """Each layer's name, or ``<kind><index>`` when it has none."""
        return tuple(layer.name or f"{layer.kind}{i}" for i, layer in enumerate(self.layers))

    @cached_property
    def shapes(self) -> tuple[Shape, ...]:
        """The output shape of every layer (per sample)."""
        out: list[Shape] = []
        shape: Shape = ()
        for i, layer in enumerate(self.layers):
            shape = layer.output_shape(shape, f"layers[{i}]")
            out.append(shape)
        return tuple(out)

    @cached_property
    def layer_counts(self) -> tuple[LayerCounts, ...]:
        """Per-sample counts of every layer (docs/model.md §3)."""
        counts = []
        shape: Shape = ()
        seen_compute = False
        for layer, out_shape in zip(self.layers, self.shapes, strict=True):
            # The first layer after the input sends no error further down (model.md §3).
            first = not seen_compute and not isinstance(layer, InputLayer)
            counts.append(layer.counts(shape, out_shape, first=first))
            if not isinstance(layer, InputLayer):
                seen_compute = True
            shape = out_shape
        return tuple(counts)

    @property
    def input_shape(self) -> Shape:
        return self.shapes[0]
