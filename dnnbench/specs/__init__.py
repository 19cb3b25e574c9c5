"""Frozen, validated specs: networks, clusters, data sets and configurations."""

from .cluster import Cluster, Dataset, Machine, MachineClass, MacTimes, Nic, PeakRate, SharedHost
from .config import AllReduce, Compression, Configuration
from .layers import LAYER_TYPES, LayerCounts
from .network import Network

__all__ = [
    "LAYER_TYPES", "AllReduce", "Cluster", "Compression", "Configuration", "Dataset", "LayerCounts", "MacTimes",
    "Machine", "MachineClass", "Network", "SharedHost", "Nic", "PeakRate",
]
