"""Exact optimisation in O(W_max) model evaluations (model.md §7, reconstructed).

For a fixed W the replica bound grows with R and every PS bound grows with P (asynchronous mode:
linearly), so the best (R, P) uses the whole budget, P = N - W·R, and the throughput
X(R) = min(R·a, (N - W·R)·c) is the minimum of an increasing and a decreasing function of R.
Its real maximiser is R* = N·c / (a + W·c); the integer optimum is floor(R*) or ceil(R*).
Synchronous rounds, request–reply replicas (a closed queueing network) and compressed pulls (whose
size grows with R, so c does) have no closed form: X(R) is unimodal there and a vectorised binary
search on its discrete slope finds the peak in O(log N) steps per W; so does a cluster of nodes, where a
device's share of its node's NICs falls as W·R grows to the node's size. A single replica without a PS (P = 0) is
always a candidate too. Enumeration (``brute.py``) proves both exact on small budgets in the tests.
On a cluster whose machines share one host (``Cluster.shared_host``) contention grows with every thread,
so neither premise holds: there every W·R + P <= N is evaluated (``OptimizeResult.method``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import checks, fmt, presets
from ..errors import SpecError
from ..model import BOTTLENECKS, INFEASIBLE_REASONS, evaluate
from ..model.arrays import network_arrays
from ..model.compute import worker_compute
from ..model.evaluate import check_precision
from ..model.memory import PS_REPLICATION, ps_bytes, worker_capacity_bytes
from ..model.traffic import choose_spatial
from ..specs import PRECISIONS, Cluster, Configuration, Dataset, Network
from ..specs.config import DDP_BUCKET_BYTES

#: W values always searched in full before the bound prunes larger ones.
HEAD_WORKERS = 64
#: The largest budget searched exhaustively (a shared host): 773,015 configurations (0.8 s, 550 MB).
MAX_EXHAUSTIVE_MACHINES = 512


@dataclass(frozen=True)
class Candidate:
    workers_per_replica: int
    replicas: int
    ps_machines: int
    epoch_time_s: float
    speedup: float
    bottleneck: str
    machines_idle: int
    push_interval_samples: int
    threads: int | None
    partitioning: str
    data_parallel: str = "ps"  # how the replicas share updates: the PS or an all-reduce
    allreduce_algorithm: str = "ring"  # the all-reduce's algorithm (read when data_parallel is allreduce)
    precision: str = "fp32"  # the arithmetic of the layers
    local_batch_samples: int = 16  # b: the mini-batch of one machine (one device)
    bucket_bytes: int = DDP_BUCKET_BYTES  # the all-reduce's bucket
    zero_stage: int = 0  # ZeRO sharding over the all-reduce group
    memory_bytes_per_worker: float = 0.0  # what one worker (device) holds

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class OptimizeResult:
    best: Candidate
    top: tuple[Candidate, ...]
    evaluated: int
    infeasible: dict[str, int]
    explanation: str
    budget_machines: int
    choices: dict[str, list[Any]] = field(default_factory=dict)
    pruned_workers_per_replica: int = 0  # W values skipped because their bound could not win
    #: How the optimum was found, both exact: "closed form" (the monotone bounds of the module doc) or
    #: "exhaustive" (every W·R + P <= N, where the closed form's premise does not hold: a shared host).
    method: str = "closed form"
    #: p10–p90 epoch time of the best and the runner-up (docs/model.md §12), when the worker machine
    #: has a compute error band; and whether the two intervals overlap (None: no band or no runner-up).
    intervals_epoch_time_s: tuple[tuple[float, float], ...] = ()
    runner_up_overlaps: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "best": self.best.to_dict(), "top": [c.to_dict() for c in self.top], "evaluated": self.evaluated,
            "intervals_epoch_time_s": [list(i) for i in self.intervals_epoch_time_s],
            "runner_up_overlaps": self.runner_up_overlaps,
            "infeasible": dict(self.infeasible), "explanation": self.explanation,
            "budget_machines": self.budget_machines, "pruned_workers_per_replica": self.pruned_workers_per_replica,
            "method": self.method, "choices": {k: list(v) for k, v in self.choices.items()},
        }

    def configuration(self, base: Configuration | None = None) -> Configuration:
        """The best configuration as a spec (categorical settings taken from ``base``)."""
        return _config_of(base or Configuration(), self.best)


def _ps_min(network: Network, cluster: Cluster) -> int:
    """Fewest PS machines whose memory holds the replicated shards (same formula as the model)."""
    total = float(sum(c.weights for c in network.layer_counts))
    for p in range(1, PS_REPLICATION + 1):
        if ps_bytes(total, p) <= cluster.ps.memory_bytes:
            return p
    # Beyond the replication, M_PS = 2·3·|W|·4 B / P: the smallest P that fits.
    return int(np.ceil(ps_bytes(total, 1.0) * PS_REPLICATION / cluster.ps.memory_bytes))


def _throughput_upper_bound(network: Network, cluster: Cluster, config: Configuration, ws: np.ndarray,
                            n: int) -> np.ndarray:
    """Samples/s no configuration with W = ``ws`` can beat within ``n`` machines.

    At most N/W replicas (or one without a PS), each no faster than its compute alone, which is at
    least the compute with every FC weight gradient left to the PS, no contention and free messages.
    """
    arr = network_arrays(network)
    spatial = choose_spatial(arr, config.partitioning)
    comp = worker_compute(arr, cluster.worker, ws, config.threads, arr.offloadable.astype(float), spatial,
                          float(config.local_batch_samples))
    return np.asarray(np.maximum(n / ws, 1.0) / comp.total_s)


def _candidates_one_choice(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration,
                           budget: int, ws: np.ndarray) -> tuple[dict[str, np.ndarray], int, dict[str, int]]:
    """Candidate (W, R, P) arrays for one setting of the categorical choices and the given W values."""
    n = budget
    infeasible = {"worker memory": 0, "PS memory": 0}
    # Rates at P = 1: a = replica throughput per replica, c = PS throughput per PS machine.
    probe = evaluate(network, cluster, dataset, config, workers_per_replica=ws, replicas=1.0, ps_machines=1.0)
    worker_ok = probe.memory_bytes_per_worker <= worker_capacity_bytes(cluster)
    infeasible["worker memory"] = int(np.sum(~worker_ok))
    p_min = _ps_min(network, cluster)
    r_max = np.floor((n - p_min) / ws)
    w_list, r_list, p_list = [], [], []
    # A single replica training alone, without a PS.
    w_list.append(ws)
    r_list.append(np.ones_like(ws))
    p_list.append(np.zeros_like(ws))
    has_dp = worker_ok & (r_max >= 1)
    infeasible["PS memory"] = int(np.sum(worker_ok & (r_max < 1) & (ws < n)))
    wd = ws[has_dp]
    rmax = r_max[has_dp]
    if wd.size:
        # On nodes a device's share of its node's NICs falls as W·R grows to the node's size, so the
        # replica rate a depends on R: R·a(R) still grows with R and X(R) stays unimodal (binary search).
        if _linear_ps_bounds(config) and cluster.node is None:
            a = probe.bounds_samples_per_s["replicas"][has_dp]
            c = np.minimum(np.minimum(probe.bounds_samples_per_s["ps_network_in"],
                                      probe.bounds_samples_per_s["ps_network_out"]),
                           probe.bounds_samples_per_s["ps_compute"])[has_dp]
            with np.errstate(divide="ignore", invalid="ignore"):
                r_star = np.where(np.isfinite(c), n * c / (a + wd * c), rmax)
            base = np.floor(r_star)
            offsets: tuple[float, ...] = (0.0, 1.0)  # floor(R*) and ceil(R*)
        else:
            base = _sync_peak(network, cluster, dataset, config, wd, rmax, n)
            offsets = (-1.0, 0.0, 1.0)
        for off in offsets:
            r = np.clip(base + off, 1.0, rmax)
            w_list.append(wd)
            r_list.append(r)
            p_list.append(n - wd * r)
    w_all = np.concatenate(w_list)
    r_all = np.concatenate(r_list)
    p_all = np.concatenate(p_list)
    keep = np.concatenate([worker_ok] + [np.ones(wd.size, bool)] * (len(w_list) - 1))
    # Clipping can repeat a candidate; repeats are harmless here and skipped when ranking.
    return {"w": w_all[keep], "r": r_all[keep], "p": p_all[keep]}, int(probe.samples_per_s.size), infeasible


def _linear_ps_bounds(config: Configuration) -> bool:
    """Whether X(R) = min(R·a, (N − W·R)·c) with c independent of R, the closed form's premise:
    asynchronous overlapped replicas, and pulls whose size does not grow with R. Compressed pulls
    carry the union of the replicas' supports, so c falls as R grows; X(R) is still the minimum of an
    increasing and a decreasing function, and :func:`_sync_peak`'s search finds its peak."""
    return (config.mode == "async" and config.ps_exchange == "overlapped"
            and not (config.compression.method != "none" and config.compression.compress_pull))


def _sync_peak(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration,
               ws: np.ndarray, rmax: np.ndarray, n: int) -> np.ndarray:
    """Per W, the R in [1, rmax] maximising throughput with P = N - W·R (binary search on the slope)."""
    lo = np.ones_like(ws)
    hi = rmax.copy()
    while np.any(lo < hi):
        mid = np.floor((lo + hi) / 2.0)
        nxt = np.minimum(mid + 1.0, rmax)
        x = evaluate(network, cluster, dataset, config, workers_per_replica=np.concatenate([ws, ws]),
                     replicas=np.concatenate([mid, nxt]), ps_machines=np.concatenate([n - ws * mid, n - ws * nxt]))
        x_mid, x_nxt = np.split(x.samples_per_s, 2)
        rising = x_nxt > x_mid
        active = lo < hi
        lo = np.where(active & rising, mid + 1.0, lo)
        hi = np.where(active & ~rising, mid, hi)
    return lo


def optimize(network: Network, cluster: Cluster, dataset: Dataset, budget_machines: int | None = None,
             config: Configuration | None = None, *, top_k: int = 5,
             push_intervals: Iterable[int] | None = None, threads: Iterable[int | None] | None = None,
             partitionings: Iterable[str] | None = None, data_parallels: Iterable[str] | None = None,
             allreduce_algorithms: Iterable[str] | None = None, w_max: int | None = None,
             precisions: Iterable[str] | None = None, local_batches: Iterable[int] | None = None,
             bucket_sizes_bytes: Iterable[int] | None = None, zero_stages: Iterable[int] | None = None,
             ) -> OptimizeResult:
    """The configuration with the smallest epoch time using at most ``budget_machines`` machines.

    ``precisions`` (fp32, tf32, fp16, bf16: those the worker has), ``local_batches`` (the per-device
    mini-batch b; all-reduce configurations then reduce once per mini-batch, k_push = b, unless
    ``push_intervals`` is given), ``bucket_sizes_bytes`` and ``zero_stages`` (all-reduce only) are
    searched too: every combination exactly, configurations that do not fit in memory excluded.

    Optional sets of update batches (push intervals), thread counts, partitioning schemes and
    data-parallel schemes (``["ps", "allreduce"]``: the parameter server against an all-reduce) and
    all-reduce algorithms (``["ring", "tree"]``) are searched too. Categorical settings not searched
    come from ``config``. All-reduce configurations (P = 0) are searched exhaustively over every
    W·R <= N, in blocks.
    """
    network, cluster, dataset, config = presets.problem(network, cluster, dataset, config)
    n = checks.whole_number(cluster.machines if budget_machines is None else budget_machines, "machines", 1,
                            checks.MAX_BUDGET_MACHINES)
    top_k = checks.whole_number(top_k, "top_k", 1)
    if w_max is not None:
        w_max = checks.whole_number(w_max, "w_max", 1)
    choices: dict[str, list[Any]] = {
        "push_interval_samples": list(push_intervals or [config.push_interval_samples]),
        "threads": list(threads or [config.threads]),
        "partitioning": list(partitionings or [config.partitioning]),
        "data_parallel": [checks.choice("data_parallel", d, ("ps", "allreduce"))
                          for d in (data_parallels or [config.data_parallel])],
    }
    algorithms = [checks.choice("allreduce_algorithms", a, ("ring", "tree", "hierarchical"))
                  for a in (allreduce_algorithms or [config.allreduce.algorithm])]
    if "allreduce" in choices["data_parallel"] and len(algorithms) > 1:
        choices["allreduce_algorithm"] = algorithms
    precision_list = [checks.choice("precisions", p, PRECISIONS) for p in (precisions or [config.precision])]
    for prec in precision_list:
        check_precision(cluster, config.evolve(precision=prec))
    batch_list = [checks.whole_number(b, "local_batches", 1, 1_000_000) for b in (local_batches or
                                                                                   [config.local_batch_samples])]
    bucket_list = [checks.whole_number(b, "bucket_sizes_bytes", 1, 2**62) for b in (bucket_sizes_bytes or
                                                                                    [config.allreduce.bucket_bytes])]
    zero_list = [checks.whole_number(z, "zero_stages", 0, 3) for z in (zero_stages or [config.zero_stage])]
    if any(zero_list) and "allreduce" not in choices["data_parallel"]:
        raise SpecError("zero_stages", zero_list, "need data_parallels to include 'allreduce'")
    for key, given, values in (("precision", precisions, precision_list), ("local_batch_samples", local_batches,
                               batch_list), ("bucket_bytes", bucket_sizes_bytes, bucket_list),
                               ("zero_stage", zero_stages, zero_list)):
        if given is not None:
            choices[key] = values
    ddp_step = local_batches is not None and push_intervals is None
    rows: list[tuple[float, Candidate, np.ndarray]] = []
    evaluated = 0
    infeasible: dict[str, int] = {}
    all_preds = []
    pruned = 0
    # On a shared host every machine's threads compete for the host's cores, so a PS machine or a
    # replica more can slow the others down: "the best (R, P) uses the whole budget" and the
    # unimodality of X(R) no longer hold. There the search enumerates every W·R + P <= N instead.
    exhaustive = cluster.shared_host is not None
    if exhaustive:
        from .brute import all_configurations

        if n > MAX_EXHAUSTIVE_MACHINES:
            raise SpecError("machines", int(n), f"is more than the {MAX_EXHAUSTIVE_MACHINES} machines the exhaustive "
                                                "search takes (a cluster on one shared host, shared_host set)")
        w_all, r_all, p_all = all_configurations(int(n))
        if w_max is not None:
            keep_w = w_all <= w_max
            w_all, r_all, p_all = w_all[keep_w], r_all[keep_w], p_all[keep_w]
    for k, t, part, dp, prec, batch in itertools.product(
            *(choices[key] for key in ("push_interval_samples", "threads", "partitioning", "data_parallel")),
            precision_list, batch_list):
        cfg = config.evolve(push_interval_samples=int(k), threads=t, partitioning=part, data_parallel=dp,
                            ps_machines=0 if dp == "allreduce" else config.ps_machines,
                            replicas=1 if dp == "ps" and config.ps_machines == 0 else config.replicas,
                            precision=prec, local_batch_samples=int(batch), zero_stage=0)
        if dp == "allreduce":
            if ddp_step:
                cfg = cfg.evolve(push_interval_samples=int(batch))
            for algorithm, bucket, zero in itertools.product(algorithms, bucket_list, zero_list):
                evaluated += _allreduce_rows(
                    network, cluster, dataset,
                    cfg.evolve(allreduce=cfg.allreduce.evolve(algorithm=algorithm, bucket_bytes=int(bucket)),
                               zero_stage=int(zero)),
                    int(n), w_max, top_k, rows, infeasible)
            continue
        if exhaustive:
            pred = evaluate(network, cluster, dataset, cfg, workers_per_replica=w_all, replicas=r_all,
                            ps_machines=p_all)
            evaluated += int(pred.samples_per_s.size)
            bad = pred.infeasible_code != 0
            for code in np.unique(pred.infeasible_code[bad]):
                name = INFEASIBLE_REASONS[int(code)]
                infeasible[name] = infeasible.get(name, 0) + int(np.sum(pred.infeasible_code == code))
            all_preds.append((cfg, pred))
            continue
        ws_all = np.arange(1, min(int(n), int(n) if w_max is None else w_max) + 1, dtype=float)
        # Small W first; then only the larger W whose throughput bound can still beat the best so far
        # (exact: the bound is a true upper bound, see _throughput_upper_bound).
        head, tail = ws_all[:HEAD_WORKERS], ws_all[HEAD_WORKERS:]
        x_best = 0.0
        for ws in (head, tail):
            if ws is tail and ws.size:
                ub = _throughput_upper_bound(network, cluster, cfg, ws, int(n))
                keep = ub >= x_best * (1.0 - 1e-9)
                pruned += int(np.sum(~keep))
                ws = ws[keep]
            if not ws.size:
                continue
            cand, probes, inf = _candidates_one_choice(network, cluster, dataset, cfg, int(n), ws)
            pred = evaluate(network, cluster, dataset, cfg, workers_per_replica=cand["w"], replicas=cand["r"],
                            ps_machines=cand["p"])
            evaluated += probes + int(pred.samples_per_s.size)
            for key, v in inf.items():
                infeasible[key] = infeasible.get(key, 0) + v
            bad = pred.infeasible_code != 0
            for code in np.unique(pred.infeasible_code[bad]):
                name = INFEASIBLE_REASONS[int(code)]
                infeasible[name] = infeasible.get(name, 0) + int(np.sum(pred.infeasible_code == code))
            if np.any(~bad):
                x_best = max(x_best, float(np.max(pred.samples_per_s[~bad])))
            all_preds.append((cfg, pred))
    for cfg, pred in all_preds:
        _top_rows(cfg, pred, int(n), top_k, rows)
    if not rows:
        reasons = ", ".join(f"{k}: {v}" for k, v in infeasible.items() if v) or "none fit"
        raise SpecError("machines", int(n), f"admits no feasible configuration ({reasons})")
    rows.sort(key=lambda r: (r[0], r[1].workers_per_replica * r[1].replicas + r[1].ps_machines))
    top = tuple(r[1] for r in rows[:top_k])
    best = top[0]
    explanation = explain(network, cluster, dataset, config, best, int(n))
    if len(choices["data_parallel"]) > 1:
        rival = next((r[1] for r in rows if r[1].data_parallel != best.data_parallel), None)
        if rival is not None:
            explanation += " " + compare_schemes(network, cluster, dataset, config, best, rival)
    intervals, overlap = _top_intervals(network, cluster, dataset, config, top)
    if overlap is not None:
        explanation += " " + _overlap_words(top, intervals, overlap)
    return OptimizeResult(best=best, top=top, evaluated=evaluated,
                          intervals_epoch_time_s=intervals, runner_up_overlaps=overlap,
                          infeasible={k: v for k, v in infeasible.items() if v}, explanation=explanation,
                          budget_machines=int(n), choices=choices, pruned_workers_per_replica=pruned,
                          method="exhaustive" if exhaustive else (
                              "closed form; all-reduce exhaustive" if "allreduce" in choices["data_parallel"]
                              else "closed form"))


#: All-reduce configurations evaluated per block (bounds the memory of a large budget's search).
ALLREDUCE_BLOCK = 262_144


def _allreduce_rows(network: Network, cluster: Cluster, dataset: Dataset, cfg: Configuration, n: int,
                    w_max: int | None, top_k: int, rows: list[tuple[float, Candidate, Any]],
                    infeasible: dict[str, int]) -> int:
    """Every all-reduce (W, R, 0) with W·R <= n, evaluated in blocks of W; the best of each block go to
    ``rows``. Returns the number of configurations evaluated."""
    from .brute import allreduce_pairs

    w_top = n if w_max is None else min(n, w_max)
    evaluated, w_lo = 0, 1
    while w_lo <= w_top:
        # W values whose pairs (n // W each) fill about one block.
        w_hi, size = w_lo, n // w_lo
        while w_hi < w_top and size + n // (w_hi + 1) <= ALLREDUCE_BLOCK:
            w_hi += 1
            size += n // w_hi
        w, r = allreduce_pairs(n, w_lo, w_hi)
        pred = evaluate(network, cluster, dataset, cfg, workers_per_replica=w, replicas=r, ps_machines=0.0)
        evaluated += int(w.size)
        bad = pred.infeasible_code != 0
        for code in np.unique(pred.infeasible_code[bad]):
            name = INFEASIBLE_REASONS[int(code)]
            infeasible[name] = infeasible.get(name, 0) + int(np.sum(pred.infeasible_code == code))
        _top_rows(cfg, pred, n, top_k, rows)
        w_lo = w_hi + 1
    return evaluated


def _top_rows(cfg: Configuration, pred: Any, n: int, top_k: int, rows: list[tuple[float, Candidate, Any]]) -> None:
    """The k best distinct (W, R, P) of ``pred`` into ``rows``: a partial sort, then repeats skipped."""
    ok = np.flatnonzero(np.asarray(pred.infeasible_code).ravel() == 0)
    if not ok.size:
        return
    times_all = np.asarray(pred.epoch_time_s).ravel()
    machines_all = np.asarray(pred.machines).ravel()
    n_head = min(int(ok.size), 4 * max(top_k, 1) + 8)
    times = times_all[ok]
    part = ok[np.argpartition(times, n_head - 1)[:n_head]] if 0 < n_head < ok.size else ok
    order = part[np.lexsort((machines_all[part], times_all[part]))]
    flat = _Flat(pred)
    seen: set[tuple[int, int, int]] = set()
    for i in order:
        wrp = (int(flat.workers_per_replica[i]), int(flat.replicas[i]), int(flat.ps_machines[i]))
        if wrp in seen:
            continue
        seen.add(wrp)
        rows.append((float(times_all[i]), _candidate(flat, int(i), cfg, n), flat.bottleneck_code[i]))
        if len(seen) >= max(top_k, 1):
            break


class _Flat:
    """The fields of a prediction the candidates read, flattened."""

    def __init__(self, pred: Any) -> None:
        self.workers_per_replica = np.asarray(pred.workers_per_replica).ravel()
        self.replicas = np.asarray(pred.replicas).ravel()
        self.ps_machines = np.asarray(pred.ps_machines).ravel()
        self.epoch_time_s = np.asarray(pred.epoch_time_s).ravel()
        self.speedup = np.asarray(pred.speedup).ravel()
        self.bottleneck_code = np.asarray(pred.bottleneck_code).ravel()
        self.memory_bytes_per_worker = np.asarray(pred.memory_bytes_per_worker).ravel()


def _candidate(pred: Any, i: int, cfg: Configuration, n: int) -> Candidate:
    w, r, p = (int(pred.workers_per_replica[i]), int(pred.replicas[i]), int(pred.ps_machines[i]))
    return Candidate(
        workers_per_replica=w, replicas=r, ps_machines=p, epoch_time_s=float(pred.epoch_time_s[i]),
        speedup=float(pred.speedup[i]), bottleneck=BOTTLENECKS[int(pred.bottleneck_code[i])],
        machines_idle=n - (w * r + p), push_interval_samples=cfg.push_interval_samples, threads=cfg.threads,
        partitioning=cfg.partitioning, data_parallel=cfg.data_parallel, allreduce_algorithm=cfg.allreduce.algorithm,
        precision=cfg.precision, local_batch_samples=cfg.local_batch_samples, bucket_bytes=cfg.allreduce.bucket_bytes,
        zero_stage=cfg.zero_stage, memory_bytes_per_worker=float(pred.memory_bytes_per_worker[i]))


def explain(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration, best: Candidate,
            n: int) -> str:
    """Plain words: which bound binds at the optimum, and what one more PS machine or replica would do."""
    cfg = _config_of(config, best)
    w, r, p = best.workers_per_replica, best.replicas, best.ps_machines
    if best.data_parallel == "allreduce":
        more = evaluate(network, cluster, dataset, cfg, workers_per_replica=np.array([w]), replicas=np.array([r + 1]),
                        ps_machines=np.array([0]))
        gain = float((more.epoch_time_s[0] / best.epoch_time_s - 1.0) * 100.0 + 0.0)
        algorithm = cfg.allreduce.algorithm
        return " ".join([
            f"Best with {n} machines: {r} replica(s) of {w} machine(s) each, reducing their gradients by a "
            f"{algorithm} all-reduce every {cfg.push_interval_samples} samples, no PS ({w * r} used, "
            f"{best.machines_idle} idle); epoch time {best.epoch_time_s:,.1f} s, speed-up {best.speedup:.2f}x over "
            "one machine.",
            f"The binding bound is {best.bottleneck}.",
            f"One more replica would change the epoch time by {_pct(gain)} (it needs machines beyond this "
            "configuration).",
        ]) + _memory_words(cluster, best)
    more = evaluate(network, cluster, dataset, cfg, workers_per_replica=np.array([w, w]),
                    replicas=np.array([r, r + 1]), ps_machines=np.array([max(p, 1) + (1 if p else 0), max(p, 1)]))
    t = best.epoch_time_s
    gain_ps, gain_rep = (more.epoch_time_s / t - 1.0) * 100.0 + 0.0  # + 0.0 turns -0.0 into 0.0
    words = [
        f"Best with {n} machines: {r} replica(s) of {w} machine(s) each and {p} PS machine(s) "
        f"({w * r + p} used, {best.machines_idle} idle); epoch time {t:,.1f} s, speed-up {best.speedup:.2f}x "
        f"over one machine.",
        f"The binding bound is {best.bottleneck}.",
        f"One more PS machine would change the epoch time by {_pct(gain_ps)}; "
        f"one more replica by {_pct(gain_rep)} (each needs machines beyond this configuration).",
    ]
    if p == 0:
        words.append("No PS: a single replica trains alone, so no weights cross to a parameter server.")
    return " ".join(words) + _memory_words(cluster, best)


def _memory_words(cluster: Cluster, best: Candidate) -> str:
    """Where a device's memory decides: what the best holds, in which precision and mini-batch."""
    if cluster.worker.accelerator is None:
        return ""
    cap = worker_capacity_bytes(cluster)
    zero = f", ZeRO stage {best.zero_stage}" if best.zero_stage else ""
    return (f" Each device computes in {best.precision} on mini-batches of {best.local_batch_samples} and holds "
            f"{fmt.nbytes(best.memory_bytes_per_worker)} of its {fmt.nbytes(cap)}{zero}.")


def _config_of(config: Configuration, c: Candidate) -> Configuration:
    return config.evolve(push_interval_samples=c.push_interval_samples, threads=c.threads,
                         partitioning=c.partitioning, data_parallel=c.data_parallel,
                         allreduce=config.allreduce.evolve(algorithm=c.allreduce_algorithm,
                                                           bucket_bytes=c.bucket_bytes),
                         ps_machines=c.ps_machines, replicas=c.replicas, workers_per_replica=c.workers_per_replica,
                         precision=c.precision, local_batch_samples=c.local_batch_samples, zero_stage=c.zero_stage)


def _top_intervals(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration,
                   top: tuple[Candidate, ...]) -> tuple[tuple[tuple[float, float], ...], bool | None]:
    """p10–p90 epoch times of the best and the runner-up and whether they overlap (() and None
    without a compute error band or a runner-up)."""
    if cluster.worker.compute_error is None or len(top) < 2:
        return (), None
    out = []
    for c in top[:2]:
        iv = evaluate(network, cluster, dataset, _config_of(config, c), interval=True).interval
        lo, hi = iv["epoch_time_s"]
        out.append((float(lo), float(hi)))
    return tuple(out), bool(out[1][0] <= out[0][1])


def _overlap_words(top: tuple[Candidate, ...], intervals: tuple[tuple[float, float], ...], overlap: bool) -> str:
    (b_lo, b_hi), (r_lo, r_hi) = intervals
    runner = top[1]
    who = f"W={runner.workers_per_replica}, R={runner.replicas}, P={runner.ps_machines}"
    if overlap:
        return (f"The runner-up ({who}) is within the model's p10-p90 uncertainty: its epoch time "
                f"{r_lo:,.1f}-{r_hi:,.1f} s overlaps the best's {b_lo:,.1f}-{b_hi:,.1f} s, so measure both "
                "before choosing.")
    return (f"The best's p10-p90 epoch time {b_lo:,.1f}-{b_hi:,.1f} s lies below the runner-up's "
            f"({who}) {r_lo:,.1f}-{r_hi:,.1f} s.")


def compare_schemes(network: Network, cluster: Cluster, dataset: Dataset, config: Configuration, best: Candidate,
                    other: Candidate) -> str:
    """Why ``best`` beats ``other`` (the best of the other data-parallel scheme), from the model's own
    numbers: the part of a sample's time that differs most between them."""
    from ..model.prediction import PART_LABELS

    def scheme(c: Candidate) -> str:
        if c.data_parallel == "allreduce":
            return f"a {c.allreduce_algorithm} all-reduce (W={c.workers_per_replica}, R={c.replicas})"
        return (f"the parameter server (W={c.workers_per_replica}, R={c.replicas}, P={c.ps_machines})")

    preds = [evaluate(network, cluster, dataset, _config_of(config, c)).item() for c in (best, other)]
    per_replica = [c.replicas / pr["samples_per_s"] for pr, c in zip(preds, (best, other), strict=True)]
    parts = [pr["breakdown_s_per_sample"] for pr in preds]
    diff = {k: parts[1].get(k, 0.0) - parts[0].get(k, 0.0) for k in parts[0]}
    part = max(diff, key=lambda k: abs(diff[k]))
    ratio = other.epoch_time_s / best.epoch_time_s
    first = scheme(best)
    text = (f"{first[0].upper()}{first[1:]} beats the best with {scheme(other)}: epoch time "
            f"{best.epoch_time_s:,.1f} s against {other.epoch_time_s:,.1f} s ({ratio:.2f}x). It trains "
            f"{best.replicas} replica(s) against {other.replicas}, and one replica takes "
            f"{fmt.seconds(per_replica[0])} per sample against {fmt.seconds(per_replica[1])}")
    if diff[part] != 0.0:
        text += (f" (the largest difference: {PART_LABELS.get(part, part)}, {fmt.seconds(parts[0][part])} "
                 f"against {fmt.seconds(parts[1][part])})")
    text += "."
    if other.data_parallel == "ps" and other.ps_machines:
        text += (f" The PS takes {other.ps_machines} of the machines to carry every replica's pushes and pulls; an "
                 "all-reduce moves about 2(R−1)/R of the gradients per machine on each worker's own NIC.")
        bounds = preds[1]["bounds_samples_per_s"]
        ps_bound = min(bounds.get(k, np.inf) for k in ("ps_network_in", "ps_network_out", "ps_compute"))
        x_best = preds[0]["samples_per_s"]
        if np.isfinite(ps_bound) and ps_bound < x_best and config.mode == "async":
            # Asynchronous PS bounds grow linearly with P (docs/model.md §7).
            need = int(np.ceil(other.ps_machines * x_best / ps_bound))
            text += (f" To carry the all-reduce's {fmt.count(x_best)} samples/s the PS would need {need} machines, "
                     f"{need - other.ps_machines} more.")
    elif other.replicas == 1:
        text += (" All-reduce's best is a single replica, which reduces nothing: on this budget every all-reduce "
                 "of more replicas was slower or did not fit.")
    elif best.data_parallel == "ps" and config.mode == "async":
        text += (" The PS's replicas exchange with it asynchronously, beside their compute; an all-reduce step "
                 "waits for the slowest replica and for the part of the reduction backward does not hide.")
    return text


def _pct(change: float) -> str:
    """'-12.3 %', '+0.4 %', or 'less than 0.05 %' for changes that round to zero."""
    return "less than 0.05 %" if abs(change) < 0.05 else f"{change:+.1f} %"
