"""The JupyterLab extension in a real JupyterLab (GitHub issue 9, docs/jupyterlab.md).

Uses the session JupyterLab and chromium fixtures of tests/browser/conftest.py; each test opens its
own fresh workspace so tabs restored from other tests do not interfere.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import workbench_page as wp  # noqa: E402

from dnnbench import presets  # noqa: E402
from dnnbench.specs import io  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TIMEOUT_MS = 180_000


def fresh_lab(page: Any, base_url: str) -> None:
    """JupyterLab in a new, empty workspace, once the launcher is shown."""
    page.goto(f"{base_url}lab/workspaces/labext-{uuid.uuid4().hex[:8]}?reset", timeout=TIMEOUT_MS)
    page.locator(".jp-Launcher").first.wait_for(timeout=TIMEOUT_MS)


def new_files(root: Path, pattern: str, before: set[Path], page: Any) -> list[Path]:
    for _ in range(600):
        found = sorted(set(root.glob(pattern)) - before)
        if found:
            return found
        page.wait_for_timeout(100)
    raise AssertionError(f"no new {pattern} in {root}")


def post(base_url: str, endpoint: str, body: dict[str, str]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(f"{base_url}dnnbench/{endpoint}", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def test_extension_is_served(lab_server: Any) -> None:
    with urllib.request.urlopen(lab_server.url + "lab", timeout=30) as resp:
        page = resp.read().decode()
    config = json.loads(re.search(r'id="jupyter-config-data"[^>]*>(.*?)</script>', page, re.S).group(1))
    assert "dnnbench" in [e["name"] for e in config["federated_extensions"]]
    with urllib.request.urlopen(lab_server.url + "dnnbench/notebooks", timeout=30) as resp:
        names = [nb["name"] for nb in json.loads(resp.read())["notebooks"]]
    assert "mnist_study" in names and "workbench" not in names


def test_launcher_tile_opens_a_workbench(lab_server: Any, page: Any) -> None:
    root = lab_server.root
    before = set(root.glob("workbench*.ipynb"))
    fresh_lab(page, lab_server.url)
    page.locator('.jp-LauncherCard[data-category="Notebook"]', has_text="DNN Bench").first.click()
    (made,) = new_files(root, "workbench*.ipynb", before, page)
    page.locator(".lm-TabBar-tab.jp-mod-current", has_text=made.name).first.wait_for(timeout=TIMEOUT_MS)
    wp.wait_for_plots(page, TIMEOUT_MS)  # the extension ran all cells: live widgets and Bokeh plots
    data = wp.source(page, "speedup_current")
    assert data is not None and data["epoch_time_s"][0] > 0
    assert page.locator(".dnnbench-network-name input").first.input_value() == "imagenet22k-adam"
    assert not [e for e in page.errors if "dnnbench" in e.lower()]


def test_spec_file_opens_the_workbench_on_that_network(lab_server: Any, page: Any) -> None:
    root = lab_server.root
    net = presets.network("lenet5").evolve(name="labext-tiny-net")
    io.save(net, root / "tiny.dnn.json")
    (root / "tiny.workbench.ipynb").unlink(missing_ok=True)
    fresh_lab(page, lab_server.url)
    page.locator(".jp-DirListing-item", has_text="tiny.dnn.json").first.dblclick()
    page.locator(".lm-TabBar-tab.jp-mod-current", has_text="tiny.workbench.ipynb").first.wait_for(timeout=TIMEOUT_MS)
    wp.wait_for_plots(page, TIMEOUT_MS)
    # The network panel may sit in a tab that is not shown: read the field, visible or not.
    assert page.locator(".dnnbench-network-name input").first.input_value() == "labext-tiny-net"
    nb = json.loads((root / "tiny.workbench.ipynb").read_text())
    injected = [c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert "network = 'tiny.dnn.json'" in "".join(injected[0]["source"])  # a Python literal (repr)
    # No placeholder tab left behind.
    assert page.locator(".lm-TabBar-tab", has_text="tiny.dnn.json").count() == 0


def test_palette_opens_a_study_notebook(lab_server: Any, page: Any) -> None:
    fresh_lab(page, lab_server.url)
    page.keyboard.press("Control+Shift+C")
    page.locator(".lm-CommandPalette-input").fill("Open the ESGD Study")
    page.locator(".lm-CommandPalette-item", has_text="Open the ESGD Study").first.wait_for(timeout=30_000)
    page.locator(".lm-CommandPalette-input").fill("MNIST")
    page.locator(".lm-CommandPalette-item", has_text="MNIST").first.click()
    page.locator(".lm-TabBar-tab.jp-mod-current", has_text="mnist_study.ipynb").first.wait_for(timeout=60_000)
    assert (lab_server.root / "mnist_study.ipynb").is_file()


def test_server_rejects_a_bad_spec_with_one_line(lab_server: Any) -> None:
    bad = lab_server.root / "bad.dnn.json"
    bad.write_text(json.dumps({"name": "x", "layers": [{"kind": "input", "shape": [1, 8, 8]},
                                                       {"kind": "conv2d", "out_channels": -3, "kernel": 3}]}))
    status, body = post(lab_server.url, "spec", {"path": "bad.dnn.json"})
    assert status == 400
    assert "layers[1].out_channels" in body["message"] and "\n" not in body["message"]
    assert not (lab_server.root / "bad.workbench.ipynb").exists()
    status, body = post(lab_server.url, "notebook", {"name": "../etc/passwd", "dir": ""})
    assert status == 400
