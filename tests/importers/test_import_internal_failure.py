"""A form the importer fails on inside (a defect, not the user's input) is still one line that names the
operation it was importing and the failure, never a traceback (the bad-input rule of the README)."""

from __future__ import annotations

import pytest
from torch import nn

import dnnbench
from dnnbench.cli import main
from dnnbench.errors import SpecError
from dnnbench.importers import torch_import


def _broken(b: object, op: object) -> str:
    raise KeyError("a value the handler did not expect")


def test_an_internal_failure_names_the_operation_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch_import, "_linear", _broken)
    with pytest.raises(SpecError) as err:
        dnnbench.from_torch(nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(8, 2)), (1, 4, 4))
    text = str(err.value)
    assert text.startswith("2 (torch.nn.Linear): is a form dnnbench's importer fails on (KeyError:")
    assert "\n" not in text


def test_the_cli_reports_it_with_exit_2(monkeypatch: pytest.MonkeyPatch, tmp_path, capsys) -> None:
    monkeypatch.setattr(torch_import, "_linear", _broken)
    assert main(["import", "torch_nets:LeNet5", "-o", str(tmp_path / "x.json"), "--input-shape", "1", "32", "32"]) == 2
    err = capsys.readouterr().err
    assert "importer fails on (KeyError" in err and err.count("\n") == 1 and "Traceback" not in err


def test_the_onnx_importer_too(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from onnx_export import export

    from dnnbench.importers import onnx_import

    path = export(nn.Sequential(nn.Flatten(), nn.Linear(16, 2)), (1, 4, 4), tmp_path / "m.onnx")

    def broken(shape: object) -> object:
        raise IndexError("an index the importer did not expect")

    monkeypatch.setattr(onnx_import, "input_shapes", broken)
    with pytest.raises(SpecError) as err:
        dnnbench.from_onnx(path, input_shape=(1, 4, 4))
    assert "is a graph dnnbench's ONNX importer fails on (IndexError:" in str(err.value)
    assert "\n" not in str(err.value)
