"""Studies: parameterised notebooks run with papermill into a notebook, a results JSON and an HTML report.

Every ``notebooks/*_study.ipynb`` is a study named by its prefix (``mnist``, ``imagenet22k``, ``esgd``)::

    from dnnbench import studies
    res = studies.run("mnist", {"budgets": [8, 16]}, "out")      # out/mnist.{ipynb,json,html}
    studies.batch("mnist", {"cluster": ["adam-2014", "modern-2025"]}, "reports")  # + index.html

See docs/studies.md. Names below load on first use (papermill, bokeh and dask stay unloaded).
"""

from __future__ import annotations

from dnnbench._lazy import lazy_exports

_LAZY = {
    "available": ("dnnbench.studies.registry", "available"),
    "find": ("dnnbench.studies.registry", "find"),
    "run": ("dnnbench.studies.runner", "run"),
    "prepare": ("dnnbench.studies.runner", "prepare"),
    "StudyRun": ("dnnbench.studies.runner", "StudyRun"),
    "StudyError": ("dnnbench.studies.runner", "StudyError"),
    "batch": ("dnnbench.studies.batch", "batch"),
    "BatchResult": ("dnnbench.studies.batch", "BatchResult"),
    "export_html": ("dnnbench.studies.report", "export_html"),
    "declared_parameters": ("dnnbench.studies.params", "declared"),
    "show": ("dnnbench.studies.display", "show"),
    "markdown": ("dnnbench.studies.display", "markdown"),
    "table": ("dnnbench.studies.display", "table"),
    "write_results": ("dnnbench.studies.display", "write_results"),
}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
