"""Mapping of runs to model configurations, the calibrated cluster spec, summaries and the CLI."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dnnbench import presets
from dnnbench.cli import main
from dnnbench.measure import netns
from dnnbench.measure.calibrate import build_cluster, machine_from_fit, tbf_nic
from dnnbench.measure.fit import ComputeFit
from dnnbench.measure.mapping import configuration, predicted_samples_per_s, run_cluster, scale_compute
from dnnbench.measure.plan import Run, plan
from dnnbench.measure.report import ranking, summarise, table
from dnnbench.measure.runs import step_parts
from dnnbench.specs import Cluster


def _cluster() -> Cluster:
    fit = ComputeFit(3e-11, 4e-11, 1e-9, 1.0, {})
    return build_cluster(machine_from_fit(fit), tbf_nic(1e9, 1e-4))


def test_calibrated_cluster_is_a_valid_spec() -> None:
    c = _cluster()
    assert Cluster.build(c.to_dict()) == c
    assert c.worker.mac_time("fc") == 4e-11


@pytest.mark.parametrize("name,off", [("lenet5", 0.8), ("mnist-adam", 1.3), ("lenet5", 1.0)])
def test_the_compute_fit_is_anchored_to_the_calibration_run_s_step(name: str, off: float) -> None:
    """Whatever the per-kind fit predicts for the calibration run, the anchored fit reproduces its
    measured step (one factor on every fitted time, recorded as the fit's step_scale)."""
    from dnnbench.measure.calibrate import nic_from_fit
    from dnnbench.measure.fit import TransferFit
    from dnnbench.measure.mapping import anchored_to_step

    net, run = presets.network(name), Run("single")
    fit = ComputeFit(3e-11, 4e-11, 1e-9, 1.0, {"step": 0.1}, layer_overhead_s=2e-5)
    tfit = TransferFit(1e-4, 1e9, {}, 1e-10)

    def predicted(f: ComputeFit) -> float:
        machine = machine_from_fit(f, copy_time_s_per_byte=tfit.copy_time_s_per_byte)
        return predicted_samples_per_s(net, run_cluster(machine, nic_from_fit(tfit), run, None), run, 64)[0]

    measured = off * predicted(fit)
    anchored = anchored_to_step(net, fit, measured, 64, tfit)
    assert predicted(anchored) == pytest.approx(measured, rel=1e-6)
    assert anchored.step_scale == pytest.approx(1 / off, rel=0.05)
    assert anchored.residuals == fit.residuals and anchored.cache_speedup == fit.cache_speedup
    assert anchored.to_dict()["step_scale"] == anchored.step_scale


def test_configuration_mapping() -> None:
    cfg = configuration(Run("dp", "async", 3), 64)
    assert (cfg.replicas, cfg.ps_machines, cfg.push_interval_samples, cfg.pull_interval_samples) == (3, 1, 64, 64)
    assert cfg.mode == "async" and cfg.threads == 1 and cfg.fc_update == "deltas"
    mp = configuration(Run("mp", ranks=2), 32)
    assert mp.workers_per_replica == 2 and mp.samples_per_message == 32 and mp.ps_machines == 0


def test_more_workers_predict_more_throughput_and_slower_links_less() -> None:
    net, cl = presets.network("lenet5"), _cluster()
    one, _ = predicted_samples_per_s(net, cl, Run("dp", "sync", 1), 64)
    two, _ = predicted_samples_per_s(net, cl, Run("dp", "sync", 2), 64)
    assert one < two < 2 * one
    slow = build_cluster(cl.worker, tbf_nic(1e6, 1e-4))
    assert predicted_samples_per_s(net, slow, Run("dp", "sync", 1), 64)[0] < one


def test_run_cluster_describes_processes_on_one_host() -> None:
    fit = ComputeFit(3e-11, 4e-11, 1e-9, 1.0, {}, layer_overhead_s=2e-5)
    machine, nic = machine_from_fit(fit), tbf_nic(1e9, 1e-4)
    run = Run("dp", "sync", 2, 1e9)
    shared = run_cluster(machine, nic, run, 2)
    assert (shared.shared_host.cores, shared.machines, shared.worker.cores, shared.ps.cores) == (2, 3, 1, 1)
    assert shared.worker.layer_overhead_s == 2e-5
    free = run_cluster(machine, nic, run, None)
    net = presets.network("lenet5")
    # Synchronous: 2 workers on 2 cores compute while the PS waits (κ = 1); 4 workers: κ = 2.
    a = predicted_samples_per_s(net, shared, run, 64)[1]["breakdown_s_per_sample"]
    b = predicted_samples_per_s(net, free, run, 64)[1]["breakdown_s_per_sample"]
    assert a["compute_forward"] == pytest.approx(b["compute_forward"])
    run4 = Run("dp", "sync", 4, 1e9)
    a4 = predicted_samples_per_s(net, run_cluster(machine, nic, run4, 2), run4, 64)[1]["breakdown_s_per_sample"]
    b4 = predicted_samples_per_s(net, run_cluster(machine, nic, run4, None), run4, 64)[1]["breakdown_s_per_sample"]
    assert a4["compute_forward"] == pytest.approx(2.0 * b4["compute_forward"])
    slow = scale_compute(machine, 2.0)
    assert slow.mac_time("fc") == 8e-11 and slow.elem_time_s == 2e-9 and slow.layer_overhead_s == 4e-5


def test_plan() -> None:
    assert [r.kind for r in plan(True)] == ["single", "dp", "dp"]
    assert [r.link_bits_per_s for r in plan(True)] == [None, 1e9, 1e9]
    full = plan(False, (1e9,))
    assert full[0].kind == "single" and sum(r.link_bits_per_s == 1e9 for r in full) == 4


def _report(rows: list[dict[str, Any]], summary: dict[str, Any], notes: tuple[str, ...] = ()) -> Any:
    from dnnbench.measure.report import ValidationReport

    return ValidationReport(network="n", network_spec=None, batch_size=1, iterations=1, smoke=False,
                            calibration={}, conditions={}, rows=tuple(rows), summary=summary, notes=notes)


def test_summary_and_table() -> None:
    rows = [{"label": "a", "in_sample": True, "predicted_samples_per_s": 1.0, "measured_samples_per_s": 1.0,
             "error": 0.0, "cpu_view_error": None, "bottleneck": "worker compute"}]
    rows += [{"label": f"b{i}", "in_sample": False, "predicted_samples_per_s": p, "measured_samples_per_s": m,
              "error": p / m - 1, "cpu_view_error": None, "bottleneck": "worker compute"}
             for i, (p, m) in enumerate([(100, 110), (200, 190), (300, 330)])]
    s = summarise(rows)
    assert s["configurations"] == 3 and s["ranking_preserved"]
    assert s["max_abs_error"] == pytest.approx(10 / 110)
    report = _report(rows, s, ("x",))
    assert "ranking preserved" in table(report)
    assert s["measured_apart_pairs"] == 3 and s["ranking_preserved_where_apart"]  # single launches: all apart


def test_step_parts_report_the_mean_wait_beside_the_median() -> None:
    """A tail of long waits (one step in four waits a whole compute, docs/validation.md §"What the
    remaining error is") moves the mean push + pull, which the throughput measures, not the median."""
    def worker(comm_ms: list[float]) -> dict:
        n = len(comm_ms)
        return {"role": "worker", "compute": {"cpu_s": 4e-3, "wall_s": 4e-3},
                "communication": {"wall_s": float(sorted(comm_ms)[n // 2]) * 1e-3},
                "steps": {"compute_wall_s": [4e-3] * n, "communication_wall_s": [c * 1e-3 for c in comm_ms]}}

    item = {"breakdown_s_per_sample": {"compute_fwd_s": 1e-4, "network_s": 2e-5}}
    meas = {"raw": [{"role": "ps"}, worker([0.5, 0.5, 0.5, 4.5]), worker([0.5, 0.5, 0.5, 0.5])]}
    parts = step_parts(meas, item, 32)
    assert parts["communication_wall_s_per_step"] == pytest.approx(0.5e-3)
    assert parts["communication_mean_wall_s_per_step"] == pytest.approx(np.median([1.5e-3, 0.5e-3]))
    assert parts["model_compute_s_per_step"] == pytest.approx(3.2e-3)
    # Reports written before the runs kept their steps: no mean, nothing invented.
    old = {"raw": [{k: v for k, v in w.items() if k != "steps"} for w in meas["raw"]]}
    assert step_parts(old, item, 32)["communication_mean_wall_s_per_step"] is None


def test_ranking_counts_only_pairs_the_launches_tell_apart() -> None:
    # b and c are measured 4 % apart with overlapping launches; the model swaps them.
    pred, meas = [100.0, 1174.0, 1095.0], [90.0, 1113.0, 1160.0]
    launches = [[85.0, 90.0, 95.0], [1041.0, 1113.0, 1206.0], [1150.0, 1160.0, 1244.0]]
    r = ranking(pred, meas, launches)
    assert not r["ranking_preserved"] and r["kendall_tau"] == pytest.approx(1 / 3)
    assert r["measured_apart_pairs"] == 2 and r["misordered_apart_pairs"] == 0 and r["ranking_preserved_where_apart"]
    # Launches that do not overlap make the swap count.
    r = ranking(pred, meas, [[90.0], [1100.0, 1113.0, 1120.0], [1150.0, 1160.0, 1244.0]])
    assert r["measured_apart_pairs"] == 3 and r["misordered_apart_pairs"] == 1
    assert not r["ranking_preserved_where_apart"]
    rows = [{"label": str(i), "in_sample": False, "predicted_samples_per_s": p, "measured_samples_per_s": m,
             "error": p / m - 1, "cpu_view_error": None, "bottleneck": "worker compute",
             "launches_samples_per_s": ls} for i, (p, m, ls) in enumerate(zip(pred, meas, launches, strict=True))]
    report = _report(rows, summarise(rows))
    assert "pairs the launches tell apart: 2, of them ordered the other way by the model: 0" in table(report)


def test_netns_set_up_and_torn_down() -> None:
    why = netns.available()
    if why is not None:
        with pytest.raises(netns.NetnsUnavailable):
            with netns.emulated(2, 1e9):
                pass
        return
    with netns.emulated(2, 1e8) as topo:
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert all(ns in listed for ns in topo.namespaces)
        assert topo.addrs == ["10.231.0.1", "10.231.0.2"]
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(ns in listed for ns in topo.namespaces)


def test_cli_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--network", "no-such-net"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-net" in err[0]
    with pytest.raises(SystemExit) as exc:
        main(["validate", "--network", "lenet5", "--link", "fast"])
    assert exc.value.code == 2


def test_import_stays_light() -> None:
    code = "import sys, dnnbench.measure, dnnbench.measure.cli, dnnbench.cli; dnnbench.cli.build_parser(); " \
           "print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_report_saves_loads_and_replays_as_one_typed_value(tmp_path: Path) -> None:
    from dnnbench.measure.report import ValidationReport, replay

    saved = Path(__file__).parents[1] / "model" / "data" / "replay-report.json"
    report = ValidationReport.load(saved)
    assert report.network == "lenet5" and len(report.rows) == 16 and report.replayed is False
    again = replay(report)
    assert again.replayed and again.summary["configurations"] == 15
    path = again.save(tmp_path / "again.json")
    back = ValidationReport.load(path)
    from dnnbench.fileio import json_ready

    assert back.to_dict() == json_ready(again.to_dict())  # the JSON round trip keeps every part
    assert replay(back).rows == again.rows


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.pop("rows"), "missing or bad 'rows'"),
    (lambda d: d.update(batch_size="64"), "missing or bad 'batch_size'"),
    (lambda d: d["rows"][3].pop("measured_samples_per_s"), "rows\\[3\\].measured_samples_per_s"),
    (lambda d: d["rows"].__setitem__(0, 5), "rows\\[0\\] is not an object"),
])
def test_a_document_that_is_not_a_report_is_one_line(tmp_path: Path, change: Any, message: str) -> None:
    from dnnbench.errors import SpecError
    from dnnbench.measure.report import ValidationReport

    data = json.loads((Path(__file__).parents[1] / "model" / "data" / "replay-report.json").read_text())
    change(data)
    with pytest.raises(SpecError, match=message) as err:
        ValidationReport.from_dict(data)
    assert "\n" not in str(err.value) and str(err.value).startswith("report:")
