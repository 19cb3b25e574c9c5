"""Checks shared by the tests of every shipped notebook."""

from __future__ import annotations

from pathlib import Path

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
