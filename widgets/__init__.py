"""The dnnbench workbench for JupyterLab and Voila (installed as ``dnnbench.widgets``).

    from dnnbench.widgets import Workbench
    Workbench(network="imagenet22k-adam", cluster="adam-2014")

Names load on first use. The arithmetic behind the views lives in the core
(:mod:`dnnbench.face.landscape`, :mod:`dnnbench.face.plots`); the panels only observe.
"""

from __future__ import annotations

from dnnbench._lazy import lazy_exports

_LAZY = {
    "Workbench": ("dnnbench.widgets.workbench", "Workbench"),
    "NetworkPanel": ("dnnbench.widgets.network_panel", "NetworkPanel"),
    "ClusterPanel": ("dnnbench.widgets.cluster_panel", "ClusterPanel"),
    "ConfigPanel": ("dnnbench.widgets.config_panel", "ConfigPanel"),
}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
