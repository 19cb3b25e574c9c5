"""Checks shared by the tests of every shipped notebook."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import nbformat


def stripped_typed_parameters(path: Path) -> set[str]:
    """Assert ``path`` is committed without outputs and has one typed, commented ``parameters`` cell;
    return the parameter names."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), f"{path.name} has outputs"
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, f"{path.name} needs exactly one cell tagged 'parameters'"
    lines = [ln for ln in params[0].source.splitlines() if ln and not ln.startswith("#")]
    assert all(": " in ln.split("=")[0] and "  # " in ln for ln in lines), "parameters must be typed and commented"
    return {ln.split(":")[0] for ln in lines}


def execute_with_results(notebook: Path, out: Path, parameters: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """Run ``notebook`` with papermill in ``out`` (the repository importable by its kernel); return its
    results JSON (``results_path`` is set to ``r.json``) and the executed notebook."""
    import papermill
    import pytest

    repo = Path(__file__).resolve().parents[1]
    mp = pytest.MonkeyPatch()
    mp.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH", "")) if p))
    try:
        papermill.execute_notebook(str(notebook), str(out / "out.ipynb"),
                                   parameters={**parameters, "results_path": "r.json"},
                                   kernel_name="python3", cwd=str(out), progress_bar=False)
    finally:
        mp.undo()
    return json.loads((out / "r.json").read_text()), nbformat.read(out / "out.ipynb", 4)
