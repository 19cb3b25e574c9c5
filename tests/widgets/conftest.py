"""Headless workbench fixtures: widgets outside a kernel use a dummy comm, observers fire synchronously.

tests/ and tests/importers/ go on sys.path: the ONNX tests export with tests/importers/onnx_export.py and
load PyTorch modules from tests/torch_nets.py (``torch_nets:LeNet5``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

for _folder in (Path(__file__).resolve().parents[1], Path(__file__).resolve().parents[1] / "importers"):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))


@pytest.fixture
def workbench() -> Iterator[Any]:
    from dnnbench.widgets import Workbench

    wb = Workbench(network="imagenet22k-adam", cluster="adam-2014")
    yield wb
    wb.close()


@pytest.fixture
def sent(workbench: Any, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Messages the plots widget sends to the browser (PATCH-DOC parts), recorded instead of sent."""
    out: list[dict[str, Any]] = []
    monkeypatch.setattr(workbench.views.widget, "send",
                        lambda content, buffers=None: out.append({"content": content, "buffers": buffers}))
    return out
