"""dnnbench's face: what people see and start, over the core's specs, model and optimizer.

Plot builders shared by the workbench, the notebooks and the reports (:mod:`.plots`), the
workbench's landscape of configurations (:mod:`.landscape`) and saved state (:mod:`.state`), the
launchers of ``dnnbench lab`` and ``dnnbench app`` (:mod:`.launch`, :mod:`.appserver`) and the
JupyterLab server extension (:mod:`.labext`, pure; :mod:`.labext_server`, its HTTP handlers). The
widgets themselves are :mod:`dnnbench.widgets`. The core never imports this package.
"""
