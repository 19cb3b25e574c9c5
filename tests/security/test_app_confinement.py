"""Under ``dnnbench app`` the workbench's file fields reach only the app's folder and PyTorch factories
(which import code) are off unless the app was started with ``--allow-torch-factories``
(docs/security.md, "The app"). Headless: the kernel's environment is set as dnnbench.face.launch sets it."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dnnbench.widgets.confine import confine

from dnnbench import presets
from dnnbench.errors import SpecError
from dnnbench.face import launch


@pytest.fixture
def app_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "app"
    root.mkdir()
    env = launch.app_environment({}, token="t", root=root)
    for key in (launch.APP_ROOT_ENV, launch.APP_TORCH_ENV):
        monkeypatch.setenv(key, env[key])
    monkeypatch.chdir(root)
    yield root


@pytest.fixture
def wb(app_root: Path) -> Iterator[Any]:
    from dnnbench.widgets import Workbench

    bench = Workbench(network="lenet5", cluster="edge-wifi")
    yield bench
    bench.close()


def test_outside_the_app_paths_are_the_users(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(launch.APP_ROOT_ENV, raising=False)
    assert confine("/anywhere/x.json", "f") == "/anywhere/x.json"


@pytest.mark.parametrize("text, why", [("/etc/passwd", "relative"), ("~/x.json", "relative"),
                                       ("../x.json", "'..'"), ("a/../../x.json", "'..'"), ("", "relative")])
def test_paths_out_of_the_folder_are_refused(app_root: Path, text: str, why: str) -> None:
    with pytest.raises(SpecError, match=why) as err:
        confine(text, "state file")
    assert str(err.value).startswith("state file:") and "\n" not in str(err.value)


def test_a_symlink_out_of_the_folder_is_refused(app_root: Path, tmp_path: Path) -> None:
    (app_root / "out").symlink_to(tmp_path)
    (app_root / "in").symlink_to(app_root)
    with pytest.raises(SpecError, match="symlink"):
        confine("out/x.json", "state file")
    assert confine("in/x.json", "state file") == str(app_root / "x.json")
    assert confine("sub/x.json", "state file") == str(app_root / "sub" / "x.json")


def test_save_load_and_export_stay_in_the_folder(wb: Any, app_root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    for field, button in ((wb.state_path, wb.save_button), (wb.html_path, wb.export_button)):
        field.value = str(outside)
        button.click()
        assert "inside the app&#x27;s folder" in wb.error.value and not outside.exists()
    wb.state_path.value = "saved.dnn.json"
    wb.save_button.click()
    assert json.loads((app_root / "saved.dnn.json").read_text())["network"]["name"] == "lenet5"
    outside.write_text((app_root / "saved.dnn.json").read_text())
    wb.state_path.value = str(outside)
    wb.load_button.click()
    assert "inside the app&#x27;s folder" in wb.error.value
    wb.html_path.value = "plots.html"
    wb.export_button.click()
    assert (app_root / "plots.html").stat().st_size > 0


def test_network_and_cluster_files_stay_in_the_folder(wb: Any, app_root: Path, tmp_path: Path) -> None:
    spec = tmp_path / "net.json"
    spec.write_text(json.dumps(presets.network("lenet5").to_dict()))
    assert not wb.network_panel.load_source(str(spec))
    assert "inside the app&#x27;s folder" in wb.network_panel.source_error.value
    (app_root / "net.json").write_text(spec.read_text())
    assert wb.network_panel.load_source("net.json")
    assert wb.network_panel.load_source("alexnet")  # presets are not files
    wb.cluster_panel.path.value = "/etc/hostname"
    wb.cluster_panel.load_button.click()
    assert "inside the app&#x27;s folder" in wb.cluster_panel.error.value


def test_pytorch_factories_are_off_unless_the_app_allows_them(wb: Any, app_root: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    marker = app_root / "imported.txt"
    (app_root / "evil_factory.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n")
    monkeypatch.syspath_prepend(str(app_root))
    assert not wb.network_panel.load_source("evil_factory:make", input_shape="1,28,28")
    assert "--allow-torch-factories" in wb.network_panel.source_error.value
    assert not marker.exists() and "evil_factory" not in sys.modules
    monkeypatch.setenv(launch.APP_TORCH_ENV, "1")
    assert not wb.network_panel.load_source("evil_factory:make", input_shape="1,28,28")  # allowed: it imports
    assert marker.exists()
    sys.modules.pop("evil_factory", None)
