"""Run one study: check parameters, execute the notebook with papermill, keep its results and report.

Output files in ``out_dir`` (``STEM`` defaults to the study name):

- ``STEM.ipynb``: the executed notebook (with outputs, for reading in JupyterLab);
- ``STEM.json``: the results the notebook wrote to its ``results_path`` parameter, plus a ``run``
  section (study, parameters, elapsed seconds);
- ``STEM.html``: the self-contained report (``report.export_html``), opening offline.

Parameters are checked before any kernel starts (``params.check``): a wrong name or type is a
one-line :class:`SpecError`. A failing cell is a :class:`StudyError` naming the cell and the error.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SpecError
from . import params as _params
from .registry import find

KERNEL = "python3"


class StudyError(RuntimeError):
    """A study notebook failed while running; ``str(err)`` is one line naming the cell and the error."""


@dataclass(frozen=True)
class StudyRun:
    name: str
    parameters: dict[str, Any]
    notebook_path: Path
    results_path: Path
    html_path: Path | None
    elapsed_s: float
    results: dict[str, Any] = field(repr=False, default_factory=dict)


def _ipc_kernel_manager(socket_dir: str) -> type:
    """A kernel manager class whose kernels listen on IPC sockets in ``socket_dir``.

    The kernel is then reachable only through this machine's file system (ipykernel warns about
    unencrypted TCP on every start otherwise). nbclient creates, owns and shuts down the manager.
    """
    from jupyter_client.manager import AsyncKernelManager

    class IpcKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: Any) -> None:
            kwargs.setdefault("transport", "ipc")
            kwargs.setdefault("ip", os.path.join(socket_dir, "kernel"))
            super().__init__(**kwargs)

    return IpcKernelManager


def prepare(name: str | os.PathLike[str], parameters: dict[str, Any] | None = None,
            base_dir: str | os.PathLike[str] | None = None) -> tuple[str, Path, dict[str, Any]]:
    """(study name, notebook, checked parameters): every check that needs no kernel."""
    study, notebook = find(name)
    declared = _params.declared(notebook)
    values = _params.check(study, declared, dict(parameters or {}))
    values = _params.check_specs(values, base_dir)
    if _params.RESULTS_PARAMETER not in declared:
        raise SpecError("study", study, f"has no '{_params.RESULTS_PARAMETER}' parameter in its parameters cell "
                                        "(the runner needs it to collect results)")
    return study, notebook, values


def run(name: str | os.PathLike[str], parameters: dict[str, Any] | None = None,
        out_dir: str | os.PathLike[str] = ".", *, stem: str | None = None, progress: bool = False,
        report: bool = True, timeout_s: float | None = 600.0, kernel_name: str = KERNEL) -> StudyRun:
    """Execute study ``name`` with ``parameters`` into ``out_dir``; see the module docstring."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    from ..fileio import check_output_folder

    study, notebook, values = prepare(name, parameters)
    out = check_output_folder(out_dir, "--out").resolve()
    stem = stem or study
    executed = out / f"{stem}.ipynb"
    results_path = out / f"{stem}.json"
    results_path.unlink(missing_ok=True)  # never report a previous run's results
    sockets = tempfile.TemporaryDirectory(prefix="dnnbench-kernel-")
    t0 = time.perf_counter()
    try:
        pm.execute_notebook(
            str(notebook), str(executed), parameters={**values, _params.RESULTS_PARAMETER: str(results_path)},
            kernel_name=kernel_name, progress_bar=progress, log_output=False, cwd=str(out),
            execution_timeout=timeout_s, report_mode=False,
            kernel_manager_class=_ipc_kernel_manager(sockets.name),
        )
    except PapermillExecutionError as exc:
        last = (exc.evalue or "").strip().splitlines()
        detail = last[-1] if last else ""
        raise StudyError(f"study {study} failed in cell {exc.exec_count}: {exc.ename}: {detail} "
                         f"(executed notebook: {executed})") from None
    finally:
        sockets.cleanup()
    elapsed = time.perf_counter() - t0
    if not results_path.is_file():
        raise StudyError(f"study {study} ran but wrote no results to {results_path} "
                         f"(the notebook must write its '{_params.RESULTS_PARAMETER}')")
    results = json.loads(results_path.read_text(encoding="utf-8"))
    results["run"] = {"study": study, "notebook": notebook.name, "parameters": values,
                      "elapsed_s": elapsed, "executed_notebook": executed.name}
    html_path = None
    if report:
        from .report import export_html

        html_path = export_html(executed, out / f"{stem}.html")
        results["run"]["report"] = html_path.name
    from ..specs.io import write_json_atomic

    write_json_atomic(results_path, results)
    os.chmod(results_path, 0o644)  # like the notebook next to it (the atomic write creates 0600)
    return StudyRun(name=study, parameters=values, notebook_path=executed, results_path=results_path,
                    html_path=html_path, elapsed_s=elapsed, results=results)
