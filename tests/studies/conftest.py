"""Shared study runs: each shipped Adam-style study is executed once per test session, small."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

#: Small parameters: budgets up to 16, short sweeps. Each run takes ~10-15 s on 2 cores.
SMALL: dict[str, Any] = {"budgets": [8, 16], "max_workers": 12, "max_replicas": 24, "ps_options": [1, 2, 4],
                         "nic_factors": [0.5, 1.0, 2.0], "mac_factors": [0.5, 1.0, 2.0],
                         "update_batches": [1, 8, 64]}


@pytest.fixture(scope="session")
def mnist_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The MNIST study run through the CLI (``dnnbench study mnist -p ...``)."""
    from dnnbench.cli import main

    out = tmp_path_factory.mktemp("mnist")
    argv = ["study", "mnist", "--out", str(out), "-q", "-p", "budgets", "8,16", "-p", "max_workers", "12",
            "-p", "max_replicas", "24", "-y", "ps_options: [1, 2, 4]\nnic_factors: [0.5, 1.0, 2.0]\n"
            "mac_factors: [0.5, 1.0, 2.0]\nupdate_batches: [1, 8, 64]"]
    assert main(argv) == 0
    return {"out": out, "results": json.loads((out / "mnist.json").read_text()), "html": out / "mnist.html",
            "notebook": out / "mnist.ipynb"}


@pytest.fixture(scope="session")
def imagenet_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The ImageNet-22K study run through the Python API (``studies.run``)."""
    from dnnbench import studies

    out = tmp_path_factory.mktemp("imagenet22k")
    res = studies.run("imagenet22k", SMALL, out)
    return {"out": out, "results": res.results, "html": res.html_path, "notebook": res.notebook_path,
            "run": res}


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
