"""Worker compute time per sample (docs/model.md §4, reconstructed).

    T_comp(W) = Σ_l [ (M^f_l + M^b_l + (1-ω_l)·M^g_l) · t_l(W) + (E^f_l + E^b_l) · t_elem ] · ι_l(W) / W
                / (T_eff)
    t_l(W)    = t_mac(kind_l) · [(1 - φ_l(W)) + φ_l(W) / c]        (cache effect, Adam's super-linearity)
    φ_l(W)    = min(1, LLC / (bytes of the machine's slice of layer l's weights))
    ι_l(W)    = ceil(u_l / W) / (u_l / W)                           (imbalance of uneven partitions)
    T_eff     = min(T, cores) · η,  η = 1 / (1 + σ·(min(T, cores) - 1))

On a machine with an accelerator (docs/model.md §11, reconstructed roofline) each layer's phase takes

    t = max( M / (peak_MAC(precision) · e(m, n)),  bytes / memory bandwidth ) + passes / bandwidth + t_fixed / b
    e(m, n) = e_kind · m / (m + m_half) · n / (n + n_half),  m = the multiply-adds of one call (a layer on the
              b-sample batch), n = the width of the phase's output matrix per group
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..specs import Machine
from ..units import FP32_BYTES
from .arrays import KIND_GROUPS, NetworkArrays

if TYPE_CHECKING:
    from .knobs import Knobs
    from .volumes import Layout


def effective_cores(machine: Machine, threads: np.ndarray | float | None) -> np.ndarray:
    """T_eff: cores' worth of throughput from ``threads`` threads (multi-thread efficiency η)."""
    t = np.minimum(machine.cores if threads is None else np.asarray(threads, dtype=float), machine.cores)
    return t / (1.0 + machine.thread_contention * (t - 1.0))


def imbalance(units: np.ndarray, w: np.ndarray) -> np.ndarray:
    """ι(W) = ceil(u/W)·W/u ≥ 1: the busiest machine's share over the even share."""
    u = np.maximum(units, 1.0)
    return np.asarray(np.ceil(u / w) * w / u)


def mac_time_per_layer(arr: NetworkArrays, machine: Machine, w: np.ndarray,
                       replicated: np.ndarray | None = None) -> np.ndarray:
    """t_l(W): seconds per MAC per core of each layer on a machine holding a 1/W slice of it.

    ``replicated`` marks layers whose weights every machine holds whole (spatial partitioning).
    """
    t_out = np.where(arr.fc_rate, machine.mac_time("fc"), machine.mac_time("conv"))
    divisor = w if replicated is None else np.where(replicated, 1.0, w)
    slice_bytes = arr.call_weights * FP32_BYTES / divisor
    in_cache = np.minimum(1.0, machine.llc_bytes / np.maximum(slice_bytes, 1.0))
    return np.asarray(t_out * ((1.0 - in_cache) + in_cache / machine.cache_speedup))


class LayerParts(NamedTuple):
    """Per-sample compute of each layer (arrays ``(..., layers)``) by phase."""

    forward_s: np.ndarray
    backprop_s: np.ndarray
    weight_grad_s: np.ndarray
    update_s: np.ndarray


@dataclass(frozen=True)
class ComputeParts:
    """Per-sample compute time of one machine of a replica, by phase and by layer-kind group."""

    forward_s: np.ndarray
    backprop_s: np.ndarray
    weight_grad_s: np.ndarray
    update_s: np.ndarray
    by_kind_s: dict[str, np.ndarray]

    def where(self, mask: np.ndarray, other: ComputeParts) -> ComputeParts:
        """These parts where ``mask`` holds, ``other``'s elsewhere."""
        def pick(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return np.where(mask, a, b)

        return ComputeParts(pick(self.forward_s, other.forward_s), pick(self.backprop_s, other.backprop_s),
                            pick(self.weight_grad_s, other.weight_grad_s), pick(self.update_s, other.update_s),
                            {k: pick(v, other.by_kind_s[k]) for k, v in self.by_kind_s.items()})

    def scaled(self, factor: float) -> ComputeParts:
        """Every part times ``factor`` (the compute model's error band, :mod:`.interval`)."""
        return ComputeParts(self.forward_s * factor, self.backprop_s * factor, self.weight_grad_s * factor,
                            self.update_s * factor, {k: v * factor for k, v in self.by_kind_s.items()})

    @property
    def total_s(self) -> np.ndarray:
        return np.asarray(self.forward_s + self.backprop_s + self.weight_grad_s + self.update_s)


def saturation_workers(arr: NetworkArrays, machine: Machine) -> float:
    """W beyond which no layer's per-machine work changes: every unit count is split to one per
    machine (ceil(u/W) = 1) and every slice fits the cache. T_comp(W) = T_comp(min(W, W_sat))."""
    units = np.maximum(np.maximum(arr.units_feature_map, arr.units_spatial), 1.0)
    cache = np.ceil(arr.call_weights * FP32_BYTES / machine.llc_bytes)
    return float(max(np.max(units), np.max(cache), 1.0))


#: Bytes per value of activations and of the weights the layers read, by precision (mixed precision
#: keeps 16-bit activations and a 16-bit copy of the weights).
VALUE_BYTES = {"fp32": 4.0, "tf32": 4.0, "fp16": 2.0, "bf16": 2.0}
#: Bytes the optimizer step reads and writes per weight beyond weight and gradient: its state, read
#: and written (momentum: one fp32 value; Adam: two).
OPTIMIZER_STATE_BYTES = {"sgd": 0.0, "momentum": 4.0, "adam": 8.0}


def worker_compute(arr: NetworkArrays, machine: Machine, w: np.ndarray, threads: np.ndarray | float | None,
                   offload_fc: np.ndarray, spatial: np.ndarray, local_batch: float, precision: str = "fp32",
                   optimizer: str = "sgd") -> ComputeParts:
    """Per-sample compute of one worker machine; see :func:`_worker_compute`.

    Large arrays of W are reduced to their distinct values (clamped at the saturation W) first, so a
    million configurations cost a layer axis only for the few hundred distinct W they hold.
    """
    w_arr = np.asarray(w, dtype=float)
    if w_arr.size > 256 and np.ndim(offload_fc) == 1 and (threads is None or np.ndim(threads) == 0):
        uniq, inv = np.unique(np.minimum(w_arr, saturation_workers(arr, machine)), return_inverse=True)
        part = _worker_compute(arr, machine, uniq, threads, offload_fc, spatial, local_batch, precision, optimizer)
        def take(a: np.ndarray) -> np.ndarray:
            return np.asarray(a)[inv].reshape(w_arr.shape)

        return ComputeParts(take(part.forward_s), take(part.backprop_s), take(part.weight_grad_s),
                            take(part.update_s), {k: take(v) for k, v in part.by_kind_s.items()})
    return _worker_compute(arr, machine, w_arr, threads, offload_fc, spatial, local_batch, precision, optimizer)


def _by_kind(arr: NetworkArrays, per_layer: np.ndarray) -> dict[str, np.ndarray]:
    return {g: np.sum(np.where(arr.group == i, per_layer, 0.0), axis=-1) for i, g in enumerate(KIND_GROUPS)}


def width_factor(width: np.ndarray, half_width: float) -> np.ndarray:
    """n / (n + n_half): the fraction of a device's tiles a product of output width n fills (1 where the
    layer is no product, n = 0, or n_half = 0)."""
    w = np.asarray(width, dtype=float)
    return np.asarray(np.where(w > 0, w / np.maximum(w + half_width, 1e-300), 1.0))


def phase_widths(arr: NetworkArrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The output width of each phase's product, per group: forward n_out, input gradient n_in, weight
    gradient the narrower side of its n_out × n_in·k_h·k_w matrix."""
    return (arr.group_out_channels, arr.group_in_channels,
            np.minimum(arr.group_out_channels, arr.group_in_channels * arr.kernel_area))


#: Values ``nn.MultiheadAttention`` (self-attention, fused attention kernel) reads and writes per value of
#: its output outside its products (the projections and the attention kernel), forward and backward.
MHA_FORWARD_PASSES = 14.0
MHA_BACKWARD_PASSES = 54.0
#: ... and a local response norm (``F.local_response_norm``: square, pad, average over channels, scale,
#: power, divide, each a kernel of its own, and their backwards) beyond its input and output.
LRN_FORWARD_PASSES = 13.0
LRN_BACKWARD_PASSES = 37.0


class DeviceBytes(NamedTuple):
    """What each layer phase moves through device memory per sample, in values (:func:`device_values`) or
    bytes (:func:`device_bytes`): ``*_operands`` in the kernel that computes the layer (bounded below by
    the roofline), ``*_passes`` in kernels of their own that eager PyTorch runs beside it (added to its
    time)."""

    forward_operands: np.ndarray
    backprop_operands: np.ndarray
    weight_grad_operands: np.ndarray
    forward_passes: np.ndarray
    backprop_passes: np.ndarray
    weight_grad_passes: np.ndarray


def device_values(arr: NetworkArrays, share: np.ndarray | float = 1.0) -> DeviceBytes:
    """What each layer phase reads and writes, in values (docs/model.md §11, reconstructed from eager
    PyTorch's kernels). Forward reads its inputs and writes its output; back-prop reads the output's error
    and what it saved and writes the input's error; the weight gradient reads input and error. A layer's
    fused activation runs as a kernel of its own in place, reading and writing the output (2 passes), and
    its backward reads the error and the output and writes the error (3); each consumer that sends an
    error back to an output, beyond the first, adds it to the others' in backward (read two, write one;
    a comparison sends none, and a mask needs none); an fc's bias
    gradient sums the output's error in a kernel of its own (1); a view (flatten, reshape, permute) moves
    nothing. The loss is taken on the last layer's output: after a softmax layer (its log, the layer's
    own operands) its backward fills the error of the chosen classes into zeros (1); on raw outputs the
    log-softmax runs too (2 forward, 3 backward more). ``nn.MultiheadAttention`` moves
    MHA_FORWARD_PASSES and MHA_BACKWARD_PASSES times its output outside its products (its bias adds, the
    heads' layout copies, the packed projection's gradients), a local response norm LRN_FORWARD_PASSES and
    LRN_BACKWARD_PASSES times its output beyond its operands (counted from their kernels in
    tests/counts/test_device_bytes.py)."""
    return _scaled(_per_layer(arr, "values"), share)


def device_bytes(arr: NetworkArrays, share: np.ndarray | float, precision: str) -> DeviceBytes:
    """:func:`device_values` in bytes. In fp32 and tf32 every value is 4 bytes. In mixed precision (fp16,
    bf16: autocast) a value is 2 bytes, or 4 where autocast leaves it in fp32 (``arr.out_fp32``,
    :func:`~dnnbench.model.arrays.autocast_fp32`), and a product that reads fp32 values runs autocast's
    cast of them first (read 4 bytes, write 2) and the cast of their error back after its backward (read
    2, write 4); the loss runs in fp32 (autocast's float32 list)."""
    return _scaled(_per_layer(arr, precision), share)


#: (arrays, precision or "values") -> the moves of one whole layer; every move is proportional to the
#: share of the layer a machine holds. Keyed by the arrays' identity (network_arrays caches them).
_PER_LAYER: dict[tuple[int, str], tuple[NetworkArrays, DeviceBytes]] = {}


def _per_layer(arr: NetworkArrays, mode: str) -> DeviceBytes:
    hit = _PER_LAYER.get((id(arr), mode))
    if hit is not None and hit[0] is arr:
        return hit[1]
    if mode == "values":
        moved = _moved(arr, 1.0, 1.0, 0.0, 1.0)
    else:
        vb = VALUE_BYTES[mode]
        moved = (_moved(arr, vb, vb, 0.0, vb) if vb >= FP32_BYTES else
                 _moved(arr, vb, np.where(arr.out_fp32, FP32_BYTES, vb), FP32_BYTES - vb, FP32_BYTES))
    if len(_PER_LAYER) > 256:
        _PER_LAYER.clear()
    _PER_LAYER[(id(arr), mode)] = (arr, moved)
    return moved


def _scaled(per_layer: DeviceBytes, share: np.ndarray | float) -> DeviceBytes:
    if np.ndim(share) == 0 and float(share) == 1.0:
        return per_layer
    return DeviceBytes(*(np.asarray(v * share) for v in per_layer))


def _moved(arr: NetworkArrays, value_b: float, out_b: np.ndarray | float, wide_extra: float,
           loss_b: float) -> DeviceBytes:
    """The moves of :func:`device_values` for a whole layer: each value of a layer's output counted at
    ``out_b``, each input value at ``value_b`` (``wide_extra`` more for the fp32 ones), the loss at
    ``loss_b``."""
    moving = np.where(arr.view, 0.0, 1.0)
    reads = (arr.in_values * value_b + arr.in_fp32_values * wide_extra) * moving
    outs = arr.out_values * moving * out_b
    has_bwd = (arr.macs_backprop > 0) | (arr.elem_backprop > 0)
    act = np.where(arr.fused_act, outs, 0.0)
    mha = np.where(arr.multi_head, outs, 0.0)
    lrn = np.where(arr.lrn, outs, 0.0)
    last = np.arange(arr.out_values.shape[-1]) == arr.out_values.shape[-1] - 1
    loss = arr.out_values * loss_b  # on the output itself, a view too (SqueezeNet ends in a flatten)
    loss_in = np.where(last & ~arr.ends_in_softmax, 2.0 * loss, 0.0)
    loss_back = np.where(last, (1.0 if arr.ends_in_softmax else 4.0) * loss, 0.0)
    # Autocast's casts of the fp32 values a product reads: forward (read 4, write 2) and their errors back.
    casts = np.where(arr.is_product, arr.in_fp32_values * moving * 3.0 * wide_extra, 0.0)
    return DeviceBytes(forward_operands=np.asarray(reads + outs),
                       backprop_operands=np.asarray(np.where(has_bwd, reads + 2.0 * outs, 0.0)),
                       weight_grad_operands=np.asarray(reads + outs),
                       forward_passes=np.asarray(2.0 * act + MHA_FORWARD_PASSES * mha + LRN_FORWARD_PASSES * lrn
                                                 + loss_in + casts),
                       backprop_passes=np.asarray(np.where(has_bwd, 3.0 * act, 0.0)
                                                  + 3.0 * arr.extra_consumers * arr.out_values * out_b
                                                  + MHA_BACKWARD_PASSES * mha + LRN_BACKWARD_PASSES * lrn + loss_back
                                                  + np.where(has_bwd, casts, 0.0)),
                       weight_grad_passes=np.asarray(np.where(arr.fc_bias, outs, 0.0)))


def _device_layers(arr: NetworkArrays, machine: Machine, share: np.ndarray, keep_wg: np.ndarray,
                   local_batch: float, precision: str, optimizer: str) -> LayerParts:
    """Per-sample compute of each layer on one accelerator holding ``share`` of it (the roofline above)."""
    acc = machine.accelerator
    assert acc is not None
    rate = acc.peak_macs_per_s(precision)
    curve = acc.efficiency(precision)
    e_max = np.where(arr.fc_rate, curve.fc, curve.conv)

    half_width = curve.half_efficiency_channels or 0.0

    def mac_s(macs: np.ndarray, width: np.ndarray) -> np.ndarray:
        call = macs * local_batch
        with np.errstate(divide="ignore", invalid="ignore"):
            eff = e_max * call / (call + curve.half_efficiency_macs) * width_factor(width, half_width)
            return np.asarray(np.where(macs > 0, macs / (rate * eff), 0.0))

    vb = VALUE_BYTES[precision]
    bw = acc.memory_bytes_per_s
    moved = device_bytes(arr, share, precision)
    # In mixed precision autocast casts each product's fp32 weights to 16 bits every forward (read 4,
    # write 2) before the product reads the copy, and the 16-bit weight gradient back to fp32 (read 2,
    # write 4); in fp32 and tf32 forward reads the weights and the weight gradient writes them.
    cast = 0.0 if vb >= FP32_BYTES else FP32_BYTES + vb
    weight_bytes, weight_grad_bytes = vb + cast, vb + cast
    w_fwd, w_bwd, w_wg = phase_widths(arr)
    weights = arr.call_weights * share  # read by every call, shared or not
    overhead = np.where(arr.group >= 0, machine.layer_overhead_s * arr.calls / local_batch, 0.0)
    # Each phase takes the longer of its products and its operands' bytes; the weights are read once per
    # mini-batch forward, the weight gradient written in fp32; separate passes add their bytes' time.
    fwd = np.maximum(mac_s(arr.macs_forward * share, w_fwd),
                     (moved.forward_operands + weights * weight_bytes / local_batch) / bw)
    has_bwd = moved.backprop_operands > 0
    bwd = np.where(has_bwd, np.maximum(mac_s(arr.macs_backprop * share, w_bwd), moved.backprop_operands / bw), 0.0)
    has_wg = (arr.macs_weight_grad > 0) | (arr.call_weights > 0)
    wg_bytes = (moved.weight_grad_operands + weights * weight_grad_bytes / local_batch) / bw
    wg = keep_wg * (np.where(has_wg, np.maximum(mac_s(arr.macs_weight_grad * share, w_wg), wg_bytes), 0.0)
                    + moved.weight_grad_passes / bw)
    fwd = fwd + overhead + moved.forward_passes / bw
    bwd = bwd + overhead + moved.backprop_passes / bw
    # A weight normalisation computes the weight from v and g once per call, and their gradients: passes
    # over v's fp32 values.
    fwd = fwd + arr.norm_forward_values * share * FP32_BYTES / bw / local_batch
    wg = wg + keep_wg * arr.norm_backward_values * share * FP32_BYTES / bw / local_batch
    # The optimizer step once per mini-batch: read weight and gradient, write the weight, and its state.
    upd = arr.weights * share * keep_wg * (12.0 + 2.0 * OPTIMIZER_STATE_BYTES[optimizer]) / bw / local_batch
    return LayerParts(fwd, bwd, wg, upd)


def layer_parts(arr: NetworkArrays, machine: Machine, w: np.ndarray, threads: np.ndarray | float | None,
                offload_fc: np.ndarray, spatial: np.ndarray, local_batch: float, precision: str = "fp32",
                optimizer: str = "sgd") -> LayerParts:
    """Per-sample compute of each layer on one worker machine (arrays: ``w[..., None]`` against layers).

    ``offload_fc[..., l]`` is 1 where the PS computes layer l's weight gradient (Adam's FC scheme).
    ``spatial[l]`` marks conv layers partitioned by rows (weights replicated, units are rows).
    """
    wl = np.asarray(w, dtype=float)[..., None]
    units = np.where(spatial, arr.units_spatial, arr.units_feature_map)
    share = imbalance(units, wl) / wl  # the busiest machine's fraction of each layer
    if machine.accelerator is not None:
        return _device_layers(arr, machine, np.asarray(share), 1.0 - offload_fc, local_batch, precision, optimizer)
    if machine.shape_rate is not None:
        from .shape_compute import shape_compute

        return LayerParts(*shape_compute(arr, machine, np.asarray(share), 1.0 - offload_fc, spatial, local_batch,
                                         threads, OPTIMIZER_STATE_BYTES[optimizer]))
    t_mac = mac_time_per_layer(arr, machine, wl, replicated=spatial) * share
    t_elem = machine.elem_time_s * share
    keep_wg = 1.0 - offload_fc
    # Framework overhead: every machine runs its slice of each layer once forward and once backward
    # per local mini-batch, whatever the slice's size (reconstructed; measured in docs/validation.md).
    overhead = np.where(arr.group >= 0, machine.layer_overhead_s * arr.cpu_calls / local_batch, 0.0)
    fwd = arr.macs_forward * t_mac + arr.elem_forward * t_elem + overhead
    bwd = arr.macs_backprop * t_mac + arr.elem_backprop * t_elem + overhead
    wg = arr.macs_weight_grad * keep_wg * t_mac
    # A weight normalisation computes the weight from v and g once per local mini-batch, and their
    # gradients: an element operation per value of v in each pass.
    fwd = fwd + arr.norm_forward_values * t_elem / local_batch
    wg = wg + arr.norm_backward_values * keep_wg * t_elem / local_batch
    # Hogwild local weight application: |W_l| element ops every b samples (model.md §4); layers whose
    # update the PS computes are refreshed by pulls instead.
    upd = arr.weights * keep_wg * t_elem / local_batch
    cores = effective_cores(machine, threads)
    cores_l = np.asarray(cores)[..., None] if np.ndim(cores) else cores
    return LayerParts(fwd / cores_l, bwd / cores_l, wg / cores_l, upd / cores_l)


def _worker_compute(arr: NetworkArrays, machine: Machine, w: np.ndarray, threads: np.ndarray | float | None,
                    offload_fc: np.ndarray, spatial: np.ndarray, local_batch: float, precision: str = "fp32",
                    optimizer: str = "sgd") -> ComputeParts:
    """Per-sample compute of one worker machine: :func:`layer_parts` summed over the layers."""
    f, bp, g, u = layer_parts(arr, machine, w, threads, offload_fc, spatial, local_batch, precision, optimizer)
    return ComputeParts(forward_s=f.sum(-1), backprop_s=bp.sum(-1), weight_grad_s=g.sum(-1),
                        update_s=u.sum(-1), by_kind_s=_by_kind(arr, f + bp + g + u))


def machine_compute(arr: NetworkArrays, machine: Machine, k: Knobs, lay: Layout, local_batch: float,
                    precision: str = "fp32", optimizer: str = "sgd") -> ComputeParts:
    """Stage 1: the per-sample compute of one worker machine for every configuration of ``k``. Without
    a PS (P = 0) every weight gradient is computed locally, whatever the layout offloads."""
    comp = worker_compute(arr, machine, k.w, k.threads, lay.offload, lay.spatial, local_batch, precision, optimizer)
    if not np.all(k.has_ps):
        local = worker_compute(arr, machine, k.w, k.threads, np.zeros_like(arr.weights), lay.spatial, local_batch,
                               precision, optimizer)
        comp = local.where(~k.has_ps, comp)
    return comp
