"""Point-to-point transfer benchmark over torch.distributed (gloo): ping-pong, one-way = RTT / 2."""

from __future__ import annotations

from typing import Any

from .timing import median

#: Message sizes from 4 kB to 16 MB (latency- to bandwidth-dominated).
SIZES_BYTES = (4096, 65536, 524288, 2097152, 8388608, 16777216)


def pingpong_main(rank: int, world: int, args: dict[str, Any]) -> dict[str, Any]:
    """Rank 0 sends, rank 1 echoes; returns one-way seconds per size (median of ``repeats``)."""
    import time

    import torch
    import torch.distributed as dist

    out = {}
    for size in args.get("sizes_bytes", SIZES_BYTES):
        buf = torch.zeros(size // 4)
        times = []
        for i in range(int(args.get("repeats", 5)) + 1):
            t0 = time.perf_counter()
            if rank == 0:
                dist.send(buf, 1)
                dist.recv(buf, 1)
            else:
                dist.recv(buf, 0)
                dist.send(buf, 0)
            if i:
                times.append((time.perf_counter() - t0) / 2)
        out[str(size)] = median(times)
    return {"one_way_s": out}
