"""Frozen, validated specs: networks, clusters, data sets and configurations."""

from .cluster import (
                      PRECISIONS,
                      Accelerator,
                      Cluster,
                      Dataset,
                      DeviceEfficiency,
                      IntraLink,
                      Machine,
                      MachineClass,
                      MacTimes,
                      Nic,
                      Node,
                      PeakFlops,
                      PeakRate,
                      PrecisionEfficiencies,
                      SharedHost,
)
from .config import AllReduce, Compression, Configuration
from .layers import LAYER_TYPES, LayerCounts
from .network import Network
from .shape import (
    ElemCost,
    ErrorBand,
    FunctionCost,
    FunctionCosts,
    GemmCost,
    ProfiledLayer,
    ProfiledStep,
    RecurrentStepTimes,
    ShapeRate,
)

__all__ = [
    "LAYER_TYPES", "PRECISIONS", "Accelerator", "AllReduce", "Cluster", "Compression", "Configuration", "Dataset",
    "DeviceEfficiency", "ElemCost", "ErrorBand", "FunctionCost", "FunctionCosts", "GemmCost", "IntraLink",
    "LayerCounts", "MacTimes", "Machine", "MachineClass", "Network", "Nic", "Node", "PeakFlops", "PeakRate",
    "PrecisionEfficiencies", "ProfiledLayer", "ProfiledStep", "RecurrentStepTimes", "ShapeRate", "SharedHost",
]
