"""Entry point of one rank: ``python -m dnnbench.measure.proc JOB.json`` (see launch.py).

Under torchrun, ``python -m dnnbench.measure.proc --torchrun TARGET ARGS.json`` takes rank, world
size and the rendezvous from torchrun's environment instead.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any


def run(target: str, rank: int, world: int, init_method: str | None, args: dict[str, Any]) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    from .alloc import steady_allocator

    steady_allocator()  # no page faults in the steady state (docs/validation.md §"Runs")
    torch.set_num_threads(int(args.get("threads", 1)))
    if args.get("pin"):
        pin(rank, world)
    kwargs: dict[str, Any] = {"backend": "gloo", "timeout": timedelta(seconds=float(args.get("timeout_s", 120)))}
    if init_method is not None:
        kwargs.update(init_method=init_method, rank=rank, world_size=world)
    dist.init_process_group(**kwargs)
    try:
        module, func = target.split(":")
        return getattr(importlib.import_module(module), func)(rank, world, args)
    finally:
        import gc

        gc.collect()  # what the target made (DDP reducers in reference cycles) before the group it uses
        dist.destroy_process_group()


def pin(rank: int, world: int) -> bool:
    """Pin this rank to one CPU of its affinity (rank i on the i-th) when the ranks fit one per CPU
    (docs/validation.md §"Noise"): no migrations, and two ranks never share a CPU while another idles.
    Returns whether it pinned."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
        if world > len(cpus):
            return False
        os.sched_setaffinity(0, {cpus[rank]})
        return True
    except (AttributeError, OSError):
        return False


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--torchrun":
        target, args = argv[1], json.loads(Path(argv[2]).read_text())
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        result = run(target, rank, world, None, args)
        print(json.dumps({"rank": rank, **result}))
        return 0
    job = json.loads(Path(argv[0]).read_text())
    result = run(job["target"], job["rank"], job["world"], f"tcp://{job['addr']}:{job['port']}", job["args"])
    from ..fileio import atomic_write

    atomic_write(job["out"], json.dumps(result))  # the launcher reads it whole or not at all
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
