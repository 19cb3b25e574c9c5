"""Model parallelism over W processes: a network vertically partitioned (Adam's model parallelism,
docs/model.md §5, :mod:`.partition`), trained on one replica without a PS.

A conv/FC layer (but one that reads the network's input) needs its whole input: forward, each process
sends its share to every other one and receives theirs ((W-1)/W of the input); backward, each sends
every other process that process's share of its partial input gradient and sums what it receives
(again (W-1)/W of the input). That is the model's 2·(W-1)/W·N_in values per layer and sample. Layers
that act per unit (activations, pooling, normalisation over channels, add, mul, concat) keep their
input's partition, in chains and graphs alike; a network of several inputs gives every process each.
"""

from __future__ import annotations

from typing import Any

from .timing import Samples, Stopwatch


def mp_main(rank: int, world: int, args: dict[str, Any]) -> dict[str, Any]:
    """One partition of a model-parallel replica: train ``iterations`` SGD steps, time each."""
    import time

    import torch

    from ..specs import Network
    from ..specs.layers import Softmax
    from . import partition
    from .torchnet import batch, build_model, input_values, loss_fn

    net = Network.build(args["network"])
    steps = partition.plan(net, world)
    mods = partition.modules(net, steps, rank, world)
    if args.get("same_weights"):  # the whole model's weights, each process its slices (a check)
        partition.take_weights(net, steps, mods, build_model(net), rank)
    params = list({id(p): p for m in mods.values() if m is not None for p in m.parameters()}.values())  # shared once
    opt = torch.optim.SGD(params, lr=float(args.get("lr", 0.01)))
    crit = loss_fn(net)
    x, y = batch(net, int(args["batch_size"]), seed=1)
    inputs = input_values(net.input_layers, x)
    shares: dict[int, partition.Share] = {i: None for i in net.input_layers}
    shares.update({s.index: s.share for s in steps})
    last = len(net.layers) - 1
    # The whole logits are the same on every process: their gradient is too, and is not summed.
    replicated_end = isinstance(net.layers[last], Softmax)
    # Logits every process computes whole, from values it holds whole (no assembly at the end): every
    # process's gradient of them is the whole one, and the processes' gradients of what they hold whole
    # are summed (the exchanges' backward, the weights of layers held whole), so each takes 1/W of it.
    end_inputs = steps[-1].inputs if replicated_end else (last,)
    share_of_loss = 1.0 / world if all(shares[k] is None for k in end_inputs) else 1.0

    def forward() -> Any:  # noqa: ANN401
        outs = dict(inputs)
        for step in steps:
            xs = []
            for k, want, axis in zip(step.inputs, step.wants, step.dims, strict=True):
                v = outs[k]
                if not isinstance(want, str):
                    v = partition.realign(v, shares[k], want, net.shapes[k][axis], rank, world,
                                          sum_back=not (replicated_end and step.index == last), dim=axis + 1)
                xs.append(v)
            mod = mods[step.index]
            outs[step.index] = mod(*xs) if mod is not None else xs[0]
        # no softmax at the end: the logits are assembled for the loss
        end, axis = net.shapes[last], steps[-1].axis
        return partition.realign(outs[last], shares[last], None, end[axis], rank, world, sum_back=False,
                                 dim=axis + 1)

    samples = Samples()
    losses: list[float] = []
    warmup = int(args["warmup"])
    t_start = 0.0
    for i in range(int(args["iterations"]) + warmup):
        if i == warmup:
            t_start = time.perf_counter()
        with Stopwatch() as sw:
            opt.zero_grad(set_to_none=False)
            loss = crit(forward(), y)
            (loss * share_of_loss).backward()
            opt.step()
        losses.append(float(loss.detach()))
        if i >= warmup:
            samples.add(sw.wall_s, sw.cpu_s)
    elapsed = time.perf_counter() - t_start
    return {"role": "partition", "rank": rank, "step": samples.median(), "elapsed_s": elapsed,
            "iterations": int(args["iterations"]),
            "samples_per_s": int(args["iterations"]) * int(args["batch_size"]) / elapsed,
            "weights": int(sum(p.numel() for p in params)), "losses": losses[:2]}
