"""Stage 3: seconds per sample on each resource of a worker machine, and core-seconds of the PS per
update (docs/model.md §4-6). No shared-host stretch here: :mod:`.shared_host` applies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..specs import Cluster, Nic
from ..units import BITS_PER_BYTE
from .arrays import NetworkArrays
from .compute import ComputeParts, effective_cores
from .fabric import Fabric
from .knobs import Knobs
from .traffic import ps_update_core_s
from .volumes import Layout, Volumes


def link_time(up_bits: Any, down_bits: Any, up_bps: Any, down_bps: Any, duplex: str) -> Any:
    """Time to move ``up_bits`` out and ``down_bits`` in: the slower direction when full duplex,
    both in turn on a shared (half-duplex) medium."""
    if duplex == "full":
        return np.maximum(up_bits / up_bps, down_bits / down_bps)
    return up_bits / up_bps + down_bits / down_bps


def payload_bits_per_s(nic: Nic) -> tuple[float, float]:
    """(upload, download) payload bits per second of ``nic``: the wire rate times its goodput."""
    return nic.upload_bits_per_s * nic.goodput_factor, nic.download_bits_per_s * nic.goodput_factor


@dataclass(frozen=True)
class Costs:
    """Per-sample seconds of one worker machine by resource, and the PS's core-seconds per update."""

    compute: ComputeParts  # layer compute by phase
    select_s: np.ndarray  # compression's selection over the pushed deltas
    model_parallel_copy_s: np.ndarray  # CPU copying model-parallel messages in and out
    ps_copy_s: np.ndarray  # CPU copying this machine's pushes and pulls
    model_parallel_s: np.ndarray  # model-parallel exchanges on the link, with latencies and rounds
    push_s: np.ndarray  # this machine's pushes on its link
    pull_s: np.ndarray  # this machine's pulls on its link
    network_s: np.ndarray  # the worker NIC carrying model-parallel and PS traffic together
    cores: Any  # T_eff of a worker machine
    ps_apply_core_s: np.ndarray  # C_PS: the update of one push (outer products and application)
    ps_push_copy_core_s: np.ndarray  # copying one push in
    ps_pull_copy_core_s: np.ndarray  # copying one pull out

    @property
    def copy_s(self) -> np.ndarray:
        return np.asarray(self.model_parallel_copy_s + self.ps_copy_s)

    @property
    def worker_s(self) -> np.ndarray:
        """Everything a worker machine's CPU does per sample."""
        return np.asarray(self.compute.total_s + self.select_s + self.copy_s)

    def ps_core_s(self, k: Knobs) -> np.ndarray:
        """The PS's core-seconds per push: the update and both copies (pulls every k_pull samples)."""
        pulls = self.ps_pull_copy_core_s * k.k_push / k.k_pull
        return np.asarray(self.ps_apply_core_s + self.ps_push_copy_core_s + pulls)


def costs(arr: NetworkArrays, cluster: Cluster, k: Knobs, lay: Layout, comp: ComputeParts,
          vol: Volumes, fab: Fabric | None = None) -> Costs:
    wk, wn, pk = cluster.worker, cluster.worker_nic, cluster.ps
    up_bps: Any
    down_bps: Any
    up_bps, down_bps = payload_bits_per_s(wn)
    if fab is not None and cluster.node is not None:
        # A device's share of its node's NICs; a replica inside one node exchanges on the intra link.
        up_bps, down_bps = up_bps * fab.nic_share, down_bps * fab.nic_share
    cores = effective_cores(wk, k.threads)
    # Compression costs compute: selection over the pushed deltas (docs/esgd.md §4).
    delta_values = vol.push_dense_values - np.where(k.has_ps, 0.0, vol.push_dense_values)
    select_s = vol.select_ops_per_element * np.maximum(delta_values, 0.0) / k.k_push / k.w * wk.elem_time_s / cores
    mp_bits = vol.model_parallel_bits
    mp_wait = vol.model_parallel_messages * wn.latency_s + vol.model_parallel_rounds * wn.exchange_overhead_s
    mp_link = link_time(mp_bits, mp_bits, up_bps, down_bps, wn.duplex) + mp_wait
    if fab is not None and cluster.node is not None:
        intra_bps = fab.intra_bytes_per_s * BITS_PER_BYTE
        intra = mp_bits / intra_bps + vol.model_parallel_messages * fab.intra_latency_s
        mp_link = np.where(fab.in_node, intra, mp_link)
        mp_wait = np.where(fab.in_node, 0.0, mp_wait)
        mp_bits_nic = np.where(fab.in_node, 0.0, mp_bits)
    else:
        mp_bits_nic = mp_bits
    push_m, pull_m = vol.push_bits_per_sample, vol.pull_bits_per_sample
    # One message per push and per pull: the connections to the P PS machines run in parallel.
    ps_latency = np.where(k.has_ps, wn.latency_s * (1 / k.k_push + 1 / k.k_pull), 0.0)
    # Message copies cost CPU on both ends (reconstructed; measured in docs/validation.md): per sample
    # on a worker the model-parallel copies and those of its pushes and pulls; on the PS per update
    # (every push) and per fetch (every pull).
    copy, ps_per_byte = wk.copy_time_s_per_byte, pk.copy_time_s_per_byte
    return Costs(
        compute=comp, select_s=select_s,
        model_parallel_copy_s=2.0 * mp_bits / BITS_PER_BYTE * copy / cores,
        ps_copy_s=(push_m + pull_m) / BITS_PER_BYTE * copy / cores,
        model_parallel_s=mp_link,
        push_s=push_m / up_bps + np.where(k.has_ps, wn.latency_s / k.k_push, 0.0),
        pull_s=pull_m / down_bps + np.where(k.has_ps, wn.latency_s / k.k_pull, 0.0),
        network_s=np.maximum(link_time(mp_bits_nic + push_m, mp_bits_nic + pull_m, up_bps, down_bps, wn.duplex)
                             + mp_wait + ps_latency, mp_link),
        cores=cores,
        # The PS computes the k samples' outer products as one GEMM: compute-bound, at the conv rate.
        ps_apply_core_s=ps_update_core_s(arr, k.k_push, lay.offload, lay.spatial, k.w, pk.mac_time("conv"),
                                         pk.elem_time_s),
        ps_push_copy_core_s=np.where(k.has_ps, vol.push_bits / BITS_PER_BYTE * ps_per_byte, 0.0),
        ps_pull_copy_core_s=np.where(k.has_ps, vol.pull_bits / BITS_PER_BYTE * ps_per_byte, 0.0),
    )


def combine(compute_s: Any, network_s: Any, overlap: Any) -> Any:
    """(1-o)·(a+b) + o·max(a,b): no overlap sums compute and network, full overlap takes the max."""
    return (1.0 - overlap) * (compute_s + network_s) + overlap * np.maximum(compute_s, network_s)
