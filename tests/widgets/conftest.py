"""Headless workbench fixtures: widgets outside a kernel use a dummy comm, observers fire synchronously."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


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
