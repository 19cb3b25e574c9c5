"""Hypothesis strategies shared by the property tests: random valid networks, clusters, configurations."""

from __future__ import annotations

from typing import Any, get_args

from hypothesis import strategies as st

from dnnbench import presets
from dnnbench.specs import Cluster
from dnnbench.specs.layers import ActivationName, Reduce

#: Every function a conv or fc layer may fuse, and every reduction.
FUSED_FUNCTIONS = [f for f in get_args(ActivationName) if f != "none"]
REDUCTIONS = list(get_args(Reduce.model_fields["mode"].annotation))


def _input_gradient(draw: Any) -> dict[str, Any]:
    """An input whose own gradient backward computes (adversarial training), or the usual one."""
    return {"needs_gradient": True} if draw(st.booleans()) else {}


def _weight_norm(draw: Any, kernel: bool = False) -> dict[str, Any]:
    """A weight normalisation (g per output, per input or one; ``kernel``, of a 2-D convolution: per kernel
    row or column too) on about a quarter of the learned layers."""
    modes = ["none", "none", "none", "output", "input", "whole"]
    mode = draw(st.sampled_from(modes + (["kernel_rows", "kernel_columns"] if kernel else [])))
    return {} if mode == "none" else {"weight_norm": mode}


@st.composite
def network_dicts(draw: Any) -> dict[str, Any]:
    """A random valid network spec as plain data (convs and pools that fit, then FC layers)."""
    c = draw(st.integers(1, 4))
    h = draw(st.integers(4, 40))
    w = draw(st.integers(4, 40))
    layers: list[dict[str, Any]] = [{"kind": "input", "shape": [c, h, w], **_input_gradient(draw)}]
    for _ in range(draw(st.integers(0, 4))):
        k = draw(st.integers(1, 5))
        pad = draw(st.integers(0, k // 2))
        if k > min(h, w) + 2 * pad:
            break
        stride = draw(st.integers(1, 2))
        layers.append({"kind": "conv2d", "out_channels": draw(st.integers(1, 24)), "kernel": k, "stride": stride,
                       "padding": pad, "activation": draw(st.sampled_from(["none", "relu", "tanh", "sigmoid", "elu",
                                                                           "softplus"])),
                       # a fixed filter (a blur of buffers): no weights, no bias, no weight gradient
                       **({"learned": False, "bias": False} if draw(st.integers(0, 5)) == 0
                          else _weight_norm(draw, kernel=True))})
        h = (h + 2 * pad - k) // stride + 1
        w = (w + 2 * pad - k) // stride + 1
        if draw(st.integers(0, 3)) == 0 and max(h, w) <= 20:  # a transposed conv: the map grows
            k, s = draw(st.integers(1, 4)), draw(st.integers(1, 2))
            extra = draw(st.integers(0, s - 1))
            layers.append({"kind": "conv_transpose2d", "out_channels": draw(st.integers(1, 12)), "kernel": k,
                           "stride": s, "padding": draw(st.integers(0, (k - 1) // 2)), "output_padding": extra,
                           **_weight_norm(draw, kernel=True)})
            h = (h - 1) * s - 2 * layers[-1]["padding"] + k + extra
            w = (w - 1) * s - 2 * layers[-1]["padding"] + k + extra
        if draw(st.booleans()) and min(h, w) >= 2:
            ceil = draw(st.booleans())  # ceil_mode: an odd size keeps its last, partial window
            mode = draw(st.sampled_from(["max", "avg"]))
            # a max pooling's taps may be 2 apart (a dilated window spanning 3)
            dilation = draw(st.integers(1, 2)) if mode == "max" and min(h, w) >= 3 else 1
            layers.append({"kind": "pool", "mode": mode, "window": 2, "ceil_mode": ceil,
                           **({"dilation": dilation} if dilation > 1 else {})})

            def pooled(n: int, span: int = dilation + 1, ceil: bool = ceil) -> int:
                if not ceil:
                    return (n - span) // 2 + 1
                out = -(-(n - span) // 2) + 1
                return out - 1 if (out - 1) * 2 >= n else out

            h, w = pooled(h), pooled(w)
        if draw(st.booleans()):
            kind = draw(st.sampled_from(["lrn", "batchnorm", "activation", "dropout", "prelu"]))
            layers.append({"kind": kind, **({"per_channel": draw(st.booleans())} if kind in ("prelu", "dropout")
                                             else {"affine": draw(st.booleans())} if kind == "batchnorm" else {})})
    layers.append({"kind": "flatten"})
    for _ in range(draw(st.integers(1, 3))):
        layers.append({"kind": "fc", "out_features": draw(st.integers(1, 300)),
                       "activation": draw(st.sampled_from(["none", "relu"])), **_weight_norm(draw)})
    if draw(st.booleans()):
        layers.append({"kind": "softmax"})
    return {"name": "random", "layers": layers}


@st.composite
def graph_network_dicts(draw: Any) -> dict[str, Any]:
    """A random valid graph network as plain data, with every graph kind and option somewhere:
    a convolutional graph (grouped, depthwise and dilated convs, residual adds with a fused activation,
    concat branches, squeeze-and-excitation gates and gated products, ConvNeXt blocks (layer norm and FC
    layers on channels-last maps, a learned layer scale, a dropout of whole samples), ShuffleNet units
    (channel pieces, a shuffle viewed with four axes), U-Net steps (down, group norm, upsample, joined),
    Swin steps (a roll as two slices joined, windows cut and joined by views with five axes, a bias),
    a convolution and its norm applied twice with their parameters shared, a split attention's branches
    summed (reduce layers),
    adaptive pooling, a
    ViT-style patch sequence) or a token transformer (embedding, position table, class token, layer norm,
    causal or full attention, as one layer or written by hand (a projection sliced into queries, keys and
    values, viewed as heads, sdpa (with a learned bias on its scores or not) or the products written out,
    a learned or constant bias on the scores),
    FC on tokens, a layer scale (per feature or one learned number), an MLP applied twice with its layers
    shared, residual
    adds, a per-token head (its own or tied to the token embedding) or a selected token, a recurrent layer
    of any cell), or a volume network (3-D convolutions and pools, batch norm, a residual add). One conv or
    volume graph in four takes a second input, added to the first (a network of several inputs)."""
    which = draw(st.integers(0, 4))
    if which < 2:
        net = draw(_conv_graph())
    elif which < 4:
        return draw(_token_graph())
    else:
        net = draw(_volume_graph())
    return _with_second_input(net, draw) if draw(st.integers(0, 3)) == 0 else net


def inputs_needing_gradient(net: dict[str, Any], need: bool) -> dict[str, Any]:
    """``net`` (plain data) with ``needs_gradient`` set to ``need`` on every ``input`` layer."""
    return {**net, "layers": [{**layer, "needs_gradient": need} if layer["kind"] == "input" else layer
                              for layer in net["layers"]]}


def _with_second_input(net: dict[str, Any], draw: Any) -> dict[str, Any]:
    """``net`` with a second ``input`` of the first's shape, added to it before the first layer (a
    network of several inputs: the first layer and any that named the input take their sum)."""
    first, *rest = net["layers"]
    name = first.get("name") or "input"
    joined = "joined_inputs"
    other = {"kind": "input", "name": "other_input", "shape": list(first["shape"]), **_input_gradient(draw)}
    add = {"kind": "add", "name": joined, "inputs": [name, "other_input"]}
    moved = [{**layer, "inputs": [joined if ref == name else ref for ref in layer["inputs"]]} if layer.get("inputs")
             else layer for layer in rest]
    return {**net, "layers": [first, other, add, *moved]}


@st.composite
def _volume_graph(draw: Any) -> dict[str, Any]:
    """(C, D, H, W) volumes: a 3-D convolution stem, residual blocks of 3-D convolutions (any kernel,
    stride 1, groups, dilation), 3-D pools (max or average, ceil_mode), a global pool, a head."""
    c, depth, side = draw(st.integers(1, 3)), draw(st.integers(2, 6)), draw(st.integers(4, 12))
    width = draw(st.sampled_from([2, 4, 6]))
    layers: list[dict[str, Any]] = [
        {"kind": "input", "shape": [c, depth, side, side], **_input_gradient(draw)},
        {"kind": "conv3d", "name": "stem", "out_channels": width, "kernel": [draw(st.integers(1, min(3, depth))), 3, 3],
         "padding": [0, 1, 1], "activation": draw(st.sampled_from(["none", "relu", "gelu"]))}]
    depth -= layers[-1]["kernel"][0] - 1
    last = "stem"
    for b in range(draw(st.integers(0, 2))):
        k, d = draw(st.sampled_from([1, 3])), draw(st.integers(1, 2))
        layers += [
            {"kind": "conv3d", "name": f"b{b}c", "out_channels": width, "kernel": k, "padding": d * (k // 2),
             "dilation": d, "groups": draw(st.sampled_from([1, 2])), "bias": draw(st.booleans()), "inputs": [last],
             **_weight_norm(draw)},
            {"kind": "batchnorm", "name": f"b{b}n"},
            {"kind": "add", "name": f"b{b}", "inputs": [last, f"b{b}n"], "activation": "relu"},
        ]
        last = f"b{b}"
    if draw(st.booleans()) and side % 2 == 0:  # a 3-D U-Net step: down by a strided conv, up by a transposed one
        layers += [
            {"kind": "conv3d", "name": "down", "out_channels": width, "kernel": [1, 2, 2], "stride": [1, 2, 2],
             "inputs": [last]},
            {"kind": "group_norm", "groups": draw(st.sampled_from([1, width])), "affine": draw(st.booleans())},
            {"kind": "conv_transpose3d", "name": "up", "out_channels": width, "kernel": [1, 2, 2],
             "stride": [1, 2, 2], "groups": draw(st.sampled_from([1, 2])), "activation": "relu"}
            if draw(st.booleans()) else
            {"kind": "upsample", "name": "up", "size": [depth, side, side],
             "mode": draw(st.sampled_from(["nearest", "trilinear"]))},
            {"kind": "concat", "name": "joined", "inputs": [last, "up"]},
        ]
        last = "joined"
    if draw(st.booleans()) and min(depth, side) >= 2:
        ceil = draw(st.booleans())
        mode = draw(st.sampled_from(["max", "avg"]))
        # a max pooling's taps may be 2 apart across the maps (a dilated window spanning 3)
        d = draw(st.integers(1, 2)) if mode == "max" and side >= 3 else 1
        layers.append({"kind": "pool3d", "mode": mode, "window": [1, 2, 2], "ceil_mode": ceil,
                       **({"dilation": [1, d, d]} if d > 1 else {})})
        out = -(-(side - d - 1) // 2) + 1 if ceil else (side - d - 1) // 2 + 1
        side = out - 1 if ceil and (out - 1) * 2 >= side else out
    layers += [{"kind": "pool3d", "mode": "avg", "window": [depth, side, side]}, {"kind": "flatten"},
               {"kind": "fc", "out_features": draw(st.integers(2, 12))}]
    return {"name": "random-volumes", "layers": layers}


@st.composite
def _conv_graph(draw: Any) -> dict[str, Any]:
    c = draw(st.integers(1, 4))
    side = draw(st.integers(6, 24))
    layers: list[dict[str, Any]] = [{"kind": "input", "shape": [c, side, side], **_input_gradient(draw)}]
    width = draw(st.sampled_from([4, 6, 8, 12]))
    layers.append({"kind": "conv2d", "name": "stem", "out_channels": width, "kernel": 3, "padding": 1,
                   "activation": draw(st.sampled_from(FUSED_FUNCTIONS))})
    last = "stem"
    for b in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["residual", "depthwise", "concat", "gate", "gated", "convnext", "shuffle",
                                     "unet", "windows", "recurrent", "split", "context", "norm", "warp",
                                     "select", "unpool", "im2col", "running", "copies", "straight", "messages"]))
        if kind == "messages":  # message passing over a fixed graph of the channels, rows or columns: each
            # edge's source gathered (repeats allowed), summed (or averaged, maximised, ...) into its target
            # onto the maps (index_add, index_reduce)
            axis = draw(st.integers(0, 2))
            size = width if axis == 0 else side
            edges = draw(st.integers(1, 2 * size))
            src = draw(st.lists(st.integers(0, size - 1), min_size=edges, max_size=edges))
            dst = draw(st.lists(st.integers(0, size - 1), min_size=edges, max_size=edges))
            signed = axis - 3 * draw(st.booleans())  # the axis counted from the end as well
            scatter = {"kind": "scatter_add", "name": f"b{b}", "inputs": [last, f"b{b}g"], "axis": signed,
                       "index": dst}
            reduce = draw(st.sampled_from(["sum", "mean", "amax", "amin", "prod"]))  # index_reduce's too
            if reduce != "sum" or draw(st.booleans()):
                scatter |= {"reduce": reduce, "include_self": draw(st.booleans()),
                            "index_per_value": draw(st.booleans())}  # scatter_reduce's kernel
            layers += [{"kind": "gather", "name": f"b{b}g", "inputs": [last], "axis": signed, "index": src}, scatter]
            last = f"b{b}"
        elif kind == "straight":  # a straight-through branch: a learned 1x1 convolution (or a constant factor)
            # whose values are added with no gradient back (x + f(x).detach()): the branch trains nothing
            layers += [{"kind": "conv2d", "name": f"b{b}q", "inputs": [last], "out_channels": width, "kernel": 1}
                       if draw(st.booleans()) else {"kind": "scale", "name": f"b{b}q", "inputs": [last],
                                                    "learned": False},
                       {"kind": "stop_gradient", "name": f"b{b}d"},
                       {"kind": "add", "name": f"b{b}", "inputs": [last, f"b{b}d"]}]
            last = f"b{b}"
        elif kind == "copies" and draw(st.booleans()):  # one window of every row (or column) of each map
            # (x.unfold(d, H, s): the map transposed), viewed as maps again and added to them
            layers += [{"kind": "windows", "name": f"b{b}w", "inputs": [last],
                        "axis": draw(st.sampled_from([1, 2, -1])), "size": side, "step": draw(st.integers(1, 3))},
                       {"kind": "reshape", "name": f"b{b}s", "shape": [width, side, side]},
                       {"kind": "add", "name": f"b{b}", "inputs": [last, f"b{b}s"]}]
            last = f"b{b}"
        elif kind == "copies":  # copies along an axis of the maps (repeat, tile, expand, repeat_interleave), cut
            # back to the maps' size and added to them
            axis = draw(st.integers(0, 2))
            layers += [{"kind": "repeat", "name": f"b{b}r", "inputs": [last], "axis": axis - 3 * draw(st.booleans()),
                        "times": draw(st.integers(1, 3)), "interleave": draw(st.booleans())},
                       {"kind": "slice", "name": f"b{b}s", "axis": axis, "start": 0, "stop": side if axis else width},
                       {"kind": "add", "name": f"b{b}", "inputs": [last, f"b{b}s"]}]
            last = f"b{b}"
        elif kind == "running":  # running sums along an axis of the maps, scaled down, added back; or the top k
            # values along the width (k-max pooling), padded back to it
            if draw(st.booleans()):
                layers += [{"kind": "cumsum", "name": f"b{b}c", "inputs": [last], "axis": draw(st.integers(-3, 2)),
                            "product": draw(st.booleans())},
                           {"kind": "scale", "name": f"b{b}s", "learned": False}]
            else:
                k = draw(st.integers(1, side - 1))
                layers += [{"kind": "topk", "name": f"b{b}c", "inputs": [last], "k": k, "axis": -1,
                            "largest": draw(st.booleans())},
                           {"kind": "pad", "name": f"b{b}s", "padding": [0, side - k, 0, 0]}]
            layers.append({"kind": "add", "name": f"b{b}", "inputs": [last, f"b{b}s"]})
            last = f"b{b}"
        elif kind == "im2col":  # windows as columns (F.unfold), a product over them or a factor, put back (F.fold)
            product = draw(st.booleans())
            if product:  # a "same" convolution as a product over the columns: the maps keep their size
                (k, dil), stride = draw(st.sampled_from([(1, 1), (3, 1), (2, 2), (3, 2)])), 1
                pad = dil * (k - 1) // 2
            else:
                k, stride, pad, dil = (draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.integers(0, 1)),
                                       draw(st.integers(1, 2)))
            windows = {"window": k, "stride": stride, "padding": pad, "dilation": dil}
            layers.append({"kind": "unfold", "name": f"b{b}u", "inputs": [last], **windows})
            if product:
                layers += [{"kind": "permute", "dims": [1, 0]},
                           {"kind": "fc", "out_features": width, "bias": draw(st.booleans())},
                           {"kind": "permute", "dims": [1, 0]},
                           {"kind": "reshape", "name": f"b{b}c", "shape": [width, side, side]},
                           {"kind": "add", "name": f"b{b}", "inputs": [last, f"b{b}c"]}]
                last = f"b{b}"
            else:  # the maps keep their size: later blocks rely on it
                layers += [{"kind": "scale", "learned": False},
                           {"kind": "fold", "name": f"b{b}", "size": side, **windows}]
                last = f"b{b}"
        elif kind == "unpool":  # SegNet: max pooling, then the values written back where they were
            layers += [{"kind": "pool", "name": f"b{b}p", "inputs": [last], "mode": "max", "window": 2},
                       {"kind": "max_unpool", "name": f"b{b}", "window": 2,
                        **({"size": [side, side]} if side % 2 or draw(st.booleans()) else {})}]
            last = f"b{b}"
        elif kind == "select":  # a selection by a mask computed from the maps: torch.where(x > c, x, a·x or c)
            layers += [
                {"kind": "compare", "name": f"b{b}m", "inputs": [last], "op": draw(st.sampled_from(
                    ["gt", "ge", "lt", "le", "eq", "ne"])), "value": draw(st.sampled_from([0.0, 0.5, -1.0]))},
                {"kind": "scale", "name": f"b{b}s", "inputs": [last], "learned": False},
            ]
            if draw(st.booleans()):
                layers.append({"kind": "where", "name": f"b{b}", "inputs": [f"b{b}m", last, f"b{b}s"]})
            else:
                layers += [{"kind": "where", "name": f"b{b}w", "inputs": [f"b{b}m", f"b{b}s"],
                            "value": draw(st.sampled_from([0.0, -1.0])), "value_first": draw(st.booleans())},
                           {"kind": "mul", "name": f"b{b}", "inputs": [f"b{b}w", f"b{b}m"]}]
            last = f"b{b}"
        elif kind == "warp":  # a spatial transformer: θ from the maps, their grid, the maps sampled on it
            layers += [
                {"kind": "flatten", "name": f"b{b}f", "inputs": [last]},
                {"kind": "fc", "out_features": 6},
                {"kind": "reshape", "shape": [2, 3]},
                {"kind": "affine_grid", "name": f"b{b}g", "size": [side, side], "align_corners": draw(st.booleans())},
                {"kind": "grid_sample", "name": f"b{b}", "inputs": [last, f"b{b}g"],
                 "mode": draw(st.sampled_from(["bilinear", "nearest", "bicubic"])),
                 "padding_mode": draw(st.sampled_from(["zeros", "border", "reflection"]))},
            ]
            last = f"b{b}"
        elif kind == "norm":  # a norm over the channels written out (ConvNeXt's): its steps as layers
            layers += [
                {"kind": "reduce", "name": f"b{b}u", "inputs": [last], "axes": [0], "keepdim": True,
                 "mode": draw(st.sampled_from(["mean", "var", "std"]))},
                {"kind": "add", "name": f"b{b}d", "inputs": [last, f"b{b}u"]},
                {"kind": "activation", "function": "pow", "exponent": draw(st.sampled_from([2.0, 3.0, 1.5, -2.0]))},
                {"kind": "reduce", "axes": [0], "mode": "mean", "keepdim": True},
                {"kind": "bias", "weights": 0},
                {"kind": "activation", "name": f"b{b}s",
                 "function": draw(st.sampled_from(["sqrt", "rsqrt", "reciprocal", "log", "erf"]))},
                {"kind": "mul", "name": f"b{b}", "inputs": [f"b{b}d", f"b{b}s"], "divide": draw(st.booleans())},
            ]
            last = f"b{b}"
        elif kind == "context":  # GCNet's global context: a (width, 1, 1) summary added at every position
            layers += [
                {"kind": "reduce", "name": f"b{b}c", "inputs": [last], "axes": [1, 2], "mode": "mean",
                 "keepdim": True},
                {"kind": "add", "name": f"b{b}", "inputs": [last, f"b{b}c"],
                 "activation": draw(st.sampled_from(["none", "relu"]))},
            ]
            last = f"b{b}"
        elif kind == "split":  # SK-Net's, ResNeSt's split attention: branches in one convolution, summed
            layers += [
                {"kind": "conv2d", "name": f"b{b}r", "out_channels": 2 * width, "kernel": 3, "padding": 1,
                 "inputs": [last]},
                {"kind": "reshape", "shape": [2, width, side, side]},
                {"kind": "reduce", "axes": [draw(st.sampled_from([0, -4]))],
                 "mode": draw(st.sampled_from(REDUCTIONS))},
                {"kind": "reduce", "name": f"b{b}m", "axes": [1, 2], "keepdim": True},  # (width, 1, 1)
                {"kind": "reduce", "name": f"b{b}s", "inputs": [last], "axes": [0], "keepdim": True},  # (1, H, W)
                {"kind": "mul", "name": f"b{b}o", "inputs": [f"b{b}m", f"b{b}s"]},  # broadcast both ways
                {"kind": "mul", "name": f"b{b}", "inputs": [last, f"b{b}o"]},
            ]
            last = f"b{b}"
        elif kind == "recurrent":  # one convolution (and its norm) applied twice, its parameters shared
            conv = {"kind": "conv2d", "out_channels": width, "kernel": 3, "padding": 1,
                    "bias": draw(st.booleans()), "activation": draw(st.sampled_from(["none", "relu"])),
                    **_weight_norm(draw, kernel=True)}
            norm = draw(st.sampled_from([None, {"kind": "batchnorm"}, {"kind": "group_norm", "groups": 2}]))
            layers.append({**conv, "name": f"b{b}c", "inputs": [last]})
            if norm:
                layers.append({**norm, "name": f"b{b}n"})
            layers.append({**conv, "name": f"b{b}c2", "shares": f"b{b}c"})
            if norm:
                layers.append({**norm, "name": f"b{b}n2", "shares": f"b{b}n"})
            layers.append({"kind": "add", "name": f"b{b}", "inputs": [last, layers[-1]["name"]]})
            last = f"b{b}"
        elif kind == "residual":
            d = draw(st.integers(1, 2))
            layers.append({"kind": "conv2d", "name": f"b{b}a", "out_channels": width, "kernel": 3, "padding": d,
                           "dilation": d, "groups": draw(st.sampled_from([1, 2])), "inputs": [last]})
            affine = draw(st.booleans())
            layers.append({"kind": "batchnorm", "name": f"b{b}n", "affine": affine} if draw(st.booleans()) else
                          {"kind": "group_norm", "name": f"b{b}n", "groups": draw(st.sampled_from([1, 2])),
                           "affine": affine})
            layers.append({"kind": "add", "name": f"b{b}", "inputs": [last, f"b{b}n"],
                           "activation": draw(st.sampled_from(["none", "relu"]))})
            last = f"b{b}"
        elif kind == "depthwise":  # its padding in the convolution, or a pad layer before it (TensorFlow's)
            if draw(st.booleans()):
                layers.append({"kind": "conv2d", "name": f"b{b}dw", "out_channels": width, "kernel": 3, "padding": 1,
                               "groups": width, "inputs": [last]})
            else:
                mode = draw(st.sampled_from(["constant", "reflect", "replicate", "circular"]))
                layers.append({"kind": "pad", "padding": [1, 1, 1, 1], "inputs": [last], "mode": mode,
                               "value": draw(st.sampled_from([0.0, 1.0])) if mode == "constant" else 0.0})
                layers.append({"kind": "conv2d", "name": f"b{b}dw", "out_channels": width, "kernel": 3,
                               "groups": width})
            layers.append({"kind": "conv2d", "name": f"b{b}", "out_channels": width, "kernel": 1})
            last = f"b{b}"
        elif kind == "gate":  # squeeze-and-excitation: a (C, 1, 1) gate broadcast over the map
            layers.append({"kind": "adaptive_pool", "name": f"b{b}p", "mode": "avg", "output_size": 1,
                           "inputs": [last]})
            layers.append({"kind": "conv2d", "name": f"b{b}s", "out_channels": width, "kernel": 1,
                           "activation": "sigmoid"})
            pair = [last, f"b{b}s"] if draw(st.booleans()) else [f"b{b}s", last]
            layers.append({"kind": "mul", "name": f"b{b}", "inputs": pair,
                           "activation": draw(st.sampled_from(["none", "relu"]))})
            last = f"b{b}"
        elif kind == "convnext":  # a depthwise conv, a layer norm and an MLP on channels-last maps, a layer scale
            k = draw(st.sampled_from([3, 7]))
            layers += [
                {"kind": "conv2d", "name": f"b{b}dw", "out_channels": width, "kernel": k, "padding": k // 2,
                 "groups": width, "inputs": [last]},
                {"kind": "permute", "dims": [1, 2, 0]},
                {"kind": "layer_norm", "bias": draw(st.booleans())},
                {"kind": "reshape", "shape": [side * side, width]},
                {"kind": "fc", "out_features": 4 * width, "activation": "gelu"},
                {"kind": "fc", "out_features": width},
                {"kind": "reshape", "shape": [side, side, width]},
                {"kind": "permute", "dims": [2, 0, 1]},
                {"kind": "scale", "axis": draw(st.sampled_from([0, -3]))},
                {"kind": "dropout", "name": f"b{b}sd", "p": draw(st.sampled_from([0.1, 0.5])),
                 **draw(st.sampled_from([{}, {"per_sample": True}, {"per_channel": True}]))},
                {"kind": "add", "name": f"b{b}", "inputs": [last, f"b{b}sd"]},
            ]
            last = f"b{b}"
        elif kind == "shuffle":  # ShuffleNet: half the channels through a branch, the rest kept, then shuffled
            half = width // 2
            layers += [
                {"kind": "slice", "name": f"b{b}k", "inputs": [last], "axis": 0, "start": 0, "stop": half},
                {"kind": "slice", "name": f"b{b}x", "inputs": [last], "axis": 0, "start": half, "stop": width},
                {"kind": "conv2d", "out_channels": width - half, "kernel": 1, "activation": "relu"},
                {"kind": "conv2d", "name": f"b{b}y", "out_channels": width - half, "kernel": 3, "padding": 1,
                 "groups": width - half},
                {"kind": "concat", "inputs": [f"b{b}k", f"b{b}y"]},
                {"kind": "reshape", "shape": [2, half, side, side]},
                {"kind": "permute", "dims": [1, 0, 2, 3]},
                {"kind": "reshape", "name": f"b{b}", "shape": [width, side, side]},
            ]
            last = f"b{b}"
        elif kind == "unet":  # down by a strided conv, back up (resized or a transposed conv), joined to the skip
            if draw(st.booleans()):
                up: dict[str, Any] = {"kind": "upsample", "name": f"b{b}u", "size": side,
                                      "mode": draw(st.sampled_from(["nearest", "bilinear", "bicubic"]))}
            else:  # (d - 1)·2 − 2p + k + output_padding = side from d = ceil(side / 2)
                k, p = draw(st.sampled_from([(3, 1), (5, 2)] if side % 2 else [(2, 0), (4, 1), (3, 1)]))
                extra = side - ((side - 1) // 2 * 2 - 2 * p + k)
                up = {"kind": "conv_transpose2d", "name": f"b{b}u", "out_channels": width, "kernel": k, "stride": 2,
                      "padding": p, "groups": draw(st.sampled_from([1, 2])), "bias": draw(st.booleans()),
                      "activation": draw(st.sampled_from(["none", "relu"])),
                      **({"output_padding": extra} if extra else {}), **_weight_norm(draw, kernel=True)}
            layers += [
                {"kind": "conv2d", "name": f"b{b}d", "out_channels": width, "kernel": 3, "stride": 2, "padding": 1,
                 "inputs": [last]},
                {"kind": "group_norm", "groups": draw(st.sampled_from([1, 2])), "affine": draw(st.booleans())},
                up,
                {"kind": "add", "name": f"b{b}", "inputs": [last, f"b{b}u"]},
            ]
            last = f"b{b}"
        elif kind == "windows":  # Swin: channels-last maps shifted (a roll), cut into windows (views with
            # five axes), a learned or constant bias per window, back to maps
            w = draw(st.sampled_from([d for d in (1, 2, 3, 4, 6) if side % d == 0]))
            n, shift = side // w, draw(st.integers(1, side - 1))
            layers += [
                {"kind": "permute", "name": f"b{b}hw", "inputs": [last], "dims": [1, 2, 0]},
                {"kind": "slice", "name": f"b{b}r1", "inputs": [f"b{b}hw"], "axis": 0, "start": shift, "stop": side},
                {"kind": "slice", "name": f"b{b}r2", "inputs": [f"b{b}hw"], "axis": 0, "start": 0, "stop": shift},
                {"kind": "concat", "inputs": [f"b{b}r1", f"b{b}r2"], "axis": 0},
                {"kind": "reshape", "shape": [n, w, n, w, width]},
                {"kind": "permute", "dims": [0, 2, 1, 3, 4]},
                {"kind": "reshape", "shape": [n * n, w * w, width]},
                {"kind": "layer_norm", "affine": draw(st.booleans())},
                {"kind": "bias", "weights": draw(st.integers(0, 50))},
                {"kind": "reshape", "shape": [n, n, w, w, width]},
                {"kind": "permute", "dims": [0, 2, 1, 3, 4]},
                {"kind": "reshape", "shape": [side, side, width]},
                {"kind": "permute", "name": f"b{b}m", "dims": [2, 0, 1]},
                {"kind": "add", "name": f"b{b}", "inputs": [last, f"b{b}m"]},
            ]
            last = f"b{b}"
        elif kind == "gated":  # a gated unit: the product of two maps of one shape
            layers.append({"kind": "conv2d", "name": f"b{b}g", "out_channels": width, "kernel": 1, "inputs": [last],
                           "activation": "silu"})
            layers.append({"kind": "conv2d", "name": f"b{b}v", "out_channels": width, "kernel": 1, "inputs": [last]})
            layers.append({"kind": "mul", "name": f"b{b}", "inputs": [f"b{b}g", f"b{b}v"],
                           **({"divide": True} if draw(st.booleans()) else {})})
            last = f"b{b}"
        else:
            half = width // 2
            layers.append({"kind": "conv2d", "name": f"b{b}x", "out_channels": half, "kernel": 1, "inputs": [last]})
            layers.append({"kind": "conv2d", "name": f"b{b}y", "out_channels": width - half, "kernel": 3,
                           "padding": 1, "inputs": [last]})
            layers.append({"kind": "concat", "name": f"b{b}", "inputs": [f"b{b}x", f"b{b}y"]})
            last = f"b{b}"
    if draw(st.booleans()):  # a patch sequence through attention, as ViT does
        layers.append({"kind": "reshape", "shape": [width, side * side]})
        layers.append({"kind": "permute", "dims": [1, 0]})
        layers.append({"kind": "layer_norm"})
        layers.append({"kind": "attention", "heads": draw(st.sampled_from([h for h in (1, 2, 4) if width % h == 0]))})
        layers.append({"kind": "select_token", "index": draw(st.integers(0, side * side - 1))})
    else:
        size = draw(st.integers(1, min(side, 4)))
        layers.append({"kind": "adaptive_pool", "mode": draw(st.sampled_from(["avg", "max"])), "output_size": size})
        layers.append({"kind": "flatten"})
    layers.append({"kind": "fc", "out_features": draw(st.integers(2, 50))})
    return {"name": "random-graph", "layers": layers}


@st.composite
def _token_graph(draw: Any) -> dict[str, Any]:
    seq = draw(st.integers(2, 32))
    dim = draw(st.sampled_from([8, 16, 24, 32]))
    vocab = draw(st.integers(10, 500))
    layers: list[dict[str, Any]] = [{"kind": "input", "shape": [seq], **_input_gradient(draw)},
                                    {"kind": "embedding", "name": "tok", "vocabulary": vocab, "dim": dim},
                                    {"kind": "position_embedding", "name": "pos",
                                     "rows": draw(st.integers(seq, 2 * seq))}]
    last = "pos"
    if draw(st.booleans()):  # the embeddings times a constant, as sqrt(D) in "Attention Is All You Need"
        layers.append({"kind": "scale", "name": "sqrt_d", "learned": False})
        last = "sqrt_d"
    tokens = seq
    if draw(st.booleans()):
        cls = draw(st.integers(1, 2))
        layers.append({"kind": "class_token", "name": "cls", "tokens": cls})
        last, tokens = "cls", seq + cls
    causal = draw(st.booleans())
    for b in range(draw(st.integers(1, 3))):
        layers.append({"kind": "layer_norm", "name": f"ln{b}", "inputs": [last], "affine": draw(st.booleans()),
                       "bias": draw(st.booleans())})
        heads = draw(st.sampled_from([1, 2, 4, 8]))
        if draw(st.booleans()):
            layers.append({"kind": "attention", "name": f"attn{b}", "heads": heads, "causal": causal,
                           "bias": draw(st.booleans())})
        else:  # written by hand: one projection split into queries, keys and values, viewed as heads
            layers.append({"kind": "fc", "name": f"qkv{b}", "out_features": 3 * dim})
            axis = draw(st.sampled_from([-1, 1]))
            for j, part in enumerate("qkv"):
                layers += [
                    {"kind": "slice", "name": f"{part}{b}", "inputs": [f"qkv{b}"], "axis": axis, "start": j * dim,
                     "stop": (j + 1) * dim},
                    {"kind": "reshape", "shape": [tokens, heads, dim // heads]},
                    {"kind": "permute", "name": f"{part}{b}h", "dims": [1, 0, 2]},
                ]
            if draw(st.booleans()):
                layers.append({"kind": "sdpa", "name": f"sdpa{b}", "inputs": [f"q{b}h", f"k{b}h", f"v{b}h"],
                               "causal": causal, "bias_weights": draw(st.sampled_from([0, 0, 1, 7, 30]))})
            else:  # written out: q @ kᵀ, a constant factor (and a mask), softmax, a dropout, @ v
                layers += [
                    {"kind": "permute", "name": f"k{b}t", "inputs": [f"k{b}h"], "dims": [0, 2, 1]},
                    {"kind": "matmul", "name": f"scores{b}", "inputs": [f"q{b}h", f"k{b}t"]},
                    {"kind": "scale", "learned": False},
                    *([{"kind": "scale", "learned": False}] if causal else []),
                    *([{"kind": "bias", "weights": draw(st.integers(0, 64))}] if draw(st.booleans()) else []),
                    {"kind": "softmax"},
                    {"kind": "dropout", "name": f"pdrop{b}", "p": draw(st.sampled_from([0.1, 0.5]))},
                    {"kind": "matmul", "name": f"sdpa{b}", "inputs": [f"pdrop{b}", f"v{b}h"]},
                ]
            layers += [
                {"kind": "permute", "inputs": [f"sdpa{b}"], "dims": [1, 0, 2]},
                {"kind": "reshape", "shape": [tokens, dim]},
                {"kind": "fc", "name": f"attn{b}", "out_features": dim},
            ]
        layers += [
            {"kind": "add", "name": f"r{b}", "inputs": [last, f"attn{b}"]},
            {"kind": "fc", "name": f"up{b}", "out_features": 4 * dim, "activation": "gelu"},
            {"kind": "dropout", "name": f"drop{b}", "p": 0.1},
            {"kind": "fc", "name": f"down{b}", "out_features": dim},
            {"kind": "scale", "name": f"ls{b}", "axis": draw(st.sampled_from([-1, 1])), "shared": draw(st.booleans())},
            {"kind": "add", "name": f"m{b}", "inputs": [f"r{b}", f"ls{b}"]},
        ]
        last = f"m{b}"
        if draw(st.booleans()):  # the block's MLP applied again, its layers shared (ALBERT's repeated layers)
            layers += [
                {"kind": "fc", "name": f"up{b}r", "shares": f"up{b}", "out_features": 4 * dim, "activation": "gelu"},
                {"kind": "fc", "name": f"down{b}r", "shares": f"down{b}", "out_features": dim},
                {"kind": "add", "name": f"m{b}r", "inputs": [last, f"down{b}r"]},
            ]
            last = f"m{b}r"
    if draw(st.booleans()):  # a recurrent layer over the tokens (an LSTM or GRU decoder), back to the width
        # ... over the whole sequence, or over its halves side by side (R = 2 sequences of S/2 steps: a map's
        # rows folded into the batch, as Sequencer's LSTMs run)
        halves = tokens % 2 == 0 and draw(st.booleans())
        hidden, bidirectional = draw(st.integers(1, 24)), draw(st.booleans())
        mode = draw(st.sampled_from(["lstm", "gru", "rnn_tanh", "rnn_relu"]))
        # an LSTM's hidden state projected (LSTMP, PyTorch's proj_size) or not
        projection = draw(st.integers(0, hidden - 1)) if mode == "lstm" and hidden > 1 else 0
        state = projection or hidden
        layers += [*([{"kind": "reshape", "name": "rows", "inputs": [last], "shape": [2, tokens // 2, dim]}]
                     if halves else []),
                   {"kind": "recurrent", "name": "rnn", "inputs": ["rows" if halves else last], "mode": mode,
                    "hidden": hidden, "layers": draw(st.integers(1, 2)), "projection": projection,
                    "bidirectional": bidirectional, "bias": draw(st.booleans())},
                   *([{"kind": "reshape", "shape": [tokens, state * (2 if bidirectional else 1)]}] if halves else []),
                   {"kind": "fc", "name": "rnn_out", "out_features": dim}]
    if draw(st.booleans()):  # a recurrent cell unrolled over two tokens, from a zero state (nn.GRUCell's kernels)
        hidden = draw(st.integers(1, 12))
        last = str(layers[-1].get("name", last))  # after the recurrent layer: its projection
        layers += [{"kind": "select_token", "name": "t0", "inputs": [last], "index": 0},
                   {"kind": "select_token", "name": "t1", "inputs": [last], "index": 1},
                   {"kind": "zeros", "name": "h0", "inputs": ["t0"], "shape": [hidden]}]
        state = "h0"
        for step in ("t0", "t1"):
            layers += [{"kind": "fc", "name": f"{step}ih", "inputs": [step], "out_features": 3 * hidden},
                       {"kind": "fc", "name": f"{step}hh", "inputs": [state], "out_features": 3 * hidden,
                        **({"shares": "t0hh"} if step == "t1" else {})},
                       {"kind": "add", "inputs": [f"{step}hh", f"{step}ih"], "activation": "sigmoid"},
                       {"kind": "slice", "name": f"{step}z", "axis": 0, "start": 0, "stop": hidden},
                       {"kind": "mul", "name": f"{step}h", "inputs": [f"{step}z", state]}]
            state = f"{step}h"
        layers += [{"kind": "fc", "inputs": [state], "out_features": draw(st.integers(2, 20)), "activation": "tanh"}]
    elif draw(st.booleans()):
        layers += [{"kind": "select_token", "index": 0}, {"kind": "fc", "out_features": draw(st.integers(2, 20)),
                                                           "activation": "tanh"}]
    else:  # a language model's head, its matrix its own or tied to the token embedding
        layers.append({"kind": "fc", "out_features": vocab, "bias": False,
                       **({"tied_to": "tok"} if draw(st.booleans()) else {})})
    return {"name": "random-tokens", "layers": layers}


def scaled_cluster(base: Cluster, *, bandwidth: float = 1.0, mac: float = 1.0, elem: float = 1.0,
                   latency: float = 1.0) -> Cluster:
    """``base`` with NIC bandwidths multiplied by ``bandwidth`` and times by the other factors."""

    def nic(n: Any) -> Any:
        return n.evolve(upload_bits_per_s=n.upload_bits_per_s * bandwidth,
                        download_bits_per_s=n.download_bits_per_s * bandwidth, latency_s=n.latency_s * latency)

    def machine(m: Any) -> Any:
        acc = m.accelerator
        if acc is not None:
            peaks = {p: (v / mac if v is not None else None) for p, v in acc.peak_flops_per_s.to_dict().items()}
            acc = acc.evolve(peak_flops_per_s=acc.peak_flops_per_s.evolve(**peaks),
                             memory_bytes_per_s=acc.memory_bytes_per_s / elem)
        # The fixed cost per layer call scales with the compute times.
        overhead = m.layer_overhead_s * mac
        if not m.has_cpu_rate:
            return m.evolve(accelerator=acc, elem_time_s=m.elem_time_s * elem, layer_overhead_s=overhead)
        rate = {"conv": m.mac_time("conv") * mac, "fc": m.mac_time("fc") * mac}
        # The shape-aware model's constants mix arithmetic and bytes: all scale with the compute times.
        shape = None if m.shape_rate is None else m.shape_rate.scaled(mac)
        return m.evolve(mac_time_s=rate, peak=None, elem_time_s=m.elem_time_s * elem, accelerator=acc,
                        layer_overhead_s=overhead, shape_rate=shape)

    node = base.node
    if node is not None:
        node = node.evolve(link=node.link.evolve(bytes_per_s=node.link.bytes_per_s * bandwidth,
                                                 latency_s=node.link.latency_s * latency))
    return base.evolve(worker=machine(base.worker), ps=machine(base.ps), worker_nic=nic(base.worker_nic),
                       ps_nic=nic(base.ps_nic), node=node)


preset_networks = st.sampled_from(presets.names("networks"))
preset_clusters = st.sampled_from(presets.names("clusters"))


def spec_floats(low: float, high: float) -> Any:
    """Floats from ``low`` to ``high`` that a spec holds: 0, or magnitudes of at least 1e-30
    (dnnbench.specs.io.MIN_MAGNITUDE; subnormal and tinier values are refused when a spec is built)."""
    from dnnbench.specs.io import MIN_MAGNITUDE

    if low > 0.0:
        return st.floats(max(low, MIN_MAGNITUDE), high)
    return st.just(0.0) | st.floats(MIN_MAGNITUDE, high)


@st.composite
def gemm_costs(draw: Any) -> dict[str, float]:
    """A GemmCost mapping: every constant 0 or a plausible CPU value."""
    def one(value: float) -> Any:
        return st.sampled_from([0.0, value, 4.0 * value])

    return {"mac_time_s": draw(st.sampled_from([1e-11, 4e-11])), "weight_element_time_s": draw(one(1e-10)),
            "input_element_time_s": draw(one(1e-10)), "output_element_time_s": draw(one(5e-10)),
            "strided_mac_time_s": draw(one(5e-12)), "strided_input_element_time_s": draw(one(1e-9)),
            "grouped_mac_time_s": draw(one(1e-10)), "grouped_input_element_time_s": draw(one(3e-10)),
            "grouped_output_element_time_s": draw(one(7e-10)), "depthwise_wide_mac_time_s": draw(one(5e-10)),
            "vector_weight_element_time_s": draw(st.sampled_from([None, 0.0, 3e-11, 2e-10])),
            "call_time_s": draw(one(1e-5))}


@st.composite
def elem_costs(draw: Any) -> dict[str, float]:
    """An ElemCost mapping."""
    return {"op_time_s": draw(st.sampled_from([0.0, 5e-10])), "byte_time_s": draw(st.sampled_from([0.0, 2e-11])),
            "backward_op_time_s": draw(st.sampled_from([None, 0.0, 3e-10])),
            "forward_call_time_s": draw(st.sampled_from([0.0, 8e-6])),
            "backward_call_time_s": draw(st.sampled_from([0.0, 1e-5])),
            "weight_grad_byte_time_s": draw(st.sampled_from([None, 0.0, 1e-11]))}


@st.composite
def function_costs(draw: Any) -> dict[str, dict[str, float]]:
    """A FunctionCosts mapping: each activation function's extra times, drawn."""
    from dnnbench.specs.shape import ACTIVATION_FUNCTIONS

    return {f: {"forward_op_time_s": draw(st.sampled_from([0.0, 2e-9])),
                "backward_op_time_s": draw(st.sampled_from([0.0, 3e-10])),
                "forward_call_time_s": draw(st.sampled_from([0.0, 7e-6])),
                "backward_call_time_s": draw(st.sampled_from([0.0, 1.4e-5]))} for f in ACTIVATION_FUNCTIONS}


@st.composite
def shape_rates(draw: Any) -> dict[str, Any]:
    """A ShapeRate mapping with every part drawn (docs/model.md §12)."""
    from dnnbench.specs.shape import ELEM_FAMILY_FIELDS, GEMM_PHASES

    families = {f: draw(elem_costs()) for f in ELEM_FAMILY_FIELDS}
    families["max_pool"] = draw(st.none() | elem_costs())  # None: max pools priced as the pool family
    return {**{g: draw(gemm_costs()) for g in GEMM_PHASES}, **families,
            "functions": draw(function_costs()),
            "update_byte_time_s": draw(st.sampled_from([0.0, 1e-10])),
            "update_call_time_s": draw(st.sampled_from([0.0, 3e-5])),
            "memory_byte_time_s": draw(st.sampled_from([0.0, 5e-11])),
            "cache_bytes": draw(st.sampled_from([2**20, 2**25])),
            "memory_per_core": draw(st.booleans()),
            "fresh_byte_time_s": draw(st.sampled_from([0.0, 1e-9])),
            "fresh_threshold_bytes": draw(st.sampled_from([2**16, 2**25])),
            "layout_copies": draw(st.booleans()),
            "layout_copy_byte_time_s": draw(st.sampled_from([0.0, 5e-11])),
            "thread_contention": draw(st.sampled_from([0.0, 0.2, 1.0])),
            "layer_step_time_s": draw(st.sampled_from([0.0, 5e-6])),
            "step_call_scale": draw(st.sampled_from([0.0, 0.5, 1.0])),
            "step_time_s": draw(st.sampled_from([0.0, 1e-4])),
            "recurrent_steps": draw(st.none() | st.fixed_dictionaries({
                "lstm_s": st.sampled_from([0.0, 2e-6]), "gru_s": st.sampled_from([0.0, 8e-5]),
                "rnn_s": st.sampled_from([0.0, 3e-5])}))}


@st.composite
def machine_changes(draw: Any, base: Any) -> Any:
    """``base`` (a Machine) with every optional part of a machine drawn: on a CPU machine also compute
    from the layers' shapes (``shape_rate``) and a compute error band."""
    cpu = {}
    if base.accelerator is None:
        cpu = {"shape_rate": draw(st.none() | shape_rates()),
               "compute_error": draw(st.none() | st.fixed_dictionaries({
                   "p10": st.sampled_from([-0.3, 0.0]), "p90": st.sampled_from([0.0, 0.5])}))}
    return base.evolve(
        cores=draw(st.integers(1, 16)), thread_contention=draw(st.sampled_from([0.0, 0.05, 0.3])),
        cache_speedup=draw(st.sampled_from([1.0, 1.5, 3.0])), llc_bytes=draw(st.sampled_from([2**16, 2**22, 2**28])),
        layer_overhead_s=draw(st.sampled_from([0.0, 2e-5])), copy_time_s_per_byte=draw(st.sampled_from([0.0, 2e-10])),
        step_time_cv=draw(st.sampled_from([0.0, 0.3])), memory_bytes=draw(st.sampled_from([2**30, 2**36])), **cpu)


@st.composite
def nic_changes(draw: Any, base: Any) -> Any:
    """``base`` (a Nic) with every optional part of a NIC drawn."""
    rate = draw(st.sampled_from([1e8, 1e9, 1e10]))
    return base.evolve(upload_bits_per_s=rate, download_bits_per_s=rate * draw(st.sampled_from([1.0, 0.25])),
                       latency_s=draw(st.sampled_from([0.0, 5e-5])), goodput_factor=draw(st.sampled_from([1.0, 0.9])),
                       duplex=draw(st.sampled_from(["full", "half"])),
                       exchange_overhead_s=draw(st.sampled_from([0.0, 1e-5])))


@st.composite
def clusters_with_every_part(draw: Any, shared_host: bool | None = None) -> Cluster:
    """A cluster from a preset with every optional part drawn: machines, NICs (half duplex too), a
    separate PS type or the workers', and a shared host when ``shared_host`` is None or True."""
    base = presets.cluster(draw(preset_clusters))
    worker = draw(machine_changes(base.worker))
    if worker.accelerator is not None:
        acc = worker.accelerator
        worker = worker.evolve(accelerator=acc.evolve(
            efficiency_conv=draw(st.sampled_from([0.3, acc.efficiency_conv])),
            half_efficiency_macs=draw(st.sampled_from([0.0, 1e6, acc.half_efficiency_macs])),
            half_efficiency_channels=draw(st.sampled_from([0.0, 8.0, acc.half_efficiency_channels])),
            reserved_bytes=draw(st.sampled_from([0, acc.reserved_bytes])),
            memory_bytes=draw(st.sampled_from([2**28, acc.memory_bytes])),
            efficiency_by_precision={p: draw(st.none() | st.builds(
                lambda c, f, h, n: {"conv": c, "fc": f, "half_efficiency_macs": h, "half_efficiency_channels": n},
                st.sampled_from([0.2, 0.5, 1.0]), st.sampled_from([0.3, 0.9]), st.sampled_from([0.0, 1e9]),
                st.sampled_from([None, 0.0, 128.0])))
                for p in acc.peak_flops_per_s.supported}))
    ps = worker if worker.has_cpu_rate and draw(st.booleans()) else draw(machine_changes(base.ps))
    nic = draw(nic_changes(base.worker_nic))
    ps_nic = nic if draw(st.booleans()) else draw(nic_changes(base.ps_nic))
    host = None
    if shared_host or (shared_host is None and draw(st.booleans())):
        host = {"cores": draw(st.integers(1, 16)), "background_threads": draw(st.sampled_from([0.0, 0.5, 2.0])),
                "corun_slowdown": draw(st.sampled_from([0.0, 0.2])),
                "wakeup_delay_s": draw(st.sampled_from([0.0, 1e-3]))}
    node = base.node.to_dict() if base.node is not None else None
    if draw(st.booleans()):  # nodes of several devices (or machines) on an intra-node link, or none
        node = draw(st.none() | st.fixed_dictionaries({
            "devices": st.integers(1, 8), "nics": st.integers(1, 4),
            "link": st.fixed_dictionaries({"kind": st.sampled_from(["nvlink", "nvswitch", "pcie"]),
                                           "bytes_per_s": st.sampled_from([1e9, 1e10, 3e11]),
                                           "latency_s": st.sampled_from([0.0, 2e-6])})}))
    return base.evolve(worker=worker, ps=ps, worker_nic=nic, ps_nic=ps_nic, shared_host=host, node=node)


@st.composite
def configurations_with_every_part(draw: Any, precisions: tuple[str, ...] = ("fp32",)) -> Any:
    """A configuration with every choice drawn: mode and PS exchange, compression (sparse, quantised,
    compressed pulls), overlap, threads, partitioning, FC update scheme, intervals, value bits, the
    data-parallel scheme (the PS, or an all-reduce with its algorithm, bucket size, overlap and ZeRO
    stage), the optimizer and a precision of ``precisions``."""
    from dnnbench.specs import Configuration

    data_parallel = draw(st.sampled_from(["ps", "ps", "allreduce"]))
    mode, exchange = draw(st.sampled_from([("async", "overlapped"), ("async", "request_reply"),
                                           ("sync", "overlapped")]))
    compression = draw(st.sampled_from([
        {}, {"method": "topk_ef", "density": 0.01, "encoding": "bitmap"},
        {"method": "esgd", "density": 0.1, "compress_pull": True}, {"method": "qsgd", "encoding": "dense"},
        {"method": "randk", "density": 0.05, "encoding": "values_only"}]))
    return Configuration.build({
        "mode": mode, "ps_exchange": exchange, "compression": compression,
        "overlap": draw(st.sampled_from([0.0, 0.5, 1.0])), "threads": draw(st.sampled_from([None, 1, 4])),
        "partitioning": draw(st.sampled_from(["feature-map", "spatial", "auto"])),
        "fc_update": draw(st.sampled_from(["auto", "activations", "deltas"])),
        "push_interval_samples": draw(st.sampled_from([1, 32])),
        "pull_interval_samples": draw(st.sampled_from([32, 1024])),
        "samples_per_message": draw(st.sampled_from([1, 8])), "local_batch_samples": draw(st.sampled_from([1, 16])),
        "value_bits": draw(st.sampled_from([16, 32])),
        "data_parallel": data_parallel,
        "precision": draw(st.sampled_from(precisions)),
        "optimizer": draw(st.sampled_from(["sgd", "momentum", "adam"])),
        "zero_stage": draw(st.integers(0, 3)) if data_parallel == "allreduce" else 0,
        "allreduce": {"algorithm": draw(st.sampled_from(["ring", "tree", "hierarchical"])),
                      "bucket_bytes": draw(st.sampled_from([4096, 2**20, 25 * 2**20])),
                      "overlap_backward": draw(st.booleans())}})


@st.composite
def partitionable_graph_dicts(draw: Any) -> dict[str, Any]:
    """A random graph of the kinds a model-parallel run splits (dnnbench.measure.partition): maps pooled or normalised
    before the stem (held whole by every process) or not, a second input added to the first or not, then residual
    blocks (a batch norm or a group norm, an add with a fused activation), depthwise convolutions (channel
    multiplier 1 or 2) and their pointwise mix, grouped convolutions, inception-style branches joined (the block's
    input among them or not), squeeze-and-excitation gates (a global pool, 1x1 convolutions, a product broadcast
    over the maps), ConvNeXt blocks (maps permuted to channels last for a layer norm and an MLP on every position, a
    layer scale before or after the permutation back), ShuffleNet units (the maps chunked by channels, one chunk
    through a branch, the chunks joined and their channels shuffled), crops (slices of rows and columns), masks (a
    learned slope or factor, a comparison, values chosen by it, running sums, zeros added), pooling;
    then flatten or a global pool, one or two FC layers (of fewer units than processes or not) and a softmax
    or not."""
    c, side = draw(st.integers(1, 3)), draw(st.sampled_from([6, 8, 10]))
    layers: list[dict[str, Any]] = [{"kind": "input", "shape": [c, side, side]}]
    last = "input"
    if draw(st.booleans()):
        layers += [{"kind": "input", "name": "other", "shape": [c, side, side]},
                   {"kind": "add", "name": "joined", "inputs": ["input", "other"]}]
        last = "joined"
    before = draw(st.sampled_from(["none", "pool", "batchnorm", "activation"]))
    if before == "pool":
        layers.append({"kind": "pool", "name": "pre", "inputs": [last], "window": 2, "mode": "avg"})
        side //= 2
        last = "pre"
    elif before != "none":
        layers.append({"kind": before, "name": "pre", "inputs": [last]})
        last = "pre"
    width = draw(st.sampled_from([3, 4, 6, 8, 12]))
    layers.append({"kind": "conv2d", "name": "stem", "inputs": [last], "out_channels": width, "kernel": 3,
                   "padding": 1, "activation": draw(st.sampled_from(["none", "relu"]))})
    last = "stem"
    for b in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["residual", "depthwise", "grouped", "branches", "gate", "pool", "convnext",
                                     "shuffle", "crop", "copies", "masks"]))
        if kind == "masks":  # a learned slope (one, or one per channel) or a shared factor, a mask of it, values
            # chosen by the mask, running sums along channels, rows or columns, zeros (a cell's state) added
            layers += [{"kind": "prelu", "name": f"b{b}p", "inputs": [last], "per_channel": draw(st.booleans())}
                       if draw(st.booleans()) else {"kind": "scale", "name": f"b{b}p", "inputs": [last],
                                                    "shared": True},
                       {"kind": "compare", "name": f"b{b}m", "op": draw(st.sampled_from(["gt", "le"])),
                        **({"inputs": [f"b{b}p", last]} if draw(st.booleans()) else {"value": 0.1})},
                       {"kind": "where", "name": f"b{b}w",
                        "inputs": [f"b{b}m", f"b{b}p", last] if draw(st.booleans()) else [f"b{b}m", f"b{b}p"],
                        "value": -0.5, "value_first": draw(st.booleans())},
                       {"kind": "cumsum", "name": f"b{b}r", "axis": draw(st.integers(-3, 2))},
                       {"kind": "zeros", "name": f"b{b}z", "inputs": [last], "shape": [width, side, side]},
                       {"kind": "add", "name": f"b{b}", "inputs": [f"b{b}r", f"b{b}z"]}]
        elif kind == "copies":  # copies along channels, rows or columns (tiled or interleaved), cut back, added
            axis, times = draw(st.integers(0, 2)), draw(st.integers(2, 3))
            start = draw(st.integers(0, times - 1))
            layers += [{"kind": "repeat", "inputs": [last], "axis": axis, "times": times,
                        "interleave": draw(st.booleans())},
                       {"kind": "slice", "name": f"b{b}s", "axis": axis, "start": start,
                        "stop": start + (side if axis else width)},
                       {"kind": "add", "name": f"b{b}", "inputs": [last, f"b{b}s"]}]
        elif kind == "shuffle":  # ShuffleNet V2: the maps chunked by channels, one part through a branch, joined,
            # the channels shuffled in g groups ((C, H, W) as (g, C/g, H, W), two axes swapped, back)
            cut = draw(st.integers(1, width - 1))
            g = draw(st.sampled_from([d for d in (2, 3, 4) if width % d == 0]))
            layers += [{"kind": "slice", "name": f"b{b}a", "inputs": [last], "axis": 0, "start": 0, "stop": cut},
                       {"kind": "slice", "inputs": [last], "axis": 0, "start": cut, "stop": width},
                       {"kind": "conv2d", "name": f"b{b}c", "out_channels": width - cut, "kernel": 1,
                        "activation": "relu"},
                       {"kind": "concat", "inputs": [f"b{b}a", f"b{b}c"]},
                       {"kind": "reshape", "shape": [g, width // g, side, side]},
                       {"kind": "permute", "dims": [1, 0, 2, 3]},
                       {"kind": "reshape", "name": f"b{b}", "shape": [width, side, side]}]
        elif kind == "crop":  # slices along rows and columns: each process crops its own maps
            if side < 3:
                continue
            layers += [{"kind": "slice", "inputs": [last], "axis": 1, "start": 1, "stop": side},
                       {"kind": "slice", "name": f"b{b}", "axis": draw(st.sampled_from([2, -1])), "start": 0,
                        "stop": side - 1}]
            side -= 1
        elif kind == "convnext":  # channels last around a layer norm and an MLP on every position, a layer scale
            hidden = draw(st.sampled_from([2, 4])) * width
            layers += [{"kind": "conv2d", "name": f"b{b}d", "inputs": [last], "out_channels": width, "kernel": 3,
                        "padding": 1, "groups": width},
                       {"kind": "permute", "dims": [1, 2, 0]},
                       {"kind": "layer_norm"},
                       {"kind": "reshape", "shape": [side * side, width]},
                       {"kind": "fc", "out_features": hidden, "activation": "gelu"},
                       {"kind": "fc", "out_features": width},
                       {"kind": "reshape", "shape": [side, side, width]},
                       *([{"kind": "scale", "axis": -1}] if draw(st.booleans()) else []),
                       {"kind": "permute", "dims": [2, 0, 1]},
                       *([{"kind": "scale", "axis": 0}] if draw(st.booleans()) else [])]
            layers[-1] = {**layers[-1], "name": f"b{b}s"}
            layers.append({"kind": "add", "name": f"b{b}", "inputs": [last, f"b{b}s"]})
        elif kind == "residual":
            norm = draw(st.sampled_from([{"kind": "batchnorm"}, *({"kind": "group_norm", "groups": g,
                                                                   "affine": draw(st.booleans())}
                                                                  for g in (1, 2, 3, 4) if width % g == 0)]))
            layers += [{"kind": "conv2d", "name": f"b{b}c", "inputs": [last], "out_channels": width, "kernel": 3,
                        "padding": 1},
                       {**norm, "name": f"b{b}n"},
                       {"kind": "add", "name": f"b{b}", "inputs": [last, f"b{b}n"], "activation": "relu"}]
        elif kind == "depthwise":
            mult = draw(st.sampled_from([1, 2]))
            layers += [{"kind": "conv2d", "name": f"b{b}d", "inputs": [last], "out_channels": mult * width,
                        "kernel": 3, "padding": 1, "groups": width},
                       {"kind": "conv2d", "name": f"b{b}", "out_channels": width, "kernel": 1}]
        elif kind == "grouped":
            groups = draw(st.sampled_from([g for g in (2, 3, 4) if width % g == 0]))
            layers.append({"kind": "conv2d", "name": f"b{b}", "inputs": [last], "out_channels": width, "kernel": 3,
                           "padding": 1, "groups": groups, "activation": "relu"})
        elif kind == "branches":
            a, d = draw(st.integers(2, 6)), draw(st.integers(2, 6))
            joined = [f"b{b}x", f"b{b}y"] + ([last] if draw(st.booleans()) else [])
            layers += [{"kind": "conv2d", "name": f"b{b}x", "inputs": [last], "out_channels": a, "kernel": 1},
                       {"kind": "conv2d", "name": f"b{b}y", "inputs": [last], "out_channels": d, "kernel": 3,
                        "padding": 1},
                       {"kind": "concat", "name": f"b{b}j", "inputs": joined},
                       {"kind": "conv2d", "name": f"b{b}", "out_channels": width, "kernel": 1}]
        elif kind == "gate":
            squeeze = draw(st.integers(2, 4))
            layers += [{"kind": "adaptive_pool", "name": f"b{b}p", "inputs": [last]},
                       {"kind": "conv2d", "out_channels": squeeze, "kernel": 1, "activation": "relu"},
                       {"kind": "conv2d", "out_channels": width, "kernel": 1},
                       {"kind": "activation", "name": f"b{b}g", "function": "sigmoid"},
                       {"kind": "mul", "name": f"b{b}", "inputs": [last, f"b{b}g"]}]
        elif side >= 2:
            layers.append({"kind": "pool", "name": f"b{b}", "inputs": [last], "window": 2,
                           "mode": draw(st.sampled_from(["max", "avg"]))})
            side //= 2
        else:
            continue
        last = f"b{b}"
    if draw(st.booleans()):
        layers.append({"kind": "adaptive_pool", "inputs": [last], "mode": draw(st.sampled_from(["avg", "max"]))})
        layers.append({"kind": "flatten"})
    else:
        layers.append({"kind": "flatten", "inputs": [last]})
    for _ in range(draw(st.integers(1, 2))):  # of 1 to 3 units too: the last processes hold none of them
        layers.append({"kind": "fc", "out_features": draw(st.integers(1, 12)),
                       "activation": draw(st.sampled_from(["none", "relu"]))})
    if draw(st.booleans()):
        layers.append({"kind": "softmax"})
    return {"name": "random-split", "layers": layers}


@st.composite
def _attention_block(draw: Any, name: str, tokens: int, width: int, heads: int) -> list[dict[str, Any]]:
    """Attention on a (tokens, width) sequence, ending in a layer called ``name``: the attention layer,
    or written by hand (an FC layer of Q, K and V, sliced, viewed as heads and permuted, then
    ``q @ kᵀ``, a bias added to the scores or not, a softmax and ``@ v``, or ``sdpa`` with a learned bias
    or not; permuted back, viewed and projected)."""
    form = draw(st.sampled_from(["attention", "matmul", "sdpa"]))
    causal = draw(st.booleans())
    if form == "attention":
        return [{"kind": "attention", "name": name, "heads": heads, "causal": causal, "bias": draw(st.booleans())}]
    d = width // heads
    out: list[dict[str, Any]] = [{"kind": "fc", "name": f"{name}qkv", "out_features": 3 * width}]
    for i, n in enumerate("qkv"):
        out += [{"kind": "slice", "name": f"{name}{n}0", "inputs": [f"{name}qkv"], "axis": 1, "start": i * width,
                 "stop": (i + 1) * width},
                {"kind": "reshape", "name": f"{name}{n}1", "shape": [tokens, heads, d]},
                {"kind": "permute", "name": f"{name}{n}", "dims": [1, 0, 2]}]
    if form == "sdpa":
        out.append({"kind": "sdpa", "name": f"{name}y", "inputs": [f"{name}{n}" for n in "qkv"], "causal": causal,
                    "bias_weights": draw(st.sampled_from([0, 5]))})
    else:
        out += [{"kind": "permute", "name": f"{name}kt", "inputs": [f"{name}k"], "dims": [0, 2, 1]},
                {"kind": "matmul", "name": f"{name}s", "inputs": [f"{name}q", f"{name}kt"]}]
        bias = draw(st.sampled_from([None, 0, 5]))  # none, a mask of constants, a learned relative-position bias
        if bias is not None:
            out.append({"kind": "bias", "weights": bias})
        out += [{"kind": "softmax", "name": f"{name}p"},
                {"kind": "matmul", "name": f"{name}y", "inputs": [f"{name}p", f"{name}v"]}]
    return [*out, {"kind": "permute", "name": f"{name}y1", "inputs": [f"{name}y"], "dims": [1, 0, 2]},
            {"kind": "reshape", "name": f"{name}y2", "shape": [tokens, width]},
            {"kind": "fc", "name": name, "out_features": width}]


@st.composite
def partitionable_token_dicts(draw: Any) -> dict[str, Any]:
    """A random token transformer of the kinds a model-parallel run splits: an embedding of token ids or
    a ViT's patches (a convolution whose maps are viewed as a sequence), a class token or not, a position
    table, 1-2 pre-norm blocks (layer norm, attention causal or not with or without biases or written
    by hand with ``matmul`` or ``sdpa`` (:func:`_attention_block`), a residual add; layer norm, an MLP
    of two FC layers with a dropout, a residual add), a final layer norm or not, then a per-token head or
    the selected first token's head, and a softmax or not."""
    tokens, width = draw(st.integers(3, 8)), draw(st.sampled_from([8, 12, 16]))
    heads = draw(st.sampled_from([h for h in (1, 2, 4) if width % h == 0]))
    if draw(st.booleans()):
        layers: list[dict[str, Any]] = [{"kind": "input", "shape": [tokens]},
                                        {"kind": "embedding", "name": "tok", "vocabulary": draw(st.integers(8, 40)),
                                         "dim": width}]
    else:  # a ViT's patches: a convolution of stride = kernel, its maps viewed as a sequence of tokens
        patch, rows, cols = draw(st.sampled_from([2, 4])), draw(st.integers(1, 3)), draw(st.integers(2, 3))
        tokens = rows * cols
        layers = [{"kind": "input", "shape": [draw(st.sampled_from([1, 3])), rows * patch, cols * patch]},
                  {"kind": "conv2d", "out_channels": width, "kernel": patch, "stride": patch},
                  {"kind": "reshape", "shape": [width, tokens]},
                  {"kind": "permute", "name": "tok", "dims": [1, 0]}]
    rows = tokens
    if draw(st.booleans()):
        layers.append({"kind": "class_token", "name": "cls"})
        rows += 1
    layers.append({"kind": "position_embedding", "name": "x0", "rows": rows})
    last = "x0"
    for b in range(draw(st.integers(1, 2))):
        layers += [{"kind": "layer_norm", "name": f"b{b}n1", "inputs": [last]},
                   *draw(_attention_block(f"b{b}a", rows, width, heads)),
                   {"kind": "add", "name": f"b{b}r1", "inputs": [last, f"b{b}a"]},
                   {"kind": "layer_norm", "name": f"b{b}n2"},
                   {"kind": "fc", "name": f"b{b}up", "out_features": 2 * width,
                    "activation": draw(st.sampled_from(["gelu", "relu"]))},
                   {"kind": "dropout", "p": 0.0},
                   {"kind": "fc", "name": f"b{b}down", "out_features": width},
                   {"kind": "add", "name": f"b{b}", "inputs": [f"b{b}r1", f"b{b}down"]}]
        last = f"b{b}"
    if draw(st.booleans()):
        layers.append({"kind": "layer_norm", "name": "final", "inputs": [last]})
        last = "final"
    if draw(st.booleans()):
        layers += [{"kind": "select_token", "inputs": [last], "index": 0},
                   {"kind": "fc", "out_features": draw(st.integers(4, 10))}]
    else:
        layers.append({"kind": "fc", "inputs": [last], "out_features": draw(st.integers(4, 20))})
    if draw(st.booleans()):
        layers.append({"kind": "softmax"})
    return {"name": "random-tokens", "layers": layers}
