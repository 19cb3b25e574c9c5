"""Every shipped Adam-style study runs through papermill with small parameters, and its results JSON
says what the study is about (docs/studies.md). The browser checks of the reports are in
test_study_report_browser.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dnnbench import presets
from dnnbench.optimizer import optimize
from dnnbench.specs import Configuration

pytestmark = pytest.mark.slow

MAX_WORKERS = 12  # the sweep of the session's runs (conftest.py)


def _problem(name: str):  # type: ignore[no-untyped-def]
    net = presets.network(name)
    return net, presets.cluster("adam-2014"), presets.default_dataset_for(net)


def test_mnist_files_and_run_section(mnist_run):  # type: ignore[no-untyped-def]
    r = mnist_run["results"]
    assert r["study"] == "mnist" and r["network"] == "mnist-adam" and r["cluster"] == "adam-2014"
    assert r["run"]["parameters"]["budgets"] == [8, 16]
    assert r["run"]["parameters"]["ps_options"] == [1, 2, 4]  # from -y
    assert mnist_run["html"].is_file() and mnist_run["notebook"].is_file()
    assert r["run"]["elapsed_s"] < 60


def test_mnist_model_parallel_peaks_at_a_small_w(mnist_run):  # type: ignore[no-untyped-def]
    mp = mnist_run["results"]["model_parallel"]
    assert mp["workers_per_replica"] == list(range(1, 13))
    speedup = np.array(mp["speedup"])
    peak = mp["peak_workers"]
    assert 2 <= peak <= 8 and speedup[peak - 1] == pytest.approx(mp["peak_speedup"])
    assert speedup[-1] < speedup[peak - 1] * 0.9  # past the peak, more machines slow the replica down
    assert mp["peak_speedup"] < peak  # far from linear: messages cost more than the arithmetic saved
    # Communication per sample grows with W while compute falls.
    assert mp["network_s_per_sample"][-1] > mp["compute_s_per_sample"][-1]


def test_imagenet_model_parallel_keeps_rising(imagenet_run):  # type: ignore[no-untyped-def]
    mp = imagenet_run["results"]["model_parallel"]
    speedup = np.array(mp["speedup"])
    assert mp["peak_workers"] == MAX_WORKERS
    assert np.all(np.diff(speedup) > 0)
    assert speedup[-1] > 0.8 * MAX_WORKERS  # near-linear: compute dominates
    nc = np.array(mp["speedup_no_cache_vs_cached_baseline"])
    assert np.all(nc <= speedup + 1e-9)  # the cache effect only helps


def test_data_parallel_ps_provisioning(mnist_run, imagenet_run):  # type: ignore[no-untyped-def]
    for run in (mnist_run, imagenet_run):
        dp = run["results"]["data_parallel"]
        assert dp["ps_machines"] == [1, 2, 4]
        sat = {p: dp["curves"][str(p)]["saturation_replicas"] for p in dp["ps_machines"]}
        top = {p: dp["curves"][str(p)]["max_speedup"] for p in dp["ps_machines"]}
        # Too few PS machines: the PS binds, and it binds later the more PS machines there are.
        assert sat[1] is not None and sat[1] < sat[2] < sat[4]
        assert top[1] < top[2] < top[4]
        assert dp["curves"]["1"]["bottleneck"][-1].startswith("PS")
        # Flat once the PS binds.
        s1 = dp["curves"]["1"]["speedup"]
        assert s1[-1] == pytest.approx(s1[sat[1] - 1], rel=1e-6)


@pytest.mark.parametrize("fixture, network", [("mnist_run", "mnist-adam"), ("imagenet_run", "imagenet22k-adam")])
def test_optimizer_section_matches_optimize(fixture, network, request):  # type: ignore[no-untyped-def]
    results = request.getfixturevalue(fixture)["results"]
    net, cl, ds = _problem(network)
    opt = results["optimizer"]
    assert opt["budgets"] == [8, 16]
    for row in opt["results"]:
        direct = optimize(net, cl, ds, row["budget_machines"], Configuration(), top_k=3).to_dict()
        for key in ("workers_per_replica", "replicas", "ps_machines", "bottleneck"):
            assert row["best"][key] == direct["best"][key]
        assert row["best"]["epoch_time_s"] == pytest.approx(direct["best"]["epoch_time_s"], rel=1e-12)
        assert row["explanation"] == direct["explanation"]
    best = results["curves"]["best"]
    assert best["machines"] == list(range(1, 17))
    assert np.all(np.diff(best["speedup"]) >= -1e-9)  # more budget never hurts the optimum
    assert results["headline"]["best_speedup"] == pytest.approx(opt["results"][-1]["best"]["speedup"])


def test_counts_and_time_split(mnist_run, imagenet_run):  # type: ignore[no-untyped-def]
    m, i = mnist_run["results"], imagenet_run["results"]
    assert 3.5e6 < m["counts"]["totals"]["weights"] < 4.5e6
    assert 2.0e9 < i["counts"]["totals"]["weights"] < 2.2e9
    for r in (m, i):
        shares = [row["macs_share"] for row in r["counts"]["layers"]]
        assert sum(shares) == pytest.approx(1.0)
        single = r["time_split"]["single_machine"]
        assert single["workers_per_replica"] == 1 and single["bottleneck"] == "worker compute"
        assert single["epoch_time_s"] == pytest.approx(r["headline"]["single_machine_epoch_time_s"])


def test_sensitivity(mnist_run, imagenet_run):  # type: ignore[no-untyped-def]
    for run in (mnist_run, imagenet_run):
        s = run["results"]["sensitivity"]
        mac = s["mac_time"]
        assert mac["factors"] == [0.5, 1.0, 2.0]
        assert np.all(np.diff(mac["epoch_time_s_fixed"]) > 0)  # slower cores, slower epochs
        assert 0.3 < mac["elasticity"] <= 1.0 + 1e-9
        nic = s["nic_bandwidth"]
        assert np.all(np.diff(nic["epoch_time_s_fixed"]) <= 1e-12)  # a faster network never hurts
        assert all(r <= f * (1 + 1e-9) for r, f in zip(nic["epoch_time_s_reoptimised"], nic["epoch_time_s_fixed"],
                                                        strict=True))
        assert nic["epoch_time_s_fixed"][1] == pytest.approx(s["base_epoch_time_s"])
        ub = s["update_batch"]
        assert ub["push_interval_samples"] == [1, 8, 64]
        assert ub["epoch_time_s"][0] > ub["epoch_time_s"][-1]  # pushing every sample makes the PS bind


def test_results_json_is_standard_json(mnist_run):  # type: ignore[no-untyped-def]
    text = (mnist_run["out"] / "mnist.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))


def test_executed_notebook_has_no_errors(mnist_run, imagenet_run):  # type: ignore[no-untyped-def]
    for run in (mnist_run, imagenet_run):
        nb = json.loads(run["notebook"].read_text())
        outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
        assert not [o for o in outputs if o["output_type"] == "error"]
        tags = [c["metadata"].get("tags", []) for c in nb["cells"]]
        assert ["injected-parameters"] in tags
