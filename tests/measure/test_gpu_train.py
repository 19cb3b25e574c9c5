"""benchmarks/gpu_train.py's code path, run on the CPU with a tiny batch (``--cpu-smoke``): the training
loop of every network it names, the fit to the first network and the out-of-sample predictions, the JSON
it writes, and one line with exit code 2 for bad arguments. The GPU figures themselves are in
docs/validation.md; this checks only that the script that makes them works."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import benchmark_scripts
import pytest
from torchvision_models import models

import dnnbench
from dnnbench import presets
from dnnbench.model import predict
from dnnbench.specs import Configuration


def _script() -> ModuleType:
    return benchmark_scripts.load("gpu_train")


def test_the_script_trains_fits_and_predicts_out_of_sample(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    rc = _script().main(["--cpu-smoke", "--device", "h200-sxm", "--networks", "mobilenet-v2,squeezenet1_1",
                         "--precisions", "fp32", "--batch", "2", "--steps", "2", "--warmup", "0", "--json", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    rows = data["rows"]
    assert [(r["network"], r["precision"], r["steps"]) for r in rows] == [("mobilenet-v2", "fp32", 2),
                                                                        ("squeezenet1_1", "fp32", 2)]
    fit, held_out = rows
    assert fit["fitted_to_this_row"] and not held_out["fitted_to_this_row"]
    # The fitted efficiency reproduces the row it was fitted to, and only that one.
    assert fit["predicted_fitted_samples_per_s"] == pytest.approx(fit["measured_samples_per_s"], rel=1e-4)
    cfg = Configuration(precision="fp32", local_batch_samples=2, optimizer="momentum")
    cluster = presets.cluster("dgx-a100").evolve(worker=presets.device("h200-sxm"), node=None, machines=1)
    imported = dnnbench.from_torch(models().squeezenet1_1(), (3, 224, 224))  # not a preset: imported
    for row, net in zip(rows, ["mobilenet-v2", imported], strict=True):
        item = predict(net, cluster, "imagenet1k", cfg).item()
        assert row["predicted_preset_samples_per_s"] == pytest.approx(item["samples_per_s"], rel=1e-9)
        assert row["model_memory_bytes"] == pytest.approx(item["memory_bytes_per_worker"]
                                                          - item["memory_bytes_per_worker_parts"]["workspace"])
        assert row["measured_samples_per_s"] > 0 and row["peak_memory_bytes"] is None  # no device memory on a CPU


def test_a_network_the_importer_cannot_read_is_skipped_with_its_reason(capsys: pytest.CaptureFixture[str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Every torchvision classification model imports, so the importer is made to refuse this one.
    from dnnbench.errors import SpecError

    def refuse(module: object, *args: object, **kwargs: object) -> None:
        raise SpecError.plain("roll (torch.roll)", "is not supported")

    monkeypatch.setattr(dnnbench, "from_torch", refuse)
    rc = _script().main(["--cpu-smoke", "--networks", "squeezenet1_1", "--precisions", "fp32", "--batch", "1",
                         "--steps", "1", "--warmup", "0"])
    out = capsys.readouterr().out
    assert rc == 0 and "squeezenet1_1: dnnbench cannot import it (roll (torch.roll): is not supported); skipped" in out


@pytest.mark.parametrize(("args", "line"), [
    (["--networks", "bert-base"], "gpu_train: --networks: 'bert-base' is not a network this script trains"),
    (["--precisions", "fp8"], "gpu_train: --precisions: 'fp8' is not a precision"),
    (["--batch", "0"], "gpu_train: --batch: 0; expected a positive integer"),
    (["--device", "b200"], "gpu_train: --device: 'b200' is neither a preset"),
    (["--device", "epyc-9654"], "gpu_train: --device: 'epyc-9654' is a CPU machine"),
])
def test_bad_arguments_are_one_line_and_exit_code_2(args: list[str], line: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert _script().main(["--cpu-smoke", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(line) and err.count("\n") == 1


def test_without_a_gpu_it_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the script would train on it")
    assert _script().main(["--networks", "resnet50", "--steps", "1"]) == 2
    assert "no CUDA device here" in capsys.readouterr().err
