"""The validation's training runs and what they measure (docs/validation.md §"Runs"): launches
interleaved, the median launch, the calibration rows of the single-process run, the steps' parts, and
the wake-up delay measured on each PS run's path."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ..specs import Network
from .plan import Run, launch_order, processes
from .quiet import QuietGate, bracket, launch_again


def layer_rows(net: Network, layers: dict[str, dict[str, float]], batch_size: int,
               suffix: str = "") -> list[dict[str, Any]]:
    """Per-layer timings of a single-process run in the fit's row format (CPU seconds per batch)."""
    from ..model.arrays import KIND_GROUPS, network_arrays

    arr = network_arrays(net)
    rows = []
    for i, name in enumerate(arr.names):
        t = layers.get(name)
        if t is None:
            continue
        rows.append({"name": name + suffix, "group": KIND_GROUPS[int(arr.group[i])], "batch_size": batch_size,
                     "macs": float(arr.macs_forward[i] + arr.macs_backprop[i] + arr.macs_weight_grad[i]),
                     "elem_ops": float(arr.elem_forward[i] + arr.elem_backprop[i]), "weights": float(arr.weights[i]),
                     # forward and backward, each of the layer's calls (a recurrent layer's steps: the model's
                     # per-call overhead, NetworkArrays.cpu_calls)
                     "update_elem_ops": 0.0, "passes": 2.0 * float(arr.cpu_calls[i]),
                     "cpu_s": t["forward_cpu_s"] + t["backward_cpu_s"]})
    return rows


def calibration_rows(net: Network, single: dict[str, Any], batch_size: int) -> list[dict[str, Any]]:
    """Per-layer rows plus one row for the whole step (its layers and the SGD update), weighted 10x:
    the step's CPU time includes the framework's per-step overheads the isolated layers miss (and
    isolated layers pay timing overheads the step does not), and the step is what runs predict. The
    step is the mean one, the statistic a run's throughput (iterations / elapsed) measures. The
    same rows at the small batch (when timed) separate the per-layer-pass overhead."""
    out = []
    for res, suffix in ((single, ""), (single.get("small"), "@small")):
        if res is None:
            continue
        b = int(res.get("batch_size", batch_size))
        rows = layer_rows(net, res["layers"], b, suffix)
        parts = [{k: v for k, v in r.items() if k != "update_elem_ops"} for r in rows]
        step = {"name": "step" + suffix, "group": "step", "batch_size": b, "parts": parts,
                "cpu_s": _step(res)["cpu_s"], "weight": 10.0}
        out += [*rows, step]
    return out


def measure(net: Network, run: Run, batch_size: int, iterations: int, warmup: int = 3,
            topology: Any = None, pollers: bool = False) -> dict[str, Any]:
    """Run one configuration; measured samples/s from wall time, and the CPU-time view of compute.
    ``pollers``: beside one idle poller per CPU (:mod:`.pollers`, docs/validation.md §"Shared host"; off by
    default)."""
    from .launch import run_ranks

    args = {"network": net.to_dict(), "batch_size": batch_size, "iterations": iterations, "warmup": warmup,
            "mode": run.mode}
    background: list[float] = []
    kw: dict[str, Any] = {"timeout_s": 60 + 2.0 * iterations, "background": background, "pollers": pollers}
    if topology is not None:
        kw.update(addrs=topology.addrs, namespaces=topology.namespaces)
    if run.kind == "single":  # in a fresh process, like the runs it calibrates for
        res = run_ranks("dnnbench.measure.single:single_main", 1,
                        {**args, "small_batch_size": small_batch(batch_size)}, timeout_s=kw["timeout_s"],
                        pollers=pollers)[0]
        step = _step(res)
        return {"samples_per_s": batch_size / step["wall_s"], "cpu_view_samples_per_s": batch_size / step["cpu_s"],
                "compute_wall_over_cpu": step["wall_s"] / step["cpu_s"], "step_time_cv": res["step_cv"],
                "raw": res}
    if run.kind == "dp":
        res = run_ranks("dnnbench.measure.dataparallel:ps_dp_main", run.ranks + 1, args, **kw)
        workers = [r for r in res if r["role"] == "worker"]
        cpu_view = sum(batch_size / (w["compute"]["cpu_s"] + w["communication"]["wall_s"]) for w in workers)
        return {"samples_per_s": sum(w["samples_per_s"] for w in workers), "background_threads": _mean(background),
                "cpu_view_samples_per_s": cpu_view,
                "compute_wall_over_cpu": float(np.median([w["compute"]["wall_s"] / w["compute"]["cpu_s"]
                                                          for w in workers])), "raw": res}
    res = run_ranks("dnnbench.measure.modelparallel:mp_main", run.ranks, args, **kw)
    return {"samples_per_s": min(r["samples_per_s"] for r in res), "cpu_view_samples_per_s": None,
            "background_threads": _mean(background),
            "compute_wall_over_cpu": None, "raw": res}


def _step(res: dict[str, Any]) -> dict[str, float]:
    """A single-process run's mean step (wall and CPU seconds): what iterations / elapsed measures,
    as every other run's throughput does (the median step is 1.5–2.5 % shorter: the long steps)."""
    return res["step_mean"]


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else 0.0


def small_batch(batch_size: int) -> int:
    """The second, small mini-batch of the calibration run (separates the per-layer overhead)."""
    return max(1, batch_size // 8)


def median_launch(results: list[dict[str, Any]], busy: list[bool] | None = None) -> dict[str, Any]:
    """Several launches of one run: the launch of median wall throughput among those the host was quiet
    for (``busy``: which were not, :mod:`.quiet`; all of them where none was), with those launches'
    throughputs (timings vary between launches, docs/validation.md §"Noise"; the ranking and the phase
    range read them), the left-out ones' apart, and the median CPU view of the kept ones."""
    busy = [False] * len(results) if busy is None else busy
    if all(busy):
        busy = [False] * len(results)
    kept = [m for m, b in zip(results, busy, strict=True) if not b]
    mid = sorted(kept, key=lambda m: m["samples_per_s"])[(len(kept) - 1) // 2]
    cvs = [m["cpu_view_samples_per_s"] for m in kept if m["cpu_view_samples_per_s"]]
    return {**mid, "launches_samples_per_s": [m["samples_per_s"] for m in kept],
            "busy_launches_samples_per_s": [m["samples_per_s"] for m, b in zip(results, busy, strict=True) if b],
            "cpu_view_samples_per_s": float(np.median(cvs)) if cvs else None}


def calibration_step_samples_per_s(single: dict[str, Any], batch_size: int) -> float:
    """The samples/s at CPU time the compute fit is anchored to: the single-process run's CPU view,
    the median over its kept launches (:func:`median_launch`), which its in-sample row compares the
    prediction with; its median launch's own mean step where no CPU view was kept."""
    cv = single.get("cpu_view_samples_per_s")
    return float(cv) if cv else batch_size / float(single["raw"]["step_mean"]["cpu_s"])


def measure_interleaved(net: Network, runs: list[Run], batch_size: int, iterations: int, launches: int,
                        pollers: bool = False, say: Callable[[str], None] | None = None,
                        each_round: Callable[[int], None] | None = None,
                        gate: QuietGate | None = None) -> list[dict[str, Any]]:
    """Every run launched ``launches`` times in :func:`launch_order`, each tbf run in namespaces of its
    own per launch (:func:`.netns.emulated`); the :func:`median_launch` of each run, in ``runs`` order.
    ``each_round(k)`` is called before round k's first launch (a host measurement spread like the runs).
    Each launch is bracketed by ``gate`` (:class:`.quiet.QuietGate` on the host's cores, waiting up to
    two minutes in all while another tenant holds a core); a run with fewer than min(2, launches)
    launches on a quiet host is launched again (up to ``launches`` more times), and its median is of
    the quiet ones."""
    from . import netns

    gate = QuietGate(budget_s=120.0) if gate is None else gate
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    results: list[list[dict[str, Any]]] = [[] for _ in runs]
    refs: list[list[float]] = [[] for _ in runs]

    def launch(i: int, label: str) -> None:
        run = runs[i]

        def once() -> dict[str, Any]:
            if run.link_bits_per_s is None:
                return measure(net, run, batch_size, iterations, pollers=pollers)
            with netns.emulated(processes(run), run.link_bits_per_s) as topo:
                return measure(net, run, batch_size, iterations, topology=topo, pollers=pollers)

        result, ref = bracket(gate, cores, once)
        results[i].append(result)
        refs[i].append(ref)
        if say is not None:
            say(f"{run.label}, {label}")

    for i, k in launch_order(len(runs), launches):
        if each_round is not None and not any(len(r) > k for r in results):  # round k's first launch
            each_round(k)
        launch(i, f"launch {k + 1}/{max(1, launches)}")

    def quiet(i: int) -> int:
        return sum(not gate.is_busy(r, cores) for r in refs[i])

    launch_again(range(len(runs)), quiet, lambda i: launch(i, "launched again (the host was busy)"),
                 min(2, max(1, launches)), max(1, launches))
    return [median_launch(r, [gate.is_busy(x, cores) for x in ref]) for r, ref in zip(results, refs, strict=True)]


def measured_wait_s(meas: dict[str, Any], run: Run, cores: int) -> float:
    """Wall seconds per step a model-parallel run's ranks spent neither computing nor descheduled:
    each rank's mean step wall time (elapsed / iterations, the statistic its measured throughput
    uses; the median step missed the long steps, so the fitted o_x did not reproduce its own run)
    minus its median step CPU time stretched by the host's κ = max(1, (W + other programs'
    threads)/cores) (docs/model.md §4); the median over the ranks."""
    bg = float(meas.get("background_threads", 0.0))
    kappa = max(1.0, (run.ranks + bg) / cores)

    def wall(r: dict[str, Any]) -> float:
        return r["elapsed_s"] / r["iterations"] if r.get("elapsed_s") and r.get("iterations") else r["step"]["wall_s"]

    return float(np.median([wall(r) - kappa * r["step"]["cpu_s"] for r in meas["raw"]]))


def measured_step_s(meas: dict[str, Any]) -> float:
    """Mean wall seconds per step of a model-parallel run: each rank's elapsed / iterations (the
    statistic its measured throughput uses), the slowest rank (the throughput is the slowest's)."""
    def wall(r: dict[str, Any]) -> float:
        return r["elapsed_s"] / r["iterations"] if r.get("elapsed_s") and r.get("iterations") else r["step"]["wall_s"]

    return float(max(wall(r) for r in meas["raw"]))


def step_parts(meas: dict[str, Any], item: dict[str, Any], batch_size: int) -> dict[str, float | None]:
    """Where a step's time went, measured (median over a PS run's workers, median launch) and
    modelled (per mini-batch): the workers' compute CPU and wall, their push + pull wall, against
    the model's worker compute (κ included) and the rest of its serial time (network, PS); and the
    workers' mean push + pull wall (the throughput's statistic, median over the workers)."""
    parts = item["breakdown_s_per_sample"]
    compute = sum(v for k, v in parts.items() if k.startswith("compute_")) * batch_size
    out: dict[str, float | None] = {"model_compute_s_per_step": compute,
                                    "model_other_s_per_step": sum(parts.values()) * batch_size - compute,
                                    "compute_cpu_s_per_step": None, "compute_wall_s_per_step": None,
                                    "communication_wall_s_per_step": None, "communication_mean_wall_s_per_step": None}
    workers = [r for r in meas.get("raw") or [] if isinstance(r, dict) and r.get("role") == "worker"]
    if workers:
        out["compute_cpu_s_per_step"] = float(np.median([w["compute"]["cpu_s"] for w in workers]))
        out["compute_wall_s_per_step"] = float(np.median([w["compute"]["wall_s"] for w in workers]))
        out["communication_wall_s_per_step"] = float(np.median([w["communication"]["wall_s"] for w in workers]))
        if all("steps" in w for w in workers):  # the mean shows a tail of long waits the median hides
            out["communication_mean_wall_s_per_step"] = float(np.median(
                [np.mean(w["steps"]["communication_wall_s"]) for w in workers]))
    ps = [r for r in meas.get("raw") or [] if isinstance(r, dict) and r.get("role") == "ps"]
    for key in ("wall_s_per_push", "recv_wall_s_per_push", "apply_wall_s_per_push", "reply_wall_s_per_push",
                "reply_wait_wall_s_per_push", "process_cpu_s_per_push"):
        if ps and key in ps[0]:  # the PS's own timings (docs/validation.md §"Runs")
            out["ps_" + key] = float(ps[0][key])
    return out


def wakeup_delay(run: Run, size_bytes: int, cache: dict[tuple[float | None, int], dict[str, Any]],
                 pollers: bool, quick: bool) -> dict[str, Any]:
    """The wake-up delay d a PS run's exchanges see (``SharedHost.wakeup_delay_s``, docs/model.md §9):
    measured once per (link, message size) on the run's own path (:func:`.wakeup.measure_wakeup_delay`)
    and cached; 0, unmeasured, beside the idle pollers, which remove the wait."""
    from . import netns
    from .wakeup import measure_wakeup_delay

    key = (run.link_bits_per_s, size_bytes)
    if key not in cache:
        kw: dict[str, Any] = {"launches": 1 if quick else 3, "size_bytes": size_bytes,
                              "repeats": max(10, min(200, int(2e8 / max(size_bytes, 1))) // (4 if quick else 1))}
        if pollers:
            out: dict[str, Any] = {"host_wakeup_delay_s": 0.0, "size_bytes": size_bytes,
                                   "not_measured": "the runs' idle pollers take every woken rank at once"}
        elif run.link_bits_per_s is None:
            out = measure_wakeup_delay(**kw)
        else:
            with netns.emulated(2, run.link_bits_per_s) as topo:
                out = measure_wakeup_delay(topology=topo, **kw)
        cache[key] = {"link_bits_per_s": run.link_bits_per_s, **out}
    return cache[key]
