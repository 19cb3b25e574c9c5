"""The framework-independent half of importing: collect layers, fuse activations, check shapes.

An importer walks a traced graph (torch.fx or ONNX) and calls :class:`SpecBuilder` once per operation
with the traced per-sample output shape. The builder turns operations into spec layers (docs/importing.md):
an activation right after a conv2d or fc layer becomes that layer's ``activation`` (as the hand-written
presets have it), identity operations emit nothing, and at the end the built :class:`~dnnbench.specs.Network`
must infer the traced shape for every layer, so shapes come from the trace, never from guesses.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

from ..errors import SpecError
from ..specs import Network

Shape = tuple[int, ...]


def pair_or_int(values: tuple[int, ...] | list[int] | int) -> int | list[int]:
    """``3`` for ``(3, 3)``, ``[3, 5]`` for ``(3, 5)``: the spec's compact form."""
    if isinstance(values, int):
        return values
    vals = [int(v) for v in values]
    if len(vals) == 1:
        return vals[0]
    return vals[0] if all(v == vals[0] for v in vals) else vals


def as_pair(values: tuple[int, ...] | list[int] | int) -> tuple[int, int]:
    if isinstance(values, int):
        return (values, values)
    vals = [int(v) for v in values]
    return (vals[0], vals[0]) if len(vals) == 1 else (vals[0], vals[1])


def broadcast_together(shapes: list[Shape] | tuple[Shape, ...], out: Shape) -> bool:
    """Every shape has ``out``'s length and, on every axis, its size or 1 (an add or product that
    broadcasts layer outputs over each other's positions)."""
    return all(len(s) == len(out) and all(x in (y, 1) for x, y in zip(s, out, strict=True)) for s in shapes)


def einsum_product(b: SpecBuilder, equation: str, inputs: list[str], in_shapes: list[Shape], out_shape: Shape,
                   name: str, origin: str) -> str:
    """An einsum of two layer outputs that is a batched matrix product (``torch.einsum``, ONNX ``Einsum``):
    each operand's axes put in (shared, own, summed) order (permutes and views: no cost), a ``matmul``,
    and the product viewed and permuted into the output's order. Every index is in both operands and the
    output (shared), in both operands alone (summed over) or in one operand and the output; the first is
    the batch's, shared."""
    equation = equation.replace(" ", "")
    if len(inputs) != 2 or "->" not in equation or "." in equation:
        raise SpecError.plain(origin, f"is einsum {equation!r} of {len(inputs)} layer outputs; dnnbench imports "
                              "einsum of two layer outputs that is a batched matrix product, with an explicit "
                              "output ('ij,jk->ik')")
    ins, out = equation.split("->")
    terms = ins.split(",")
    if len(terms) != 2 or any(len(set(t)) != len(t) for t in (*terms, out)):
        raise SpecError.plain(origin, f"is einsum {equation!r}; dnnbench imports einsum of two operands, no index "
                              "repeated in one")
    a, c = terms
    shared = [i for i in a if i in c and i in out]
    summed = [i for i in a if i in c and i not in out]
    own_a, own_c = [i for i in a if i not in c], [i for i in c if i not in a]
    if (not shared or a[0] != shared[0] or c[0] != shared[0] or out[0] != shared[0]
            or any(i not in out for i in own_a + own_c) or set(out) != set(shared + own_a + own_c)):
        raise SpecError.plain(origin, f"is einsum {equation!r}; dnnbench imports einsum that is a batched matrix "
                              "product, the batch's index first in every operand and the output")
    if len(a) != len(in_shapes[0]) + 1 or len(c) != len(in_shapes[1]) + 1:
        raise SpecError.plain(origin, f"is einsum {equation!r} of values whose batch axis also holds positions of a "
                              "sample; dnnbench imports einsum whose first index is the batch's alone")
    sizes = {i: (1 if k == 0 else in_shapes[0][k - 1]) for k, i in enumerate(a)}
    sizes.update({i: (1 if k == 0 else in_shapes[1][k - 1]) for k, i in enumerate(c)})
    per = shared[1:]

    def arranged(term: str, source: str, order: list[str], rows: list[str], cols: list[str], tag: str) -> str:
        shape = tuple(sizes[i] for i in term[1:])
        dims = [term.index(i) - 1 for i in order]
        moved = tuple(sizes[i] for i in order)
        if dims != list(range(len(dims))):
            source = b.add({"kind": "permute", "dims": dims}, moved, f"{name}_{tag}", origin, [source])
        matrix = (*(sizes[i] for i in per), math.prod(sizes[i] for i in rows), math.prod(sizes[i] for i in cols))
        return b.flatten(moved if dims != list(range(len(dims))) else shape, matrix, f"{name}_{tag}_matrix",
                         origin, source)

    left = arranged(a, inputs[0], per + own_a + summed, own_a, summed, "a")
    right = arranged(c, inputs[1], per + summed + own_c, summed, own_c, "b")
    rows, cols = math.prod(sizes[i] for i in own_a), math.prod(sizes[i] for i in own_c)
    product = b.add({"kind": "matmul"}, (*(sizes[i] for i in per), rows, cols), name, origin, [left, right])
    natural = per + own_a + own_c
    spread = tuple(sizes[i] for i in natural)
    result = b.flatten((*(sizes[i] for i in per), rows, cols), spread, f"{name}_axes", origin, product)
    dims = [natural.index(i) for i in out[1:]]
    if dims == list(range(len(dims))):
        return result
    return b.add({"kind": "permute", "dims": dims}, out_shape, f"{name}_order", origin, [result])


def scale_axis(learned: Shape, data: Shape) -> int | None:
    """The per-sample axis a learned tensor of shape ``learned`` scales a ``data`` value along when it
    broadcasts as one factor per position of that axis (``(C, 1, 1)`` on ``(C, H, W)``: 0; ``(D,)`` on
    ``(S, D)``: -1), else None. A leading batch axis of 1 is allowed."""
    shape = list(learned)
    if len(shape) == len(data) + 1 and shape[0] == 1:
        shape = shape[1:]
    if len(shape) > len(data):
        return None
    shape = [1] * (len(data) - len(shape)) + shape
    axes = [i for i, d in enumerate(shape) if d != 1]
    if len(axes) != 1 or shape[axes[0]] != data[axes[0]] or (data[axes[0]] == 1):
        return None
    axis = axes[0]
    return axis if axis == 0 else axis - len(data)


class Operation(Protocol):
    """What both importers know of one traced operation (a torch.fx node or an ONNX node)."""

    name: str  # the spec layer's name to be
    origin: str  # for error messages: "features.3 (torch.nn.LSTM)", "Conv node '/features/0/Conv'"
    in_shape: Shape
    out_shape: Shape
    inputs: list[str]  # spec layer names of the data inputs, in order
    fusable: bool  # the data input has no other user

    @property
    def source(self) -> str: ...


def one_input(op: Operation) -> None:
    """A one-line error unless ``op`` takes exactly one data tensor (and no learned parameters)."""
    params = int(getattr(op, "params", 0))
    if len(op.inputs) != 1 or params:
        raise SpecError.plain(op.origin, f"takes {len(op.inputs)} data tensors" + (" and parameters" if params
                              else "") + "; dnnbench's layer of this kind takes one")


def activation_handler(function: str) -> Callable[[SpecBuilder, Any], str]:
    """The handler of an element-wise activation (fused into the layer before it where it may)."""
    def handle(b: SpecBuilder, op: Operation) -> str:
        one_input(op)
        return b.activation(function, op.out_shape, op.name, op.origin, op.source, op.fusable)
    return handle


def finite_fill(value: float) -> float:
    """A fill value the spec can hold (finite, at most 1e30 in magnitude): -inf and inf (a mask's fill
    before a softmax) and larger numbers as ∓1e30, which cost the same and leave a softmax's exponentials
    as they were (e^-1e30 is 0 in any float)."""
    return value if abs(value) <= FILL_LIMIT else math.copysign(FILL_LIMIT, value)


#: The largest magnitude a spec holds.
FILL_LIMIT = 1e30


#: ``x ** p`` exponents that are a function of their own.
POWERS = {0.5: "sqrt", -0.5: "rsqrt", -1.0: "reciprocal"}


def power(b: SpecBuilder, exponent: float, out_shape: Shape, name: str, origin: str, source: str,
          fusable: bool = True) -> str:
    """``x ** p`` of a constant number p: an activation ``pow`` with that exponent, a square root for 0.5,
    its reciprocal for −0.5, 1/x for −1; the input itself for 1."""
    if not math.isfinite(exponent):
        raise SpecError.plain(origin, f"raises to the power {exponent!r}; dnnbench imports x ** p of a finite "
                              "number p")
    p = float(exponent)
    if p == 1.0:
        return source
    if p in POWERS:
        return b.activation(POWERS[p], out_shape, name, origin, source, fusable)
    return b.add({"kind": "activation", "function": "pow", "exponent": p}, out_shape, name, origin, [source])


def adaptive_pool_handler(mode: str) -> Callable[[SpecBuilder, Any], str]:
    def handle(b: SpecBuilder, op: Operation) -> str:
        one_input(op)
        return b.adaptive_pool(mode, op.in_shape, op.out_shape, op.name, op.origin, op.source)
    return handle


def layer_handler(kind: str, **fixed: Any) -> Callable[[SpecBuilder, Any], str]:
    """The handler of an operation that is one spec layer of ``kind`` with ``fixed`` fields."""
    def handle(b: SpecBuilder, op: Operation) -> str:
        one_input(op)
        return b.add({"kind": kind, **fixed}, op.out_shape, op.name, op.origin, op.inputs)
    return handle


def pad_layer(padding: list[int], mode: str, value: float | None) -> dict[str, Any]:
    """The pad layer adding ``padding`` [left, right, top, bottom] in ``mode`` (F.pad's names), its
    defaults (constant zeros) left out."""
    layer: dict[str, Any] = {"kind": "pad", "padding": [int(p) for p in padding]}
    if mode != "constant":
        layer["mode"] = mode
    elif value:
        layer["value"] = float(value)
    return layer


def reduce_layer(dims: Any, in_shape: Shape, mode: str, keepdim: bool, origin: str) -> dict[str, Any]:
    """The reduce layer over ``dims``, axes counted with the batch axis in front (as torch and ONNX
    number them; an int or a sequence, None or empty for every axis) of a per-sample ``in_shape``."""
    if dims is None or (not isinstance(dims, int) and not len(dims)):
        raise SpecError.plain(origin, f"takes a {mode} over every axis, the batch's too; dnnbench reduces axes of "
                              "one sample")
    if isinstance(dims, str):  # an einsum-style name: not an axis
        raise SpecError.plain(origin, f"takes a {mode} over the named axes {dims!r}; dnnbench reduces numbered axes")
    rank = len(in_shape) + 1
    axes = sorted({int(d) % rank for d in ([dims] if isinstance(dims, int) else dims)})
    if 0 in axes:
        raise SpecError.plain(origin, f"takes a {mode} over the batch axis; dnnbench reduces axes of one sample")
    return {"kind": "reduce", "axes": [a - 1 for a in axes], "mode": mode, "keepdim": bool(keepdim)}


def prelu_layer(slopes: int, in_shape: Shape, origin: str) -> dict[str, Any]:
    """The prelu layer of ``slopes`` learned slopes on a per-sample ``in_shape``: one for all values, or one
    per position of its first axis (nn.PReLU's num_parameters, on a map's channels)."""
    if slopes == 1:
        return {"kind": "prelu"}
    if in_shape and slopes == in_shape[0]:
        return {"kind": "prelu", "per_channel": True}
    raise SpecError.plain(origin, f"learns {slopes} slopes on an input of shape {list(in_shape)}; dnnbench's prelu "
                          "learns one, or one per position of the first axis (a map's channels)")


def input_shapes(input_shape: Any) -> list[Shape]:
    """One shape (a sequence of sizes) or several (a sequence of such sequences, one per input)."""
    items = list(input_shape) if isinstance(input_shape, (tuple, list)) else None
    if not items:
        raise SpecError("input_shape", input_shape, "must be one sample's shape, e.g. (3, 224, 224), or one such "
                                                    "shape per input: [(3, 224, 224), (77,)]")
    nested = [isinstance(d, (tuple, list)) for d in items]
    if any(nested) and not all(nested):
        raise SpecError("input_shape", input_shape, "mixes sizes and shapes; give one shape, or one shape per input")
    try:
        return [tuple(int(d) for d in s) for s in items] if all(nested) else [tuple(int(d) for d in items)]
    except (TypeError, ValueError):
        raise SpecError("input_shape", input_shape, "must hold whole numbers") from None


#: The layer kinds whose weight a weight normalisation may be a field of (``weight_norm``).
WEIGHT_NORMED_KINDS = ("conv2d", "conv_transpose2d", "conv3d", "conv_transpose3d", "fc")


class SpecBuilder:
    """Accumulates spec layers with the traced shapes and the origin (for error messages) of each."""

    def __init__(self, input_shape: Shape, input_name: str = "input") -> None:
        if len(input_shape) not in (0, 1, 2, 3, 4) or any(int(d) < 1 for d in input_shape):
            raise SpecError("input_shape", list(input_shape), "must be (C, H, W), (C, L) signals, (C, D, H, W) "
                                                              "volumes, (N,) or (S,) token ids, or () for one "
                                                              "number per sample, with positive sizes")
        shape = tuple(int(d) for d in input_shape) or (1,)  # one number per sample: a (1,) axis in the spec
        self._signal_views: dict[str, str] = {}  # a (C, L) view -> the (C, 1, L) maps it views
        # A (C, L) signal is (C, 1, L) maps to the spec (an input of two axes is one-channel maps), viewed
        # as (C, L): 1-D layers run on the maps (PyTorch runs a 1-D convolution as that 2-D one).
        self.layers: list[dict[str, Any]] = [{"kind": "input", "name": input_name,
                                              "shape": [shape[0], 1, shape[1]] if len(shape) == 2 else list(shape)}]
        self.shapes: list[Shape] = [(shape[0], 1, shape[1]) if len(shape) == 2 else shape]
        self.origins: list[str] = ["the input"]
        self._names: set[str] = {input_name}
        self._parameter_users: dict[Any, list[str]] = {}  # parameters -> the layers of their first use
        #: An operation with several outputs (a recurrent cell's (h, c)): the layer of its first -> all of them.
        self.outputs: dict[str, tuple[str, ...]] = {}
        #: A recurrent layer imported step by step: the layer of its output -> its final states.
        self.states: dict[str, Any] = {}
        #: Such a layer's products: (module, stacked layer, "ih" or "hh") -> the layer that holds the weights.
        self.step_weights: dict[tuple[Any, ...], str] = {}
        if len(shape) == 2:
            self.signal(input_name, shape, f"{input_name}_signal", "the input")

    def add_input(self, input_shape: Shape, name: str) -> str:
        """Another input of the network (its shape as the first's is given); the name of the layer that
        carries its value (a (C, L) signal's view)."""
        if len(input_shape) not in (0, 1, 2, 3, 4) or any(int(d) < 1 for d in input_shape):
            raise SpecError(f"input_shape of {name}", list(input_shape), "must be (C, H, W), (C, L) signals, "
                            "(C, D, H, W) volumes, (N,) or (S,) token ids, or () for one number per sample "
                            "(a class id, a diffusion step), with positive sizes")
        shape = tuple(int(d) for d in input_shape) or (1,)  # one number per sample: a (1,) axis in the spec
        maps = (shape[0], 1, shape[1]) if len(shape) == 2 else shape
        own = self._unique(name)
        self.layers.append({"kind": "input", "name": own, "shape": list(maps)})
        self.shapes.append(maps)
        self.origins.append(f"the input {name}")
        if len(shape) == 2:
            return self.signal(own, shape, f"{own}_signal", f"the input {name}")
        return own

    def record_parameters(self, start: int, key: Any) -> None:
        """The layers added since ``start`` are one operation on the parameters ``key`` identifies (the
        parameters' identities: a module's, or a functional call's). A later operation on the same
        parameters that adds as many layers of kinds that may hold parameters (a module called again, or a
        tensor used two ways; a recurrent cell's first call adds a zero state besides) marks them ``shares``
        the first operation's, in order, so the parameters are counted once; :meth:`build` keeps the marks
        that hold (a layer with parameters, of the same sizes) and drops the others."""
        from ..specs.layers import LAYER_TYPES

        added = [e for e in self.layers[start:] if LAYER_TYPES[str(e["kind"])].may_hold_parameters]
        if not key or not added:
            return
        first = self._parameter_users.setdefault(key, [str(e["name"]) for e in added])
        if first[0] == added[0]["name"] or len(first) != len(added):
            return  # the first operation on them, or one that adds other layers
        for entry, owner in zip(added, first, strict=True):
            entry["shares"] = owner

    # ---- adding layers ---------------------------------------------------------------------------
    # Each method returns the name of the layer that now carries the operation's output (the input's
    # own name when the operation emits nothing), so a graph importer can name it in later inputs.

    @property
    def last(self) -> str:
        return str(self.layers[-1]["name"])

    def add(self, layer: dict[str, Any], out_shape: Shape, name: str, origin: str,
            inputs: list[str] | None = None) -> str:
        """Append a layer whose traced per-sample output shape is ``out_shape``; ``inputs``: the names of
        the layers it takes (None: the layer before, a chain)."""
        entry: dict[str, Any] = {"kind": layer["kind"], "name": self._unique(name)}
        if inputs is not None and list(inputs) != [self.last]:
            entry["inputs"] = list(inputs)
        entry.update({k: v for k, v in layer.items() if k != "kind"})
        self.layers.append(entry)
        # one number per sample (a reduction of a vector, a similarity) is a (1,) axis in the spec
        self.shapes.append(tuple(int(d) for d in out_shape) or (1,))
        self.origins.append(origin)
        return str(entry["name"])

    def shape_of(self, name: str) -> Shape | None:
        """The per-sample output shape of the layer ``name`` (None: no such layer)."""
        return next((shape for layer, shape in zip(self.layers, self.shapes, strict=True) if layer["name"] == name),
                    None)

    def maps(self, name: str, shape: Shape, origin: str) -> str:
        """The layer holding the (C, L) signal ``name`` as (C, 1, L) maps: the maps it is a view of, else
        a view (a reshape layer, which costs nothing)."""
        if name in self._signal_views:
            return self._signal_views[name]
        c, length = shape
        return self.add({"kind": "reshape", "shape": [c, 1, length]}, (c, 1, length), f"{name}_maps", origin, [name])

    def signal(self, maps: str, shape: Shape, name: str, origin: str) -> str:
        """A (C, L) view of the (C, 1, L) maps ``maps`` (the output of a 1-D layer run on maps)."""
        view = self.add({"kind": "reshape", "shape": [int(d) for d in shape]}, shape, name, origin, [maps])
        self._signal_views[view] = maps
        return view

    def activation(self, function: str, out_shape: Shape, name: str, origin: str, source: str | None = None,
                   fusable: bool = True) -> str:
        """An elementwise activation: fused into the conv2d, fc or add right before it when nothing else
        uses that layer's output (or right before the (C, L) view of a 1-D layer's maps), else its own layer.

        Fused or not, the counts are the same (one element op per output each way, model.md §3); fusing
        keeps the layer list equal to the hand-written presets, which put the activation on the layer.
        """
        last = self.layers[-1]
        viewed = self._signal_views.get(self.last)
        if viewed is not None and len(self.layers) > 1 and self.layers[-2]["name"] == viewed:
            last = self.layers[-2]  # an element-wise function commutes with the view
        if (fusable and (source is None or source == self.last)
                and last["kind"] in ("conv2d", "conv_transpose2d", "conv3d", "conv_transpose3d", "fc", "add", "mul")
                and last.get("activation", "none") == "none"):
            last["activation"] = function
            return self.last
        return self.add({"kind": "activation", "function": function}, out_shape, name, origin,
                        None if source is None else [source])

    def pool(self, mode: str, window: tuple[int, int], stride: tuple[int, int], padding: tuple[int, int],
             out_shape: Shape, name: str, origin: str, source: str | None = None, ceil_mode: bool = False,
             dilation: tuple[int, int] = (1, 1)) -> str:
        """A pooling layer (a max pooling's window ``dilation`` apart); a 1x1 window with stride 1 and no
        padding is a copy and emits nothing."""
        if window == (1, 1) and stride == (1, 1) and padding == (0, 0):
            return source or self.last
        layer = {"kind": "pool", "mode": mode, "window": pair_or_int(window), "stride": pair_or_int(stride),
                 "padding": pair_or_int(padding)}
        if ceil_mode:
            layer["ceil_mode"] = True
        if dilation != (1, 1):
            layer["dilation"] = pair_or_int(dilation)
        return self.add(layer, out_shape, name, origin, None if source is None else [source])

    def adaptive_pool(self, mode: str, in_shape: Shape, out_shape: Shape, name: str, origin: str,
                      source: str | None = None) -> str:
        """Adaptive pooling: a plain pool when the output divides the input (nothing when equal), else
        an adaptive_pool layer; of (C, D, H, W) volumes a pool3d (its output must divide the input)."""
        if len(in_shape) == 4 and len(out_shape) == 4:
            if in_shape == out_shape:
                return source or self.last
            if any(i % o for i, o in zip(in_shape[1:], out_shape[1:], strict=True)):
                raise SpecError.plain(origin, f"pools {list(in_shape)} to {list(out_shape)} in uneven windows; "
                                      "dnnbench pools volumes in whole windows")
            window = [i // o for i, o in zip(in_shape[1:], out_shape[1:], strict=True)]
            layer = {"kind": "pool3d", "mode": mode, "window": pair_or_int(window)}
            return self.add(layer, out_shape, name, origin, None if source is None else [source])
        if len(in_shape) != 3 or len(out_shape) != 3:
            raise SpecError.plain(origin, f"adaptive pooling needs a (C, H, W) input, got {list(in_shape)}")
        (_, h, w), (_, oh, ow) = in_shape, out_shape
        if (h, w) == (oh, ow):
            return source or self.last  # identity (AlexNet's avgpool(6, 6) on a 6x6 input)
        if h % oh or w % ow:
            layer = {"kind": "adaptive_pool", "mode": mode, "output_size": pair_or_int((oh, ow))}
            return self.add(layer, out_shape, name, origin, None if source is None else [source])
        window = (h // oh, w // ow)
        return self.pool(mode, window, window, (0, 0), out_shape, name, origin, source)

    def flatten(self, in_shape: Shape, out_shape: Shape, name: str, origin: str, source: str | None = None) -> str:
        """A flatten (or reshape) to a per-sample vector (nothing for a vector), else a reshape layer."""
        out_shape = tuple(out_shape) or (1,)  # one number per sample: a (1,) axis in the spec
        n = 1
        for d in in_shape:
            n *= d
        if tuple(out_shape) == tuple(in_shape) or (source is not None and self.shape_of(source) == tuple(out_shape)):
            return source or self.last  # (a number per sample the spec keeps as a (1,) axis viewed as one)
        viewed = self._signal_views.get(source or self.last)
        if viewed is not None:  # the view of a 1-D layer's maps: flatten (or view) the maps themselves
            source = viewed
        inputs = None if source is None else [source]
        if tuple(out_shape) != (n,):
            return self.add({"kind": "reshape", "shape": [int(d) for d in out_shape]}, out_shape, name, origin, inputs)
        return self.add({"kind": "flatten"}, out_shape, name, origin, inputs)

    def pixel_shuffle(self, in_shape: Shape, factor: int, name: str, origin: str, source: str,
                      unshuffle: bool = False, blocks_first: bool = False) -> str:
        """A pixel shuffle (``nn.PixelShuffle``, ONNX ``DepthToSpace``: (C·r², H, W) to (C, H·r, W·r)) or
        its inverse (``unshuffle``: ``nn.PixelUnshuffle``, ``SpaceToDepth``) as what it runs: a view with
        the factors split out, a permute of them next to the height and width, a view joining them.
        ``blocks_first``: the r·r blocks lead the channels (ONNX's DCR order) instead of following them
        (PyTorch's, ONNX's CRD)."""
        if len(in_shape) != 3:
            raise SpecError.plain(origin, f"shuffles a {list(in_shape)} input; dnnbench shuffles (C, H, W) maps")
        c, h, w = in_shape
        r = int(factor)
        if r == 1:
            return source
        if unshuffle:
            if h % r or w % r:
                raise SpecError.plain(origin, f"unshuffles {h}x{w} maps by {r}, which does not divide them")
            split, dims = (c, h // r, r, w // r, r), ((2, 4, 0, 1, 3) if blocks_first else (0, 2, 4, 1, 3))
            out: Shape = (c * r * r, h // r, w // r)
        else:
            if c % (r * r):
                raise SpecError.plain(origin, f"shuffles {c} channels by {r}; they must divide by {r * r}")
            k = c // (r * r)
            split = (r, r, k, h, w) if blocks_first else (k, r, r, h, w)
            dims = (2, 3, 0, 4, 1) if blocks_first else (0, 3, 1, 4, 2)
            out = (k, h * r, w * r)
        view = self.add({"kind": "reshape", "shape": list(split)}, split, f"{name}_split", origin, [source])
        moved = tuple(split[d] for d in dims)
        turned = self.add({"kind": "permute", "dims": list(dims)}, moved, f"{name}_permute", origin, [view])
        return self.add({"kind": "reshape", "shape": list(out)}, out, name, origin, [turned])

    # ---- finishing -------------------------------------------------------------------------------

    def build(self, name: str, description: str, source: str, output: str | None = None) -> Network:
        """The validated network ending in the layer ``output`` (default: the last one added); every
        layer's inferred shape must equal its traced shape."""
        self._prune(output)
        self._settle_shares()
        data = {"name": name, "description": description, "source": source, "reconstructed": False,
                "layers": self.layers}
        if len(self.layers) < 2:
            raise SpecError.plain("network", "has no layers dnnbench can count (only the input)")
        try:
            net = Network.build(data)
        except SpecError as err:
            raise SpecError.plain(self._origin_of(err.field), str(err)) from None
        for i, (got, want) in enumerate(zip(net.shapes, self.shapes, strict=True)):
            if tuple(got) != want:
                raise SpecError.plain(self.origins[i], f"the traced output shape {list(want)} differs from the "
                                      f"shape {list(got)} the spec infers (an option dnnbench does not model, "
                                      "e.g. dilation)")
        return net

    def _settle_shares(self) -> None:
        """Keep ``shares`` where the spec allows it (the owner is an earlier layer holding parameter tensors
        of the same sizes, not none). A layer that shares all of a layer's of its kind is not ``tied_to``
        it besides; a head tied to an embedding stays ``tied_to`` it. Elsewhere the layer counts its
        parameters as its own."""
        if not any("shares" in layer for layer in self.layers):
            return
        plain = [{k: v for k, v in layer.items() if k not in ("shares", "tied_to")} for layer in self.layers]
        try:
            net = Network.build({"name": "provisional", "layers": plain})
        except SpecError:
            return  # the real build reports what is wrong
        index = {n: i for i, n in enumerate(net.layer_names)}
        for i, layer in enumerate(self.layers):
            owner = index.get(str(layer.get("shares", "")))
            if owner is None:
                layer.pop("shares", None)
                continue
            mine, theirs = net.call_counts[i], net.call_counts[owner]
            same = ("shares" not in self.layers[owner] and mine.weights > 0
                    and net.layers[i].parameter_tensors(mine.input_shape, mine.weights)
                    == net.layers[owner].parameter_tensors(theirs.input_shape, theirs.weights))
            if same and layer.get("tied_to") and self.layers[owner]["kind"] != layer["kind"]:
                layer.pop("shares")  # a head tied to an embedding: tied_to says so (and keeps a bias its own)
            elif same:
                layer.pop("tied_to", None)
                if self.layers[owner].get("tied_to"):  # the owner's matrix is tied: so is this call's
                    layer.pop("shares")
                    layer["tied_to"] = self.layers[owner]["tied_to"]
            else:
                layer.pop("shares")

    def _prune(self, output: str | None) -> None:
        """Leave out layers whose output does not lead to ``output`` (a value the code computes and never
        uses: PiT's and CoaT's; PyTorch runs their forward, but no gradient flows through them); a layer
        whose implicit input (the layer before) is left out names it."""
        names = [str(layer["name"]) for layer in self.layers]
        index = {n: i for i, n in enumerate(names)}
        inputs = [[] if layer["kind"] == "input" else list(layer.get("inputs") or ([names[i - 1]] if i else []))
                  for i, layer in enumerate(self.layers)]  # an input layer takes none (not the layer before it)
        root = index[output] if output is not None else len(names) - 1
        keep, todo = {0, root}, [root]
        while todo:
            for n in inputs[todo.pop()]:
                if index[n] not in keep:
                    keep.add(index[n])
                    todo.append(index[n])
        if len(keep) == len(names):
            return
        layers, shapes, origins, before = [], [], [], -1
        holders: dict[str, str] = {}  # a left-out layer -> the first kept layer that used its parameters
        for i in sorted(keep):
            layer = dict(self.layers[i])
            for field in ("shares", "tied_to"):
                owner = layer.get(field)
                if owner and index[owner] not in keep:  # the layer that held them is left out: this one does
                    holder = holders.setdefault(owner, str(layer["name"]))
                    if holder == layer["name"]:
                        del layer[field]
                    else:
                        layer[field] = holder
            if i and "inputs" not in layer and before != i - 1 and layer["kind"] != "input":
                layer["inputs"] = [names[i - 1]]
            elif layers and layer.get("inputs") == [layers[-1]["name"]]:
                del layer["inputs"]  # the layer before it, once the layers between are left out
            layers.append(layer)
            shapes.append(self.shapes[i])
            origins.append(self.origins[i])
            before = i
        self.layers, self.shapes, self.origins = layers, shapes, origins

    def _origin_of(self, field: str) -> str:
        if field.startswith("layers["):
            try:
                return self.origins[int(field[7:field.index("]")])]
            except (ValueError, IndexError):
                pass
        return "network"

    def _unique(self, name: str) -> str:
        base = name or "layer"
        out, k = base, 2
        while out in self._names:
            out, k = f"{base}:{k}", k + 1
        self._names.add(out)
        return out
