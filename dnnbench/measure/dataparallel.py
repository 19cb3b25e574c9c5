"""Data parallelism with a real parameter server over torch.distributed (gloo), docs/validation.md.

Rank 0 is the PS, ranks 1..R are workers (one replica each, W = 1). A worker trains a mini-batch of
b samples, pushes its gradient (b samples = k_push) and pulls the full weights back (k_pull = b).
Its parameters and gradients are views into one flat buffer each (:func:`flat_buffers`), so a push is
sent from the gradients and a pull lands in the weights. The PS applies each push with SGD.

- sync: the PS waits for every worker's push, applies the mean, and sends the weights to all.
- async: one PS thread per worker receives its pushes, applies each under a lock (arrival order)
  and answers with the weights right after applying it (Adam-style asynchronous updates,
  docs/model.md §6).

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


def flat_buffers(model: Any) -> tuple[Any, Any]:
    """Make every parameter and its gradient a view into one flat tensor each (as DDP's gradient
    buckets and Adam's update buffers do): pushes are sent straight from the gradients and pulls
    received straight into the weights, with no flatten or unflatten copy per step (docs/validation.md
    §"Runs"). Backward accumulates into the views in place (gradients are zeroed, never set to None)."""
    import torch

    ps = list(model.parameters())
    params = torch.cat([p.detach().reshape(-1) for p in ps])
    grad = torch.zeros_like(params)
    offset = 0
    for p in ps:
        n = p.numel()
        p.data = params[offset:offset + n].view_as(p)
        p.grad = grad[offset:offset + n].view_as(p)
        offset += n
    return params, grad


def ps_dp_main(rank: int, world: int, args: dict[str, Any]) -> dict[str, Any]:
    """Rank 0 (PS) in a sync or async data-parallel run, or a worker (rank >= 1)."""
    return _ps(world, args) if rank == 0 else _worker(rank, args)


def _ps(world: int, args: dict[str, Any]) -> dict[str, Any]:
    import time

    import torch
    import torch.distributed as dist

    _, model, _, _ = _model(args)
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    lr = float(args.get("lr", 0.01))
    workers = world - 1
    warm = int(args["warmup"]) * workers  # pushes before the timed part (the workers' warm-up steps)
    steps = int(args["iterations"]) + int(args["warmup"])
    apply_ = Samples()
    # Where the PS's wall time goes, per push served after the warm-up (docs/validation.md §"Runs"):
    # blocked in recv, applying (and cloning the reply), sending the reply; async: waiting for the lock.
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
            with Stopwatch() as sw:  # the mean of the pushes, accumulated in place
                for b in bufs:
                    params.add_(b, alpha=-lr / workers)
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
        # One service thread per worker, as a PS serves its connections (Adam's PS): it receives that
        # worker's push, applies it under the lock (Hogwild-style updates in arrival order) and sends
        # the weights back, while the other threads keep receiving (the PS's NIC is full duplex,
        # docs/model.md §6). gloo releases the GIL while it waits. A single loop receiving from any
        # source made each push wait for gloo's any-source rendezvous instead (0.5-1.9 ms per LeNet-5
        # push against 0.2-0.3 ms).
        import threading

        lock = threading.Lock()
        clock: dict[str, float] = {}

        def serve(src: int) -> None:
            nonlocal served, w0, c0
            buf = torch.empty_like(params)
            for _ in range(steps):
                t0 = time.perf_counter()
                dist.recv(buf, src=src)
                t1 = time.perf_counter()
                with lock:
                    t2 = time.perf_counter()
                    with Stopwatch() as sw:
                        params.add_(buf, alpha=-lr)
                    apply_.add(sw.wall_s, sw.cpu_s)
                    reply = params.clone()
                    clock["n"] = clock.get("n", 0) + 1
                    timed = clock["n"] > warm
                    if clock["n"] == warm:
                        w0, c0 = start()
                t3 = time.perf_counter()
                dist.send(reply, dst=src)
                if timed:
                    with lock:
                        served += 1
                        parts["recv_wall_s"] += t1 - t0
                        parts["reply_wait_wall_s"] += t2 - t1  # waiting for the lock
                        parts["apply_wall_s"] += t3 - t2
                        parts["reply_wall_s"] += time.perf_counter() - t3

        if warm == 0:
            w0, c0 = start()
        threads = [threading.Thread(target=serve, args=(src,)) for src in range(1, world)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    # Busy share: process CPU (every thread, gloo's I/O included) over wall time of the timed part.
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    per_push = {k.replace("_s", "_s_per_push"): v / max(served, 1) for k, v in parts.items()}
    return {"role": "ps", "apply": apply_.median(), "weights": int(params.numel()),
            "cpu_busy_fraction": cpu / max(wall, 1e-9), "pushes": served,
            "wall_s_per_push": wall / max(served, 1), "process_cpu_s_per_push": cpu / max(served, 1), **per_push}


def _worker(rank: int, args: dict[str, Any]) -> dict[str, Any]:
    import time

    import torch.distributed as dist

    _, model, crit, (x, y) = _model(args)
    params, grad = flat_buffers(model)
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
            with Stopwatch() as sn:  # the gradient is sent from, and the weights received into, the model
                dist.send(grad, dst=0)
                dist.recv(params, src=0)
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
            "emulated_compute": sleep_s is not None,
            "steps": {"compute_wall_s": comp.wall_s, "communication_wall_s": comm.wall_s}}
