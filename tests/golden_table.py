"""The golden prediction table: every preset network x preset cluster (and a shared-host cluster) x a
fixed grid of configurations, frozen as JSON so that a change to the model's code that changes a
number shows up (tests/model/test_golden_table.py). Regenerate only for a deliberate model change:

    python3 tests/golden_table.py --write
"""

from __future__ import annotations

import gzip
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from dnnbench import presets
from dnnbench.model import evaluate
from dnnbench.specs import Cluster, Configuration

TABLE = Path(__file__).parent / "model" / "data" / "golden_predictions.json.gz"

#: The categorical choices, each evaluated over the array grid below.
CHOICES: tuple[dict[str, Any], ...] = (
    {},
    {"ps_exchange": "request_reply"},
    {"mode": "sync"},
    {"overlap": 0.5, "partitioning": "auto", "fc_update": "deltas"},
    {"mode": "sync", "partitioning": "spatial", "fc_update": "activations",
     "compression": {"method": "topk_ef", "density": 0.01, "encoding": "bitmap"}},
    {"ps_exchange": "request_reply", "threads": 2, "samples_per_message": 4,
     "compression": {"method": "esgd", "density": 0.1, "compress_pull": True}},
    {"threads": 3, "local_batch_samples": 64, "value_bits": 16,
     "compression": {"method": "qsgd", "encoding": "dense"}},
)

#: Choices evaluated on the clusters whose workers are accelerators (all-reduce: P = 0 at every point).
DEVICE_CHOICES: tuple[dict[str, Any], ...] = (
    {"precision": "fp16", "optimizer": "adam", "local_batch_samples": 64, "data_parallel": "allreduce",
     "allreduce": {"algorithm": "hierarchical"}},
    {"optimizer": "momentum", "data_parallel": "allreduce", "zero_stage": 3,
     "allreduce": {"algorithm": "tree", "bucket_bytes": 2**20, "overlap_backward": False}},
    {"precision": "fp16", "local_batch_samples": 256, "data_parallel": "allreduce", "zero_stage": 1},
)

#: (W, R, P, k_push, k_pull) points: P = 0 only for one replica.
POINTS = tuple((w, r, p, kp, kl) for w, r, p, kp, kl in itertools.product(
    (1, 2, 8), (1, 4), (0, 1, 6), (1, 32), (64, 1024)) if not (p == 0 and r > 1) and (kl == 1024 or w == 2))


def shared_host_cluster() -> Cluster:
    """A preset cluster emulated on one 8-core host with every shared-host effect switched on."""
    base = presets.cluster("modern-2025")
    data = base.to_dict()
    data.update(name="shared-host", machines=64)
    data["shared_host"] = {"cores": 8, "background_threads": 0.5, "corun_slowdown": 0.2, "wakeup_delay_s": 2e-4}
    data["worker"] = {**data["worker"], "copy_time_s_per_byte": 1e-10, "layer_overhead_s": 2e-5,
                      "step_time_cv": 0.3}
    data["ps"] = {**data["ps"], "copy_time_s_per_byte": 2e-10}
    data["worker_nic"] = {**data["worker_nic"], "exchange_overhead_s": 1e-5}
    return Cluster.build(data)


def clusters() -> dict[str, Cluster]:
    out = {name: presets.cluster(name) for name in presets.names("clusters")}
    out["shared-host"] = shared_host_cluster()
    return out


def columns(pred: Any) -> dict[str, list[Any]]:
    """A prediction's numbers as named columns over the grid's points."""
    cols: dict[str, Any] = {
        "samples_per_s": pred.samples_per_s, "epoch_time_s": pred.epoch_time_s, "speedup": pred.speedup,
        "bottleneck_code": pred.bottleneck_code, "infeasible_code": pred.infeasible_code,
        "phase_low_samples_per_s": pred.phase_low_samples_per_s,
        "phase_high_samples_per_s": pred.phase_high_samples_per_s,
        "memory_bytes_per_worker": pred.memory_bytes_per_worker, "memory_bytes_per_ps": pred.memory_bytes_per_ps,
        "ps_utilisation": pred.ps_utilisation,
        **{f"breakdown.{k}": v for k, v in pred.breakdown.parts().items()},
        **{f"by_kind.{k}": v for k, v in pred.breakdown.compute_by_kind_s.items()},
        **{f"bound.{k}": v for k, v in pred.bounds_samples_per_s.items()},
    }
    return {k: np.asarray(v).tolist() for k, v in cols.items()}


def table() -> dict[str, dict[str, list[Any]]]:
    """Every block of the table, keyed 'network|cluster|choice'."""
    grid = np.array(POINTS, dtype=float).T
    out: dict[str, dict[str, list[Any]]] = {}
    for net_name in presets.names("networks"):
        net = presets.network(net_name)
        for cl_name, cluster in clusters().items():
            for i, choice in enumerate(CHOICES):
                pred = evaluate(net, cluster, None, Configuration.build(choice), workers_per_replica=grid[0],
                                replicas=grid[1], ps_machines=grid[2], push_interval_samples=grid[3],
                                pull_interval_samples=grid[4])
                out[f"{net_name}|{cl_name}|{i}"] = columns(pred)
            if cluster.worker.accelerator is None:
                continue
            for i, choice in enumerate(DEVICE_CHOICES):
                pred = evaluate(net, cluster, None, Configuration.build(choice), workers_per_replica=grid[0],
                                replicas=grid[1], ps_machines=0.0, push_interval_samples=grid[3],
                                pull_interval_samples=grid[4])
                out[f"{net_name}|{cl_name}|d{i}"] = columns(pred)
    return out


def load() -> dict[str, dict[str, list[Any]]]:
    with gzip.open(TABLE, "rt", encoding="utf-8") as f:
        return json.load(f)  # type: ignore[no-any-return]


if __name__ == "__main__" and "--write" in sys.argv:
    with gzip.GzipFile(TABLE, "wb", mtime=0) as g:
        g.write(json.dumps(table(), separators=(",", ":")).encode())
    print(f"wrote {TABLE} ({TABLE.stat().st_size} bytes)")
