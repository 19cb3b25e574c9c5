"""The network panel loads whole networks: ONNX files (path or upload), PyTorch ``package.module:factory``
with an input shape, spec uploads; failures show next to their field and keep the last valid network."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from dnnbench.widgets.network_sources import kind_of, parse_shape
from onnx_export import export
from torch_nets import build

import dnnbench
from dnnbench import presets
from dnnbench.importers.torch_import import load_module
from dnnbench.model import predict


@pytest.fixture(scope="module")
def lenet_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    module, shape = build("lenet5", device="cpu")  # export needs real weights: a small network
    return export(module, shape, tmp_path_factory.mktemp("onnx") / "lenet-export.onnx")


def _current_matches_the_model(wb: Any) -> None:
    s = wb.state
    expected = predict(s.network, s.cluster, s.dataset, s.configuration).item()
    data = wb.views.speedup.sources["speedup_current"].data
    assert data["epoch_time_s"][0] == pytest.approx(expected["epoch_time_s"], rel=1e-12)


def _upload(name: str, content: bytes) -> tuple[dict[str, Any], ...]:
    """The FileUpload value a browser upload gives (ipywidgets 8)."""
    return ({"name": name, "type": "", "size": len(content), "content": memoryview(content),
             "last_modified": datetime.now(UTC)},)


def test_source_kinds_and_shapes() -> None:
    assert kind_of("nets/a.ONNX") == "onnx"
    assert kind_of("lenet5") == kind_of("a.yaml") == kind_of("b.json") == "spec"
    assert kind_of("torch_nets:LeNet5") == "torch"
    assert parse_shape("3,224,224") == parse_shape("3x224x224") == parse_shape("3 224 224") == (3, 224, 224)
    assert parse_shape("784") == (784,)
    assert parse_shape(" ") is None
    for bad in ("3,x", "0,2", "-1", "2.5", "true", "3,8; ", "1,32,32;;1,32,32"):
        with pytest.raises(dnnbench.SpecError, match="input shape"):
            parse_shape(bad)
    assert parse_shape("1,32,32; 1x32x32") == [(1, 32, 32), (1, 32, 32)]  # one shape per input
    assert parse_shape("100; ()") == [(100,), ()]  # an input of one number per sample


def test_a_pytorch_module_of_two_inputs(workbench: Any, lenet_onnx: Path) -> None:
    """One shape per input, separated by ';'; too few shapes name the next input; an ONNX file of one
    input given two shapes says how many it has."""
    panel = workbench.network_panel
    assert not panel.load_source("torch_nets:DigitPair", "1,32,32")
    assert "takes another input &#x27;right&#x27;" in panel.source_error.value + panel.shape_field.error.value
    assert panel.load_source("torch_nets:DigitPair", "1,32,32; 1,32,32")
    net = workbench.state.network
    assert net.input_layers == (0, 1) and net.shapes[-1] == (2,)
    assert net == dnnbench.from_torch(load_module("torch_nets:DigitPair"), [(1, 32, 32), (1, 32, 32)])
    _current_matches_the_model(workbench)
    assert not panel.load_source(str(lenet_onnx), "1,32,32; 1,32,32")
    assert "gives 2 input(s); lenet-export.onnx has 1" in panel.source_error.value + panel.shape_field.error.value
    assert workbench.state.network is net


def test_onnx_file_by_path(workbench: Any, lenet_onnx: Path, sent: list[Any]) -> None:
    panel = workbench.network_panel
    panel.path.value = str(lenet_onnx)
    panel.load_button.click()
    net = workbench.state.network
    assert net == dnnbench.from_onnx(lenet_onnx)
    assert net.name == "lenet-export"
    assert net.layer_counts == presets.network("lenet5").layer_counts
    assert len(panel.rows) == len(net.layers)
    assert panel.preset.value == "(edited)"
    assert panel.source_error.value == ""
    _current_matches_the_model(workbench)
    assert workbench.views.widget.patch_messages_sent == 1  # one update for the whole new network


def test_onnx_input_shape_override_and_its_errors(workbench: Any, lenet_onnx: Path) -> None:
    panel = workbench.network_panel
    assert panel.load_source(str(lenet_onnx), "1,32,32")
    good = workbench.state.network
    assert good.layers[0].shape == (1, 32, 32)
    assert not panel.load_source(str(lenet_onnx), "1,8,8")  # too small for two 5x5 convolutions
    assert "fails ONNX shape inference" in panel.source_error.value
    assert "last valid network" in panel.source_error.value
    assert workbench.state.network is good
    assert not panel.load_source(str(lenet_onnx), "1,x")
    assert "input shape" in panel.shape_field.error.value
    assert panel.source_error.value == ""
    assert workbench.state.network is good
    assert not panel.load_source(str(lenet_onnx.with_name("missing.onnx")), "")
    assert "does not exist" in panel.source_error.value
    assert workbench.state.network is good


def test_onnx_upload(workbench: Any, lenet_onnx: Path) -> None:
    panel = workbench.network_panel
    panel.upload.value = _upload("uploaded-lenet.onnx", lenet_onnx.read_bytes())
    net = workbench.state.network
    assert net.name == "uploaded-lenet"
    assert net.layer_counts == presets.network("lenet5").layer_counts
    assert panel.upload.value == ()  # cleared: the same file can be uploaded again
    _current_matches_the_model(workbench)
    # A broken file: its own name in the message, never the temporary copy's path; the network stays.
    panel.upload.value = _upload("broken.onnx", b"not a protobuf at all")
    assert "broken.onnx" in panel.source_error.value
    assert "not a valid ONNX model" in panel.source_error.value
    assert "dnnbench-upload-" not in panel.source_error.value
    assert workbench.state.network is net


def test_spec_upload_and_unknown_upload(workbench: Any, tmp_path: Path) -> None:
    panel = workbench.network_panel
    doc = presets.network("mnist-adam").evolve(name="uploaded-spec").model_dump_json().encode()
    panel.upload.value = _upload("net.json", doc)
    assert workbench.state.network.name == "uploaded-spec"
    panel.upload.value = _upload("net.txt", b"{}")
    assert "net.txt" in panel.source_error.value and "neither a spec file" in panel.source_error.value
    assert workbench.state.network.name == "uploaded-spec"


def test_pytorch_factory_with_input_shape(workbench: Any) -> None:
    panel = workbench.network_panel
    before = workbench.state.network
    assert not panel.load_source("torch_nets:LeNet5", "")
    assert "is required for a PyTorch module" in panel.shape_field.error.value
    assert workbench.state.network is before
    assert panel.load_source("torch_nets:LeNet5", "1,32,32")
    net = workbench.state.network
    assert net == dnnbench.from_torch(load_module("torch_nets:LeNet5"), (1, 32, 32))
    assert net.layer_counts == presets.network("lenet5").layer_counts
    assert panel.shape_field.error.value == ""
    _current_matches_the_model(workbench)
    assert not panel.load_source("torch_nets:NoSuchNet", "1,32,32")
    assert "has no attribute &#x27;NoSuchNet&#x27;" in panel.source_error.value  # HTML-escaped
    assert not panel.load_source("no_such_package.models:net", "1,32,32")
    assert "cannot be imported" in panel.source_error.value
    assert workbench.state.network is net
    # The Load button reads the fields.
    panel.path.value = "mnist-adam"
    panel.load_button.click()
    assert workbench.state.network == presets.network("mnist-adam")
    assert panel.source_error.value == ""


def test_pytorch_training_code_with_its_labels(workbench: Any) -> None:
    """A forward that takes the labels (nanoGPT's targets): the labels field names the parameter, so the
    training branch and its loss are loaded; a wrong name shows under the field and keeps the network."""
    panel = workbench.network_panel
    assert panel.load_source("transformer_nets:TrainingGPT", "64", "")
    inference = workbench.state.network
    assert inference.layers[-1].kind == "fc" and inference.shapes[-1] == (1, 100)  # the last token alone
    assert panel.load_source("transformer_nets:TrainingGPT", "64", "targets")
    training = workbench.state.network
    assert training.layers[-1].kind == "softmax" and training.shapes[-1] == (64, 100)
    _current_matches_the_model(workbench)
    assert not panel.load_source("transformer_nets:TrainingGPT", "64", "labels")
    assert "is not a parameter of TrainingGPT.forward" in panel.labels_field.error.value
    assert panel.source_error.value == "" and workbench.state.network is training
    assert not panel.load_source("mnist-adam", None, "targets")
    assert "is for a PyTorch module" in panel.labels_field.error.value
    assert workbench.state.network is training
    assert panel.load_source("mnist-adam", None, "")
    assert panel.labels_field.error.value == ""


def test_pytorch_forward_that_takes_sequences_first(workbench: Any) -> None:
    """A forward of (S, N) token ids (PyTorch's word language model): the batch-axis field set to 1 loads
    it as its batch-first twin imports; at 0 the import's one-line error shows under the source and the
    network stays; a batch axis for a preset shows under its own field."""
    panel = workbench.network_panel
    assert panel.load_source("importers.seq_first_nets:WordLanguageModel", "7", "", 1)
    loaded = workbench.state.network
    twin = dnnbench.from_torch(load_module("importers.seq_first_nets:WordLanguageModel"), (7,), batch_axis=1)
    assert loaded.layers == twin.layers and panel.batch_axis.value == 1
    _current_matches_the_model(workbench)
    assert not panel.load_source("importers.seq_first_nets:WordLanguageModel", "7", "", 0)
    assert "has batch_first=False, so it takes the batch on axis 1" in panel.source_error.value
    assert workbench.state.network is loaded
    assert not panel.load_source("mnist-adam", None, "", 1)
    assert "is for a PyTorch module whose forward takes sequences first" in panel.batch_axis_field.error.value
    assert workbench.state.network is loaded
    assert panel.load_source("mnist-adam", None, "", 0)
    assert panel.batch_axis_field.error.value == ""
