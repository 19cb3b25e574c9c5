"""Layer timings across shapes, fitted into a :class:`~dnnbench.specs.ShapeRate` (docs/model.md §12).

``shape_cases`` draws (seeded) convolutions with 1–512 channels, kernels 1–11, strides 1–4 and maps
7–64 wide (depthwise and grouped among them), FC layers 10–8192 wide, and element-wise layers (every
activation function, pooling, batch norm), at mini-batches 1–128, in and out of cache. ``time_cases``
times each case's forward, input gradient and weight gradient the way a training step runs them
(autograd on the layer's PyTorch module), in rounds that interleave the cases, keeping each case's
median over rounds: a machine whose speed drifts during the calibration shifts every case alike
instead of a few. ``fit_shape_rate`` is non-negative least squares on relative residuals: the model
is linear in its constants for a given cache level, thread contention and whether caches and memory
bandwidth are each core's own, which are chosen on a grid; its design matrix is the model itself
(:func:`dnnbench.model.shape_compute.phase_calls` with one constant set to 1 at a time), so the fit
sees exactly the terms a prediction charges.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.arrays import ELEM_FAMILIES, NetworkArrays, network_arrays
from ..model.shape_compute import phase_calls
from ..specs import Network
from ..specs.shape import (
    ACTIVATION_FUNCTIONS,
    ElemCost,
    ErrorBand,
    FunctionCost,
    FunctionCosts,
    GemmCost,
    ShapeRate,
)
from .quiet import QuietGate, quiet_median

PHASES = ("forward", "input_grad", "weight_grad", "update")
GEMMS = ("conv_forward", "conv_input_grad", "conv_weight_grad", "fc_forward", "fc_input_grad", "fc_weight_grad")
GEMM_FIELDS = ("mac_time_s", "weight_element_time_s", "input_element_time_s", "output_element_time_s",
               "strided_mac_time_s", "strided_input_element_time_s", "grouped_mac_time_s",
               "grouped_input_element_time_s", "grouped_output_element_time_s", "depthwise_wide_mac_time_s",
               "vector_weight_element_time_s", "call_time_s")
FAMILIES = ("activation", "pool", "norm", "other", "max_pool")
ELEM_FIELDS = ("op_time_s", "backward_op_time_s", "byte_time_s", "forward_call_time_s", "backward_call_time_s",
               "weight_grad_byte_time_s")
#: The ElemCost fields that are None (their default rule) where a fit leaves them out.
OPTIONAL_ELEM_FIELDS = ("backward_op_time_s", "weight_grad_byte_time_s")
RATE_FIELDS = ("update_byte_time_s", "update_call_time_s", "memory_byte_time_s", "fresh_byte_time_s",
               "layout_copy_byte_time_s")
FUNCTION_FIELDS = ("forward_op_time_s", "backward_op_time_s", "forward_call_time_s", "backward_call_time_s")
#: Cap on one case's multiply-adds per call, so that the calibration stays within its time budget.
MAX_CASE_MACS = 1.2e9
#: The same for the convolutions the CPU library runs far below its dense rate (0.2–1 ns per multiply-add
#: here): a depthwise one with a wide kernel (its weight gradient) and a grouped one (every phase).
MAX_SLOW_KERNEL_MACS = 6e7


@dataclass(frozen=True)
class ShapeCase:
    """One layer (a spec layer mapping) on an input shape, at a mini-batch and a thread count."""

    name: str
    layer: dict[str, Any]
    input_shape: tuple[int, ...]
    batch: int
    threads: int = 1

    def network(self) -> Network:
        """The layer behind a ReLU, on an input that needs its gradient (so that it back-propagates to its
        input, as inside a network, and as it is timed)."""
        return Network.build({"name": self.name, "layers": [
            {"kind": "input", "name": "input", "shape": list(self.input_shape), "needs_gradient": True},
            {"kind": "activation", "name": "pre", "function": "relu"},
            {**self.layer, "name": "case"},
        ]})


def _conv_case(rng: np.random.Generator) -> tuple[dict[str, Any], tuple[int, ...]] | None:
    c = int(rng.choice([1, 3, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512]))
    o = int(rng.choice([4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512]))
    k = int(rng.choice([1, 1, 3, 3, 3, 5, 7, 11]))
    s = int(rng.choice([1, 1, 1, 2, 2, 4]))
    h = int(rng.choice([7, 8, 14, 16, 28, 32, 56, 64]))
    if k > h:
        return None
    layer: dict[str, Any] = {"kind": "conv2d", "out_channels": o, "kernel": k, "stride": s, "padding": k // 2}
    u = rng.random()
    if u < 0.2 and c >= 8:  # depthwise
        layer.update(out_channels=c, groups=c)
    elif u < 0.3 and c >= 8:  # grouped, a few groups (ResNeXt's 32)
        g = int(rng.choice([2, 4, 8, 32]))
        if c % g == 0:
            layer.update(out_channels=g * max(1, o // g), groups=g)
    elif u < 0.4 and c >= 8:  # few channels per group (ShuffleNet's, RegNet's; channel multipliers)
        per_group = int(rng.choice([1, 2, 3, 4, 6, 8, 12, 16]))
        if c % per_group == 0 and c // per_group >= 2:
            layer.update(out_channels=(c // per_group) * int(rng.choice([1, 2, 3, 4, 8])), groups=c // per_group)
    if rng.random() < 0.4:
        layer["activation"] = str(rng.choice(["relu", *ACTIVATION_FUNCTIONS]))
    return layer, (c, h, h)


def _fc_case(rng: np.random.Generator) -> tuple[dict[str, Any], tuple[int, ...]]:
    widths = [10, 16, 32, 64, 100, 128, 256, 500, 512, 784, 1024, 1500, 2048, 4096, 8192]
    layer: dict[str, Any] = {"kind": "fc", "out_features": int(rng.choice(widths))}
    if rng.random() < 0.4:
        layer["activation"] = str(rng.choice(list(ACTIVATION_FUNCTIONS)))
    return layer, (int(rng.choice(widths)),)


def _elem_case(rng: np.random.Generator) -> tuple[dict[str, Any], tuple[int, ...]]:
    c = int(rng.choice([1, 3, 8, 16, 32, 64, 128, 256]))
    h = int(rng.choice([4, 8, 14, 28, 32, 56, 64]))
    kinds: list[dict[str, Any]] = [{"kind": "activation", "function": f} for f in ACTIVATION_FUNCTIONS] + [
        {"kind": "pool", "mode": "max", "window": 2}, {"kind": "pool", "mode": "avg", "window": 2},
        {"kind": "pool", "mode": "max", "window": 3, "stride": 2, "padding": 1},
        {"kind": "batchnorm"}]
    return kinds[int(rng.integers(len(kinds)))], (c, h, h)


def shape_cases(count: int = 180, seed: int = 0, threads: Sequence[int] = (1,)) -> list[ShapeCase]:
    """``count`` cases (about 45 % convolutions, 25 % FC, 30 % element-wise) spanning the shapes above;
    the cases are spread over ``threads`` in turn."""
    rng = np.random.default_rng(seed)
    out: list[ShapeCase] = []
    while len(out) < count:
        u = rng.random()
        made = _conv_case(rng) if u < 0.45 else _fc_case(rng) if u < 0.70 else _elem_case(rng)
        if made is None:
            continue
        layer, shape = made
        b = int(rng.choice([1, 2, 4, 8, 16, 32, 64, 128]))
        case = ShapeCase(f"case{len(out)}", layer, shape, b, threads[len(out) % len(threads)])
        try:
            arr = case_arrays([case])
        except Exception:  # noqa: BLE001 - a drawn shape the spec rejects (a window larger than the map)
            continue
        per_sample = float((arr.macs_forward + arr.macs_backprop + arr.macs_weight_grad)[0]) / 3.0
        if arr.depthwise_wide[0] or arr.grouped[0]:
            # A slow kernel keeps its shape at a smaller batch (so that such cases stay as frequent).
            while b > 1 and per_sample * b > MAX_SLOW_KERNEL_MACS:
                b //= 2
            if per_sample * b > MAX_SLOW_KERNEL_MACS:
                continue
            case = dataclasses.replace(case, batch=b)
        if per_sample * b > MAX_CASE_MACS or (arr.in_values[0] + arr.out_values[0]) * b * 4 > 400e6:
            continue
        out.append(case)
    return out


def case_arrays(cases: Sequence[ShapeCase]) -> NetworkArrays:
    """The model's arrays of the cases' layers, one row per case (the ReLU in front dropped)."""
    rows = [network_arrays(c.network()) for c in cases]
    def pick(name: str) -> Any:
        first = getattr(rows[0], name)
        if isinstance(first, np.ndarray):
            return np.concatenate([getattr(r, name)[1:2] for r in rows])
        if isinstance(first, tuple):
            return tuple(getattr(r, name)[1] for r in rows)
        return first
    return NetworkArrays(**{f.name: pick(f.name) for f in dataclasses.fields(NetworkArrays)})


# --- timing -----------------------------------------------------------------------------------------

class RandomPool:
    """Views of one tensor of normal random values, grown when a larger one is asked for.

    The cases of a calibration are all alive at once (their rounds interleave); with inputs, output
    gradients, weight copies and their gradients of their own they held 4 GB here, and a process that
    grows that large page-faults its fresh memory in up to ten times slower (48 s to set the cases up;
    under 10 s when they share). What the cases only read, or write without reading it back, they
    share: each case's views start at the pool's start, one after another, 64-byte aligned (the
    alignment of a tensor of its own)."""

    ALIGN_VALUES = 16

    def __init__(self) -> None:
        self._pool: Any = None

    def views(self, shapes: Sequence[Sequence[int]]) -> list[Any]:
        """Tensors of ``shapes`` (no gradient, leaves) on the pool's first values, one after another."""
        import torch

        sizes = [math.prod(sh) for sh in shapes]
        starts = np.concatenate([[0], np.cumsum([-(-n // self.ALIGN_VALUES) * self.ALIGN_VALUES for n in sizes])])
        need = int(starts[-1])
        if self._pool is None or self._pool.numel() < need:
            self._pool = torch.randn(need if self._pool is None else max(need, 2 * self._pool.numel()))
        return [self._pool[int(a):int(a) + n].view(*sh).detach()
                for a, n, sh in zip(starts[:-1], sizes, shapes, strict=True)]

    def view(self, shape: Sequence[int]) -> Any:
        """A tensor of ``shape`` on the pool's first values."""
        return self.views([shape])[0]


@dataclass
class CasePools:
    """The random values the cases share (:class:`RandomPool`): inputs, gradients (of outputs and of
    the weight copies), weight copies (the optimizer step writes them)."""

    inputs: RandomPool = dataclasses.field(default_factory=RandomPool)
    grads: RandomPool = dataclasses.field(default_factory=RandomPool)
    weights: RandomPool = dataclasses.field(default_factory=RandomPool)


def _case_runner(case: ShapeCase, pools: CasePools | None = None) -> dict[str, Callable[[], Any]]:
    """Closures that run the case's forward, input gradient, weight gradient and optimizer step once
    each; what they only read (and the weights the step writes) are views of ``pools``."""
    import torch

    from .torchnet import _module

    pools = pools or CasePools()
    net = case.network()
    layer = net.layers[-1]
    mod = _module(layer, case.input_shape, "case")
    params = [p for p in mod.parameters() if p.requires_grad]
    x = pools.inputs.view((case.batch, *case.input_shape)).requires_grad_(True)
    y = mod(x)
    gy = pools.grads.view(tuple(y.shape))

    def forward() -> Any:
        return mod(x)

    def input_grad() -> Any:
        return torch.autograd.grad(y, [x], gy, retain_graph=True)

    def weight_grad() -> Any:
        return torch.autograd.grad(y, params, gy, retain_graph=True)

    runners = {"forward": forward, "input_grad": input_grad}
    if params:
        # The step on copies of the weights: it writes them in place, which would void the graph.
        shapes = [tuple(q.shape) for q in params]
        copies = [torch.nn.Parameter(v) for v in pools.weights.views(shapes)]
        for q, g in zip(copies, pools.grads.views(shapes), strict=True):
            q.grad = g
        opt = torch.optim.SGD(copies, lr=1e-6)
        runners["weight_grad"] = weight_grad
        runners["update"] = opt.step
    return runners


def _null_runner() -> Callable[[], Any]:
    """autograd.grad through one trivial node: the engine's fixed cost per call, which a training step
    pays once per backward pass and not per layer (subtracted from the gradient timings)."""
    import torch

    x = torch.zeros(1, requires_grad=True)
    y = x * 1.0
    g = torch.ones(1)
    return lambda: torch.autograd.grad(y, [x], g, retain_graph=True)


def _time_once(fn: Callable[[], Any], reps: int, clock: Callable[[], float] = time.perf_counter) -> float:
    best = float("inf")
    for _ in range(reps):
        t = clock()
        fn()
        best = min(best, clock() - t)
    return best


def case_clock(threads: int) -> Callable[[], float]:
    """The clock of a timing at ``threads`` threads: the thread's CPU time on one thread (a shared
    machine's pauses, when the thread waits for a CPU, are not the kernel's), wall time on more (the
    threads' CPU time would count their spinning)."""
    return time.thread_time if threads == 1 else time.perf_counter


def time_cases(cases: Sequence[ShapeCase], rounds: int = 3, reps: int = 2,
               progress: Callable[[str], None] | None = None, steady_spread: float = 0.25,
               extra_rounds: int | None = None, min_timed_s: float = 1e-3, max_reps: int = 8,
               gate: QuietGate | None = None) -> list[dict[str, float]]:
    """Seconds per call of each case's phases: the median over interleaved rounds of the best of
    ``reps`` calls (:func:`case_clock`, at the case's thread count); after the first round a short
    phase takes the best of as many calls as fill ``min_timed_s`` (at most ``max_reps``), so that one
    slow call of a short phase does not decide its round. A phase the layer lacks is 0; ``spread`` is
    the median over phases of max / min − 1 over the rounds.

    After ``rounds`` rounds of every case, the cases whose rounds spread by more than ``steady_spread``
    (the host was busy during one of them) are timed again, interleaved among themselves, for up to
    ``extra_rounds`` more rounds (default ``rounds``) or until their spread over their last ``rounds``
    rounds is below it; their median is over every round.

    Before each multi-thread case ``gate`` (a :class:`~.quiet.QuietGate`, made here if None) waits out
    a busy host; a round timed while the host was busy anyway is left out of the case's median where
    the case has others, and a case with fewer than two quiet rounds is timed again among the
    unsteady ones. ``rounds_timed`` gives each case's count, ``busy_rounds`` its rounds left out."""
    import torch

    from .alloc import steady_allocator

    steady_allocator()  # as in the runs' processes: no block mapped anew per call (docs/validation.md §"Runs")
    before = torch.get_num_threads()
    samples: list[dict[str, list[float]]] = [{p: [] for p in PHASES} for _ in cases]
    refs: list[list[float]] = [[] for _ in cases]
    null = _null_runner()
    extra = rounds if extra_rounds is None else extra_rounds
    gate = QuietGate() if gate is None else gate

    def quiet(i: int) -> list[bool]:
        return [not gate.is_busy(r, cases[i].threads) for r in refs[i]]

    try:
        pools = CasePools()
        runners = [_case_runner(c, pools) for c in cases]

        def one_round(indices: Sequence[int], first: bool) -> None:
            for i in indices:
                refs[i].append(gate.wait(cases[i].threads))
                torch.set_num_threads(cases[i].threads)
                clock = case_clock(cases[i].threads)
                engine = _time_once(null, reps + 1, clock)
                for phase, fn in runners[i].items():
                    if first:
                        fn()  # warm-up: caches, the allocator, oneDNN's kernel choice
                    seen = samples[i][phase]
                    n = reps if not seen else int(min(max_reps, max(reps, math.ceil(min_timed_s / max(seen[0],
                                                                                                      1e-9)))))
                    t = _time_once(fn, n, clock)
                    if phase in ("input_grad", "weight_grad"):
                        t = max(t - engine, 0.5 * t)
                    samples[i][phase].append(t)

        every = list(range(len(cases)))
        for r in range(rounds):
            one_round(every, r == 0)
            if progress is not None:
                progress(f"round {r + 1}/{rounds}")
        for _ in range(extra):
            unsteady = [i for i in every if _spread(_kept(samples[i], quiet(i)), last=rounds) > steady_spread
                        or sum(quiet(i)) < min(2, rounds)]
            if not unsteady:
                break
            one_round(unsteady, False)
    finally:
        torch.set_num_threads(before)
    out = []
    for i, case_samples in enumerate(samples):
        kept = _kept(case_samples, quiet(i))
        row = {p: float(np.median(v)) if v else 0.0 for p, v in kept.items()}
        row["spread"] = _spread(kept)
        row["rounds_timed"] = float(max(len(v) for v in case_samples.values()))
        row["busy_rounds"] = float(row["rounds_timed"] - max(len(v) for v in kept.values()))
        out.append(row)
    return out


def _kept(case_samples: dict[str, list[float]], quiet: Sequence[bool]) -> dict[str, list[float]]:
    """A case's rounds timed on a quiet host (every round where none was)."""
    if not any(quiet) or all(quiet):
        return case_samples
    return {p: [t for t, q in zip(v, quiet, strict=True) if q] if len(v) == len(quiet) else v
            for p, v in case_samples.items()}


def _spread(case_samples: dict[str, list[float]], last: int | None = None) -> float:
    """Median over a case's phases of max / min − 1 over its rounds (its ``last`` rounds)."""
    spreads = []
    for v in case_samples.values():
        w = v[-last:] if last else v
        if w and min(w) > 0:
            spreads.append(max(w) / min(w) - 1.0)
    return float(np.median(spreads)) if spreads else 0.0


# --- fit ----------------------------------------------------------------------------------------------

#: Channels per group tried as ShapeRate.group_block_channels (the SIMD widths of fp32 kernels).
GROUP_BLOCKS = (4, 8, 16)

COLUMNS = (tuple((g, f) for g in GEMMS for f in GEMM_FIELDS) + tuple((g, f) for g in FAMILIES for f in ELEM_FIELDS)
           + tuple(("", f) for f in RATE_FIELDS)
           + tuple((f"fn:{name}", f) for name in ACTIVATION_FUNCTIONS for f in FUNCTION_FIELDS))


def _rate(values: dict[tuple[str, str], float], cache_bytes: int, contention: float,
          layer_step_time_s: float = 0.0, columns: Sequence[tuple[str, str]] = COLUMNS,
          block: int = GROUP_BLOCKS[1], layout_copies: bool = False) -> ShapeRate:
    """The rate of the constants ``values`` (the rest 0); a family's weight-gradient byte time outside
    ``columns`` is None (its pass priced as a backward one)."""
    # Constants the fit leaves below 1e-20 s are zero (a spec holds no magnitudes that small).
    values = {k: (v if v >= 1e-20 else 0.0) for k, v in values.items()}
    gemm = {g: GemmCost(**{f: float(values.get((g, f), 0.0)) for f in GEMM_FIELDS}) for g in GEMMS}
    elem = {g: ElemCost(**{f: (float(values.get((g, f), 0.0)) if (g, f) in columns
                               or f not in OPTIONAL_ELEM_FIELDS else None) for f in ELEM_FIELDS})
            for g in FAMILIES}
    functions = FunctionCosts(**{name: FunctionCost(**{f: float(values.get((f"fn:{name}", f), 0.0))
                                                       for f in FUNCTION_FIELDS}) for name in ACTIVATION_FUNCTIONS})
    return ShapeRate(**gemm, **elem, **{f: float(values.get(("", f), 0.0)) for f in RATE_FIELDS}, functions=functions,
                     cache_bytes=cache_bytes, thread_contention=contention, layer_step_time_s=layer_step_time_s,
                     group_block_channels=block, layout_copies=layout_copies)


def _predict(arr: NetworkArrays, cases: Sequence[ShapeCase], rate: ShapeRate, cores: int) -> np.ndarray:
    """Modelled seconds per call, (cases, phases)."""
    b = np.array([c.batch for c in cases], dtype=float)
    t = np.minimum(np.array([c.threads for c in cases], dtype=float), cores)
    t_eff = t / (1.0 + rate.thread_contention * (t - 1.0))
    ones = np.ones_like(arr.weights)
    return np.stack(phase_calls(arr, rate, ones, np.zeros_like(ones, dtype=bool), b, t_eff, threads=t), axis=1)


def _design(arr: NetworkArrays, cases: Sequence[ShapeCase], cache_bytes: int, contention: float,
            cores: int, columns: Sequence[tuple[str, str]] = COLUMNS, block: int = GROUP_BLOCKS[1],
            layout_copies: bool = False, per_core: bool = False) -> np.ndarray:
    """(cases·phases, columns): the model's time with one constant 1 and the rest 0."""
    update = {"cache_bytes": int(cache_bytes), "thread_contention": float(contention), "memory_per_core": per_core}
    cols = [_predict(arr, cases, r.model_copy(update=update), cores).ravel() / _UNIT
            for r in _unit_rates(tuple(columns), block, layout_copies)]
    return np.stack(cols, axis=1)


_UNIT = 1e-6  # a valid constant (each is below 1 s), divided out of a design column


@functools.lru_cache(maxsize=16)
def _unit_rates(columns: tuple[tuple[str, str], ...], block: int, layout_copies: bool) -> tuple[ShapeRate, ...]:
    """One rate per column with that constant :data:`_UNIT` and the rest 0 (cache and contention set by
    the caller): built and validated once per fit rather than once per grid point."""
    return tuple(_rate({col: _UNIT}, 1, 0.0, columns=columns, block=block, layout_copies=layout_copies)
                 for col in columns)


@dataclass(frozen=True)
class ShapeFit:
    rate: ShapeRate
    residuals: np.ndarray  # (cases, phases) predicted / measured - 1, nan where a phase is absent
    held_out: np.ndarray  # the same from a fit without the case's fold
    band: ErrorBand

    def summary(self) -> dict[str, float]:
        def stats(r: np.ndarray) -> tuple[float, float]:
            a = np.abs(r[np.isfinite(r)])
            return (float(np.median(a)), float(np.max(a))) if a.size else (float("nan"), float("nan"))
        (m, x), (hm, hx) = stats(self.residuals), stats(self.held_out)
        return {"median_abs_residual": m, "max_abs_residual": x, "held_out_median_abs_residual": hm,
                "held_out_max_abs_residual": hx, "cases": int(self.residuals.shape[0])}


def _solve(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative constants: NNLS on relative residuals, then a robust fit of log(predicted / measured)
    (soft-L1 loss) from there, so that a few kernels far off the form (slow library paths) do not pull
    every other case off."""
    from scipy.optimize import least_squares, nnls

    scale = 1.0 / y
    norms = np.linalg.norm(a * scale[:, None], axis=0)
    norms[norms == 0] = 1.0
    an = a * scale[:, None] / norms  # columns in units where each row's measurement is 1
    coef, _ = nnls(an, np.ones_like(y), maxiter=50 * a.shape[1])
    floor = 1e-9

    def fun(c: np.ndarray) -> np.ndarray:
        return np.asarray(np.log(np.maximum(an @ c, floor)))

    def jac(c: np.ndarray) -> np.ndarray:
        return np.asarray(an / np.maximum(an @ c, floor)[:, None])

    used = np.linalg.norm(an, axis=0) > 0
    res = least_squares(lambda c: fun(_full(c, used)), coef[used], jac=lambda c: jac(_full(c, used))[:, used],
                        bounds=(0.0, np.inf), loss="soft_l1", f_scale=0.1, max_nfev=200, method="trf")
    return np.asarray(_full(res.x, used) / norms)


def _robust_loss(predicted: np.ndarray, measured: np.ndarray) -> float:
    """The loss :func:`_solve` minimises: soft-L1 of log(predicted / measured) at scale 0.1 (so that the
    cache level and contention are chosen by the same measure as the constants, not by a few outliers)."""
    z = np.log(np.maximum(predicted, 1e-30) / measured) / 0.1
    return float(np.sum(2.0 * (np.sqrt(1.0 + z * z) - 1.0)))


def _full(c: np.ndarray, used: np.ndarray) -> np.ndarray:
    out = np.zeros(used.shape)
    out[used] = c
    return out


def fit_shape_rate(cases: Sequence[ShapeCase], measured: Sequence[dict[str, float]], cache_levels: Sequence[int],
                   cores: int, folds: int = 5, columns: Sequence[tuple[str, str]] = COLUMNS,
                   layout_copies: bool | None = None, memory_per_core: bool | None = None) -> ShapeFit:
    """The constants of least relative residual, the cache level and contention on a grid; held-out
    residuals by ``folds``-fold cross-validation give the :class:`ErrorBand`. ``columns``: the
    constants fitted (the others 0), every one of :data:`COLUMNS` unless a benchmark compares forms.
    ``layout_copies`` (ShapeRate.layout_copies) and ``memory_per_core`` (ShapeRate.memory_per_core):
    None chooses by the fit, as the group block."""
    arr = case_arrays(cases)
    y = np.array([[m[p] for p in PHASES] for m in measured], dtype=float).ravel()
    has = y > 0
    multi = any(c.threads > 1 for c in cases)
    best: tuple[float, int, bool, float, np.ndarray] | None = None
    for cache in sorted(set(int(c) for c in cache_levels)):
        # A cache of each core's own matters only where some case runs on several threads.
        for per_core in (((False, True) if multi else (False,)) if memory_per_core is None
                         else (bool(memory_per_core),)):
            for sigma in ((0.0, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0) if multi else (0.0,)):
                a = _design(arr, cases, cache, sigma, cores, columns, per_core=per_core)[has]
                coef = _solve(a, y[has])
                err = _robust_loss(a @ coef, y[has])
                if best is None or err < best[0]:
                    best = (err, cache, per_core, sigma, coef)
    assert best is not None
    _, cache, per_core, sigma, coef = best
    # The group block and whether oneDNN's layout copies are priced, together (the block also decides
    # which inputs are copied), at the chosen cache and contention.
    choices = [(blk, cp) for cp in ((False, True) if layout_copies is None else (bool(layout_copies),))
               for blk in GROUP_BLOCKS]
    chosen: tuple[float, int, bool, np.ndarray, np.ndarray] | None = None
    for blk, cp in choices:
        a_try = _design(arr, cases, cache, sigma, cores, columns, blk, layout_copies=cp, per_core=per_core)
        c_try = coef if (blk, cp) == (GROUP_BLOCKS[1], False) else _solve(a_try[has], y[has])
        err = _robust_loss(a_try[has] @ c_try, y[has])
        if chosen is None or err < chosen[0]:
            chosen = (err, blk, cp, a_try, c_try)
    assert chosen is not None
    _, block, copies, a_all, coef = chosen
    rate = _rate(dict(zip(columns, coef, strict=True)), cache, sigma, columns=columns, block=block,
                 layout_copies=copies).evolve(memory_per_core=per_core)
    if not (arr.elem_family == ELEM_FAMILIES.index("max_pool")).any():
        rate = rate.evolve(max_pool=None)  # no case timed it: priced as the pool family
    res = np.full(y.shape, np.nan)
    res[has] = (a_all[has] @ coef) / y[has] - 1.0
    held = np.full(y.shape, np.nan)
    fold = np.repeat(np.arange(len(cases)) % folds, len(PHASES))
    for f in range(folds):
        train, test = has & (fold != f), has & (fold == f)
        if test.any() and train.any():
            c = _solve(a_all[train], y[train])
            held[test] = (a_all[test] @ c) / y[test] - 1.0
    # measured / predicted - 1 of the held-out cases: where measurements fall around a prediction.
    # (A held-out case its fold's fit prices at nothing, a kind no other case has, counts as 1000 times off.)
    ratio = 1.0 / np.maximum(1.0 + held[np.isfinite(held)], 1e-3) - 1.0
    band = ErrorBand(p10=min(0.0, float(np.quantile(ratio, 0.1))), p90=max(0.0, float(np.quantile(ratio, 0.9))),
                     cases=int(ratio.size))
    return ShapeFit(rate, res.reshape(-1, len(PHASES)), held.reshape(-1, len(PHASES)), band)


# --- whole training steps -------------------------------------------------------------------------

#: Seeds of the calibration's own chains (dnnbench.measure.chains); the generalisation benchmark draws
#: from other seeds.
STEP_SEEDS = (9001, 9002, 9003, 9004, 9005, 9006)
#: Scales of the fitted per-call times tried against whole steps (a call timed alone pays more fixed
#: cost than the same call inside a step).
CALL_SCALES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2)


def step_points(threads: Sequence[int] = (1,), seeds: Sequence[int] = STEP_SEEDS) -> list[tuple[int, int, int]]:
    """(seed, batch, threads) of the calibration's whole-step measurements."""
    return [(s, b, t) for s in seeds for b in (4, 32) for t in threads]


def time_steps(points: Sequence[tuple[int, int, int]], rounds: int = 3, steps: int = 5,
               gate: QuietGate | None = None) -> list[float]:
    """Seconds per training step of each (seed, batch, threads): median over interleaved rounds (over
    those ``gate`` found the host quiet for, :func:`.quiet.quiet_median`)."""
    from .chains import random_chain, step_times, torch_chain

    gate = QuietGate() if gate is None else gate
    per: list[list[float]] = [[] for _ in points]
    refs: list[list[float]] = [[] for _ in points]
    models = {s: torch_chain(random_chain(s)) for s in {p[0] for p in points}}
    for _ in range(rounds):
        for i, (seed, b, t) in enumerate(points):
            shape = tuple(random_chain(seed)["layers"][0]["shape"])
            refs[i].append(gate.wait(t))
            per[i].append(float(np.median(step_times(models[seed], shape, b, t, steps=steps, warmup=2))))
    return [quiet_median(v, r, t, gate) for v, r, (_, _, t) in zip(per, refs, points, strict=True)]


def _step_parts(rate: ShapeRate, machine_cores: int, points: Sequence[tuple[int, int, int]]
                ) -> tuple[np.ndarray, np.ndarray]:
    """Of each chain step in ``points`` (seed, batch, threads): the modelled seconds of its calls (their
    fixed times at ``rate.step_call_scale``) and its count of costed layers."""
    from .chains import random_chain

    base, layers = [], []
    for seed, b, t in points:
        arr = network_arrays(Network.build(random_chain(seed)))
        t_run = min(t, machine_cores)
        t_eff = np.asarray(t_run / (1.0 + rate.thread_contention * (t_run - 1.0)))
        ones = np.ones_like(arr.weights)
        parts = phase_calls(arr, rate, ones, np.zeros_like(ones, dtype=bool), float(b), t_eff,
                            calls=rate.step_call_scale, threads=float(t_run))
        base.append(float(sum(np.sum(p) for p in parts)))
        layers.append(float(np.sum(arr.group >= 0)))
    return np.asarray(base), np.asarray(layers)


def fit_steps(rate: ShapeRate, machine_cores: int, points: Sequence[tuple[int, int, int]],
              measured: Sequence[float]) -> ShapeRate:
    """The call-time scale, the fixed time per layer and per step of least relative residual against
    whole training steps of the calibration's chains (NNLS for the two times, the scale on a grid)."""
    from scipy.optimize import nnls

    y = np.asarray(measured, dtype=float)
    best: tuple[float, ShapeRate] | None = None
    for scale in CALL_SCALES:
        scaled = rate.evolve(step_call_scale=scale)
        base, layers = _step_parts(scaled, machine_cores, points)
        a = np.stack([layers, np.ones_like(y)], axis=1) / y[:, None]
        coef, _ = nnls(a, 1.0 - base / y)
        pred = base + np.stack([layers, np.ones_like(y)], axis=1) @ coef
        err = float(np.sum(np.log(np.maximum(pred, 1e-12) / y) ** 2))
        if best is None or err < best[0]:
            best = (err, scaled.evolve(layer_step_time_s=min(float(coef[0]), 0.5),
                                       step_time_s=min(float(coef[1]), 5.0)))
    assert best is not None
    return best[1]


#: Whole steps the step band needs to replace the layer cases' band as the prediction interval.
MIN_STEP_BAND_CASES = 6


def step_predictions(rate: ShapeRate, machine_cores: int, points: Sequence[tuple[int, int, int]]) -> np.ndarray:
    """Modelled seconds per training step of the calibration chains' ``points`` (seed, batch, threads)."""
    base, layers = _step_parts(rate, machine_cores, points)
    return np.asarray(base + rate.layer_step_time_s * layers + rate.step_time_s)


def step_band(rate: ShapeRate, machine_cores: int, points: Sequence[tuple[int, int, int]],
              measured: Sequence[float]) -> ErrorBand:
    """Quantiles of measured / predicted − 1 of whole training steps, each chain's steps predicted by a
    :func:`fit_steps` without that chain (leave one chain out): the error of a network the step fit
    has not seen, where the layer cases' band is the error of one layer."""
    seeds = sorted({p[0] for p in points})
    y = np.asarray(measured, dtype=float)
    ratios: list[float] = []
    for seed in seeds:
        keep = [i for i, p in enumerate(points) if p[0] != seed]
        test = [i for i, p in enumerate(points) if p[0] == seed]
        if not keep:
            continue
        fitted = fit_steps(rate, machine_cores, [points[i] for i in keep], y[keep])
        pred = step_predictions(fitted, machine_cores, [points[i] for i in test])
        ratios += list(y[test] / np.maximum(pred, 1e-12) - 1.0)
    r = np.asarray(ratios)
    if r.size == 0:
        return ErrorBand(p10=0.0, p90=0.0, cases=0)
    return ErrorBand(p10=max(-0.99, min(0.0, float(np.quantile(r, 0.1)))), p90=min(100.0, max(0.0, float(
        np.quantile(r, 0.9)))), cases=int(r.size))


# --- one network's layers ---------------------------------------------------------------------------

#: Mini-batches a network's layers are timed at by default (fixed cost and cost per sample).
PROFILE_BATCHES = (8, 64)


def _children(net: Network, model: Any) -> list[tuple[int, Any]]:
    """(spec layer index, module) of the model's children (dnnbench.measure.torchnet.build_model)."""
    index = getattr(model, "layer_index", None)
    if index is not None:
        return list(zip(index, model.children(), strict=True))
    return [(net.layer_names.index(name), mod) for name, mod in model.named_children()]


def time_in_steps(net: Network, batch: int, threads: int, steps: int = 6, warmup: int = 2
                  ) -> dict[int, tuple[float, float]]:
    """Median forward and backward seconds of each layer inside ``steps`` training steps (SGD,
    synthetic data), by forward and backward hooks on its module."""
    import torch

    from .alloc import steady_allocator
    from .torchnet import batch as make_batch
    from .torchnet import build_model, loss_fn

    steady_allocator()  # as in the runs' processes (docs/validation.md §"Runs")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    model = build_model(net)
    x, y = make_batch(net, batch)
    crit = loss_fn(net)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    times: dict[int, tuple[list[float], list[float]]] = {}
    start: dict[tuple[int, str], float] = {}
    handles = []
    # Layers fed by the network's inputs alone: their input needs no gradient, so autograd calls their
    # backward hook before it computes their weight gradient. Their backward ends where the next layer's
    # begins (autograd runs one node at a time), or with the pass: several such layers (two branches from
    # the input, or from two inputs) each end at their own.
    inputs = set(net.input_layers)
    first = {i for i, ids in enumerate(net.input_indices) if ids and all(k in inputs for k in ids)}

    def close_first(now: float, but: int = -1) -> None:
        for j in first:
            if j != but and (j, "b") in start:
                times[j][1].append(now - start.pop((j, "b")))

    for i, mod in _children(net, model):
        times[i] = ([], [])

        def pre(_m: Any, _a: Any, i: int = i) -> None:
            start[(i, "f")] = time.perf_counter()

        def post(_m: Any, _a: Any, _o: Any, i: int = i) -> None:
            times[i][0].append(time.perf_counter() - start[(i, "f")])

        def bpre(_m: Any, _g: Any, i: int = i) -> None:
            now = time.perf_counter()
            close_first(now, but=i)
            start[(i, "b")] = now

        def bpost(_m: Any, _gi: Any, _go: Any, i: int = i) -> None:
            if (i, "b") in start and i not in first:
                times[i][1].append(time.perf_counter() - start.pop((i, "b")))

        handles += [mod.register_forward_pre_hook(pre), mod.register_forward_hook(post),
                    mod.register_full_backward_pre_hook(bpre), mod.register_full_backward_hook(bpost)]
    try:
        with warnings.catch_warnings():
            # The first layers' inputs need no gradient: their hook fires early, which is handled above.
            warnings.filterwarnings("ignore", message="Full backward hook is firing", category=UserWarning)
            _run_steps(model, x, y, crit, opt, times, close_first, warmup, steps)
    finally:
        for h in handles:
            h.remove()
        torch.set_num_threads(before)
    return {i: (float(np.median(f)) if f else 0.0, float(np.median(bk)) if bk else 0.0)
            for i, (f, bk) in times.items()}


def _run_steps(model: Any, x: Any, y: Any, crit: Any, opt: Any, times: dict[int, tuple[list[float], list[float]]],
               close_first: Callable[[float], None], warmup: int, steps: int) -> None:
    """The hooked training steps of :func:`time_in_steps` (the warm-up's timings dropped)."""
    for step in range(warmup + steps):
        if step == warmup:
            for f, bk in times.values():
                f.clear()
                bk.clear()
        opt.zero_grad()
        crit(model(x), y).backward()
        close_first(time.perf_counter())
        opt.step()


def profile_network(net: Network, threads: int = 1, batches: tuple[int, int] = PROFILE_BATCHES, launches: int = 3,
                    progress: Callable[[str], None] | None = None, gate: QuietGate | None = None
                    ) -> tuple[Any, ...]:
    """Each distinct layer of ``net`` timed inside training steps on this machine, forward and backward,
    at two mini-batches (:class:`~dnnbench.specs.ProfiledLayer`, keyed by its signature): the median
    over ``launches`` interleaved launches (over those ``gate`` found the host quiet for, on several
    threads); layers of the same signature share their median."""
    from ..model.arrays import network_signatures
    from ..specs.shape import ProfiledLayer

    gate = QuietGate() if gate is None else gate
    small, large = sorted(batches)
    runs: dict[int, list[dict[int, tuple[float, float]]]] = {small: [], large: []}
    refs: dict[int, list[float]] = {small: [], large: []}
    for launch in range(launches):
        for b in (small, large):
            refs[b].append(gate.wait(threads))
            runs[b].append(time_in_steps(net, b, threads))
        if progress is not None:
            progress(f"launch {launch + 1}/{launches}")
    by_sig: dict[str, dict[str, list[float]]] = {}
    signatures = network_signatures(net)
    for i in runs[small][0]:
        sig = signatures[i]
        entry = by_sig.setdefault(sig, {"fs": [], "fl": [], "bs": [], "bl": [], "spread": []})
        for key, b, j in (("fs", small, 0), ("fl", large, 0), ("bs", small, 1), ("bl", large, 1)):
            values = [r[i][j] for r in runs[b]]
            entry[key].append(quiet_median(values, refs[b], threads, gate))
            if min(values) > 0:
                entry["spread"].append(max(values) / min(values) - 1.0)
    out = []
    for sig, e in by_sig.items():
        def med(key: str, e: dict[str, list[float]] = e) -> float:
            return float(np.median(e[key]))
        out.append(ProfiledLayer(signature=sig, threads=threads, batch_samples=(small, large),
                                 forward_s=(med("fs"), med("fl")), backward_s=(med("bs"), med("bl")),
                                 spread=min(10.0, float(np.median(e["spread"])) if e["spread"] else 0.0),
                                 launches=launches))
    return tuple(out)


def check_batch(batches: tuple[int, int]) -> int:
    """The mini-batch between the two profiled ones whose whole steps :func:`profile_and_check` times
    (their geometric mean)."""
    small, large = sorted(batches)
    return max(small + 1, min(large - 1, round(float(np.sqrt(small * large))))) if large - small > 1 else large


def _check_step(net: Network, cluster: Any, threads: int, batches: tuple[int, int], launches: int = 3,
                gate: QuietGate | None = None) -> tuple[int, float, float]:
    """(b, measured, predicted) seconds per training step of ``net`` at :func:`check_batch` (the median of
    ``launches``), predicted from ``cluster``'s worker with its profiled layers: a batch the profiles were
    not timed at, so the difference holds what composing a step and interpolating in b miss."""
    from ..model.evaluate import single_machine_time_per_sample
    from ..specs import Configuration
    from .chains import plain_step_s

    gate = QuietGate() if gate is None else gate
    b = check_batch(batches)
    refs, steps = [], []
    for _ in range(launches):
        refs.append(gate.wait(threads))
        steps.append(plain_step_s(net, b, threads))
    measured = quiet_median(steps, refs, threads, gate)
    predicted = single_machine_time_per_sample(net, cluster, Configuration(threads=threads, local_batch_samples=b))
    return b, measured, predicted * b


@dataclasses.dataclass(frozen=True)
class NetworkProfile:
    """What ``dnnbench calibrate --network`` stores for one network and thread count: its distinct
    layers timed inside training steps, each carrying the whole-step check's error, and its step's own
    fixed time (the check's whole steps less the model's time of everything else)."""

    layers: tuple[Any, ...]
    step: Any
    error: float  # |measured / predicted − 1| of the checked steps before the step's fixed time was set

    def merged_into(self, machine: Any) -> Any:
        """``machine`` with these layers and this step added (those timed again replaced)."""
        steps = tuple(p for p in machine.profiled_steps
                      if (p.network, p.threads) != (self.step.network, self.step.threads)) + (self.step,)
        return machine.evolve(profiled_layers=merge_profiles(machine.profiled_layers, self.layers),
                              profiled_steps=steps)


def profile_and_check(net: Network, cluster: Any, threads: int = 1, batches: tuple[int, int] = PROFILE_BATCHES,
                      launches: int = 3, progress: Callable[[str], None] | None = None) -> NetworkProfile:
    """:func:`profile_network`, then whole steps at :func:`check_batch`: each layer carries the steps'
    error as predicted from the profiles (the interval's width), and the network's step takes the fixed
    time that makes the checked steps' prediction equal their measurement (at least 0)."""
    from ..model.arrays import network_arrays, network_digest
    from ..model.shape_compute import step_time_of
    from ..specs.shape import ProfiledStep

    gate = QuietGate()
    new = profile_network(net, threads=threads, batches=batches, launches=launches, progress=progress, gate=gate)
    worker = cluster.worker.evolve(profiled_layers=merge_profiles(cluster.worker.profiled_layers, new))
    b, measured, predicted = _check_step(net, cluster.evolve(worker=worker), threads, batches, launches, gate)
    err = min(10.0, abs(predicted / measured - 1.0)) if measured > 0 else 0.0
    arr = network_arrays(net)
    now = step_time_of(arr, worker, float(threads))
    step = ProfiledStep(network=network_digest(arr.signatures), threads=threads, batch_samples=b,
                        step_time_s=min(9.0, max(0.0, now + measured - predicted)))
    return NetworkProfile(tuple(p.evolve(step_error=err) for p in new), step, err)


def merge_profiles(old: Sequence[Any], new: Sequence[Any]) -> tuple[Any, ...]:
    """``old`` with the layers of ``new`` added; a layer timed again at the same threads is replaced."""
    keys = {(p.signature, p.threads) for p in new}
    return tuple(p for p in old if (p.signature, p.threads) not in keys) + tuple(new)


# --- the whole shape calibration --------------------------------------------------------------------

def calibration_threads(cores: int) -> tuple[int, ...]:
    """Thread counts the cases are timed at: 1 and all cores (at most 16)."""
    return (1,) if cores <= 1 else (1, min(cores, 16))


def calibrate_shapes(cores: int, cache_levels: Sequence[int], quick: bool = False,
                     progress: Callable[[str], None] | None = None) -> tuple[ShapeRate, ErrorBand, dict[str, Any]]:
    """Time the shape cases and the calibration's chains, fit: (the rate, the prediction interval's
    band, a report). The band is :func:`step_band` (whole steps, leave one chain out); the layer cases'
    held-out band is in the report as ``band``."""
    threads = calibration_threads(cores)
    cases = shape_cases(64 if quick else 200, seed=0, threads=threads)
    gate = QuietGate()
    measured = time_cases(cases, rounds=2 if quick else 3, progress=progress, gate=gate)
    fit = fit_shape_rate(cases, measured, cache_levels, cores)
    points = step_points(threads[:1] if quick else threads, STEP_SEEDS[:3] if quick else STEP_SEEDS)
    steps = time_steps(points, rounds=2 if quick else 3, gate=gate)
    rate = fit_steps(fit.rate, cores, points, steps)
    whole = step_band(fit.rate, cores, points, steps)
    if progress is not None:
        progress("steps")
    from . import recurrent_steps

    recurrent = recurrent_steps.time_points(rounds=2 if quick else 3)
    rate = rate.evolve(recurrent_steps=recurrent_steps.fit_step_times(rate, recurrent))
    if progress is not None:
        progress("recurrent steps")
    residuals = {f"{c.name} {c.layer.get('kind')} {'x'.join(map(str, c.input_shape))} b{c.batch} t{c.threads} {ph}":
                 float(fit.residuals[i, j]) for i, c in enumerate(cases) for j, ph in enumerate(PHASES)
                 if np.isfinite(fit.residuals[i, j])}
    report = {**fit.summary(), "band": fit.band.model_dump(mode="json"),
              "step_band": whole.model_dump(mode="json"), "residuals": residuals, "quiet_gate": gate.report(),
              "timings": [{"layer": c.layer, "input_shape": list(c.input_shape), "batch": c.batch, "threads": c.threads,
                         **m} for c, m in zip(cases, measured, strict=True)],
              "steps": [{"seed": s, "batch": b, "threads": t, "step_s": v} for (s, b, t), v in zip(points, steps,
                                                                                                    strict=True)],
              "recurrent_steps": [{"mode": m, "steps": s, "step_s": v}
                                  for (m, s), v in zip(recurrent_steps.points(), recurrent, strict=True)]}
    # The interval of a network's prediction: how far whole steps of chains the step fit has not seen
    # fall (it holds about 80 % of unseen networks' steps, where the single layers' band holds ~95 %).
    band = whole if whole.cases >= MIN_STEP_BAND_CASES else fit.band
    return rate, band, report


def shape_steps(quick: bool) -> int:
    """Progress steps of :func:`calibrate_shapes`."""
    return (2 if quick else 3) + 2
