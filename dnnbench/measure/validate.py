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
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..specs import Cluster, Configuration, Machine, Network, Nic, SharedHost

SMOKE_BOUND = 2.5  # CI: measured / predicted must lie within a factor 2.5 either way
SMOKE_LINK_BITS_PER_S = 1e9  # the smoke runs' emulated link (tbf), when root


@dataclass(frozen=True)
class Run:
    kind: str  # single | dp | mp
    mode: str = "sync"  # dp: sync | async
    ranks: int = 1  # dp: R workers; mp: W partitions
    link_bits_per_s: float | None = None  # None: loopback; else a tbf-shaped emulated link

    @property
    def label(self) -> str:
        link = "loopback" if self.link_bits_per_s is None else f"tbf {self.link_bits_per_s / 1e6:g} Mbit/s"
        what = {"single": "1 process", "dp": f"PS {self.mode} R={self.ranks}", "mp": f"model-parallel W={self.ranks}"}
        return f"{what[self.kind]}, {link}"


def plan(smoke: bool, rates_bits_per_s: tuple[float, ...] = ()) -> list[Run]:
    """The runs: the single-process run first (calibration), then the validation set.

    Smoke: PS sync with 1 and 2 workers on an emulated 1 Gbit/s tbf link (loopback when emulation
    is unavailable, see :func:`validate`)."""
    if smoke:
        return [Run("single"), Run("dp", "sync", 1, SMOKE_LINK_BITS_PER_S), Run("dp", "sync", 2, SMOKE_LINK_BITS_PER_S)]
    runs = [Run("single")]
    for link in (None, *rates_bits_per_s):
        runs += [Run("dp", "sync", 1, link), Run("dp", "sync", 2, link), Run("dp", "async", 2, link)]
        runs += [Run("mp", "sync", 2, link)]
    return runs


def runnable(runs: list[Run], smoke: bool, emulate: bool = True) -> tuple[list[Run], str | None]:
    """The runs this host can do, and why the others cannot: without network emulation (not root, no
    ``ip``/``tc``, or ``emulate`` off) the tbf runs are dropped, or in a smoke validation moved to loopback."""
    from . import netns

    if not any(r.link_bits_per_s for r in runs):
        return runs, None
    why = netns.available() if emulate else "network emulation switched off; loopback only"
    if why is None:
        return runs, None
    if smoke:  # the smoke runs fall back to loopback rather than vanish
        return [Run(r.kind, r.mode, r.ranks, None) for r in runs], why
    return [r for r in runs if r.link_bits_per_s is None], why


def progress_steps(runs: list[Run], launches: int) -> int:
    """How many times :func:`validate` reports progress: transfers, σ_h, each link's latency, each PS
    path's wake-up delay, and every launch of every run."""
    links = {r.link_bits_per_s for r in runs if r.link_bits_per_s is not None}
    paths = {r.link_bits_per_s for r in runs if r.kind == "dp"}
    return 2 + len(links) + len(paths) + len(runs) * max(1, launches)


def processes(run: Run) -> int:
    """Processes (model "machines") of a run: the PS and R workers, W partitions, or one."""
    return run.ranks + 1 if run.kind == "dp" else run.ranks if run.kind == "mp" else 1


def configuration(run: Run, batch_size: int) -> Configuration:
    """The model's configuration for a run (module docstring, "Mapping")."""
    base = {"threads": 1, "local_batch_samples": batch_size, "fc_update": "deltas",
            "push_interval_samples": batch_size, "pull_interval_samples": batch_size}
    if run.kind == "dp":
        # The runner's workers push, wait for the PS and pull (request–reply), and its async PS serves
        # each worker's connection concurrently (docs/validation.md §"Mapping").
        return Configuration.build({**base, "replicas": run.ranks, "ps_machines": 1, "mode": run.mode,
                                    "ps_exchange": "request_reply"})
    if run.kind == "mp":
        return Configuration.build({**base, "workers_per_replica": run.ranks, "samples_per_message": batch_size})
    return Configuration.build(base)


def run_cluster(machine: Machine, nic: Nic, run: Run, shared_host_cores: int | None,
                ps_machine: Machine | None = None, background_threads: float = 0.0,
                corun_slowdown: float = 0.0, wakeup_delay_s: float = 0.0) -> Cluster:
    """The cluster a run is predicted on: every process a one-core machine (1 torch thread, the PS
    too) on a host of ``shared_host_cores`` cores (None: as if each process had its own machine)
    shared with ``background_threads`` runnable threads of other programs, busy threads slowing each
    other by σ_h = ``corun_slowdown`` and a woken rank waiting ``wakeup_delay_s`` for a CPU when the
    ranks outnumber the cores (``Cluster.shared_host``, docs/model.md §9)."""
    from .calibrate import build_cluster

    host = None if not shared_host_cores else SharedHost(
        cores=shared_host_cores, background_threads=float(background_threads), corun_slowdown=float(corun_slowdown),
        wakeup_delay_s=float(wakeup_delay_s))
    return build_cluster(machine.evolve(cores=1), nic, name="calibrated-processes", machines=processes(run),
                         shared_host=host, ps_machine=None if ps_machine is None else ps_machine.evolve(cores=1))


def own_busy_threads(run: Run) -> tuple[float, float]:
    """(busy threads the workers compete with, busy threads the PS competes with) among the run's
    own processes, as the model's κ counts them (docs/model.md §9): synchronous rounds separate the
    workers' compute from the PS's, asynchronous ones overlap them."""
    if run.kind == "single":
        return 1.0, 1.0
    if run.kind == "mp":
        return float(run.ranks), 0.0
    if run.mode == "sync":
        return float(run.ranks), 1.0
    return float(run.ranks + 1), float(run.ranks + 1)


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
                     "update_elem_ops": 0.0, "passes": 2.0, "cpu_s": t["forward_cpu_s"] + t["backward_cpu_s"]})
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


def launch_order(runs: int, launches: int) -> list[tuple[int, int]]:
    """(run index, launch index) in the order the launches happen: every run's k-th launch before any
    run's (k+1)-th, the rounds alternately forwards and backwards (A B C C B A A B C ...). The host's speed
    drifts over minutes (docs/validation.md §"Interleaved launches"); in this order each run's launches
    spread over the whole sweep, and a linear drift reaches every run's median alike."""
    order = []
    for k in range(max(1, launches)):
        idx = range(runs) if k % 2 == 0 else range(runs - 1, -1, -1)
        order += [(i, k) for i in idx]
    return order


def median_launch(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Several launches of one run: the launch of median wall throughput, with every launch's throughput
    listed (timings vary between launches, docs/validation.md §"Noise") and the median CPU view."""
    results = sorted(results, key=lambda m: m["samples_per_s"])
    mid = results[(len(results) - 1) // 2]
    cvs = [m["cpu_view_samples_per_s"] for m in results if m["cpu_view_samples_per_s"]]
    return {**mid, "launches_samples_per_s": [m["samples_per_s"] for m in results],
            "cpu_view_samples_per_s": float(np.median(cvs)) if cvs else None}


def measure_interleaved(net: Network, runs: list[Run], batch_size: int, iterations: int, launches: int,
                        pollers: bool = False, say: Callable[[str], None] | None = None,
                        each_round: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """Every run launched ``launches`` times in :func:`launch_order`, each tbf run in namespaces of its
    own per launch (:func:`.netns.emulated`); the :func:`median_launch` of each run, in ``runs`` order.
    ``each_round(k)`` is called before round k's first launch (a host measurement spread like the runs)."""
    from . import netns

    results: list[list[dict[str, Any]]] = [[] for _ in runs]
    for i, k in launch_order(len(runs), launches):
        run = runs[i]
        if each_round is not None and not any(len(r) > k for r in results):  # round k's first launch
            each_round(k)
        if run.link_bits_per_s is None:
            results[i].append(measure(net, run, batch_size, iterations, pollers=pollers))
        else:
            with netns.emulated(processes(run), run.link_bits_per_s) as topo:
                results[i].append(measure(net, run, batch_size, iterations, topology=topo, pollers=pollers))
        if say is not None:
            say(f"{run.label}, launch {k + 1}/{max(1, launches)}")
    return [median_launch(r) for r in results]


def predicted_samples_per_s(net: Network, cluster: Cluster, run: Run, batch_size: int) -> tuple[float, dict[str, Any]]:
    from .. import presets
    from ..model import predict

    pred = predict(net, cluster, presets.default_dataset_for(net), configuration(run, batch_size)).item()
    return float(pred["samples_per_s"]), pred


def scale_compute(machine: Machine, factor: float) -> Machine:
    """``machine`` with every CPU time (MAC, element op, per-layer overhead, message copies) times
    ``factor``."""
    mac = machine.mac_time_s
    if mac is None:  # calibrated machines always carry MAC times
        raise ValueError("machine has no mac_time_s")
    return machine.evolve(mac_time_s=mac.evolve(conv=mac.conv * factor, fc=mac.fc * factor),
                          elem_time_s=machine.elem_time_s * factor,
                          layer_overhead_s=min(0.5, machine.layer_overhead_s * factor),
                          copy_time_s_per_byte=min(1e-4, machine.copy_time_s_per_byte * factor))


def exchange_rounds_per_step(net: Network, run: Run) -> float:
    """Model-parallel exchange rounds per mini-batch as the model counts them: forward and backward
    of every exchanging layer (``model.traffic.model_parallel_rounds``; samples_per_message = b)."""
    from ..model.arrays import network_arrays
    from ..model.traffic import model_parallel_rounds

    return float(model_parallel_rounds(network_arrays(net), np.asarray(float(run.ranks))))


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


def fit_exchange_overhead(net: Network, cluster: Cluster, run: Run, batch_size: int,
                          meas: dict[str, Any], cores: int) -> dict[str, float]:
    """``Nic.exchange_overhead_s`` from one model-parallel run (docs/validation.md §"Exchange
    overhead"): the o_x ≥ 0 at which the model reproduces the run's measured step time
    (:func:`measured_step_s`; root-finding, the model's step time grows with o_x). Everything the
    model does not charge a model-parallel step otherwise (waiting for the other partition, the
    exchange op's framework and copy costs, gloo's wake-ups) lands in this one per-round constant,
    which the other model-parallel runs then test out of sample. The report also keeps the wait
    the ranks measured (:func:`measured_wait_s`) and the model's link time per step."""
    from scipy.optimize import brentq

    def step_s(o_x: float) -> float:
        c = cluster.evolve(worker_nic=cluster.worker_nic.evolve(exchange_overhead_s=o_x))
        return batch_size / predicted_samples_per_s(net, c, run, batch_size)[0]

    target = measured_step_s(meas)
    rounds = exchange_rounds_per_step(net, run)
    bare = cluster.evolve(worker_nic=cluster.worker_nic.evolve(exchange_overhead_s=0.0))
    _, item = predicted_samples_per_s(net, bare, run, batch_size)
    link_s = float(item["breakdown_s_per_sample"]["model_parallel_network"]) * batch_size
    o_x = 0.0
    if rounds and step_s(0.0) < target:
        hi = max(1e-3, target)
        while step_s(hi) < target:  # the step grows at least linearly in o_x: a few doublings at most
            hi *= 2.0
        o_x = float(brentq(lambda v: step_s(v) - target, 0.0, hi, xtol=1e-9, rtol=1e-9))
    return {"exchange_overhead_s": o_x, "step_s": target, "wait_s_per_step": measured_wait_s(meas, run, cores),
            "model_link_s_per_step": link_s, "rounds_per_step": rounds}


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


def worker_link(nic: Nic, run: Run) -> Nic:
    """The workers' NIC as a run uses it (docs/validation.md §"Mapping"): a PS worker pushes and
    then waits for its pull (request–reply), so its link never carries both directions at once —
    duplex "half" (the model then adds push and pull, docs/model.md §6); the PS's NIC stays full
    duplex (it receives the next push while its replies go out). Model-parallel ranks send and
    receive each exchange at once: full duplex."""
    return nic.evolve(duplex="half") if run.kind == "dp" else nic


#: Largest rate factor :func:`bucket_rate_factor` returns (traffic the bucket passes whole).
BUCKET_CAP = 100.0


def message_bytes(net: Network, run: Run, batch_size: int) -> list[float]:
    """Bytes of each message that crosses the busiest tbf port of a run, each starting on a full
    bucket: a PS run's push (or pull) of the weights, all R of them at the PS's port in a synchronous
    round; a model-parallel run's exchange of one layer in one pass ((W-1)/W of its input, b samples;
    the layers' compute refills the bucket in between)."""
    from ..model.arrays import network_arrays
    from ..units import FP32_BYTES

    arr = network_arrays(net)
    weights_bytes = float(arr.weights.sum()) * FP32_BYTES
    if run.kind == "dp":
        return [weights_bytes * (run.ranks if run.mode == "sync" else 1)]
    if run.kind == "mp":
        share = (run.ranks - 1) / run.ranks
        return [float(v) / 2 * share * batch_size * FP32_BYTES for v in arr.fm_values if v > 0] * 2
    return []


def bucket_rate_factor(net: Network, run: Run, batch_size: int, burst_bytes: float) -> float:
    """Link-rate multiplier that makes the model's bucket-less link time of a run's messages equal
    tbf's Σ max(0, S - burst)·8/(g·R) (docs/validation.md §"Network emulation"); ≤ ``BUCKET_CAP``."""
    sizes = message_bytes(net, run, batch_size)
    total = sum(sizes)
    rest = sum(max(0.0, m - burst_bytes) for m in sizes)
    if total <= 0:
        return 1.0
    return min(BUCKET_CAP, total / rest) if rest > 0 else BUCKET_CAP


def run_nic(net: Network, run: Run, batch_size: int, tfit: Any,
            links: dict[float, dict[str, Any]]) -> tuple[Nic, float]:
    """The NIC a run is predicted on, and its tbf bucket factor: loopback's fit, or the emulated
    link's rate × :func:`bucket_rate_factor` with goodput 0.956 and the link's measured latency
    (``links[rate]["latency_s"]``; loopback's when the link was not measured)."""
    from . import netns
    from .calibrate import nic_from_fit, tbf_nic

    if run.link_bits_per_s is None:
        return nic_from_fit(tfit), 1.0
    bucket = bucket_rate_factor(net, run, batch_size, netns.burst_for(run.link_bits_per_s))
    latency = links.get(run.link_bits_per_s, {}).get("latency_s", tfit.latency_s)
    return tbf_nic(run.link_bits_per_s * bucket, latency), bucket


def predict_run(net: Network, run: Run, batch_size: int, machine: Machine, free_machine: Machine, nic: Nic,
                cores: int, background_threads: float | None, sigma_h: float,
                exchange_overhead_s: float | None, wakeup_delay_s: float = 0.0) -> tuple[float, dict[str, Any], float]:
    """(predicted samples/s on this shared host, the prediction, the CPU view's uncontended
    samples/s) of one run: the single-process run on ``machine`` (the calibration run's own load,
    λ), the others on ``free_machine`` with the host's cores, the other programs' threads measured
    during the run, σ_h and the wake-up delay d (docs/validation.md §"Mapping")."""
    if run.kind == "mp":
        nic = nic.evolve(exchange_overhead_s=float(exchange_overhead_s or 0.0))
    worker_nic = worker_link(nic, run)
    if run.kind == "single":  # in-sample: the machine as loaded during this very run (λ)
        cluster = run_cluster(machine, nic, run, cores)
    else:  # the other programs' runnable threads measured during the run join the model's κ
        cluster = run_cluster(free_machine, nic, run, cores, background_threads=background_threads or 0.0,
                              corun_slowdown=sigma_h, wakeup_delay_s=wakeup_delay_s)
    pred, item = predicted_samples_per_s(net, cluster.evolve(worker_nic=worker_nic), run, batch_size)
    free, _ = predicted_samples_per_s(net, run_cluster(free_machine, nic, run, None).evolve(worker_nic=worker_nic),
                                      run, batch_size)
    return pred, item, free


def phase_fields(item: dict[str, Any], launches: list[float]) -> dict[str, Any]:
    """A run's phase range (docs/model.md §6: request–reply replicas in lock step and staggered) and
    how many of its launches fell inside it; the range is the prediction itself where no phase enters."""
    lo, hi = item["phase_range_samples_per_s"]
    inside = sum(1 for v in launches if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9))
    return {"predicted_phase_range_samples_per_s": [lo, hi], "launches_in_phase_range": inside}


def replay(report: dict[str, Any]) -> dict[str, Any]:
    """A saved validation report predicted again with the current model from its own calibration
    (compute fit, transfers, link latencies, σ_h, o_x, the load measured during each run): no run is
    repeated. Every row's prediction, error, CPU-view error and bottleneck, and the summary, are
    recomputed; the measurements are the report's. For working on the model against measurements
    that cost minutes to take (``dnnbench validate --replay REPORT``)."""
    from ..errors import SpecError
    from ..specs.io import check_plain

    check_plain(report, "report")
    try:
        return _replay(report)
    except SpecError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError, OverflowError) as err:
        # A report is a document the user brings: any part missing or of the wrong type is this one line.
        raise SpecError.plain("report", f"is not a dnnbench validation report (missing or bad {err!r:.80})") from None


def _replay(report: dict[str, Any]) -> dict[str, Any]:
    from .. import presets
    from .calibrate import machine_from_fit
    from .fit import ComputeFit, TransferFit

    try:
        if not isinstance(report, dict):
            raise TypeError("not a JSON object")
        spec = report.get("network_spec")
        net = Network.build(spec) if spec is not None else presets.network(report["network"])
        cal, cond = report["calibration"], report["conditions"]
        c, t = cal["compute"], cal["transfer"]
        cfit = ComputeFit(c["mac_time_s"]["conv"], c["mac_time_s"]["fc"], c["elem_time_s"], c["cache_speedup"], {},
                          c["layer_overhead_s"])
        tfit = TransferFit(t["latency_s"], t["bits_per_s"], {}, t["copy_time_s_per_byte"])
        batch_size, cores = int(report["batch_size"]), int(cond["host_cores"])
        sigma_h = float(cond["host_corun_slowdown"])
        stretch = float(cond.get("compute_stretch", 1.0))
        links = {float(v["rate_bits_per_s"]): v for v in cal.get("links") or []}
        o_x = (cal.get("exchange") or {}).get("exchange_overhead_s")
        step_cv = float((cal.get("jitter") or {}).get("step_time_cv", 0.0))  # reports before it: none
        rows_in = report["rows"]
    except (KeyError, TypeError, ValueError) as err:
        from ..errors import SpecError

        raise SpecError.plain("report", f"is not a dnnbench validation report (missing or bad {err})") from None
    free_machine = machine_from_fit(cfit, copy_time_s_per_byte=tfit.copy_time_s_per_byte).evolve(
        step_time_cv=min(10.0, step_cv))
    machine = scale_compute(free_machine, stretch)
    rows = []
    for row in rows_in:
        run = Run(row["kind"], row["mode"], int(row["ranks"]), row["link_bits_per_s"])
        nic, bucket = run_nic(net, run, batch_size, tfit, links)
        pred, item, free = predict_run(net, run, batch_size, machine, free_machine, nic, cores,
                                       row.get("background_threads"), sigma_h, o_x,
                                       float(row.get("wakeup_delay_s") or 0.0))  # reports before it: none
        cv = row.get("cpu_view_samples_per_s")
        rows.append({**row, "predicted_samples_per_s": pred, "error": pred / row["measured_samples_per_s"] - 1.0,
                     "predicted_uncontended_samples_per_s": free, "cpu_view_error": (free / cv - 1.0) if cv else None,
                     "bucket_rate_factor": bucket, "bottleneck": item["bottleneck"],
                     **phase_fields(item, row.get("launches_samples_per_s") or [row["measured_samples_per_s"]])})
    return {**report, "rows": rows, "summary": summarise(rows), "replayed": True}


def validate(net: Network, *, smoke: bool = False, batch_size: int = 64, iterations: int = 30,
             rates_bits_per_s: tuple[float, ...] = (), progress: Callable[[str], None] | None = None,
             emulate: bool = True, launches: int = 1,
             exchange_overhead_s: float | None = None, pollers: bool = False) -> dict[str, Any]:
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
        host_cores,
        llc_bytes,
        machine_from_fit,
        measure_link_latency,
        measure_transfer,
        nic_from_fit,
    )
    from .fit import fit_compute
    from .hostload import load_average
    from .pollers import available as pollers_available

    say = progress or (lambda _m: None)
    pollers = pollers and pollers_available() and host_cores() > 1
    steady_allocator()  # the co-run measurement runs in this process (docs/validation.md §"Runs")
    notes: list[str] = []
    runs, why = runnable(plan(smoke, rates_bits_per_s), smoke, emulate)
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

    measured = measure_interleaved(net, runs, batch_size, iterations, launches, pollers=pollers, say=say,
                                   each_round=None if pollers else corun_round)
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
                     "predicted_uncontended_samples_per_s": free, "cpu_view_samples_per_s": cv,
                     "cpu_view_error": (free / cv - 1.0) if cv else None,
                     "compute_wall_over_cpu": meas.get("compute_wall_over_cpu"),
                     "bucket_rate_factor": bucket, "background_threads": bg, "bottleneck": item["bottleneck"],
                     "wait_s_per_step": measured_wait_s(meas, run, cores) if run.kind == "mp" else None,
                     "calibrates": "exchange_overhead_s" if exchange else None, "wakeup_delay_s": wd,
                     **phase_fields(item, meas["launches_samples_per_s"]), **step_parts(meas, item, batch_size)})
    conditions = {"host_cores": cores, "load_average_before": load_before, "load_average_after": load_average(),
                  "single_wall_over_cpu": single["compute_wall_over_cpu"], "compute_stretch": stretch,
                  "launches": launches, "launch_order": "interleaved", "tbf_burst_s": netns.BURST_S,
                  "host_corun_slowdown": sigma_h,
                  "idle_pollers": pollers}
    return {"network": net.name, "network_spec": net.to_dict(), "batch_size": batch_size, "iterations": iterations,
            "smoke": smoke,
            "calibration": {"compute": cfit.to_dict(), "transfer": tfit.to_dict(), "exchange": exchange_fit,
                            "jitter": {"step_time_cv": step_cv, "steps": iterations,
                                       "run": f"{runs[0].label} (median launch)"},
                            "links": list(links.values()),
                            "corun": corun, "wakeup": list(wakeups.values()),
                            "cluster": run_cluster(machine, nic_from_fit(tfit), runs[0], cores,
                                                   corun_slowdown=sigma_h).to_dict()},
            "conditions": conditions, "rows": rows, "summary": summarise(rows), "notes": notes}


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


def table(report: dict[str, Any]) -> str:
    """The report as a text table (predicted against measured samples/s and the error)."""
    lines = [f"{report['network']}: batch {report['batch_size']}, {report['iterations']} iterations per run",
             f"{'configuration':<38}{'predicted/s':>12}{'measured/s':>12}{'error':>9}"
             f"{'cpu-view err':>13}{'other thr':>10}  bottleneck"]
    for r in report["rows"]:
        cv = "" if r.get("cpu_view_error") is None else f"{100 * r['cpu_view_error']:+.1f}%"
        tag = " (calibration)" if r["in_sample"] else ""
        bg = "" if r.get("background_threads") is None else f"{r['background_threads']:.2f}"
        lines.append(f"{r['label'] + tag:<38}{r['predicted_samples_per_s']:>12.1f}{r['measured_samples_per_s']:>12.1f}"
                     f"{100 * r['error']:>+8.1f}%{cv:>13}{bg:>10}  {r['bottleneck']}")
    for r in report["rows"]:
        lo, hi = r.get("predicted_phase_range_samples_per_s") or (0.0, 0.0)
        if hi > 1.01 * lo > 0:  # request–reply replicas whose phase the model leaves open (docs/model.md §6)
            got = r.get("launches_samples_per_s") or [r["measured_samples_per_s"]]
            lines.append(f"  phase range of {r['label']}: {lo:.1f}/s in lock step to {hi:.1f}/s staggered; "
                         f"launches {', '.join(f'{v:.1f}' for v in sorted(got))}: "
                         f"{r.get('launches_in_phase_range', 0)} of {len(got)} inside")
    s = report["summary"]
    if s["median_abs_error"] is not None:
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
    c = report.get("conditions")
    if c:
        lines.append(f"conditions: {c['host_cores']} cores, load average {c['load_average_before']:.1f} before, "
                     f"{c['load_average_after']:.1f} after; 1-process step wall/CPU "
                     f"{c['single_wall_over_cpu']:.2f}; co-run slowdown σ_h {c.get('host_corun_slowdown', 0.0):.3f}"
                     f"{' (idle pollers: not applied)' if c.get('idle_pollers') else ''}; "
                     f"median of {c['launches']} launch(es) per run")
    wake = report.get("calibration", {}).get("wakeup")
    if isinstance(wake, list) and wake:
        def path(rate: float | None) -> str:
            return "loopback" if rate is None else f"tbf {rate / 1e6:g} Mbit/s"

        lines.append("wake-up delay d (a woken rank waiting for a CPU; PS runs with more ranks than cores): "
                     + ", ".join(f"{1e3 * m['host_wakeup_delay_s']:.2f} ms on {path(m['link_bits_per_s'])} "
                                 f"({m['size_bytes'] / 1e3:.0f} kB)" for m in wake))
    x = report.get("calibration", {}).get("exchange")
    if x:
        lines.append(f"model-parallel exchange overhead {1e3 * x['exchange_overhead_s']:.2f} ms per round, "
                     f"calibrated on: {x['run']}")
    lines += [f"note: {n}" for n in report["notes"]]
    return "\n".join(lines)
