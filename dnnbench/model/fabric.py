"""Stage 2b: where a configuration's devices sit in nodes, and the links they use (docs/model.md §11,
reconstructed).

A cluster without ``node`` has one machine per NIC: every exchange uses the worker's NIC whole. With
nodes of G devices and ``nics`` NICs, ranks are packed: a replica's W devices lie in one node when
W <= G (its model-parallel exchanges then use the intra-node link), and g = min(R, floor(G/W)) ranks of
each all-reduce group share a node, so a group spans ceil(R/g) nodes. The devices in use in one node,
u = min(G, W·R), share its NICs: each gets min(nics, u)/u of one NIC's rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..specs import Cluster
from .knobs import Knobs


@dataclass(frozen=True)
class Fabric:
    """The links of every configuration of the knobs (arrays that broadcast with them)."""

    in_node: np.ndarray  # a replica's W devices lie in one node: model-parallel traffic on the intra link
    nic_share: np.ndarray  # fraction of one NIC's rate a device gets
    group_per_node: np.ndarray  # g: ranks of one all-reduce group in one node
    group_nodes: np.ndarray  # nodes one all-reduce group spans
    intra_bytes_per_s: float  # the intra-node link per device and direction (inf without nodes)
    intra_latency_s: float


def fabric(cluster: Cluster, k: Knobs) -> Fabric:
    node = cluster.node
    if node is None:
        one = np.ones(np.shape(k.r))
        return Fabric(in_node=np.zeros(np.shape(k.w), dtype=bool), nic_share=one, group_per_node=one,
                      group_nodes=np.asarray(k.r, dtype=float), intra_bytes_per_s=np.inf, intra_latency_s=0.0)
    g_dev = float(node.devices)
    used = np.minimum(g_dev, k.w * k.r)
    share = np.minimum(float(node.nics), used) / used
    in_node = k.w <= g_dev
    g = np.where(in_node, np.minimum(k.r, np.maximum(1.0, np.floor(g_dev / k.w))), 1.0)
    return Fabric(in_node=np.asarray(in_node), nic_share=np.asarray(share), group_per_node=np.asarray(g),
                  group_nodes=np.asarray(np.ceil(k.r / g)), intra_bytes_per_s=float(node.link.bytes_per_s),
                  intra_latency_s=float(node.link.latency_s))
