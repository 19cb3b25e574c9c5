"""A small DDP run of :func:`dnnbench.esgd.esgd_hook` on the CPU (gloo, 127.0.0.1), to check and show it.

:func:`run_ddp_check` spawns ``world_size`` processes; each trains three copies of one tiny MLP on its
own seeded synthetic shard, in lock step: DDP with the ESGD hook at ``drop_ratio``, DDP with the ESGD
hook at drop ratio 0, and plain DDP (all-reduce averaging). It returns each rank's losses and final
weights. torch is imported inside the functions only.
"""

from __future__ import annotations

import os
import socket
import tempfile
from typing import Any

from .. import checks as v
from ..compression.methods import drop_ratio as checked_drop_ratio


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _flat_params(model: Any) -> list[float]:
    import torch

    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).tolist()


def _train(rank: int, steps: int, drop_ratio: float, options: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Train the three copies in lock step; every DDP model (and its reducer) is gone when this returns."""
    import copy

    import torch
    from torch.nn.parallel import DistributedDataParallel

    from ..compression.torch_hook import ESGDHookState, esgd_hook

    torch.manual_seed(0)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    teacher = torch.randn(8, 3, generator=torch.Generator().manual_seed(1))
    gen = torch.Generator().manual_seed(100 + rank)  # every rank its own shard
    x = torch.randn(steps, 16, 8, generator=gen)
    y = (x @ teacher).argmax(dim=-1)
    runs: dict[str, dict[str, Any]] = {}
    states = {"esgd": ESGDHookState(drop_ratio, **options), "esgd_drop0": ESGDHookState(0.0, **options),
              "allreduce": None}
    models = {}
    for name, state in states.items():
        model = DistributedDataParallel(copy.deepcopy(net))
        if state is not None:
            model.register_comm_hook(state, esgd_hook)
        models[name] = (model, torch.optim.SGD(model.parameters(), lr=0.2), state)
        runs[name] = {"losses": []}
    for t in range(steps):
        for name, (model, opt, state) in models.items():
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[t]), y[t])
            if state is not None:
                state.observe_loss(loss)
            loss.backward()
            opt.step()
            runs[name]["losses"].append(float(loss.detach()))
    for name, (model, _, state) in models.items():
        runs[name]["params"] = _flat_params(model.module)
        runs[name]["density"] = None if state is None else state.density
    return runs


def _worker(rank: int, world_size: int, port: int, out_dir: str, steps: int, drop_ratio: float,
            options: dict[str, Any]) -> None:
    import gc
    import json

    import torch
    import torch.distributed as dist

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    try:
        runs = _train(rank, steps, drop_ratio, options)
        gc.collect()  # the DDP reducers before the process group they use (a reducer left to exit aborts)
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w", encoding="utf-8") as fh:
            json.dump(runs, fh)
        dist.barrier()  # no rank tears gloo down while another still talks to it
    finally:
        dist.destroy_process_group()


def run_ddp_check(world_size: int = 2, steps: int = 20, drop_ratio: float = 0.5,
                  **options: Any) -> list[dict[str, dict[str, Any]]]:
    """Spawn the ranks, train, and return per rank {"esgd" | "esgd_drop0" | "allreduce": {losses, params, density}}."""
    import json

    import torch.multiprocessing as mp

    v.integer("world_size", world_size, low=1, high=64)
    v.integer("steps", steps, low=1)
    checked_drop_ratio(drop_ratio)
    with tempfile.TemporaryDirectory(prefix="dnnbench-ddp-") as out_dir:
        mp.spawn(_worker, args=(world_size, free_port(), out_dir, steps, drop_ratio, options), nprocs=world_size,
                 join=True)
        results = []
        for rank in range(world_size):
            with open(os.path.join(out_dir, f"rank{rank}.json"), encoding="utf-8") as fh:
                results.append(json.load(fh))
    return results


__all__ = ["free_port", "run_ddp_check"]
