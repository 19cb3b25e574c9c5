"""``dnnbench validate``: calibrate on one set of runs, predict the others, compare (docs/validation.md).

Calibration set (in-sample): the network trained in one process, each layer timed (CPU time), fitted
into the model's compute constants; gloo ping-pong over loopback for latency and bandwidth.
Validation set (out-of-sample): data-parallel runs with a real PS (sync and async, R workers) and a
model-parallel run (W = 2), on loopback and, when root, on tbf-shaped emulated links.

Mapping (docs/validation.md §"Mapping"): a run with mini-batch b measures b samples per step.
The model's configuration is W, R, P = 1 per PS run, k_push = k_pull = b, threads = 1, local batch
b, FC updates as deltas (the runner pushes plain gradients), samples_per_message = b (a model-
parallel message carries the mini-batch). Measured throughput = samples / wall seconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from ..specs import Network
from .mapping import (
    anchored_to_step,
    fit_exchange_overhead,
    message_bytes,
    phase_fields,
    predict_run,
    run_cluster,
    run_nic,
    scale_compute,
)
from .plan import Run, plan, runnable
from .quiet import QuietGate
from .report import ValidationReport, summarise
from .runs import (
    calibration_rows,
    calibration_step_samples_per_s,
    measure_interleaved,
    measured_wait_s,
    step_parts,
    wakeup_delay,
)


def validate(net: Network, *, smoke: bool = False, batch_size: int = 64, iterations: int = 30,
             rates_bits_per_s: tuple[float, ...] = (), progress: Callable[[str], None] | None = None,
             emulate: bool = True, launches: int = 1,
             exchange_overhead_s: float | None = None, pollers: bool = False) -> ValidationReport:
    """Calibrate on the single-process run and loopback transfers, predict and measure the rest.

    Each run is predicted on the calibrated machine with the link it used (loopback fit, or the tbf
    rate with goodput 0.956), every process a one-core machine on this host (``Cluster.shared_host``,
    docs/model.md §4) shared with the other programs' runnable threads measured during the run
    (``SharedHost.background_threads``). Smoke runs use a 1 Gbit/s tbf link when emulation is
    available, else loopback. ``exchange_overhead_s`` (``Nic.exchange_overhead_s``): given, every
    model-parallel run is out-of-sample; None, the first model-parallel run (loopback) calibrates it
    (:func:`fit_exchange_overhead`) and is reported in-sample. Each PS run is predicted with the wake-up
    delay d measured on its own path and message (:func:`wakeup_delay`). The host's calibration
    measurements come first; then every run, the calibration run among them, is launched ``launches``
    times in :func:`launch_order` (interleaved, so that the host's drift reaches the calibration and the
    runs alike) and its median launch kept. ``pollers`` (opt-in): every
    run beside one idle poller per CPU (:mod:`.pollers`); then neither σ_h (the calibration run ran
    beside a busy thread already) nor d (the pollers remove the wait) is measured or applied.
    """
    from . import netns
    from .alloc import steady_allocator
    from .calibrate import (
        llc_bytes,
        machine_from_fit,
        measure_link_latency,
        measure_transfer,
        nic_from_fit,
    )
    from .fit import fit_compute
    from .hostload import host_cores, load_average
    from .pollers import available as pollers_available

    say = progress or (lambda _m: None)
    pollers = pollers and pollers_available() and host_cores() > 1
    steady_allocator()  # the co-run measurement runs in this process (docs/validation.md §"Runs")
    notes: list[str] = []
    runs, why = runnable(plan(smoke, rates_bits_per_s), smoke, emulate, net)
    if why is not None:
        notes.append(why)
    load_before = load_average()
    cores = host_cores()
    # 1. The host's calibration measurements: loopback transfers, each emulated link's latency and the
    # wake-up delay d of each PS run's path and message (σ_h is taken in the rounds, below).
    tfit = measure_transfer(quick=smoke, launches=1 if smoke else 3)
    say("loopback transfers")
    links: dict[float, dict[str, Any]] = {}  # each emulated link's own latency
    for rate in dict.fromkeys(r.link_bits_per_s for r in runs if r.link_bits_per_s is not None):
        links[rate] = measure_link_latency(rate, tfit.copy_time_s_per_byte, repeats=8 if smoke else 20)
        say(f"latency of the {rate / 1e6:g} Mbit/s link")
    wakeups: dict[tuple[float | None, int], dict[str, Any]] = {}  # d per (link, message)
    wake_d: dict[Run, float] = {}
    for run in runs:
        if run.kind == "dp":  # d on the run's own path with its own PS message (docs/validation.md §"Shared host")
            one = Run("dp", "async", 1, run.link_bits_per_s)  # one worker's push (or pull) of the weights
            size = int(max(message_bytes(net, one, batch_size)))
            fresh = (run.link_bits_per_s, size) not in wakeups
            wake = wakeup_delay(run, size, wakeups, pollers, smoke)
            wake_d[run] = float(wake["host_wakeup_delay_s"])
            if fresh:
                say(f"wake-up delay {1e3 * wake_d[run]:.2f} ms ({run.label.split(', ')[1]}, {size / 1e3:.0f} kB)")
    # 2. Every run, the calibration run among them, launched in turn (launch_order): the host's drift
    # over the sweep reaches the calibration and the runs it predicts alike. The co-run slowdown σ_h is
    # measured likewise: its (alone, beside) pairs spread over the rounds, before each round's launches.
    from .corun import corun_slowdown, merge_corun

    pairs = math.ceil((3 if smoke else 5) / max(1, launches))  # 3 or 5 pairs in all
    corun_parts: list[dict[str, Any]] = []

    def corun_round(_k: int) -> None:
        corun_parts.append(corun_slowdown(net, batch_size, steps=5 if smoke else 10, repeats=pairs))

    gate = QuietGate(budget_s=120.0)
    measured = measure_interleaved(net, runs, batch_size, iterations, launches, pollers=pollers, say=say,
                                   each_round=None if pollers else corun_round, gate=gate)
    if gate.waited_s >= 1.0 or gate.disturbed:
        say(f"the host was busy: waited {gate.waited_s:.0f} s for it; launches taken busy anyway are left out "
            "of the medians")
    if pollers:  # every run's spare CPUs spin: the calibration run runs beside a busy thread already
        corun = {"host_corun_slowdown": 0.0, "not_measured": "the runs' idle pollers keep every CPU busy, "
                 "so the calibration run's constants carry the co-run slowdown"}
    else:
        corun = merge_corun(corun_parts)
    sigma_h = float(corun["host_corun_slowdown"])
    say(f"co-run slowdown {sigma_h:.3f}")
    single = measured[0]
    # 3. The compute fit on the calibration run's median launch.
    cfit = fit_compute(calibration_rows(net, single["raw"], batch_size), llc_bytes(), relative_to="total")
    # ... anchored to the calibration run's CPU view: the median over its kept launches, the statistic
    # its in-sample row is compared with (a relaunch on a busy host can keep two or more launches).
    cfit = anchored_to_step(net, cfit, calibration_step_samples_per_s(single, batch_size), batch_size, tfit)
    # A synchronous round waits for the slowest worker (docs/model.md §6): the steps' jitter.
    step_cv = float(single["step_time_cv"])
    free_machine = machine_from_fit(cfit, copy_time_s_per_byte=tfit.copy_time_s_per_byte).evolve(
        step_time_cv=min(10.0, step_cv))
    # Wall-time calibration: the machine as loaded during the calibration run (other programs share
    # it): every compute constant stretched by the single-process step's wall/CPU ratio λ (1 on an
    # idle host). The CPU view uses the CPU-time constants and no contention at all.
    stretch = max(1.0, float(single["compute_wall_over_cpu"]))
    machine = scale_compute(free_machine, stretch)
    # 4. Predict each run and compare.
    rows = []
    exchange_fit: dict[str, Any] | None = None
    if exchange_overhead_s is not None:
        exchange_fit = {"exchange_overhead_s": exchange_overhead_s, "run": "given (another network or link)"}
    for run, meas in zip(runs, measured, strict=True):
        nic, bucket = run_nic(net, run, batch_size, tfit, links)
        bg = None if run.kind == "single" else float(meas.get("background_threads", 0.0))
        wd = wake_d.get(run, 0.0)
        in_sample = run.kind == "single"
        exchange = None
        if run.kind == "mp" and exchange_overhead_s is None:  # calibrates the exchange overhead
            exchange = fit_exchange_overhead(net, run_cluster(free_machine, nic, run, cores, background_threads=bg,
                                                              corun_slowdown=sigma_h, wakeup_delay_s=wd),
                                             run, batch_size, meas, cores)
            exchange_overhead_s, exchange_fit = exchange["exchange_overhead_s"], {**exchange, "run": run.label}
            in_sample = True
        pred, item, free = predict_run(net, run, batch_size, machine, free_machine, nic, cores, bg, sigma_h,
                                       exchange_overhead_s, wd)
        m = meas["samples_per_s"]
        cv = meas.get("cpu_view_samples_per_s")
        rows.append({"label": run.label, **asdict(run), "in_sample": in_sample,
                     "predicted_samples_per_s": pred, "measured_samples_per_s": m,
                     "error": pred / m - 1.0, "launches_samples_per_s": meas["launches_samples_per_s"],
                     "busy_launches_samples_per_s": meas.get("busy_launches_samples_per_s", []),
                     "predicted_uncontended_samples_per_s": free, "cpu_view_samples_per_s": cv,
                     "cpu_view_error": (free / cv - 1.0) if cv else None,
                     "compute_wall_over_cpu": meas.get("compute_wall_over_cpu"),
                     "bucket_rate_factor": bucket, "background_threads": bg, "bottleneck": item["bottleneck"],
                     "wait_s_per_step": measured_wait_s(meas, run, cores) if run.kind == "mp" else None,
                     "calibrates": "exchange_overhead_s" if exchange else None, "wakeup_delay_s": wd,
                     **phase_fields(item, meas["launches_samples_per_s"]), **step_parts(meas, item, batch_size)})
    conditions = {"host_cores": cores, "load_average_before": load_before, "load_average_after": load_average(),
                  "single_wall_over_cpu": single["compute_wall_over_cpu"], "compute_stretch": stretch,
                  "launches": launches, "launch_order": "interleaved", "quiet_gate": gate.report(),
                  "tbf_burst_s": netns.BURST_S,
                  "host_corun_slowdown": sigma_h,
                  "idle_pollers": pollers}
    calibration = {"compute": cfit.to_dict(), "transfer": tfit.to_dict(), "exchange": exchange_fit,
                   "jitter": {"step_time_cv": step_cv, "steps": iterations, "run": f"{runs[0].label} (median launch)"},
                   "links": list(links.values()), "corun": corun, "wakeup": list(wakeups.values()),
                   "cluster": run_cluster(machine, nic_from_fit(tfit), runs[0], cores,
                                          corun_slowdown=sigma_h).to_dict()}
    return ValidationReport(network=net.name, network_spec=net.to_dict(), batch_size=batch_size,
                            iterations=iterations, smoke=smoke, calibration=calibration, conditions=conditions,
                            rows=tuple(rows), summary=summarise(rows), notes=tuple(notes))
