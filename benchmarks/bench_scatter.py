"""What each way of combining a graph's messages at their target nodes costs on this CPU, against what
the model's ``scatter_add`` layer prices (docs/model.md §3).

    python3 benchmarks/bench_scatter.py [--repeats 15]

Times, on one thread, forward and backward of ``index_add`` (the sum by an index per slice),
``index_reduce`` and ``scatter_add``/``scatter_reduce`` (an index per value,
``dst.view(1, -1, 1).expand_as(m)``) for each reduction, at two graphs (8 edges per node and one edge per
2 nodes), the forms interleaved and the median of the rounds kept, on a steady heap (docs/validation.md
§"Runs"). Each is printed as a multiple of ``index_add``'s time at the same graph, beside the multiple the
model's element ops give (``dnnbench.specs.layers.scatter_ops``, whose table was measured so: its figures
are in sample for these two graphs).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections.abc import Callable

import torch

from dnnbench.measure.alloc import restart_with_steady_heap, steady_allocator
from dnnbench.specs.layers import scatter_ops

BATCH, FEATURES = 8, 64
GRAPHS = {"8 edges per node": (1000, 8000), "1 edge per 2 nodes": (4000, 2000)}
REDUCTIONS = ("sum", "mean", "amax", "amin", "prod")


def _forms(dst: torch.Tensor, edges: int) -> dict[tuple[bool, str, bool], Callable[..., torch.Tensor]]:
    index = dst.view(1, -1, 1).expand(BATCH, edges, FEATURES)
    forms: dict[tuple[bool, str, bool], Callable[..., torch.Tensor]] = {}
    for reduce in REDUCTIONS:
        for include_self in (True, False):
            def by_value(h: torch.Tensor, m: torch.Tensor, r: str = reduce, s: bool = include_self) -> torch.Tensor:
                if r == "sum" and s:
                    return h.scatter_add(1, index, m)
                return h.scatter_reduce(1, index, m, r, include_self=s)
            forms[(True, reduce, include_self)] = by_value
            if reduce == "sum" and include_self:
                forms[(False, reduce, include_self)] = lambda h, m: h.index_add(1, dst, m)
            elif reduce == "sum":  # the runner's sum by slices without the base: its positions zeroed first
                forms[(False, reduce, include_self)] = lambda h, m: h.index_fill(1, dst, 0.0).index_add(1, dst, m)
            else:
                def by_slice(h: torch.Tensor, m: torch.Tensor, r: str = reduce, s: bool = include_self) -> torch.Tensor:
                    return h.index_reduce(1, dst, m, r, include_self=s)
                forms[(False, reduce, include_self)] = by_slice
    return forms


def _time(form: Callable[..., torch.Tensor], h: torch.Tensor, m: torch.Tensor) -> tuple[float, float]:
    start = time.perf_counter()
    out = form(h, m)
    mid = time.perf_counter()
    out.backward(torch.ones_like(out))
    end = time.perf_counter()
    h.grad = m.grad = None
    return mid - start, end - mid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=15, help="interleaved rounds per form (median kept)")
    args = parser.parse_args()
    restart_with_steady_heap(sys.argv)  # no block mapped anew and faulted in at every call
    steady_allocator()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="index_reduce")
    generator = torch.Generator().manual_seed(0)
    worst = 0.0
    for graph, (nodes, edges) in GRAPHS.items():
        dst = torch.randint(0, nodes, (edges,), generator=generator)
        h = torch.randn(BATCH, nodes, FEATURES, requires_grad=True)
        m = torch.randn(BATCH, edges, FEATURES, requires_grad=True)
        forms = _forms(dst, edges)
        times: dict[tuple[bool, str, bool], list[tuple[float, float]]] = {key: [] for key in forms}
        for _ in range(args.repeats):
            for key, form in forms.items():
                times[key].append(_time(form, h, m))
        n, values = BATCH * nodes * FEATURES, BATCH * edges * FEATURES
        base_key = (False, "sum", True)
        base = [statistics.median(t[k] for t in times[base_key]) for k in (0, 1)]
        model_base = scatter_ops(n, values, "sum", True, False)
        print(f"\n{graph}: {nodes} nodes, {edges} edges, batch {BATCH}, {FEATURES} features; index_add "
              f"{base[0] * 1e3:.2f} ms forward, {base[1] * 1e3:.2f} ms backward")
        print(f"{'form':<15} {'reduce':<5} {'self':<5} {'forward: measured':>18} {'model':>6} "
              f"{'backward: measured':>19} {'model':>6}")
        for (per_value, reduce, include_self), rounds in times.items():
            measured = [statistics.median(t[k] for t in rounds) / base[k] for k in (0, 1)]
            model = [a / b for a, b in zip(scatter_ops(n, values, reduce, include_self, per_value), model_base,
                                           strict=True)]
            worst = max(worst, *(abs(x / y - 1) for x, y in zip(model, measured, strict=True)))
            form = "scatter_reduce" if per_value else ("index_reduce" if reduce != "sum" else "index_add")
            form = "scatter_add" if per_value and reduce == "sum" and include_self else form
            print(f"{form:<15} {reduce:<5} {include_self!s:<5} {measured[0]:17.2f}x {model[0]:5.2f}x "
                  f"{measured[1]:18.2f}x {model[1]:5.2f}x")
    print(f"\nlargest |model / measured - 1| over the forms: {worst:.0%}")


if __name__ == "__main__":
    main()
