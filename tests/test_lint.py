"""Strict tooling: ruff with the rule set chosen in pyproject.toml, and mypy strict on the core."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_is_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "."],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-1000:]


def test_mypy_is_clean_on_specs_model_and_optimizer() -> None:
    """Strict typing of the core's specs, model and optimizer ([tool.mypy] in pyproject.toml)."""
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-1000:]
    assert "no issues found in" in proc.stdout and "source files" in proc.stdout
