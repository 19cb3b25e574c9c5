"""``dnnbench lab`` lands on the running workbench: its JupyterLab runs the notebook once when the page
opens (dnnbench.face.launch.lab_environment, the extension's ``startup`` endpoint), as the launcher tile does."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import servers

sys.path.insert(0, str(Path(__file__).parent))

import workbench_page as wp  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_notebook_runs_without_run_all(tmp_path: Path, page: Any) -> None:
    with servers.jupyterlab(tmp_path, as_dnnbench_lab=True) as server:
        page.goto(server.url + "lab/tree/workbench.ipynb", timeout=180_000)
        wp.wait_for_plots(page, 180_000)  # nobody pressed "Run All Cells"
        # No "Would you like to get notified about official Jupyter news?" over the workbench.
        page.wait_for_timeout(3000)
        assert page.get_by_text("Jupyter news").count() == 0
        assert page.locator(".jp-toast-message, .Toastify__toast").count() == 0
        # Once per server start: a reload shows the notebook without running it behind the user's back.
        with urllib.request.urlopen(server.url + "dnnbench/startup", timeout=30) as resp:
            assert json.loads(resp.read()) == {"run": None}


def test_without_dnnbench_lab_nothing_runs(lab_server: servers.Server) -> None:
    with urllib.request.urlopen(lab_server.url + "dnnbench/startup", timeout=30) as resp:
        assert json.loads(resp.read()) == {"run": None}
