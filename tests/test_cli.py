"""The dnnbench command: JSON keys, one-line errors with exit code 2, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dnnbench.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_describe_json_reports_two_billion_weights(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "describe", "imagenet22k-adam", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["totals"]["weights"] == pytest.approx(2.1e9, rel=0.02)
    assert {"name", "kind", "output_shape", "weights", "macs_forward", "macs_backprop",
            "macs_weight_grad"} <= set(data["layers"][1])


def test_presets_and_describe_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "presets", "--json")
    assert code == 0 and "imagenet22k-adam" in json.loads(out)["networks"]
    code, out, _ = run(capsys, "describe", "lenet5")
    assert code == 0 and "61,706" in out


def test_predict_json_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "predict", "--network", "mnist-adam", "--cluster", "adam-2014",
                       "--workers-per-replica", "2", "--replicas", "4", "--ps-machines", "2", "--update-batch", "16",
                       "--json")
    data = json.loads(out)
    assert code == 0
    for key in ("epoch_time_s", "samples_per_s", "speedup", "bottleneck", "breakdown_s_per_sample",
                "memory_bytes_per_worker", "feasible"):
        assert key in data
    assert data["replicas"] == 4 and data["epoch_time_s"] > 0


def test_optimize_and_speedup_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "optimize", "--network", "imagenet22k-adam", "--cluster", "adam-2014",
                       "--machines", "64", "--top", "3", "--json")
    data = json.loads(out)
    assert code == 0 and len(data["top"]) == 3
    assert {"best", "top", "evaluated", "infeasible", "explanation"} <= set(data)
    code, out, _ = run(capsys, "speedup", "--network", "mnist-adam", "--max-machines", "8", "--csv")
    assert code == 0 and out.splitlines()[0].startswith("curve,machines,speedup")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("describe", "no-such-net"), "network: 'no-such-net' is neither a preset"),
        (("predict", "--network", "lenet5", "--replicas", "3"), "ps_machines: 0 must be >= 1"),
        (("predict", "--network", "lenet5", "--replicas", "-3"), "--replicas: -3 must be >= 1"),
        (("predict", "--network", "lenet5", "--overlap", "2"), "overlap: 2.0 is not valid"),
        (("optimize", "--network", "lenet5", "--machines", "zero"), "'zero' is not a whole number"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], args: tuple[str, ...], needle: str) -> None:
    code, _, err = run(capsys, *args)
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_check_spec(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.dnn.json"
    bad.write_text(json.dumps({"name": "x", "layers": [{"kind": "input", "shape": [1, 4, 4]},
                                                        {"kind": "conv2d", "out_channels": 2, "kernel": 5}]}))
    code, _, err = run(capsys, "check-spec", str(bad))
    assert code == 2 and "layers[1].kernel: 5 is larger than the input height 4" in err
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"name": "x", "layers": [{"kind": "input", "shape": [8]},
                                                         {"kind": "fc", "out_features": 2}]}))
    code, out, _ = run(capsys, "check-spec", str(good))
    assert code == 0 and "valid network" in out


def test_console_script_has_no_traceback(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "dnnbench.cli", "describe", str(tmp_path / "none.json")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "does not exist" in proc.stderr


def test_all_reduce_and_graph_presets_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    from dnnbench import presets
    from dnnbench.model import predict
    from dnnbench.specs import Configuration

    rc, out, _ = run(capsys, "predict", "--network", "resnet50", "--cluster", "modern-2025", "--replicas", "16",
                     "--data-parallel", "allreduce", "--allreduce", "tree", "--json")
    assert rc == 0
    item = json.loads(out)
    cfg = Configuration.build({"replicas": 16, "data_parallel": "allreduce", "allreduce": {"algorithm": "tree"}})
    expected = predict(presets.network("resnet50"), presets.cluster("modern-2025"), None, cfg).item()
    assert item["samples_per_s"] == pytest.approx(expected["samples_per_s"], rel=1e-12)
    assert item["breakdown_s_per_sample"]["allreduce"] > 0 and item["ps_machines"] == 0
    rc, out, err = run(capsys, "predict", "--network", "resnet50", "--replicas", "4", "--ps-machines", "2",
                       "--data-parallel", "allreduce")
    assert rc == 2 and "ps_machines: 2 must be 0 when data_parallel is 'allreduce'" in err and "\n" == err[-1]
    rc, out, _ = run(capsys, "optimize", "--network", "bert-base:seq_len=128", "--cluster", "modern-2025",
                     "--machines", "32", "--data-parallel", "both", "--json")
    assert rc == 0
    res = json.loads(out)
    assert res["choices"]["data_parallel"] == ["ps", "allreduce"]
    assert res["best"]["data_parallel"] in ("ps", "allreduce") and "beats the best with" in res["explanation"]
    rc, out, _ = run(capsys, "describe", "gpt2-small:seq_len=64")
    assert rc == 0 and "attention" in out
    rc, _, err = run(capsys, "describe", "gpt2-small:seq_len=4096")
    assert rc == 2 and "from 1 to 1024" in err


def test_devices_precision_batch_and_memory_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "presets", "--json")
    assert rc == 0 and "h100-sxm" in json.loads(out)["devices"]
    rc, out, _ = run(capsys, "predict", "--network", "gpt2-small", "--cluster", "commodity-t4", "--batch", "64",
                     "--optimizer", "adam", "--precision", "fp16", "--json")
    item = json.loads(out)
    assert rc == 0 and not item["feasible"] and item["infeasible_detail"].startswith("worker memory: needs ")
    assert set(item["memory_bytes_per_worker_parts"]) == {"weights", "gradients", "optimizer_state", "activations",
                                                          "workspace"}
    rc, out, _ = run(capsys, "predict", "--network", "resnet50", "--cluster", "dgx-a100", "--replicas", "16",
                     "--data-parallel", "allreduce", "--allreduce", "hierarchical", "--precision", "bf16",
                     "--batch", "128", "--zero-stage", "2")
    assert rc == 0 and "hierarchical all-reduce" in out and "of 74.5 GiB" in out
    for args, message in ((["--precision", "bf16"], "precision: 'bf16' is not supported by NVIDIA V100"),
                          (["--precision", "fp8"], "'fp8' is not a precision"),
                          (["--precision", "fp16,fp32"], "is a list; this command takes one value"),
                          (["--zero-stage", "1"], "zero_stage: 1 needs data_parallel 'allreduce'"),
                          (["--zero-stage", "4"], "--zero-stage: 4 must be <= 3")):
        rc, _, err = run(capsys, "predict", "--network", "resnet50", "--cluster", "dgx1-v100", *args)
        assert rc == 2 and message in err and err.count("\n") == 1, (args, err)
    rc, out, _ = run(capsys, "optimize", "--network", "resnet50", "--cluster", "dgx-a100", "--machines", "16",
                     "--data-parallel", "both", "--precision", "all", "--batch", "64,256", "--optimizer", "momentum",
                     "--json")
    res = json.loads(out)
    assert rc == 0 and res["choices"]["precision"] == ["fp32", "tf32", "fp16", "bf16"]
    assert res["choices"]["local_batch_samples"] == [64, 256]
    assert res["best"]["precision"] in ("fp16", "bf16") and "Each device computes in" in res["explanation"]
