"""Training in one process: each step and each layer timed (wall and CPU), docs/validation.md §"Runs".

A run with mini-batch b measures b samples per step; the model's per-sample time maps to a step as
step_s = b · T_sample (docs/validation.md §"Mapping").
"""

from __future__ import annotations

from typing import Any

from ..specs import Network
from .timing import Samples, Stopwatch, coefficient_of_variation


def run_single(net: Network, batch_size: int = 32, iterations: int = 30, warmup: int = 3,
               threads: int = 1, layer_repeats: int = 5, lr: float = 0.01,
               small_batch_size: int | None = None) -> dict[str, Any]:
    """Train ``net`` for ``iterations`` SGD steps on synthetic data; time steps and layers.

    Returns ``{"step": {"wall_s", "cpu_s"}, "step_mean": {"wall_s", "cpu_s"}, "step_cv", "layers":
    {name: {"forward_s", "backward_s", ...}}, "batch_size", "iterations"}``: medians and means per
    mini-batch, and the steps' wall-time coefficient of variation (``Machine.step_time_cv``). With
    ``small_batch_size``, ``"small"`` holds the same timings at that mini-batch (fewer steps): the
    fixed per-layer overhead is what does not shrink with the batch (docs/validation.md §"Calibration").
    """
    import torch

    from .torchnet import build_model

    torch.set_num_threads(threads)
    model = build_model(net)
    out = _train_and_time(net, model, batch_size, iterations, warmup, layer_repeats, lr)
    out["threads"] = threads
    if small_batch_size is not None:
        out["small"] = _train_and_time(net, model, small_batch_size, max(10, iterations // 2), warmup,
                                       layer_repeats, lr)
    return out


def _train_and_time(net: Network, model: Any, batch_size: int, iterations: int, warmup: int,
                    layer_repeats: int, lr: float) -> dict[str, Any]:
    import torch

    from .torchnet import batch, loss_fn

    opt = torch.optim.SGD(model.parameters(), lr=lr)
    crit = loss_fn(net)
    x, y = batch(net, batch_size)
    steps = Samples()
    for i in range(warmup + iterations):
        with Stopwatch() as sw:
            opt.zero_grad(set_to_none=False)
            loss = crit(model(x), y)
            loss.backward()
            opt.step()
        if i >= warmup:
            steps.add(sw.wall_s, sw.cpu_s)
    return {
        "batch_size": batch_size, "iterations": iterations,
        "step": steps.median(), "step_mean": steps.mean(), "step_wall_s_all": steps.wall_s,
        "step_cv": coefficient_of_variation(steps.wall_s),
        "layers": time_layers(model, x, repeats=layer_repeats),
    }


def time_layers(model: Any, x: Any, repeats: int = 5) -> dict[str, dict[str, float]]:
    """Forward and backward (input and weight gradients) of each child module in isolation.

    A layer's input needs a gradient where it does in training and in the model's counts
    (``Network.needs_gradient``, docs/model.md §3): not the network's input (unless ``x`` needs it), nor
    values computed from it without parameters.
    """
    import torch

    from .torchnet import input_values

    out: dict[str, dict[str, float]] = {}
    given = input_values(getattr(model, "input_layers", [0]), x)
    needs: dict[int, bool] = {k: bool(v.requires_grad) for k, v in given.items()}
    # A chain's children each take the one before; a GraphModel's take the outputs it lists.
    names = getattr(model, "layer_names", None) or [name for name, _ in model.named_children()]
    index = getattr(model, "layer_index", None) or list(range(1, len(names) + 1))
    inputs = getattr(model, "graph_inputs", None) or [(i - 1,) for i in index]
    values: dict[int, Any] = {k: v.detach() for k, v in given.items()}
    for name, i, ids, mod in zip(names, index, inputs, model.children(), strict=True):
        args = [values[k].detach().requires_grad_(needs[k] and torch.is_floating_point(values[k])) for k in ids]
        needs[i] = any(needs[k] for k in ids) or any(p.requires_grad for p in mod.parameters())
        fwd, bwd = Samples(), Samples()
        for _ in range(repeats + 1):
            with Stopwatch() as sf:
                y = mod(*args)
            g = torch.ones_like(y)
            with Stopwatch() as sb:
                if y.requires_grad:
                    y.backward(g)
            fwd.add(sf.wall_s, sf.cpu_s)
            bwd.add(sb.wall_s, sb.cpu_s)
        out[name] = {"forward_s": fwd.median()["wall_s"], "forward_cpu_s": _median_tail(fwd.cpu_s),
                     "backward_s": bwd.median()["wall_s"], "backward_cpu_s": _median_tail(bwd.cpu_s)}
        model.zero_grad(set_to_none=True)
        with torch.no_grad():
            values[i] = mod(*(values[k] for k in ids))
    return out


def _median_tail(values: list[float]) -> float:
    from .timing import median

    return median(values[1:] if len(values) > 1 else values)  # the first call warms caches up


def single_main(rank: int, world: int, args: dict[str, Any]) -> dict[str, Any]:
    """:func:`run_single` as a rank of :func:`.launch.run_ranks` (world 1): the calibration run in a
    fresh process, like the runs it predicts, so several launches can be medianed
    (docs/validation.md §"Noise")."""
    small = args.get("small_batch_size")
    return run_single(Network.build(args["network"]), int(args["batch_size"]), int(args["iterations"]),
                      int(args["warmup"]), small_batch_size=None if small is None else int(small))
