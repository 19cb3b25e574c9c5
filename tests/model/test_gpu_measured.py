"""The device model against 30 measured training rows on one H200 (tests/model/data/gpu-h200-rows.json,
made by benchmarks/gpu_train.py; docs/validation.md, "One GPU"): four preset networks and eight
torchvision models in no preset, in fp16, bf16, tf32 and fp32. The measurements are fixed; the model
is re-run on them, so a change to the device model that moves these figures fails here.

Bounds (the figures as documented, with room for small model changes):
- memory per device without the reserved workspace: every row within 25 % of the measured peak, the
  median within 6 %;
- throughput after fitting each precision's efficiency to that run's ResNet-50 row: the other rows'
  median |error| at most 30 %;
- the band a fitted device carries (``ONE_ROW_FIT_BAND``) holds 70–90 % of those out-of-sample rows.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
import torch
from torchvision_models import models

import dnnbench
from dnnbench import presets
from dnnbench.measure.device import ONE_ROW_FIT_BAND, fit_precision_efficiency
from dnnbench.model import predict
from dnnbench.specs import Configuration

DATA = json.loads((Path(__file__).parent / "data" / "gpu-h200-rows.json").read_text())
PRESETS = {"resnet50", "vgg16", "mobilenet-v2", "vit-b16"}


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    cluster = presets.cluster("dgx-a100").evolve(worker=presets.device(DATA["device"]), node=None, machines=1)
    nets: dict[str, Any] = {}
    fitted: dict[tuple[str, str], Any] = {}
    out = []
    for row in DATA["rows"]:
        name = row["network"]
        if name not in nets:
            if name in PRESETS:
                nets[name] = name
            else:
                with torch.device("meta"):
                    nets[name] = dnnbench.from_torch(getattr(models(), name)(), (3, 224, 224))
        cfg = Configuration(precision=row["precision"], local_batch_samples=DATA["batch"], optimizer="momentum")
        key = (row["run"], row["precision"])
        if row["fitted_to_this_row"]:
            worker, _ = fit_precision_efficiency(nets[name], cluster, "imagenet1k", cfg, row["measured_samples_per_s"])
            fitted[key] = cluster.evolve(worker=worker)
        item = predict(nets[name], fitted[key], "imagenet1k", cfg).item()
        memory = item["memory_bytes_per_worker"] - item["memory_bytes_per_worker_parts"]["workspace"]
        out.append({**row, "memory_error": memory / row["peak_memory_bytes"] - 1,
                    "time_error": item["samples_per_s"] / row["measured_samples_per_s"] - 1})
    return out


def test_memory_per_device_is_within_the_documented_error(rows: list[dict[str, Any]]) -> None:
    errors = [abs(r["memory_error"]) for r in rows]
    assert len(errors) == 30
    assert max(errors) <= 0.25 and statistics.median(errors) <= 0.06, sorted(errors)


def test_a_fitted_device_predicts_the_other_networks_and_its_band_holds_them(rows: list[dict[str, Any]]) -> None:
    held_out = [r for r in rows if not r["fitted_to_this_row"]]
    assert len(held_out) == 24
    for r in rows:
        if r["fitted_to_this_row"]:
            assert r["time_error"] == pytest.approx(0.0, abs=1e-4)
    errors = [r["time_error"] for r in held_out]
    assert statistics.median(abs(e) for e in errors) <= 0.30
    inside = sum(ONE_ROW_FIT_BAND.p10 <= e <= ONE_ROW_FIT_BAND.p90 for e in errors) / len(errors)
    assert 0.7 <= inside <= 0.9, inside
