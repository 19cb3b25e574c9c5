"""Compute of a CPU machine from each layer's shape (docs/model.md §12, reconstructed form).

Each layer phase (forward, input gradient, weight gradient) is one call on the local mini-batch b:

    t_call = [t_mac·MACs + t_w·N·K + t_a·M·K + t_c·M·N + (t_s·MACs + t_si·inputs)·[stride > 1]
              + t_g·MACs·[grouped] + (t_ga·M·K + t_gc·M·N)·[grouped, < c_blk channels per group]
              + t_dw·MACs·[depthwise, kernel > 3]] / T_eff + t_call
             + t_mem·bytes·[working set > cache] + t_fresh·(outputs over the mmap threshold)
             (+ the same two terms for oneDNN's layout copies of a convolution's tensors, when priced)

for layers that lower to a matrix product (:class:`~dnnbench.specs.GemmCost` per kind and phase), and
(t_op·ops + t_byte·bytes) / T_eff + t_call (+ the same memory and fresh terms) for element-wise
layers by family (:class:`~dnnbench.specs.ElemCost`), the activation family's t_op for the bias and
activation fused into a GEMM layer, each activation function's own time per output element
and fixed time per call (:class:`~dnnbench.specs.FunctionCosts`, alone or fused), and
t_upd·bytes / T_eff + t_upd,call (+ the memory term of its weights, gradients and state) for
the optimizer step. A product of one row (an FC layer on one sample) pays t_wv rather than t_w per
weight element: matrix-vector and outer products stream the weights without packing them.
A machine holding a 1/W slice of a layer (feature maps or
neurons) computes the slice's N, so its MACs, N·K and M·N scale by the share and its M·K does not;
a spatial slice (rows) scales M instead. Layers timed on the machine (``Machine.profiled_layers``)
keep the model's dependence on the share and the threads but take its level from the timing: their
forward (and backward: back-prop with the weight gradient) is the model's time times measured /
modelled at the profiled threads, the measurement interpolated linearly in b between the two timed
mini-batches. A network whose whole steps were timed (``Machine.profiled_steps``) takes its step's own
fixed time from them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..specs import Machine
from ..specs.shape import ACTIVATION_FUNCTIONS, GemmCost, ProfiledLayer, ShapeRate
from .arrays import (
    ELEM_FAMILIES,
    NATIVE_CONV_BATCH,
    NATIVE_CONV_INPUT_VALUES,
    NetworkArrays,
)

#: Bytes per value (the CPU model computes in fp32).
VALUE_BYTES = 4.0


def shape_threads(rate: ShapeRate, machine: Machine, threads: np.ndarray | float | None) -> np.ndarray:
    """T_eff of the shape terms: min(T, cores) / (1 + σ(min(T, cores) − 1))."""
    t = np.minimum(machine.cores if threads is None else np.asarray(threads, dtype=float), machine.cores)
    return np.asarray(t / (1.0 + rate.thread_contention * (t - 1.0)))


def _gemm_call(g: GemmCost, macs: np.ndarray, w_el: np.ndarray, a_el: np.ndarray, c_el: np.ndarray,
               in_el: np.ndarray, strided: np.ndarray, grouped: np.ndarray, small_groups: np.ndarray,
               depthwise_wide: np.ndarray, t_eff: np.ndarray, calls: np.ndarray | float,
               vector: np.ndarray | bool = False) -> np.ndarray:
    """Seconds of one GEMM call without its memory and fresh-page terms; ``vector``: a product of one row."""
    t_w = g.weight_element_time_s
    t_wv = t_w if g.vector_weight_element_time_s is None else g.vector_weight_element_time_s
    work = (g.mac_time_s * macs + np.where(vector, t_wv, t_w) * w_el + g.input_element_time_s * a_el
            + g.output_element_time_s * c_el
            + (g.strided_mac_time_s * macs + g.strided_input_element_time_s * in_el) * strided
            + g.grouped_mac_time_s * macs * grouped
            + (g.grouped_input_element_time_s * a_el + g.grouped_output_element_time_s * c_el) * small_groups
            + g.depthwise_wide_mac_time_s * macs * depthwise_wide)
    return np.asarray(np.where(macs > 0, work / t_eff + g.call_time_s * calls, 0.0))


def memory_cores(rate: ShapeRate, threads: np.ndarray | float,
                 t_eff: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """How many caches of ``cache_bytes`` a call on ``threads`` threads holds its working set in, and how
    many times one core's memory bandwidth it streams at: min(T, cores) and T_eff with a cache and a share
    of the bandwidth of each core's own (``ShapeRate.memory_per_core``), else 1 and 1 (one shared)."""
    if not rate.memory_per_core:
        return np.asarray(1.0), np.asarray(1.0)
    return np.maximum(np.asarray(threads, dtype=float), 1.0), np.maximum(np.asarray(t_eff, dtype=float), 1.0)


def _memory_terms(rate: ShapeRate, ws_bytes: np.ndarray, moved_bytes: np.ndarray | float,
                  out_bytes: np.ndarray | float, caches: np.ndarray | float = 1.0,
                  streams: np.ndarray | float = 1.0) -> np.ndarray:
    """Memory and fresh-page seconds of a call of working set ``ws_bytes`` moving ``moved_bytes`` and
    writing ``out_bytes``, its working set held in ``caches`` caches and streamed at ``streams`` times one
    core's bandwidth (:func:`memory_cores`)."""
    out_of_cache = np.asarray(ws_bytes) > rate.cache_bytes * np.asarray(caches)
    fresh = np.where(out_bytes >= rate.fresh_threshold_bytes, out_bytes, 0.0)
    return np.asarray(rate.memory_byte_time_s * moved_bytes * out_of_cache / streams + rate.fresh_byte_time_s * fresh)


def _layout_copies(arr: NetworkArrays, rate: ShapeRate, conv: np.ndarray, ws: np.ndarray, ins: np.ndarray,
                   outs: np.ndarray, t_eff: np.ndarray | float, per_core: tuple[np.ndarray, np.ndarray]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The copies oneDNN makes of a convolution's plain tensors (reconstructed from ONEDNN_VERBOSE). Each
    copy reads and writes its bytes into a buffer of its own (:func:`layout_copied` says which)."""
    (in_f, out_f), (out_b, in_b), (in_w, out_w) = layout_copied(arr, rate.group_block_channels, conv)

    def copies(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.asarray(rate.layout_copy_byte_time_s * 2.0 * (a + b) / t_eff
                          + _memory_terms(rate, ws, 2.0 * (a + b), a, *per_core)
                          + _memory_terms(rate, ws, 0.0, b, *per_core))

    def on(mask: np.ndarray, values: np.ndarray) -> np.ndarray:
        return np.where(mask, values, 0.0)

    return (copies(on(in_f, ins), on(out_f, outs)), copies(on(out_b, outs), on(in_b, ins)),
            copies(on(in_w, ins), on(out_w, outs)))


_Pair = tuple[np.ndarray, np.ndarray]


def layout_copied(arr: NetworkArrays, block: int, conv: np.ndarray) -> tuple[_Pair, _Pair, _Pair]:
    """Which tensors of each oneDNN convolution (``conv``) are copied between PyTorch's plain layout and
    the library's blocked one, per phase (read off ONEDNN_VERBOSE, fp32): forward (input in, output
    back), input gradient (output's error in, input's error back), weight gradient (input in, output's
    error in). A phase in the library's blocked kernels copies its input forward from ``block`` input
    channels (ShapeRate.group_block_channels: the SIMD width), for the weight gradient from 16 channels
    with 16-channel blocks (AVX-512) and at every count but 3 (an image's, read as it is) with 8-channel
    ones (AVX2), and the output's error always. A phase in its
    generic GEMM kernel (a grouped convolution with fewer than ``block`` channels per group; a depthwise
    one past its phase's width limit) reads the plain tensors and only copies its result back: the
    output forward, the input's error backward, nothing for the weight gradient."""
    small = arr.grouped & (arr.group_channels < block)
    plain_f, plain_w = small | arr.depthwise_wide_forward, small | arr.depthwise_wide
    ic = arr.conv_in_channels
    forward = (conv & ~plain_f & (ic >= block), conv)
    input_grad = (conv & ~small, conv)
    wg_input = (ic != 3) if block <= 8 else (ic >= block)
    weight_grad = (conv & ~plain_w & wg_input, conv & ~plain_w)
    return forward, input_grad, weight_grad


def native_convs(arr: NetworkArrays, b: float | np.ndarray, in_values: np.ndarray,
                 threads: np.ndarray | float) -> np.ndarray:
    """The convolutions PyTorch runs natively (im2col or vol2col and a matrix product, its Slow2d and
    Slow3d backends) rather than through oneDNN, at mini-batch ``b`` on ``threads`` threads, reading
    ``in_values`` input values per sample (ATen's ``use_mkldnn``, PyTorch 2, which counts a volume's values
    without its last axis): at batch 1 a convolution without groups whose kernel is at most 3 in some direction
    of its last two and whose input holds at most NATIVE_CONV_INPUT_VALUES such values, and a convolution
    1x1 in its last two, of stride 1, below a batch of NATIVE_CONV_BATCH on one thread."""
    b = np.asarray(b, dtype=float)
    small = arr.conv_small_kernel & (b == 1) & (in_values / arr.native_width * b <= NATIVE_CONV_INPUT_VALUES)
    pointwise = arr.conv_pointwise & (b < NATIVE_CONV_BATCH) & (np.asarray(threads) <= 1)
    return np.asarray(arr.is_conv & (small | pointwise))


def phase_calls(arr: NetworkArrays, rate: ShapeRate, share: np.ndarray, spatial: np.ndarray, b: float | np.ndarray,
                t_eff: np.ndarray, optimizer_state_bytes: float = 0.0, calls: float = 1.0,
                threads: np.ndarray | float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Seconds per call (a mini-batch of b samples) of each layer's forward, input gradient, weight
    gradient and optimizer step on a machine holding ``share`` of it, with T_eff ``t_eff`` (broadcast
    to the layers) on ``threads`` threads (min(T, cores); None: taken as T_eff). ``calls`` scales the
    fixed times per call: 1 for a call timed alone, ``ShapeRate.step_call_scale`` inside a training
    step. A convolution PyTorch runs natively (:func:`native_convs`) is priced as what it is, an
    im2col and a matrix product: at the FC layers' rates."""
    gemm = arr.elem_family < 0
    per_layer = calls * arr.cpu_calls  # a recurrent layer's kernels run once per step (not an LSTM's)
    n_share = np.where(spatial, 1.0, share)  # the slice's fraction of N (feature maps, neurons)
    m_share = np.where(spatial, share, 1.0)  # ... of M (rows)
    conv = arr.is_conv & ~native_convs(arr, b, arr.in_values * m_share, t_eff if threads is None else threads)
    w_el = arr.gemm_weight_elems * n_share
    a_el = arr.gemm_input_elems * b * m_share
    c_el = arr.gemm_output_elems * b * share
    ins, outs = arr.in_values * b * share * VALUE_BYTES, arr.out_values * b * share * VALUE_BYTES
    weights = arr.call_weights * share * VALUE_BYTES  # read by every call, shared or not
    ops_f, ops_b = arr.elem_forward * b * share, arr.elem_backprop * b * share
    # A max pooling's forward also writes the argmax of every output (int64: twice a value's bytes),
    # which its backward reads.
    idx = np.where(arr.max_pool, 2.0 * outs, 0.0)
    # Working set of a call: its inputs, outputs and weights (gradients take the same sizes); with a
    # cache of each core's own (ShapeRate.memory_per_core) the threads hold it in their caches together.
    ws = ins + outs + weights + idx
    per_core = memory_cores(rate, t_eff if threads is None else threads, t_eff)

    def memory(ws_bytes: np.ndarray, moved_bytes: np.ndarray | float, out_bytes: np.ndarray | float) -> np.ndarray:
        return _memory_terms(rate, ws_bytes, moved_bytes, out_bytes, *per_core)

    # An FC layer of one row (one sample of a vector): matrix-vector and outer products.
    vector = arr.is_fc & (arr.gemm_input_elems * b <= arr.fc_in)
    # The input of the convolution a layer lowers to: a transposed convolution's output.
    gemm_in = np.where(arr.transposed, arr.out_values, arr.in_values)

    def gemm_phase(cost_conv: GemmCost, cost_fc: GemmCost, macs: np.ndarray, depthwise_wide: np.ndarray) -> np.ndarray:
        mc = macs * b * share
        in_el = gemm_in * b * m_share
        small_groups = arr.grouped & (arr.group_channels < rate.group_block_channels)
        flags = (arr.strided, arr.grouped, small_groups, depthwise_wide, t_eff, per_layer)
        # A depthwise convolution in the library's depthwise kernels reads its input as it is (no im2col):
        # its input term is per input element; in the generic kernel it packs M·K as any product.
        own_kernel = arr.depthwise & ~depthwise_wide
        a_conv = np.where(own_kernel, in_el, a_el)
        # ... and strides through its input in place: no scatter of a strided gradient per input element;
        # nor does a grouped one below the block, whose generic kernel writes it by col2im (t_ga).
        in_conv = np.where(own_kernel | small_groups, 0.0, in_el)
        return np.where(conv, _gemm_call(cost_conv, mc, w_el, a_conv, c_el, in_conv, *flags),
                        _gemm_call(cost_fc, mc, w_el, a_el, c_el, in_el, *flags, vector=vector))

    fams = [rate.family(i) for i in range(len(ELEM_FAMILIES))]

    def family(attr: str) -> np.ndarray:
        values = np.array([getattr(f, attr) for f in fams] + [0.0])
        return np.asarray(values[arr.elem_family])  # index -1 (GEMM layers) takes the trailing 0

    op_t, byte_t = family("op_time_s"), family("byte_time_s")
    # The backward pass's time per operation (the forward's where a family has none of its own).
    op_bt = np.array([f.op_time_s if f.backward_op_time_s is None else f.backward_op_time_s for f in fams]
                     + [0.0])[arr.elem_family]
    act_b = rate.activation.op_time_s if rate.activation.backward_op_time_s is None \
        else rate.activation.backward_op_time_s
    # Each activation function's own time per output element, alone or fused (index -1: none, 0).
    fn = [getattr(rate.functions, name) for name in ACTIVATION_FUNCTIONS]
    fn_f = np.array([f.forward_op_time_s for f in fn] + [0.0])[arr.act_function] * outs / VALUE_BYTES
    fn_b = np.array([f.backward_op_time_s for f in fn] + [0.0])[arr.act_function] * outs / VALUE_BYTES
    # ... and its own fixed time per call.
    fc_f = np.array([f.forward_call_time_s for f in fn] + [0.0])[arr.act_function] * per_layer
    fc_b = np.array([f.backward_call_time_s for f in fn] + [0.0])[arr.act_function] * per_layer
    call_f = family("forward_call_time_s") * per_layer + fc_f
    call_b = family("backward_call_time_s") * per_layer + fc_b
    # A GEMM layer's fused bias and activation: the activation family's time per operation.
    fused_f = (rate.activation.op_time_s * ops_f + fn_f) / t_eff + fc_f
    fused_b = (act_b * ops_b + fn_b) / t_eff + fc_b
    has_fwd = arr.elem_forward > 0
    has_bwd = (arr.macs_backprop > 0) | (arr.elem_backprop > 0)
    elem_f = np.where(has_fwd, (op_t * ops_f + fn_f + byte_t * (ins + outs + idx)) / t_eff + call_f, 0.0)
    elem_b = np.where(has_bwd, (op_bt * ops_b + fn_b + byte_t * (ins + 2.0 * outs + idx)) / t_eff + call_b, 0.0)
    # A normalisation's scale and shift: their gradient is a pass of its own over input and output error
    # (its own time per byte where the family has one).
    wg_byte = [f.weight_grad_byte_time_s for f in fams]
    own_wg = np.array([v is not None for v in wg_byte] + [False])[arr.elem_family]
    wg_t = np.array([v or 0.0 for v in wg_byte] + [0.0])[arr.elem_family]
    elem_w = np.where(~gemm & (arr.call_weights > 0),
                      np.where(own_wg, wg_t * (ins + outs), op_bt * ops_b + byte_t * (ins + outs)) / t_eff + call_b,
                      0.0)

    # A transposed convolution's forward runs as its convolution's input gradient, and its input gradient
    # as that convolution's forward (oneDNN's deconvolution; reconstructed): the two phases' rates swap.
    no_wide = np.zeros_like(arr.depthwise_wide)
    gemm_f = gemm_phase(rate.conv_forward, rate.fc_forward, arr.macs_forward, arr.depthwise_wide_forward)
    gemm_b = gemm_phase(rate.conv_input_grad, rate.fc_input_grad, arr.macs_backprop, no_wide)
    if arr.transposed.any():
        gemm_f = np.where(arr.transposed, gemm_phase(rate.conv_input_grad, rate.fc_input_grad, arr.macs_forward,
                                                     no_wide), gemm_f)
        gemm_b = np.where(arr.transposed, gemm_phase(rate.conv_forward, rate.fc_forward, arr.macs_backprop,
                                                     arr.depthwise_wide_forward), gemm_b)
    fwd = np.where(gemm, gemm_f + fused_f, elem_f)
    # A fused activation writes a second output forward and its error backward.
    second = np.where(arr.fused_act, outs, 0.0)
    fwd = fwd + np.where(gemm | has_fwd, memory(ws, ws, outs)
                         + memory(ws, 0.0, second) + memory(ws, 0.0, idx), 0.0)
    # (A depthwise input gradient stays in the library's depthwise kernels at every width: no t_dw.)
    bwd = np.where(gemm, gemm_b + np.where(arr.macs_backprop > 0, fused_b, 0.0), elem_b)
    # An element-wise layer's backward reads the output's error and what it saved (its input or output)
    # and writes the input's error: three tensors in its working set, where the forward has two.
    ws_b = np.where(gemm, ws, ws + outs)
    bwd = bwd + np.where(has_bwd, memory(ws_b, ws_b, ins) + memory(ws_b, 0.0, second), 0.0)
    wg = np.where(gemm, gemm_phase(rate.conv_weight_grad, rate.fc_weight_grad, arr.macs_weight_grad,
                            arr.depthwise_wide) + np.where(arr.is_conv & (arr.macs_weight_grad == 0), 0.0, fused_b),
                  elem_w)
    wg = wg + np.where(arr.call_weights > 0, memory(ws, ws, weights), 0.0)
    if rate.layout_copies:
        f_copy, b_copy, w_copy = _layout_copies(arr, rate, conv, ws, ins, outs, t_eff, per_core)
        fwd, bwd, wg = fwd + f_copy, bwd + b_copy, wg + w_copy
    # A weight normalisation: each call computes the weight from v and g and backward their gradients,
    # passes over v's values priced as the optimizer step's passes over the weights.
    def norm_passes(values: np.ndarray) -> np.ndarray:
        moved = values * share * VALUE_BYTES
        held = arr.normed_weights * share * VALUE_BYTES
        passes = np.where(arr.normed_weights > 0, values / np.maximum(arr.normed_weights, 1.0), 0.0)
        return np.asarray(np.where(values > 0, rate.update_byte_time_s * moved / t_eff
                                   + rate.update_call_time_s * calls * passes + memory(2.0 * held, moved, held), 0.0))

    fwd = fwd + norm_passes(arr.norm_forward_values)
    wg = wg + norm_passes(arr.norm_backward_values)
    # The optimizer step: read weight and gradient, write the weight, and read and write its state.
    held = arr.weights * share * VALUE_BYTES  # each weight is updated once, at the layer holding it
    state = optimizer_state_bytes / VALUE_BYTES
    moved = held * (3.0 + 2.0 * state)
    upd = np.where(arr.weights > 0, rate.update_byte_time_s * moved / t_eff + rate.update_call_time_s * calls
                   + memory(held * (2.0 + state), moved, 0.0), 0.0)
    return np.asarray(fwd), np.asarray(bwd), np.asarray(wg), np.asarray(upd)


def _profile_factors(arr: NetworkArrays, machine: Machine, rate: ShapeRate, spatial: np.ndarray, b: float,
                     threads: np.ndarray | float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Measured / modelled per layer, forward and backward (back-prop with the weight gradient), for
    the profiled layers at mini-batch ``b`` (1 elsewhere), and 0 for the profiled layers (1 elsewhere);
    None when no layer of the network was profiled.
    A layer timed at several thread counts uses the timing nearest the configuration's (the largest of
    an array of them)."""
    want = float(machine.cores if threads is None else np.max(threads))
    table: dict[str, ProfiledLayer] = {}
    for entry in machine.profiled_layers:
        old = table.get(entry.signature)
        if old is None or abs(entry.threads - want) < abs(old.threads - want):
            table[entry.signature] = entry
    hits = [table.get(s) for s in arr.signatures]
    if not any(hits):
        return None
    ones = np.ones_like(arr.weights)
    fwd_f, bwd_f, unprofiled = ones.copy(), ones.copy(), ones.copy()
    models: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for i, p in enumerate(hits):
        if p is None:
            continue
        unprofiled[i] = 0.0
        if p.threads not in models:
            t_eff = shape_threads(rate, machine, float(p.threads))
            f, bp, wg, _ = phase_calls(arr, rate, ones, spatial, b, t_eff, calls=rate.step_call_scale,
                                       threads=min(float(p.threads), machine.cores))
            models[p.threads] = (f, bp + wg)
        model = models[p.threads]
        b0, b1 = p.batch_samples
        for j, (measured, target) in enumerate(((p.forward_s, fwd_f), (p.backward_s, bwd_f))):
            # Time per call is fixed + per sample · b between (and beyond) the two timed batches.
            slope = (measured[1] - measured[0]) / (b1 - b0)
            at_b = measured[0] + slope * (b - b0)
            if at_b <= 0:
                at_b = min(measured) * min(1.0, b / b0)
            m = float(model[j][i])
            if m > 0 and at_b > 0:
                target[i] = at_b / m
    return fwd_f, bwd_f, unprofiled


def step_time_of(arr: NetworkArrays, machine: Machine, threads: np.ndarray | float | None) -> float:
    """Seconds of a training step's own fixed cost: the network's :class:`~dnnbench.specs.ProfiledStep`
    (the one timed at the thread count nearest the configuration's), else the calibration's."""
    rate = machine.shape_rate
    assert rate is not None
    if not machine.profiled_steps:
        return rate.step_time_s
    from .arrays import network_digest

    digest = network_digest(arr.signatures)
    mine = [p for p in machine.profiled_steps if p.network == digest]
    if not mine:
        return rate.step_time_s
    want = float(machine.cores if threads is None else np.max(threads))
    return min(mine, key=lambda p: abs(p.threads - want)).step_time_s


def with_measured_steps(arr: NetworkArrays) -> NetworkArrays:
    """``arr`` as a rate with measured recurrent step times prices it: a recurrent layer's per-layer fixed
    times once per stacked layer and direction (its steps' own fixed time is measured), and an LSTM, one
    oneDNN call per layer and direction on a CPU, packing its matrices once per call."""
    return dataclasses.replace(
        arr, cpu_calls=np.where(arr.recurrent_mode >= 0, arr.recurrent_layers, arr.cpu_calls),
        gemm_weight_elems=np.where(arr.recurrent_mode == 0, arr.recurrent_weight_elems, arr.gemm_weight_elems))


def shape_compute(arr: NetworkArrays, machine: Machine, share: np.ndarray, keep_wg: np.ndarray,
                  spatial: np.ndarray, local_batch: float, threads: np.ndarray | float | None,
                  optimizer_state_bytes: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-sample seconds of each layer's forward, back-prop, weight gradient and update on one CPU worker
    machine holding ``share`` of every layer (the form above)."""
    rate = machine.shape_rate
    assert rate is not None
    b = float(local_batch)
    measured_steps = rate.recurrent_steps
    if measured_steps is not None:
        arr = with_measured_steps(arr)
    t_eff = shape_threads(rate, machine, threads)
    t_l = np.asarray(t_eff)[..., None] if np.ndim(t_eff) else t_eff
    t_run = np.minimum(machine.cores if threads is None else np.asarray(threads, dtype=float), machine.cores)
    t_run = np.asarray(t_run)[..., None] if np.ndim(t_run) else t_run
    fwd, bwd, wg, upd = phase_calls(arr, rate, share, spatial, b, t_l, optimizer_state_bytes, rate.step_call_scale,
                                    threads=t_run)
    factors = _profile_factors(arr, machine, rate, spatial, b, threads)
    if factors is not None:
        fwd, bwd, wg = fwd * factors[0], bwd * factors[1], wg * factors[1]
    wg, upd = wg * keep_wg, upd * keep_wg
    # The fixed cost of each layer in a training step beyond its calls (the autograd engine's nodes);
    # a profiled layer's timing, taken inside training steps, holds it already.
    unprofiled = np.ones_like(arr.weights) if factors is None else np.asarray(factors[2])
    upd = upd + np.where(arr.group >= 0, rate.layer_step_time_s * arr.cpu_calls * unprofiled, 0.0)
    if measured_steps is not None:  # ... and each recurrent step its measured time (RecurrentStepTimes)
        per_step = np.array([measured_steps.lstm_s, measured_steps.gru_s, measured_steps.rnn_s, 0.0])
        upd = upd + per_step[arr.recurrent_mode] * arr.recurrent_steps * unprofiled
    # ... and of the step itself, charged to the network's first layer: the network's own, where its
    # steps were timed.
    first = np.zeros_like(arr.weights)
    first[..., :1] = step_time_of(arr, machine, threads)
    upd = upd + first
    return np.asarray(fwd / b), np.asarray(bwd / b), np.asarray(wg / b), np.asarray(upd / b)
