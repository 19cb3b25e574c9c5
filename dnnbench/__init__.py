"""dnnbench: predict how fast a deep neural network trains on a cluster, and pick the fastest setup.

The core is pure and light: ``import dnnbench`` loads neither bokeh, ipywidgets, torch nor dask.
Names below are loaded on first use.
"""

from __future__ import annotations

from dnnbench._lazy import lazy_exports

__version__ = "0.1.0"

_LAZY = {
    "SpecError": ("dnnbench.errors", "SpecError"),
    "Network": ("dnnbench.specs", "Network"),
    "Cluster": ("dnnbench.specs", "Cluster"),
    "Dataset": ("dnnbench.specs", "Dataset"),
    "Configuration": ("dnnbench.specs", "Configuration"),
    "Compression": ("dnnbench.specs", "Compression"),
    "load_network": ("dnnbench.presets", "network"),
    "load_cluster": ("dnnbench.presets", "cluster"),
    "load_dataset": ("dnnbench.presets", "dataset"),
    "totals": ("dnnbench.counts", "totals"),
    "describe": ("dnnbench.counts", "describe"),
    "predict": ("dnnbench.model", "predict"),
    "evaluate": ("dnnbench.model", "evaluate"),
    "optimize": ("dnnbench.optimizer", "optimize"),
    "from_torch": ("dnnbench.importers.torch_import", "from_torch"),
    "from_onnx": ("dnnbench.importers.onnx_import", "from_onnx"),
}

__all__ = ["__version__", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
