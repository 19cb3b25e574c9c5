"""A validation report as a typed value, shared by ``dnnbench validate`` and ``--replay``: load and save,
the summary (errors, ranking), the replay of a saved report with the current model, and the table."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..specs import Network
from .mapping import (
    phase_fields,
    predict_run,
    run_nic,
    scale_compute,
)
from .plan import Run


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Out-of-sample median and maximum |error| (wall time, and the CPU view where a run has one),
    and whether the ranking of configurations holds (:func:`ranking`)."""
    out = [r for r in rows if not r["in_sample"]]
    err = np.abs([r["error"] for r in out])
    cpu = np.abs([r["cpu_view_error"] for r in out if r.get("cpu_view_error") is not None])
    order = ranking([r["predicted_samples_per_s"] for r in out], [r["measured_samples_per_s"] for r in out],
                    [r.get("launches_samples_per_s") or [r["measured_samples_per_s"]] for r in out])
    return {"configurations": len(out),
            "median_abs_error": float(np.median(err)) if err.size else None,
            "max_abs_error": float(np.max(err)) if err.size else None,
            "cpu_view_median_abs_error": float(np.median(cpu)) if cpu.size else None,
            "cpu_view_max_abs_error": float(np.max(cpu)) if cpu.size else None,
            **order}


def ranking(predicted: list[float], measured: list[float], launches: list[list[float]]) -> dict[str, Any]:
    """Does the model rank the configurations as the runs do?

    ``ranking_preserved``: predicted and measured (median launch) sort the same way, every pair;
    ``kendall_tau`` of the two. Two runs whose launches overlap (the slower one's fastest launch is
    faster than the other's slowest) are not told apart by the measurement, so their order is noise:
    ``measured_apart_pairs`` counts the pairs whose launches do not overlap, ``misordered_apart_pairs``
    those of them the model puts the other way round, and ``ranking_preserved_where_apart`` is True
    when there are none (docs/validation.md §"Results")."""
    from scipy.stats import kendalltau

    n = len(predicted)
    same_order = bool(np.array_equal(np.argsort(predicted), np.argsort(measured)))
    tau = float(kendalltau(predicted, measured).statistic) if n > 1 else 1.0
    apart = misordered = 0
    for i in range(n):
        for j in range(n):
            if max(launches[i]) < min(launches[j]):  # run i measured slower than run j in every launch
                apart += 1
                misordered += predicted[i] >= predicted[j]
    return {"ranking_preserved": same_order, "kendall_tau": tau, "measured_apart_pairs": apart,
            "misordered_apart_pairs": misordered, "ranking_preserved_where_apart": misordered == 0}


#: The measurements and inputs each row of a report must have for a replay (the rest is derived).
ROW_FIELDS = {"label": str, "kind": str, "mode": str, "ranks": int, "in_sample": bool,
              "measured_samples_per_s": float}


@dataclass(frozen=True)
class ValidationReport:
    """One ``dnnbench validate`` run: what was measured, what it was calibrated on, the host's
    conditions, one row per run (predicted against measured, with the stable JSON keys of
    docs/validation.md) and the summary. :meth:`load` and :meth:`save` are shared by ``validate -o``
    and ``validate --replay``; a document that is not a report is one line naming what is missing."""

    network: str
    network_spec: dict[str, Any] | None
    batch_size: int
    iterations: int
    smoke: bool
    calibration: dict[str, Any]
    conditions: dict[str, Any]
    rows: tuple[dict[str, Any], ...]
    summary: dict[str, Any]
    notes: tuple[str, ...] = ()
    replayed: bool = False

    @classmethod
    def from_dict(cls, data: Any) -> ValidationReport:
        """A report from plain JSON data; a missing or mistyped part is one line (``report: ...``)."""
        from ..errors import SpecError
        from ..specs.io import check_plain

        check_plain(data, "report")

        def bad(what: str) -> SpecError:
            return SpecError.plain("report", f"is not a dnnbench validation report ({what})")

        if not isinstance(data, dict):
            raise bad("not a JSON object")
        for key, kind in (("network", str), ("batch_size", int), ("iterations", int), ("rows", list)):
            if not isinstance(data.get(key), kind) or isinstance(data.get(key), bool) and kind is int:
                raise bad(f"missing or bad {key!r}")
        for key in ("calibration", "conditions"):  # what a replay needs; a table does without
            if not isinstance(data.get(key, {}), dict):
                raise bad(f"bad {key!r}")
        for i, row in enumerate(data["rows"]):
            if not isinstance(row, dict):
                raise bad(f"rows[{i}] is not an object")
            for key, kind in ROW_FIELDS.items():
                value = row.get(key)
                ok = isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float else (
                    isinstance(value, kind) and not (kind is int and isinstance(value, bool)))
                if not ok:
                    raise bad(f"missing or bad rows[{i}].{key}")
        spec = data.get("network_spec")
        return cls(network=data["network"], network_spec=spec if isinstance(spec, dict) else None,
                   batch_size=data["batch_size"], iterations=data["iterations"], smoke=bool(data.get("smoke")),
                   calibration=data.get("calibration", {}), conditions=data.get("conditions", {}),
                   rows=tuple(data["rows"]),
                   summary=data["summary"] if isinstance(data.get("summary"), dict) else {},
                   notes=tuple(str(n) for n in data.get("notes") or ()), replayed=bool(data.get("replayed")))

    def to_dict(self) -> dict[str, Any]:
        return {"network": self.network, "network_spec": self.network_spec, "batch_size": self.batch_size,
                "iterations": self.iterations, "smoke": self.smoke, "calibration": self.calibration,
                "conditions": self.conditions, "rows": [dict(r) for r in self.rows], "summary": self.summary,
                "notes": list(self.notes), "replayed": self.replayed}

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ValidationReport:
        """Read a saved report (JSON or YAML; regular files of a bounded size only)."""
        from ..specs.io import read_document

        return cls.from_dict(read_document(path))

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the report as standard JSON (infinities as null), atomically."""
        from ..fileio import json_ready, write_json

        return write_json(path, json_ready(self.to_dict()))


def replay(report: ValidationReport | dict[str, Any]) -> ValidationReport:
    """A saved validation report predicted again with the current model from its own calibration
    (compute fit, transfers, link latencies, σ_h, o_x, the load measured during each run): no run is
    repeated. Every row's prediction, error, CPU-view error and bottleneck, and the summary, are
    recomputed; the measurements are the report's. For working on the model against measurements
    that cost minutes to take (``dnnbench validate --replay REPORT``)."""
    from ..errors import SpecError

    if not isinstance(report, ValidationReport):
        report = ValidationReport.from_dict(report)
    try:
        return _replay(report)
    except SpecError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError, OverflowError) as err:
        # A report is a document the user brings: any part missing or of the wrong type is this one line.
        raise SpecError.plain("report", f"is not a dnnbench validation report (missing or bad {err!r:.80})") from None


def _replay(report: ValidationReport) -> ValidationReport:
    from .. import presets
    from .calibrate import machine_from_fit
    from .fit import ComputeFit, TransferFit

    net = Network.build(report.network_spec) if report.network_spec is not None else presets.network(report.network)
    cal, cond = report.calibration, report.conditions
    c, t = cal["compute"], cal["transfer"]
    cfit = ComputeFit(c["mac_time_s"]["conv"], c["mac_time_s"]["fc"], c["elem_time_s"], c["cache_speedup"], {},
                      c["layer_overhead_s"])
    tfit = TransferFit(t["latency_s"], t["bits_per_s"], {}, t["copy_time_s_per_byte"])
    batch_size, cores = report.batch_size, int(cond["host_cores"])
    sigma_h = float(cond["host_corun_slowdown"])
    stretch = float(cond.get("compute_stretch", 1.0))
    links = {float(v["rate_bits_per_s"]): v for v in cal.get("links") or []}
    o_x = (cal.get("exchange") or {}).get("exchange_overhead_s")
    step_cv = float((cal.get("jitter") or {}).get("step_time_cv", 0.0))  # reports before it: none
    free_machine = machine_from_fit(cfit, copy_time_s_per_byte=tfit.copy_time_s_per_byte).evolve(
        step_time_cv=min(10.0, step_cv))
    machine = scale_compute(free_machine, stretch)
    rows = []
    for row in report.rows:
        run = Run(row["kind"], row["mode"], int(row["ranks"]), row.get("link_bits_per_s"))
        nic, bucket = run_nic(net, run, batch_size, tfit, links)
        pred, item, free = predict_run(net, run, batch_size, machine, free_machine, nic, cores,
                                       row.get("background_threads"), sigma_h, o_x,
                                       float(row.get("wakeup_delay_s") or 0.0))  # reports before it: none
        cv = row.get("cpu_view_samples_per_s")
        rows.append({**row, "predicted_samples_per_s": pred, "error": pred / row["measured_samples_per_s"] - 1.0,
                     "predicted_uncontended_samples_per_s": free, "cpu_view_error": (free / cv - 1.0) if cv else None,
                     "bucket_rate_factor": bucket, "bottleneck": item["bottleneck"],
                     **phase_fields(item, row.get("launches_samples_per_s") or [row["measured_samples_per_s"]])})
    return replace(report, rows=tuple(rows), summary=summarise(rows), replayed=True)


def table(report: ValidationReport) -> str:
    """The report as a text table (predicted against measured samples/s and the error)."""
    lines = [f"{report.network}: batch {report.batch_size}, {report.iterations} iterations per run",
             f"{'configuration':<38}{'predicted/s':>12}{'measured/s':>12}{'error':>9}"
             f"{'cpu-view err':>13}{'other thr':>10}  bottleneck"]
    for r in report.rows:
        cv = "" if r.get("cpu_view_error") is None else f"{100 * r['cpu_view_error']:+.1f}%"
        tag = " (calibration)" if r["in_sample"] else ""
        bg = "" if r.get("background_threads") is None else f"{r['background_threads']:.2f}"
        lines.append(f"{r['label'] + tag:<38}{r['predicted_samples_per_s']:>12.1f}{r['measured_samples_per_s']:>12.1f}"
                     f"{100 * r['error']:>+8.1f}%{cv:>13}{bg:>10}  {r['bottleneck']}")
    for r in report.rows:
        lo, hi = r.get("predicted_phase_range_samples_per_s") or (0.0, 0.0)
        if hi > 1.01 * lo > 0:  # request–reply replicas whose phase the model leaves open (docs/model.md §6)
            got = r.get("launches_samples_per_s") or [r["measured_samples_per_s"]]
            lines.append(f"  phase range of {r['label']}: {lo:.1f}/s in lock step to {hi:.1f}/s staggered; "
                         f"launches {', '.join(f'{v:.1f}' for v in sorted(got))}: "
                         f"{r.get('launches_in_phase_range', 0)} of {len(got)} inside")
    s = report.summary
    if s.get("median_abs_error") is not None:
        order = "preserved" if s["ranking_preserved"] else "NOT preserved"
        lines.append(f"out-of-sample ({s['configurations']} configurations): median |error| "
                     f"{100 * s['median_abs_error']:.1f}%, max {100 * s['max_abs_error']:.1f}%, ranking "
                     f"{order} (Kendall tau {s['kendall_tau']:.2f})")
        if "measured_apart_pairs" in s:
            lines.append(f"pairs the launches tell apart: {s['measured_apart_pairs']}, of them ordered the other "
                         f"way by the model: {s['misordered_apart_pairs']}")
    if s.get("cpu_view_median_abs_error") is not None:
        lines.append(f"CPU view (compute at its CPU time, no contention modelled): median |error| "
                     f"{100 * s['cpu_view_median_abs_error']:.1f}%, max {100 * s['cpu_view_max_abs_error']:.1f}%")
    c = report.conditions
    if c:
        lines.append(f"conditions: {c['host_cores']} cores, load average {c['load_average_before']:.1f} before, "
                     f"{c['load_average_after']:.1f} after; 1-process step wall/CPU "
                     f"{c['single_wall_over_cpu']:.2f}; co-run slowdown σ_h {c.get('host_corun_slowdown', 0.0):.3f}"
                     f"{' (idle pollers: not applied)' if c.get('idle_pollers') else ''}; "
                     f"median of {c['launches']} launch(es) per run")
        gate = c.get("quiet_gate") or {}
        busy = sum(len(r.get("busy_launches_samples_per_s") or ()) for r in report.rows)
        if gate.get("waited_s", 0.0) >= 1.0 or busy:
            lines.append(f"the host was busy (another program held a core): waited {gate.get('waited_s', 0.0):.0f} s; "
                         f"{busy} launch(es) taken busy anyway, left out of the medians")
    wake = report.calibration.get("wakeup")
    if isinstance(wake, list) and wake:
        def path(rate: float | None) -> str:
            return "loopback" if rate is None else f"tbf {rate / 1e6:g} Mbit/s"

        lines.append("wake-up delay d (a woken rank waiting for a CPU; PS runs with more ranks than cores): "
                     + ", ".join(f"{1e3 * m['host_wakeup_delay_s']:.2f} ms on {path(m['link_bits_per_s'])} "
                                 f"({m['size_bytes'] / 1e3:.0f} kB)" for m in wake))
    scale = (report.calibration.get("compute") or {}).get("step_scale")
    if isinstance(scale, (int, float)) and abs(scale - 1.0) > 0.01:
        lines.append(f"compute: the fitted per-kind times scaled x{scale:.2f} to reproduce the calibration run's "
                     "step (its layers' fit missed it)")
    x = report.calibration.get("exchange")
    if x:
        lines.append(f"model-parallel exchange overhead {1e3 * x['exchange_overhead_s']:.2f} ms per round, "
                     f"calibrated on: {x['run']}")
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)
