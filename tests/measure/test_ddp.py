"""PyTorch DDP over gloo on loopback, against the all-reduce model (docs/validation.md §"All-reduce
runs"): real processes and sockets, a loose bound for a shared CI host; the figures are
benchmarks/bench_ddp.py's."""

from __future__ import annotations

from dnnbench import presets
from dnnbench.measure.ddp import SMOKE_BOUND, fit_allreduce_link, validate_ddp


def test_the_link_fit_is_positive_and_reproduces_its_own_points() -> None:
    link = fit_allreduce_link(repeats=5)
    assert link["latency_s"] >= 0 and 1e6 < link["bytes_per_s"] < 1e12
    # Timings of one launch on a shared host are noisy: the fit holds its large sizes, where the
    # bandwidth term dominates, within a factor 3.
    for n, t in zip(link["sizes_bytes"], link["seconds"], strict=True):
        if n >= 2**22:
            model = 2 * link["latency_s"] + n / link["bytes_per_s"]
            assert 1 / 3 < model / t < 3.0


def test_ddp_runs_land_within_the_smoke_bound_of_the_all_reduce_model() -> None:
    report = validate_ddp([presets.network("mnist-adam")], ranks=(2,), buckets=(2**20,), iterations=8, launches=1)
    (row,) = report["rows"]
    assert row["measured_samples_per_s"] > 0 and row["allreduce_s_per_sample"] > 0
    assert 1 / SMOKE_BOUND < row["predicted_samples_per_s"] / row["measured_samples_per_s"] < SMOKE_BOUND
