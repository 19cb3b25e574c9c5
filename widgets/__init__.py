"""The dnnbench workbench for JupyterLab and Voila (installed as ``dnnbench.widgets``).

    from dnnbench.widgets import Workbench
    Workbench(network="imagenet22k-adam", cluster="adam-2014")

Names load on first use. The arithmetic behind the views lives in the core
(:mod:`dnnbench.landscape`, :mod:`dnnbench.plots`); the panels only observe.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "Workbench": ("dnnbench.widgets.workbench", "Workbench"),
    "NetworkPanel": ("dnnbench.widgets.network_panel", "NetworkPanel"),
    "ClusterPanel": ("dnnbench.widgets.cluster_panel", "ClusterPanel"),
    "ConfigPanel": ("dnnbench.widgets.config_panel", "ConfigPanel"),
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'dnnbench.widgets' has no attribute {name!r}") from None
    value = getattr(import_module(module), attr)
    globals()[name] = value
    return value
