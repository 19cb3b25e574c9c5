"""Packaging: the editable install and a built wheel both provide dnnbench.widgets; import stays light."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"dnnbench." + ".".join(p.parent.relative_to(ROOT / "dnnbench").parts)
             for p in (ROOT / "dnnbench").rglob("__init__.py")}
    found = {f.rstrip(".") for f in found} | {"dnnbench.widgets", "dnnbench.notebooks"}
    assert found <= listed, f"not listed in pyproject.toml: {sorted(found - listed)}"


def test_editable_install_imports_widgets() -> None:
    out = subprocess.run([sys.executable, "-c", "import dnnbench.widgets as w; print(w.__file__)"],
                         capture_output=True, text=True, check=True, cwd="/").stdout
    assert Path(out.strip()).resolve().parent == (ROOT / "widgets").resolve()


def test_wheel_contains_and_imports_widgets(tmp_path: Path) -> None:
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v", "-w",
                            str(tmp_path), str(ROOT)], check=True, capture_output=True, text=True)
    # Every folder that ships files is listed as a package (setuptools warns of one that is not).
    assert "is absent from the `packages` configuration" not in built.stdout + built.stderr
    wheel = next(tmp_path.glob("dnnbench-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "dnnbench/widgets/__init__.py" in names
    assert "dnnbench/presets/networks/imagenet22k-adam.json" in names
    assert "dnnbench/presets/devices/h100-sxm.json" in names  # a cluster names its devices
    assert "dnnbench/presets/datasets/mnist.json" in names
    assert "dnnbench/widgets/jupyter_data/lab_config/labconfig/default_setting_overrides.json" in names
    assert any(n.startswith("dnnbench/widgets/jupyter_data/voila/templates/dnnbench/") for n in names)
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import dnnbench.widgets, dnnbench.presets as p; "
            "assert dnnbench.widgets.__file__.startswith(sys.argv[1]), dnnbench.widgets.__file__; "
            "print(p.network('imagenet22k-adam').name); assert p.cluster('dgx-h100').worker.accelerator")
    out = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True, check=True,
                         cwd=str(tmp_path)).stdout
    assert out.strip() == "imagenet22k-adam"


def test_import_dnnbench_stays_light() -> None:
    code = ("import sys, dnnbench; from dnnbench import presets, model, optimizer, counts, cli; cli.build_parser(); "
            "heavy = [m for m in ('bokeh', 'ipywidgets', 'torch', 'dask', 'distributed', 'onnx', 'papermill') "
            "if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""
