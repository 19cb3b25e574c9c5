"""Model parallelism over W processes: every conv/FC layer split by output maps / neurons (Adam's
vertical partitioning, docs/model.md §5), trained on one replica without a PS.

A conv/FC layer (but the first) needs the full output of the layer below: forward, each process
sends its slice to every other one and receives theirs ((W-1)/W of the input); backward, each sends
every other process that process's slice of its partial input gradient and sums what it receives
(again (W-1)/W of the input). That is the model's 2·(W-1)/W·N_in values per layer and sample.
"""

from __future__ import annotations

from typing import Any

from .timing import Samples, Stopwatch


def _exchange(world: int, rank: int, mine: Any, sizes: list[int], backward_sum: bool) -> Any:
    """An autograd op: gather every rank's slice along dim 1 (forward)."""
    import torch
    import torch.distributed as dist

    class Gather(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:  # noqa: ANN401
            parts = [x.contiguous() if r == rank else x.new_empty((x.shape[0], sizes[r], *x.shape[2:]))
                     for r in range(world)]
            ops = [dist.P2POp(dist.isend, parts[rank], r) for r in range(world) if r != rank]
            ops += [dist.P2POp(dist.irecv, parts[r], r) for r in range(world) if r != rank]
            for req in dist.batch_isend_irecv(ops):
                req.wait()
            return torch.cat(parts, dim=1)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:  # noqa: ANN401
            chunks = list(torch.split(g.contiguous(), sizes, dim=1))
            if not backward_sum:  # every rank holds the same full gradient (replicated loss)
                return chunks[rank]
            recv = [torch.empty_like(chunks[rank]) for _ in range(world)]
            ops = [dist.P2POp(dist.isend, chunks[r].contiguous(), r) for r in range(world) if r != rank]
            ops += [dist.P2POp(dist.irecv, recv[r], r) for r in range(world) if r != rank]
            for req in dist.batch_isend_irecv(ops):
                req.wait()
            total = chunks[rank].clone()
            for r in range(world):
                if r != rank:
                    total += recv[r]
            return total

    return Gather.apply(mine)


def mp_main(rank: int, world: int, args: dict[str, Any]) -> dict[str, Any]:
    """One partition of a model-parallel replica: train ``iterations`` SGD steps, time each."""
    import time

    import torch

    from ..specs import Network
    from .torchnet import batch, build_layers, ends_in_log_probs, loss_fn

    net = Network.build(args["network"])
    layers = build_layers(net, part=(rank, world))
    params = [p for _, m, _ in layers for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=float(args.get("lr", 0.01)))
    crit = loss_fn(net)
    x, y = batch(net, int(args["batch_size"]), seed=1)
    sizes_in = _input_slices(net, world)
    steps = Samples()
    warmup = int(args["warmup"])
    t_start = 0.0
    for i in range(int(args["iterations"]) + warmup):
        if i == warmup:
            t_start = time.perf_counter()
        with Stopwatch() as sw:
            opt.zero_grad(set_to_none=False)
            h = x
            for li, (_, mod, exchanged) in enumerate(layers):
                if exchanged:
                    h = _exchange(world, rank, h, sizes_in[li], backward_sum=li < len(layers) - 1)
                h = mod(h)
            if not ends_in_log_probs(net):  # no softmax at the end: gather the logits for the loss
                h = _exchange(world, rank, h, sizes_in[len(layers)], backward_sum=False)
            loss = crit(h, y)
            loss.backward()
            opt.step()
        if i >= warmup:
            steps.add(sw.wall_s, sw.cpu_s)
    elapsed = time.perf_counter() - t_start
    return {"role": "partition", "rank": rank, "step": steps.median(), "elapsed_s": elapsed,
            "iterations": int(args["iterations"]),
            "samples_per_s": int(args["iterations"]) * int(args["batch_size"]) / elapsed,
            "weights": int(sum(p.numel() for p in params))}


def _input_slices(net: Any, world: int) -> list[list[int]]:
    """Per layer after the input (and one past the last): each rank's share of that layer's input
    along dim 1. Conv/FC outputs are split by units; pooling and activations keep the split;
    flatten scales a channel split by the elements per channel."""
    import math

    from ..specs.layers import Conv2d, Flatten, FullyConnected, InputLayer
    from .torchnet import slice_bounds

    out: list[list[int]] = []
    sizes = [net.input_shape[0]] * world
    for layer, in_shape, out_shape in zip(net.layers[1:], net.shapes[:-1], net.shapes[1:], strict=False):
        out.append(sizes)
        if isinstance(layer, (Conv2d, FullyConnected)):
            sizes = [hi - lo for lo, hi in (slice_bounds(out_shape[0], (r, world)) for r in range(world))]
        elif isinstance(layer, Flatten) and len(in_shape) == 3:
            sizes = [s * math.prod(in_shape[1:]) for s in sizes]
        elif isinstance(layer, InputLayer):  # pragma: no cover - only layers[0] is an input
            raise TypeError
    out.append(sizes)
    return out
