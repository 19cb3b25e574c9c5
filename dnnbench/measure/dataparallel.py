"""Data parallelism with a real parameter server over torch.distributed (gloo), docs/validation.md.

Rank 0 is the PS, ranks 1..R are workers (one replica each, W = 1). A worker trains a mini-batch of
b samples, pushes its flattened gradient (b samples = k_push) and pulls the full weights back
(k_pull = b). The PS applies each push with SGD.

- sync: the PS waits for every worker's push, applies the mean, and sends the weights to all.
- async: the PS serves pushes in arrival order (``recv`` from any source) and answers each with the
  weights right after applying it (Adam-style asynchronous updates, docs/model.md §6).

``compute_sleep_s`` replaces a worker's compute by a sleep of that duration while it still sends
real gradients: runs with more workers than cores then test the communication model; their result
carries ``"emulated_compute": true``.
"""

from __future__ import annotations

from typing import Any

from .timing import Samples, Stopwatch, median


def _model(args: dict[str, Any]) -> tuple[Any, Any, Any]:
    from ..specs import Network
    from .torchnet import batch, build_model, loss_fn

    net = Network.build(args["network"])
    return net, build_model(net), loss_fn(net), batch(net, int(args["batch_size"]), seed=1)  # type: ignore[return-value]


def ps_dp_main(rank: int, world: int, args: dict[str, Any]) -> dict[str, Any]:
    """Rank 0 (PS) in a sync or async data-parallel run, or a worker (rank >= 1)."""
    return _ps(world, args) if rank == 0 else _worker(rank, args)


def _ps(world: int, args: dict[str, Any]) -> dict[str, Any]:
    import time

    import torch
    import torch.distributed as dist
    from torch.nn.utils import parameters_to_vector

    _, model, _, _ = _model(args)
    params = parameters_to_vector(model.parameters()).detach().clone()
    lr = float(args.get("lr", 0.01))
    workers = world - 1
    warm = int(args["warmup"]) * workers  # pushes before the timed part (the workers' warm-up steps)
    steps = int(args["iterations"]) + int(args["warmup"])
    apply_ = Samples()
    # Where the PS's wall time goes, per push served after the warm-up (docs/validation.md §"Async PS"):
    # blocked in recv, applying, cloning the reply, waiting for the previous reply to the same worker.
    parts = {"recv_wall_s": 0.0, "apply_wall_s": 0.0, "reply_wall_s": 0.0, "reply_wait_wall_s": 0.0}
    served = 0
    w0 = c0 = 0.0

    def start() -> tuple[float, float]:
        return time.perf_counter(), time.process_time()

    if args["mode"] == "sync":
        bufs = [torch.empty_like(params) for _ in range(workers)]
        for i in range(steps):
            if i * workers == warm:
                w0, c0 = start()
            t0 = time.perf_counter()
            for r in [dist.irecv(bufs[i], src=i + 1) for i in range(workers)]:
                r.wait()
            t1 = time.perf_counter()
            with Stopwatch() as sw:
                params.add_(torch.stack(bufs).mean(0), alpha=-lr)
            apply_.add(sw.wall_s, sw.cpu_s)
            t2 = time.perf_counter()
            for r in [dist.isend(params, dst=i + 1) for i in range(workers)]:
                r.wait()
            if i * workers >= warm:
                served += workers
                parts["recv_wall_s"] += t1 - t0
                parts["apply_wall_s"] += t2 - t1
                parts["reply_wait_wall_s"] += time.perf_counter() - t2
    else:
        # Replies go out with isend so the PS keeps receiving pushes while it sends weights (its NIC
        # is full duplex, docs/model.md §6); at most one reply per worker is in flight.
        buf = torch.empty_like(params)
        pending: dict[int, Any] = {}
        for i in range(steps * workers):
            if i == warm:
                w0, c0 = start()
            t0 = time.perf_counter()
            src = dist.recv(buf)
            t1 = time.perf_counter()
            with Stopwatch() as sw:
                params.add_(buf, alpha=-lr)
            apply_.add(sw.wall_s, sw.cpu_s)
            t2 = time.perf_counter()
            if src in pending:
                pending[src][0].wait()
            t3 = time.perf_counter()
            reply = params.clone()
            pending[src] = (dist.isend(reply, dst=src), reply)
            if i >= warm:
                served += 1
                parts["recv_wall_s"] += t1 - t0
                parts["apply_wall_s"] += t2 - t1
                parts["reply_wait_wall_s"] += t3 - t2
                parts["reply_wall_s"] += time.perf_counter() - t3
        for req, _ in pending.values():
            req.wait()
    # Busy share: process CPU (every thread, gloo's I/O included) over wall time of the timed part.
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    per_push = {k.replace("_s", "_s_per_push"): v / max(served, 1) for k, v in parts.items()}
    return {"role": "ps", "apply": apply_.median(), "weights": int(params.numel()),
            "cpu_busy_fraction": cpu / max(wall, 1e-9), "pushes": served,
            "wall_s_per_push": wall / max(served, 1), "process_cpu_s_per_push": cpu / max(served, 1), **per_push}


def _worker(rank: int, args: dict[str, Any]) -> dict[str, Any]:
    import time

    import torch
    import torch.distributed as dist
    from torch.nn.utils import parameters_to_vector, vector_to_parameters

    _, model, crit, (x, y) = _model(args)
    params = parameters_to_vector(model.parameters()).detach().clone()
    sleep_s = args.get("compute_sleep_s")
    comp, comm, step = Samples(), Samples(), Samples()
    warmup = int(args["warmup"])
    t_start = c_start = 0.0
    for i in range(int(args["iterations"]) + warmup):
        if i == warmup:
            t_start, c_start = time.perf_counter(), time.process_time()
        with Stopwatch() as st:
            with Stopwatch() as sc:
                model.zero_grad(set_to_none=False)
                if sleep_s is None:
                    loss = crit(model(x), y)
                    loss.backward()
                else:
                    time.sleep(float(sleep_s))
                grad = parameters_to_vector(p.grad if p.grad is not None else torch.zeros_like(p)
                                            for p in model.parameters())
            with Stopwatch() as sn:
                dist.send(grad, dst=0)
                dist.recv(params, src=0)
                vector_to_parameters(params, model.parameters())
        if i >= warmup:
            comp.add(sc.wall_s, sc.cpu_s)
            comm.add(sn.wall_s, sn.cpu_s)
            step.add(st.wall_s, st.cpu_s)
    elapsed = time.perf_counter() - t_start
    busy = (time.process_time() - c_start) / max(elapsed, 1e-9)
    return {"role": "worker", "rank": rank, "compute": comp.median(), "communication": comm.median(),
            "cpu_busy_fraction": busy,
            "step": step.median(), "elapsed_s": elapsed, "iterations": int(args["iterations"]),
            "samples_per_s": int(args["iterations"]) * int(args["batch_size"]) / elapsed,
            "median_step_samples_per_s": int(args["batch_size"]) / median(step.wall_s),
            "emulated_compute": sleep_s is not None}
