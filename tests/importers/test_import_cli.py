"""``dnnbench import`` (issue 10): ONNX files and torch module paths to spec files; one-line errors, exit 2."""

from __future__ import annotations

import json

import pytest
from onnx_export import export
from torch_nets import build

from dnnbench import presets
from dnnbench.cli import main
from dnnbench.specs import Network
from dnnbench.specs.io import load


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err


def test_import_torch_module_path(tmp_path, capsys) -> None:
    out = tmp_path / "net.dnn.json"
    assert main(["import", "torch_nets:ImageNet22kAdam", "-o", str(out), "--input-shape", "3", "224", "224"]) == 0
    assert "wrote" in capsys.readouterr().out
    net = load(Network, out)
    assert net.name == "imagenet22kadam"
    assert net.layer_counts == presets.network("imagenet22k-adam").layer_counts  # built on meta: no 8 GB
    assert main(["describe", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["weights"] == 2_114_983_553  # the preset's 2.1 B


def test_import_onnx_file_with_name(tmp_path, capsys) -> None:
    module, shape = build("lenet5", device="cpu")
    path = export(module, shape, tmp_path / "lenet.onnx")
    out = tmp_path / "sub" / "lenet.dnn.json"
    assert main(["import", str(path), "-o", str(out), "--name", "my-lenet"]) == 0
    net = load(Network, out)
    assert net.name == "my-lenet" and net.layer_counts == presets.network("lenet5").layer_counts
    capsys.readouterr()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["import", "no_such_package.models:Net", "--input-shape", "3", "8", "8"], "cannot be imported"),
        (["import", "torch_nets:NoSuchNet", "--input-shape", "3", "8", "8"], "has no attribute 'NoSuchNet'"),
        (["import", "torch_nets:PRESET_MODULES", "--input-shape", "3", "8", "8"], "neither a torch.nn.Module"),
        (["import", "torch_nets:build", "--input-shape", "3", "8", "8"], "fails when called: TypeError"),
        (["import", "torch_nets", "--input-shape", "3", "8", "8"], "neither an .onnx file"),
        (["import", "torch_nets:LeNet5"], "--input-shape: is required"),
        (["import", "torch_nets:LeNet5", "--input-shape", "3", "32", "32"], "does not fit the module"),
        (["import", "lenet5"], "neither an .onnx file nor a PyTorch module path"),
        (["import", "missing.onnx"], "does not exist"),
    ],
)
def test_bad_sources_are_one_line_errors(argv: list[str], message: str, tmp_path, capsys) -> None:
    _one_line_error(capsys, [*argv, "-o", str(tmp_path / "x.json")], message)
    assert not (tmp_path / "x.json").exists()


def test_corrupt_onnx_file_is_one_line_error(tmp_path, capsys) -> None:
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"PK\x03\x04 this is a zip header, not an ONNX protobuf" * 3)
    _one_line_error(capsys, ["import", str(bad), "-o", str(tmp_path / "x.json")], "not a valid ONNX model")


@pytest.mark.parametrize(("shape", "message"), [(["1", "zero", "3"], "'zero' is not a whole number"),
                                              (["3,,32"], "'3,,32' is not a shape"), (["3x0x32"], "0 must be >= 1")])
def test_bad_input_shape_argument_exits_2(tmp_path, capsys, shape, message) -> None:
    with pytest.raises(SystemExit) as info:
        main(["import", "torch_nets:LeNet5", "-o", str(tmp_path / "x.json"), "--input-shape", *shape])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("shape", [["1,32,32"], ["1x32x32"], ["1", "32,32"], ["(1,32,32)"]])
def test_input_shape_as_the_workbench_takes_it(tmp_path, capsys, shape) -> None:
    out, spaced = tmp_path / "x.json", tmp_path / "y.json"
    assert main(["import", "torch_nets:LeNet5", "-o", str(out), "--input-shape", *shape]) == 0
    assert main(["import", "torch_nets:LeNet5", "-o", str(spaced), "--input-shape", "1", "32", "32"]) == 0
    assert load(Network, out) == load(Network, spaced)


def test_an_input_of_one_number_per_sample_is_given_as_empty_parentheses(tmp_path, capsys) -> None:
    """``--input-shape ()``: a conditional generator's class id, one per sample."""
    out = tmp_path / "cgan.dnn.json"
    argv = ["import", "user_nets:ConditionalGenerator", "-o", str(out), "--input-shape", "100", "--input-shape", "()"]
    assert main(argv) == 0
    net = load(Network, out)
    assert [layer.shape for layer in net.layers if layer.kind == "input"] == [(100,), (1,)]
    capsys.readouterr()
