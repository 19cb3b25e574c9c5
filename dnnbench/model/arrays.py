"""Per-layer numpy arrays of a network, the form the vectorised model computes with.

Layers are the last axis everywhere in the model; configurations broadcast over the leading axes.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..specs import Network
from ..specs.layers import (
    RECURRENT_GATES,
    SPREAD_REDUCTIONS,
    Activation,
    Attention,
    BatchNorm,
    Bias,
    ClassToken,
    Conv2d,
    Conv3d,
    ConvTranspose2d,
    ConvTranspose3d,
    CumSum,
    Dropout,
    Embedding,
    Flatten,
    FullyConnected,
    GridSample,
    GroupNorm,
    InputLayer,
    LayerCounts,
    LayerNorm,
    LocalResponseNorm,
    MatMul,
    Multiply,
    Permute,
    Pool,
    Pool3d,
    PositionEmbedding,
    PReLU,
    Recurrent,
    Reduce,
    Reshape,
    Scale,
    ScaledDotProductAttention,
    SelectToken,
    Shape,
    Slice,
    Softmax,
    _pair,
    _triple,
    weight_norm_magnitudes,
)
from ..specs.shape import ACTIVATION_FUNCTIONS, FUNCTION_PRICED_AS, pow_priced_as
from .split_axes import replicated, split_axes

#: Families of element-wise layers the shape-aware CPU model prices apart (docs/model.md §12).
ELEM_FAMILIES = ("activation", "pool", "norm", "other", "max_pool")


def _elem_family(layer: object) -> int:
    if isinstance(layer, (Conv2d, Conv3d, FullyConnected, Attention, ScaledDotProductAttention, MatMul, Recurrent)):
        return -1
    if isinstance(layer, (Activation, PReLU)) or type(layer).__name__ == "Dropout":
        return 0
    if isinstance(layer, (Pool, Pool3d)) and layer.mode == "max":
        return 4
    if isinstance(layer, (Pool, Pool3d)) or type(layer).__name__ in ("AdaptivePool", "Upsample", "Pad", "GridSample",
                                                                           "Unfold", "Fold", "Repeat", "Windows",
                                                                           "Gather", "ScatterAdd"):
        return 1
    if isinstance(layer, (BatchNorm, GroupNorm, LayerNorm, LocalResponseNorm, Softmax)):
        return 2
    return 3


#: Layer-kind groups used in the time breakdown.
KIND_GROUPS = ("conv", "fc", "pool", "elementwise", "attention")


@dataclass(frozen=True)
class NetworkArrays:
    names: tuple[str, ...]
    group: np.ndarray  # index into KIND_GROUPS
    is_conv: np.ndarray
    is_fc: np.ndarray
    fc_rate: np.ndarray  # matrix products priced at the FC rate (fc and attention layers)
    offloadable: np.ndarray  # FC layers on a vector: Adam's scheme may ship their activations and errors
    weights: np.ndarray  # the weights a layer holds (memory, traffic, the update): each counted once
    call_weights: np.ndarray  # the weights one call of it reads, its own or shared (compute, bytes moved)
    activations: np.ndarray
    macs_forward: np.ndarray
    macs_backprop: np.ndarray
    macs_weight_grad: np.ndarray
    elem_forward: np.ndarray
    elem_backprop: np.ndarray
    units_feature_map: np.ndarray  # output maps / neurons split over W (feature-map partitioning)
    units_spatial: np.ndarray  # output rows for map layers, neurons for FC (spatial partitioning)
    fm_values: np.ndarray  # per-direction values per sample at W -> inf, feature-map/FC exchange
    halo_values: np.ndarray  # per-direction values per sample per (W-1)/W, spatial halo exchange
    state_values: np.ndarray  # of those, a recurrent layer's every step's hidden states (0 elsewhere)
    state_rounds: np.ndarray  # ... assembled in this many exchanges (steps times stacked layers; 0 elsewhere)
    replicated_weights: np.ndarray  # weights every machine of a split replica holds whole (split_axes.replicated)
    replicated_tensors: np.ndarray  # ... in this many parameter tensors, each one's gradient summed once per update
    fc_in: np.ndarray  # N_in of FC layers (0 elsewhere)
    fc_out: np.ndarray  # N_out of FC layers (0 elsewhere)
    in_values: np.ndarray  # values a layer reads per sample: its inputs' outputs together
    out_values: np.ndarray  # values of its output per sample
    kept_values: np.ndarray  # values per sample kept for backward on an accelerator (§11): see _kept
    mask_values: np.ndarray  # values per sample a dropout of p > 0 masks: its mask is kept for backward (1 per sample)
    input_kept_values: float  # values per sample of the network's input that layers keep for backward
    # Under autocast (mixed precision), of the kept values (the input's included): those kept in fp32, and
    # the 16-bit copies of fp32 outputs kept besides them (autocast_fp32, _autocast_kept):
    autocast_fp32_kept_values: float
    autocast_copy_values: float
    # The matrix product a conv, fc or attention layer lowers to (docs/model.md §12), 0 elsewhere:
    gemm_weight_elems: np.ndarray  # N·K: elements of the weight matrix (per call, not per sample)
    gemm_input_elems: np.ndarray  # M·K per sample: the (im2col) input matrix
    gemm_output_elems: np.ndarray  # M·N per sample: the output matrix
    strided: np.ndarray  # a convolution with a stride above 1
    # The widths of the matrix products a layer lowers to, per group (docs/model.md §11), 0 elsewhere:
    group_out_channels: np.ndarray  # a convolution's output channels per group, an fc's outputs, attention's
    #                                 width, an sdpa's head width, a matmul's N: the forward product's width
    group_in_channels: np.ndarray  # the same of the inputs (the input gradient's width): input channels per
    #                                group, an fc's inputs, attention's width, the head width, a matmul's K
    kernel_area: np.ndarray  # a convolution's k_h·k_w (1 for the other products): the weight gradient is
    #                          group_out_channels by group_in_channels·kernel_area
    extra_consumers: np.ndarray  # consumers sending an error to the layer's output beyond the first:
    #                              backward adds their errors (one addition each)
    multi_head: np.ndarray  # an attention layer with its projections (nn.MultiheadAttention's kernels)
    lrn: np.ndarray  # a local response norm (F.local_response_norm: a chain of element-wise kernels)
    fc_bias: np.ndarray  # an fc layer with a bias (its gradient sums the output's error in a kernel of its own)
    view: np.ndarray  # flatten, reshape or permute: a view of its input in eager PyTorch (no kernel of its own)
    ends_in_softmax: bool  # the last layer is a softmax (the loss takes its log), else the loss takes raw outputs
    is_product: np.ndarray  # conv, fc, attention, sdpa, matmul: autocast runs them in 16 bits
    out_fp32: np.ndarray  # the output is fp32 under autocast (autocast_fp32)
    in_fp32_values: np.ndarray  # values per sample read from fp32 outputs under autocast (the input's too)
    grouped: np.ndarray  # a grouped convolution that is not depthwise (one input and one output channel per group)
    fused_act: np.ndarray  # a conv or fc layer with its activation fused (it writes a second output)
    depthwise_wide: np.ndarray  # a depthwise convolution (one input channel per group) whose weight gradient
    #                             runs the generic kernel: above 3 wide, or narrower than its stride across
    depthwise_wide_forward: np.ndarray  # ... with a kernel above DEPTHWISE_FORWARD_MAX_WIDTH wide
    depthwise: np.ndarray  # a depthwise convolution (one input and one output channel per group), any kernel
    act_function: np.ndarray  # index into ACTIVATION_FUNCTIONS of its activation (alone or fused), -1 for none
    group_channels: np.ndarray  # a grouped convolution's fewest channels per group, in or out (0 elsewhere)
    max_pool: np.ndarray  # a max pooling layer (training keeps the argmax of every output, int64)
    # Convolutions PyTorch may run natively on a CPU (im2col and a matrix product) rather than through
    # oneDNN, by ATen's rule (its ``use_mkldnn``; the batch and thread parts are applied at evaluation):
    conv_small_kernel: np.ndarray  # groups 1 and a kernel of at most 3 in some direction (native at batch 1
    #                                with at most NATIVE_CONV_INPUT_VALUES input values)
    conv_pointwise: np.ndarray  # 1x1, stride 1, no dilation (native below NATIVE_CONV_BATCH on one thread)
    conv_in_channels: np.ndarray  # a convolution's input channels (0 elsewhere): oneDNN's layout copies
    native_width: np.ndarray  # a 3-D convolution's input width (1 elsewhere): ATen's batch-1 rule counts the
    #                           input's values but its last axis (N·C·D·H of a volume, N·C·H·W of maps)
    calls: np.ndarray  # kernel calls per phase (1; a recurrent layer's per step, layer and direction, and its
    #                    input products): each pays the fixed times per call
    cpu_calls: np.ndarray  # ... on a CPU, where PyTorch runs an LSTM's steps in one oneDNN call per layer and
    #                        direction (GRU and RNN step by step)
    recurrent_mode: np.ndarray  # a recurrent layer's index in RECURRENT_MODES (lstm, gru, rnn), -1 elsewhere
    recurrent_steps: np.ndarray  # its steps times stacked layers times directions (0 elsewhere)
    recurrent_layers: np.ndarray  # its stacked layers times directions (0 elsewhere)
    recurrent_weight_elems: np.ndarray  # its input and state matrices' elements, packed once per call (a CPU
    #                                     LSTM's one oneDNN call), where gemm_weight_elems packs the state
    #                                     matrix at every step (0 elsewhere)
    transposed: np.ndarray  # a transposed convolution: its forward is a convolution's input gradient and its
    #                         input gradient that convolution's forward (the GEMM fields describe that one)
    elem_family: np.ndarray  # index into ELEM_FAMILIES of element-wise layers, -1 for conv, fc and attention
    normed_weights: np.ndarray  # the direction v of a weight-normalised layer (0 elsewhere): every call
    #                             computes its weight from v and g, and backward their gradients from its
    norm_forward_values: np.ndarray  # ... the values of v its forward passes over per call (WEIGHT_NORM_PASSES)
    norm_backward_values: np.ndarray  # ... and its backward (the weight gradient's)
    signatures: tuple[str, ...] = ()  # layer_signature of each layer
    tensors: tuple[tuple[int, ...], ...] = ()  # each layer's parameter tensors (values), in registration order


_CACHE: OrderedDict[int, tuple[Network, NetworkArrays]] = OrderedDict()


def network_arrays(net: Network) -> NetworkArrays:
    """The arrays of ``net`` (cached per network object; specs are immutable)."""
    hit = _CACHE.get(id(net))
    if hit is not None and hit[0] is net:
        return hit[1]
    arrays = _build(net)
    _CACHE[id(net)] = (net, arrays)
    while len(_CACHE) > 64:
        _CACHE.popitem(last=False)
    return arrays


def _exchange(layer: object, c: object, in_elems: int) -> tuple[float, float]:
    """(feature-map values, halo values) per direction per sample of one layer whose inputs are not
    the network's input (docs/model.md §5, reconstructed for the graph kinds):

    - conv2d and fc need every input value: (W−1)/W of the input forward and as many partial error
      sums backward, 2·N_in here (times (W−1)/W at evaluation); a conv split by rows needs only its
      halo, (k_eff − 1) rows of the input each way. A depthwise conv (groups = input channels) needs
      only its own maps: nothing; other grouped convs are counted as dense (an upper bound).
    - attention, split by heads, needs the whole sequence before the Q, K, V projections and the
      whole head outputs before the output projection: 2·2·S·D.
    - a recurrent layer, split by hidden units, needs its whole input (2·N_in, as an FC layer) and,
      at every step of every stacked layer, every direction's whole previous hidden state: the states
      are assembled after each step, 2·R·S·L·dirs·H (:func:`_state_exchange`, counted even where the
      input is held whole).
    - layer_norm, split by width, exchanges its two statistics per token (per position of the axes
      before its last): 2·2·S; group_norm, split by channels, two per group: 2·2·G.
    - element-wise layers, add, concat, pooling, views and the token layers keep the partition
      of their input: nothing (a view that cuts the split axis regathers its input instead,
      :mod:`.split_axes`; :func:`_build` prices it as a convolution's 2·N_in).
    """
    if isinstance(layer, Conv2d):
        c_in, _, w_in = c.input_shape  # type: ignore[attr-defined]
        if layer.groups > 1 and layer.groups == c_in:
            return 0.0, 0.0
        kh = layer.effective_kernel[0]
        return 2.0 * in_elems, 2.0 * (kh - 1) * w_in * c_in
    if isinstance(layer, (FullyConnected, Recurrent, Conv3d)):
        return 2.0 * in_elems, 2.0 * in_elems  # an FC layer has no spatial scheme: it always exchanges
    if isinstance(layer, Attention):
        return 4.0 * in_elems, 4.0 * in_elems
    if isinstance(layer, GroupNorm):  # two statistics per group
        stats = 2.0 * 2.0 * layer.groups
        return stats, stats
    if isinstance(layer, LayerNorm):  # per position of the axes before the normalised last one
        tokens = 2.0 * 2.0 * math.prod(c.input_shape[:-1])  # type: ignore[attr-defined]
        return tokens, tokens
    return 0.0, 0.0


def _state_exchange(layer: object, c: object) -> tuple[float, float]:
    """(values per direction per sample, exchanges per mini-batch each way) of a recurrent layer's hidden
    states, assembled whole after every step of every stacked layer (both directions at once):
    2·R·S·L·dirs·H (P with a projection: the state's width) and S·L; (0, 0) for any other layer."""
    if not isinstance(layer, Recurrent):
        return 0.0, 0.0
    steps = float(c.input_shape[-2])  # type: ignore[attr-defined]
    side = float(np.prod(c.input_shape[:-2]))  # type: ignore[attr-defined]
    return 2.0 * side * steps * layer.layers * layer.directions * layer.state_width, steps * layer.layers


def held_whole(net: Network) -> list[bool]:
    """Per layer: whether every machine of a model-parallel replica holds its whole output (docs/model.md
    §5): the network's inputs, which the data servers give every machine, the layers computed from them
    alone that make no units of their own (pooling of the input, say), and a regathered layer of one
    unit (:func:`~dnnbench.model.split_axes.split_axes`'s None). A layer fed by such outputs alone
    exchanges nothing."""
    axes, _ = split_axes(net)
    return [axis is None and not (isinstance(layer, Softmax) and index == len(net.layers) - 1)
            for index, (layer, axis) in enumerate(zip(net.layers, axes, strict=True))]


#: Functions whose backward reads their own output (PyTorch saves the result); the others read their input.
#: ReLU6 is not among them: it is hardtanh, whose backward reads its input (in place, autograd keeps a copy).
_SAVES_RESULT = ("relu", "tanh", "sigmoid", "exp", "sqrt", "rsqrt", "reciprocal")


def _saves_output(layer: object) -> bool:
    """The layer's backward reads its own output (a result-saving activation, fused or alone, softmax)."""
    if isinstance(layer, Activation):
        return layer.function in _SAVES_RESULT
    return isinstance(layer, Softmax) or getattr(layer, "activation", "none") in _SAVES_RESULT


def _needs_input(layer: object) -> bool:
    """The layer's backward reads its input: weighted layers, normalisations, max pooling, attention and
    the activations that differentiate from their input (GELU, SiLU, ReLU6), a product of two outputs (each
    input's gradient is the other input times the error; a learned scale's factors' gradient reads its
    input, a constant factor's backward does not), a running product (divided by its input)."""
    if isinstance(layer, Activation):
        return layer.function not in _SAVES_RESULT
    if isinstance(layer, Scale):
        return layer.learned
    if isinstance(layer, Reduce):
        return layer.mode in SPREAD_REDUCTIONS  # its gradient is the input over the norm, or less the mean
    if isinstance(layer, CumSum):
        return layer.product
    return isinstance(layer, (Conv2d, Conv3d, FullyConnected, BatchNorm, GroupNorm, LayerNorm, LocalResponseNorm, Pool,
                              Pool3d, PReLU, Attention, Recurrent,
                              Multiply, ScaledDotProductAttention, MatMul, GridSample))


def _internal_kept(layer: object, c: object) -> float:
    """Values per sample a layer keeps for backward besides its output: a fused activation that reads its
    input keeps the pre-activation; attention keeps what PyTorch's fused kernels (flash, memory-efficient,
    ``scaled_dot_product_attention``) save: the Q, K, V projections, the heads' output and one
    log-sum-exp per token and head, not the S×S probabilities."""
    out = float(np.prod(c.output_shape))  # type: ignore[attr-defined]
    if isinstance(layer, ScaledDotProductAttention):
        # A log-sum-exp per query and head. Its output is saved too, but the kernels write it in (S, H, d)
        # order, so the heads' merge (transpose, view) that the output projection keeps is the same
        # tensor: counted once, there.
        return float(np.prod(c.output_shape[:-1]))  # type: ignore[attr-defined]
    if isinstance(layer, Attention):
        s, d = c.input_shape  # type: ignore[attr-defined]
        return float(4.0 * s * d + s * layer.heads)
    activation = getattr(layer, "activation", "none")
    if activation != "none" and activation not in _SAVES_RESULT:
        return out
    return 0.0


#: Layers whose products autocast runs in the low precision (PyTorch's CUDA list: conv, linear, matmul,
#: bmm, the fused attention kernels): their outputs are 16-bit, and an fp32 input they keep for backward
#: is kept as the 16-bit copy autocast made of it.
_PRODUCTS = (Conv2d, Conv3d, FullyConnected, Attention, ScaledDotProductAttention, MatMul, Recurrent)
#: Layers whose outputs are fp32 under autocast: its float32 list (layer_norm, group_norm, softmax,
#: log_softmax, pow in a local response norm) and layers that bring an fp32 parameter into the values
#: (an embedding's table, a position table, a class token, a learned scale): type promotion keeps fp32.
_FP32_UNDER_AUTOCAST = (LayerNorm, GroupNorm, Softmax, LocalResponseNorm, Embedding, PositionEmbedding, ClassToken)
#: Activation functions on autocast's float32 list (softplus, exp, log, rsqrt, reciprocal, pow): fp32 outputs.
_FP32_FUNCTIONS = ("softplus", "exp", "log", "rsqrt", "reciprocal", "pow")


def _readers(net: Network) -> tuple[list[bool], list[bool]]:
    """Whether each layer's output is read by a backward that needs its input: by a product's
    (:data:`_PRODUCTS`), by another layer's."""
    by_product = [False] * len(net.layers)
    by_other = [False] * len(net.layers)
    for layer, ids in zip(net.layers, net.input_indices, strict=True):
        if _needs_input(layer):
            for j in ids:
                (by_product if isinstance(layer, _PRODUCTS) else by_other)[j] = True
    return by_product, by_other


def _kept(net: Network) -> tuple[list[float], list[float]]:
    """Values per sample each layer leaves for backward, and of them those of its own output (a view's:
    the tensor it is a view of) (reconstructed from what PyTorch's autograd
    saves, checked against its saved tensors in tests/counts/test_saved_tensors.py): its output when its
    own backward or a consumer's backward reads it, plus :func:`_internal_kept`. A batch-norm output that
    only feeds a ReLU is not kept (the ReLU's output is); one that feeds a ReLU6 is. A selected token that
    is kept keeps the whole sequence, a slice that is kept the whole tensor it is a piece of (views). The
    input layer's entry is the network's input, kept by the first layers that read it."""
    readers = [p or o for p, o in zip(*_readers(net), strict=True)]
    kept = []
    sliced: set[int] = set()  # layers whose output a kept slice is a view of
    for i, (layer, c, ids) in enumerate(zip(net.layers, net.layer_counts, net.input_indices, strict=True)):
        out = float(np.prod(c.output_shape))
        if isinstance(layer, SelectToken):
            # A view: keeping the token keeps the whole sequence it is a view of (once).
            out = 0.0 if readers[ids[0]] else float(np.prod(c.input_shape))
        if (isinstance(layer, (Flatten, Reshape)) and readers[i] and not isinstance(net.layers[ids[0]], Permute)
                and (readers[ids[0]] or _saves_output(net.layers[ids[0]]))):
            out = 0.0  # a view of an output that is kept already: the same storage
        if isinstance(layer, Slice) and readers[i]:
            # A view too: keeping a piece keeps the whole tensor it is a piece of, once for all its pieces.
            out = 0.0
            sliced.add(ids[0])
        kept.append((_internal_kept(layer, c), out if (readers[i] or _saves_output(layer)) else 0.0))
    for j in sliced:
        if not (readers[j] or _saves_output(net.layers[j])):
            inside, own = kept[j]
            kept[j] = (inside, own + float(np.prod(net.layer_counts[j].output_shape)))
    return [inside + own for inside, own in kept], [own for _, own in kept]


def autocast_fp32(net: Network) -> list[bool]:
    """Whether each layer's output is fp32 in mixed precision (``torch.autocast``, reconstructed from its
    CUDA op lists): products are 16-bit; the float32 list and fp32 parameters make fp32; every other
    layer (activations, batch norm, pooling, adds, views) takes the widest of its inputs. The network's
    input is fp32 data."""
    wide: list[bool] = []
    for layer, ids in zip(net.layers, net.input_indices, strict=True):
        if isinstance(layer, InputLayer):
            wide.append(True)
        elif isinstance(layer, _PRODUCTS):
            wide.append(getattr(layer, "activation", "none") in _FP32_FUNCTIONS)  # a softplus fused after it
        elif isinstance(layer, Activation) and layer.function in _FP32_FUNCTIONS:
            wide.append(True)
        elif isinstance(layer, PReLU):  # on autocast's 16-bit list
            wide.append(False)
        elif isinstance(layer, _FP32_UNDER_AUTOCAST) or (isinstance(layer, (Scale, Bias)) and layer.has_weights):
            wide.append(True)
        else:
            wide.append(any(wide[j] for j in ids))
    return wide


def _autocast_kept(net: Network, own: list[float]) -> tuple[list[float], list[float]]:
    """Per layer, the values of its kept output stored in fp32 under autocast (an fp32 output that a
    layer other than a product keeps, or that its own backward reads) and the 16-bit copies of fp32
    outputs that products keep besides (a product alone keeps only its copy, at the 16-bit size)."""
    wide = autocast_fp32(net)
    product_reads, other_reads = _readers(net)
    fp32, copies = [], []
    for i, layer in enumerate(net.layers):
        full = wide[i] and (other_reads[i] or _saves_output(layer))
        fp32.append(own[i] if full else 0.0)
        copies.append(own[i] if full and product_reads[i] else 0.0)
    return fp32, copies


def layer_signature(layer: object, input_shape: tuple[int, ...], *more_inputs: tuple[int, ...]) -> str:
    """A layer's kind and parameters without its name or inputs, and the shapes of its inputs (a layer of
    several inputs, add or concat, has them all, "+"-joined): layers with the same signature cost the same
    (``dnnbench calibrate --network`` keys its timings by it)."""
    import json

    spec = layer.model_dump(mode="json", exclude={"name", "inputs"})  # type: ignore[attr-defined]
    if spec.get("kind") in ("conv2d", "conv_transpose2d") and spec.get("learned") is True:
        del spec["learned"]  # the default stays out of the key: profiles stored under it stay valid
    shapes = "+".join("x".join(str(d) for d in shape) for shape in (input_shape, *more_inputs))
    return json.dumps(spec, sort_keys=True, separators=(",", ":")) + "@" + shapes


def network_signatures(net: Network) -> tuple[str, ...]:
    """:func:`layer_signature` of every layer of ``net`` (the input layer's too), with all its inputs' shapes."""
    out = []
    for layer, c, ids in zip(net.layers, net.layer_counts, net.input_indices, strict=True):
        more = tuple(tuple(net.layer_counts[j].output_shape) for j in ids[1:]) if len(ids) > 1 else ()
        out.append(layer_signature(layer, c.input_shape, *more))
    return tuple(out)


def network_digest(signatures: tuple[str, ...]) -> str:
    """A short digest of a network's layer signatures (``NetworkArrays.signatures``): what a
    :class:`~dnnbench.specs.ProfiledStep` is keyed by."""
    import hashlib

    return hashlib.sha256("\n".join(signatures).encode()).hexdigest()[:20]


def _onednn_lstm(layer: Recurrent) -> bool:
    """Whether PyTorch's CPU build runs the layer as one oneDNN RNN call per layer and direction
    (``mkldnn_rnn_layer``): an LSTM without a projection. A projected LSTM it runs step by step (ATen's
    default implementation: "LSTM with projections is not supported with oneDNN"), as a GRU or an RNN."""
    return layer.mode == "lstm" and not layer.projection


def _calls(layer: object, c: object, cpu: bool = False) -> float:
    """Kernel calls per phase of a layer: 1, but a recurrent layer's S steps and its input product per
    layer and direction; on a ``cpu`` an LSTM's one oneDNN RNN call per layer and direction (PyTorch's
    ``mkldnn_rnn_layer``; its GRU, RNN and projected LSTM run step by step)."""
    if not isinstance(layer, Recurrent):
        return 1.0
    if cpu and _onednn_lstm(layer):
        return float(layer.layers * layer.directions)
    return float(layer.layers * layer.directions * (c.input_shape[-2] + 1))  # type: ignore[attr-defined]


#: Recurrent modes in the order of ``NetworkArrays.recurrent_mode`` (and of RecurrentStepTimes' fields).
RECURRENT_MODES = ("lstm", "gru", "rnn")


def _recurrent_steps(layer: object, c: object) -> tuple[int, float, float, float]:
    """(mode index, steps · layers · directions, layers · directions, the input and state matrices'
    elements) of a recurrent layer; (-1, 0, 0, 0) of any other. A projected LSTM, which the CPU build
    runs step by step with ATen's kernels, takes the GRU's index: its fixed time per step is priced as
    the GRU's (reconstructed: a few products and a dozen element-wise kernels per step, as a GRU's)."""
    if not isinstance(layer, Recurrent):
        return -1, 0.0, 0.0, 0.0
    lanes = float(layer.layers * layer.directions)
    steps, width = c.input_shape[-2:]  # type: ignore[attr-defined]  # (R sequences side by side: the same steps)
    rows, p = float(RECURRENT_GATES[layer.mode] * layer.hidden), float(layer.state_width)
    widths = [float(width)] + [p * layer.directions] * (layer.layers - 1)
    packed = layer.directions * sum(rows * (w + p) + layer.projection * layer.hidden for w in widths)
    mode = "gru" if layer.mode == "lstm" and not _onednn_lstm(layer) else layer.mode.split("_")[0]
    return RECURRENT_MODES.index(mode), lanes * steps, lanes, packed


def _conv_sides(layer: object, c: object) -> tuple[Shape, Shape]:
    """(input, output) shape of the product a layer lowers to. A transposed convolution's arithmetic is
    the input gradient of the convolution from its output's shape to its input's (oneDNN runs it as that
    convolution's backward-data kernel): it is priced as that convolution, input and output swapped, each
    phase at the convolution's rate of the same phase (reconstructed)."""
    if isinstance(layer, (ConvTranspose2d, ConvTranspose3d)):
        return c.output_shape, c.input_shape  # type: ignore[attr-defined]
    return c.input_shape, c.output_shape  # type: ignore[attr-defined]


def _gemm(layer: object, c: object) -> tuple[float, float, float, bool]:
    """(N·K, M·K per sample, M·N per sample, strided) of the matrix product a layer lowers to: FC is
    M = tokens (1 on a vector), N = outputs, K = inputs; a convolution is an implicit GEMM with
    M = H_out·W_out, N = C_out and K = C_in·k_h·k_w / groups per group; attention is its four
    projections (reconstructed: the S×S products are left to the MAC term)."""
    shape_in, shape_out = _conv_sides(layer, c)
    if isinstance(layer, Conv2d):
        kh, kw = layer.kernel if isinstance(layer.kernel, tuple) else (layer.kernel, layer.kernel)
        m = float(shape_out[1] * shape_out[2])
        k_total = float(shape_in[0] * kh * kw)  # im2col columns over all groups
        stride = layer.stride if isinstance(layer.stride, tuple) else (layer.stride, layer.stride)
        return (float(shape_out[0]) * k_total / layer.groups, m * k_total, m * shape_out[0],
                max(stride) > 1)
    if isinstance(layer, Conv3d):
        m = float(np.prod(shape_out[1:]))
        k_total = float(shape_in[0] * np.prod(_triple(layer.kernel)))  # im2col (vol2col) columns over all groups
        return (float(shape_out[0]) * k_total / layer.groups, m * k_total, m * shape_out[0],
                max(_triple(layer.stride)) > 1)
    if isinstance(layer, FullyConnected):
        tokens = float(np.prod(shape_in[:-1])) if len(shape_in) > 1 else 1.0
        n_in = float(shape_in[-1]) if len(shape_in) > 1 else float(np.prod(shape_in))
        n_out = float(layer.out_features)
        return n_out * n_in, tokens * n_in, tokens * n_out, False
    if isinstance(layer, Attention):
        s_len, width = (float(shape_in[0]), float(shape_in[1])) if len(shape_in) == 2 else (1.0, float(shape_in[0]))
        return 4.0 * width * width, 4.0 * s_len * width, 4.0 * s_len * width, False
    if isinstance(layer, Recurrent):
        # Per layer and direction one product of the whole sequence by the input matrix, then one per
        # step by the state matrix (its G·H×P weights packed at every step: reconstructed; P = H without
        # a projection) and, with a projection, one per step of the H-wide state by the P×H matrix.
        # R sequences side by side ((R, S, D)) make each product R times as many rows.
        steps, rows, dirs = float(shape_in[-2]), float(RECURRENT_GATES[layer.mode] * layer.hidden), layer.directions
        side, p, ph = float(np.prod(shape_in[:-2])), float(layer.state_width), float(layer.projection * layer.hidden)
        widths = [float(shape_in[-1])] + [p * dirs] * (layer.layers - 1)
        return (dirs * sum(rows * (w + steps * p) + steps * ph for w in widths),
                side * dirs * sum(steps * (w + p) + (steps * layer.hidden if ph else 0.0) for w in widths),
                side * dirs * len(widths) * (2.0 * steps * rows + steps * layer.projection), False)
    return 0.0, 0.0, 0.0, False


def _widths(layer: object, c: object) -> tuple[float, float, float]:
    """(output width, input width, kernel area) per group of the matrix products a layer lowers to."""
    shape_in, shape_out = _conv_sides(layer, c)
    if isinstance(layer, Conv2d):
        kh, kw = _pair(layer.kernel)
        return shape_out[0] / layer.groups, shape_in[0] / layer.groups, float(kh * kw)
    if isinstance(layer, Conv3d):
        return shape_out[0] / layer.groups, shape_in[0] / layer.groups, float(np.prod(_triple(layer.kernel)))
    if isinstance(layer, FullyConnected):
        n_in = float(shape_in[-1]) if len(shape_in) > 1 else float(np.prod(shape_in))
        return float(layer.out_features), n_in, 1.0
    if isinstance(layer, Attention):
        return float(shape_in[-1]), float(shape_in[-1]), 1.0
    if isinstance(layer, Recurrent):
        return float(RECURRENT_GATES[layer.mode] * layer.hidden), float(shape_in[-1]), 1.0
    if isinstance(layer, ScaledDotProductAttention):
        return float(shape_out[-1]), float(shape_in[-1]), 1.0
    if isinstance(layer, MatMul):
        return float(shape_out[-1]), float(shape_in[-1]), 1.0
    return 0.0, 0.0, 0.0


def _build(net: Network) -> NetworkArrays:
    kept_all, kept_own = _kept(net)
    kept_fp32, kept_copies = _autocast_kept(net, kept_own)
    wide = autocast_fp32(net)
    signatures = network_signatures(net)
    # Consumers that send an error back to a layer's output (none to an output that needs no gradient,
    # and none from a layer no gradient flows through: a mask's comparison, zeros).
    consumers = [0] * len(net.layers)
    for layer, ids in zip(net.layers, net.input_indices, strict=True):
        for j in ids:
            consumers[j] += int(net.needs_gradient[j] and not layer.blocks_gradient)
    whole = held_whole(net)
    _, cuts = split_axes(net)
    copies = replicated(net)
    rows = []
    # Layers are kept except the input (it has no cost and exchanges nothing).
    for index, (name, layer, c, ids, kept, sig) in enumerate(zip(
            net.layer_names, net.layers, net.layer_counts, net.input_indices, kept_all, signatures, strict=True)):
        if isinstance(layer, InputLayer):
            continue
        # A layer fed by values every machine holds whole (the network's input, and layers computed
        # from it alone that act per unit) exchanges nothing.
        after_input = all(whole[k] for k in ids)
        in_elems = int(np.prod(c.input_shape))
        maps_out = len(c.output_shape) == 3
        group = (0 if isinstance(layer, (Conv2d, Conv3d)) else 1 if isinstance(layer, (FullyConnected, Recurrent)) else
                 2 if isinstance(layer, (Pool, Pool3d)) else
                 4 if isinstance(layer, (Attention, ScaledDotProductAttention, MatMul)) else 3)
        fm, halo = (0.0, 0.0) if after_input else _exchange(layer, c, in_elems)
        if cuts[index] and not after_input:  # a view that cuts the split axis regathers its input (a product,
            # the operands it assembles)
            fm = halo = cuts[index]
        states, state_rounds = _state_exchange(layer, c)
        fm, halo = fm + states, halo + states
        read = sum(int(np.prod(net.layer_counts[j].output_shape)) for j in ids) if ids else in_elems
        vector_fc = group == 1 and len(c.input_shape) != 2
        rows.append((
            name, group, c.weights, c.activations, c.macs_forward, c.macs_backprop, c.macs_weight_grad,
            c.elem_ops_forward, c.elem_ops_backprop, c.partition_units,
            c.output_shape[1] if maps_out else c.partition_units, fm, halo,
            in_elems if vector_fc else 0, c.output_shape[0] if vector_fc else 0,
            read, int(np.prod(c.output_shape)), kept, *_gemm(layer, c), sig,
            _elem_family(layer),
            _grouped(layer, c), getattr(layer, "activation", "none") != "none",
            _depthwise_wide(layer, c), _act_function(layer), _group_channels(layer, c),
            isinstance(layer, (Pool, Pool3d)) and layer.mode == "max", *_native_conv(layer),
            _conv_sides(layer, c)[0][0] if isinstance(layer, (Conv2d, Conv3d)) else 0,
            _depthwise_wide(layer, c, DEPTHWISE_FORWARD_MAX_WIDTH, strided=False),
            _depthwise_wide(layer, c, 0, strided=False),
            _mask_values(layer, c),
            *_widths(layer, c), max(consumers[index] - 1, 0), isinstance(layer, Attention),
            isinstance(layer, FullyConnected) and layer.bias, isinstance(layer, (Flatten, Reshape, Permute)),
            isinstance(layer, _PRODUCTS), wide[index], isinstance(layer, LocalResponseNorm),
            sum(int(np.prod(net.layer_counts[j].output_shape)) for j in ids if wide[j]) if ids else 0,
            isinstance(layer, (ConvTranspose2d, ConvTranspose3d)), _calls(layer, c), _calls(layer, c, cpu=True),
            *_recurrent_steps(layer, c),
            float(c.input_shape[-1]) if isinstance(layer, Conv3d) else 1.0,
            states, state_rounds, c.weights if copies[index] else 0, len(net.parameter_tensors(index)) if copies[index]
            else 0,
            *_normed_weights(layer, net.call_counts[index]),
            net.parameter_tensors(index), net.call_counts[index].weights,
        ))
    cols = list(zip(*rows, strict=True))
    def f(i: int) -> np.ndarray:
        return np.asarray(cols[i], dtype=float)

    groups: np.ndarray = np.asarray(cols[1], dtype=np.int64)
    fc_in = f(13)
    return NetworkArrays(
        names=tuple(cols[0]), group=groups, is_conv=groups == 0, is_fc=groups == 1,
        fc_rate=(groups == 1) | (groups == 4), offloadable=(groups == 1) & (fc_in > 0),
        weights=f(2), call_weights=f(len(cols) - 1), activations=f(3), macs_forward=f(4), macs_backprop=f(5),
        macs_weight_grad=f(6),
        elem_forward=f(7), elem_backprop=f(8), units_feature_map=f(9), units_spatial=f(10),
        fm_values=f(11), halo_values=f(12), fc_in=fc_in, fc_out=f(14), in_values=f(15), out_values=f(16),
        kept_values=f(17), gemm_weight_elems=f(18), gemm_input_elems=f(19), gemm_output_elems=f(20),
        strided=np.asarray(cols[21], dtype=bool), signatures=tuple(cols[22]), tensors=tuple(cols[-2]),
        elem_family=np.asarray(cols[23], dtype=np.int64), grouped=np.asarray(cols[24], dtype=bool),
        fused_act=np.asarray(cols[25], dtype=bool) & (np.asarray(cols[23]) < 0),
        depthwise_wide=np.asarray(cols[26], dtype=bool), act_function=np.asarray(cols[27], dtype=np.int64),
        group_channels=f(28), max_pool=np.asarray(cols[29], dtype=bool),
        conv_small_kernel=np.asarray(cols[30], dtype=bool), conv_pointwise=np.asarray(cols[31], dtype=bool),
        conv_in_channels=f(32), depthwise_wide_forward=np.asarray(cols[33], dtype=bool),
        depthwise=np.asarray(cols[34], dtype=bool), mask_values=f(35),
        group_out_channels=f(36), group_in_channels=f(37), kernel_area=f(38), extra_consumers=f(39),
        multi_head=np.asarray(cols[40], dtype=bool), fc_bias=np.asarray(cols[41], dtype=bool),
        view=np.asarray(cols[42], dtype=bool), is_product=np.asarray(cols[43], dtype=bool),
        out_fp32=np.asarray(cols[44], dtype=bool), lrn=np.asarray(cols[45], dtype=bool), in_fp32_values=f(46),
        transposed=np.asarray(cols[47], dtype=bool), calls=f(48), cpu_calls=f(49),
        recurrent_mode=np.asarray(cols[50], dtype=np.int64), recurrent_steps=f(51), recurrent_layers=f(52),
        recurrent_weight_elems=f(53), native_width=f(54), state_values=f(55), state_rounds=f(56),
        replicated_weights=f(57), replicated_tensors=f(58), normed_weights=f(59),
        norm_forward_values=f(60), norm_backward_values=f(61),
        ends_in_softmax=isinstance(net.layers[-1], Softmax),
        input_kept_values=float(sum(k for layer, k in zip(net.layers, kept_all, strict=True)
                                    if isinstance(layer, InputLayer))),
        autocast_fp32_kept_values=float(sum(kept_fp32)), autocast_copy_values=float(sum(kept_copies)),
    )


#: Passes over a weight-normalised layer's direction v in each call, forward and backward (the weight
#: gradient's), by PyTorch's kernels (counted in tests/counts/test_device_bytes.py): g per output or per
#: input runs one fused kernel each way (``_weight_norm_interface``: read v, write w; read w's gradient and
#: v, write v's), and so does g per kernel column (the weight's last axis); one g for the whole weight runs
#: plain kernels (a norm, a division, a product; backward their gradients, 14 passes), and so does g per
#: kernel row, v moved so that axis comes first and back (5 passes forward).
WEIGHT_NORM_PASSES = {"output": (2.0, 3.0), "input": (2.0, 3.0), "whole": (3.0, 14.0), "kernel_rows": (5.0, 14.0),
                      "kernel_columns": (2.0, 3.0)}


def _normed_weights(layer: Any, c: LayerCounts) -> tuple[int, float, float]:
    """The values of a weight-normalised layer's direction v, what its every call normalises, and its
    passes over them forward and backward (0 for a layer without weight normalisation): v is its weights
    but the magnitudes g and the bias."""
    g = weight_norm_magnitudes(layer, c.input_shape)
    if not g:
        return 0, 0.0, 0.0
    bias = getattr(layer, "out_channels", getattr(layer, "out_features", 0)) if getattr(layer, "bias", False) else 0
    v = int(c.weights - g - bias)
    forward, backward = WEIGHT_NORM_PASSES[str(layer.weight_norm)]
    return v, v * forward, v * backward


#: ATen runs a convolution natively at batch 1 when it reads at most this many input values (and its
#: kernel is at most 3 wide in some direction, without groups); oneDNN otherwise.
NATIVE_CONV_INPUT_VALUES = 20480
#: ... and a 1x1 convolution of stride 1 on one thread below this batch.
NATIVE_CONV_BATCH = 16


def _native_conv(layer: object) -> tuple[bool, bool]:
    """(groups 1 with a kernel of at most 3 in some direction of the last two, 1x1 in the last two with
    stride 1 and no dilation) of a 2-D or 3-D convolution (ATen's ``use_mkldnn`` reads the weight's last
    two sizes); (False, False) for any other layer."""
    if isinstance(layer, Conv3d):
        (_, kh, kw), stride, dilation = _triple(layer.kernel), _triple(layer.stride), _triple(layer.dilation)
        return (layer.groups == 1 and min(kh, kw) <= 3,
                (kh, kw) == (1, 1) and set(stride) == {1} and set(dilation) == {1})
    if not isinstance(layer, Conv2d):
        return False, False
    (kh, kw), (sh, sw), (dh, dw) = _pair(layer.kernel), _pair(layer.stride), _pair(layer.dilation)
    small = layer.groups == 1 and min(kh, kw) <= 3
    return small, (kh, kw, sh, sw, dh, dw) == (1, 1, 1, 1, 1, 1)


def _grouped(layer: object, c: object) -> bool:
    """A grouped convolution that is not depthwise: groups above 1 with more than one input or output
    channel per group (a channel multiplier, 1 input and k outputs per group, is grouped)."""
    if not isinstance(layer, Conv2d) or layer.groups <= 1:
        return False
    return not _depthwise(layer, c)


def _group_channels(layer: object, c: object) -> int:
    """A grouped convolution's fewest channels per group, input or output; 0 for any other layer."""
    if not _grouped(layer, c):
        return 0
    assert isinstance(layer, Conv2d)
    return int(min(c.input_shape[0], layer.out_channels) // layer.groups)  # type: ignore[attr-defined]


def _depthwise(layer: Conv2d, c: object) -> bool:
    """One input and one output channel per group."""
    return bool(c.input_shape[0] == layer.groups == layer.out_channels)  # type: ignore[attr-defined]


#: The widest kernel of a depthwise convolution whose weight gradient, and whose forward, run in
#: oneDNN's depthwise kernels (``jit_dw``); a wider one runs its generic GEMM kernel, about 10-50 times
#: slower per multiply-add. Read off ``ONEDNN_VERBOSE`` (PyTorch 2, fp32, AVX2): the width (the last
#: kernel dimension) decides, not the height (an 11 x 1 kernel stays in jit_dw, a 1 x 11 one does not);
#: the weight gradient also falls back when the stride across is larger than the kernel's width (a
#: 1 x 1 or 3 x 3 kernel of stride 4 across skips input columns); the input gradient stays in jit_dw at
#: every width and stride.
DEPTHWISE_WEIGHT_GRAD_MAX_WIDTH = 3
DEPTHWISE_FORWARD_MAX_WIDTH = 9


def _depthwise_wide(layer: object, c: object, max_width: int = DEPTHWISE_WEIGHT_GRAD_MAX_WIDTH,
                    strided: bool = True) -> bool:
    """A depthwise convolution (one input and one output channel per group) whose kernel is wider than
    ``max_width`` (its last dimension) or, when ``strided``, narrower than its stride across."""
    if not isinstance(layer, Conv2d) or layer.groups <= 1:
        return False
    _, kw = _pair(layer.kernel)
    _, sw = _pair(layer.stride)
    return _depthwise(layer, c) and (kw > max_width or (strided and sw > kw))


def _mask_values(layer: object, c: object) -> float:
    """Values per sample of a dropout's mask (kept for backward): one per value, per channel or per sample."""
    if not isinstance(layer, Dropout) or layer.p <= 0:
        return 0.0
    if layer.per_sample:
        return 1.0
    shape = c.output_shape  # type: ignore[attr-defined]
    return float(shape[0] if layer.per_channel else np.prod(shape))


def _act_function(layer: object) -> int:
    """Index into ACTIVATION_FUNCTIONS of a layer's activation function (or of the one it is priced as,
    FUNCTION_PRICED_AS), alone or fused; -1 for none."""
    name = layer.function if isinstance(layer, Activation) else getattr(layer, "activation", "none")
    if isinstance(layer, PReLU):  # a leaky ReLU whose slope is learned: the same arithmetic
        name = "leaky_relu"
    if isinstance(layer, Activation) and layer.function == "pow":
        name = pow_priced_as(float(layer.exponent))  # type: ignore[arg-type]
    name = FUNCTION_PRICED_AS.get(name, name)
    return ACTIVATION_FUNCTIONS.index(name) if name in ACTIVATION_FUNCTIONS else -1
