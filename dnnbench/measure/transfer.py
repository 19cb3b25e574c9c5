"""Point-to-point transfer benchmark over torch.distributed (gloo): ping-pong, one-way = RTT / 2.

Besides wall time, each rank records its process CPU time per round trip (every thread: gloo moves
bytes on its own I/O threads). In a round trip each rank sends S bytes and receives S bytes, so the
slope of a rank's CPU time in S is 2 × the CPU cost per byte of a message end
(``Machine.copy_time_s_per_byte``, docs/model.md §4; fitted in :func:`.fit.fit_copy_time`).
"""

from __future__ import annotations

from typing import Any

from .timing import median

#: Message sizes from 4 kB to 16 MB (latency- to bandwidth-dominated).
SIZES_BYTES = (4096, 65536, 524288, 2097152, 8388608, 16777216)


def pingpong_main(rank: int, world: int, args: dict[str, Any]) -> dict[str, Any]:
    """Rank 0 sends, rank 1 echoes; one-way wall seconds and this rank's CPU seconds per round trip
    per size (medians of ``repeats``)."""
    import time

    import torch
    import torch.distributed as dist

    out, cpu = {}, {}
    for size in args.get("sizes_bytes", SIZES_BYTES):
        buf = torch.zeros(size // 4)
        times, cpus = [], []
        for i in range(int(args.get("repeats", 5)) + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            if rank == 0:
                dist.send(buf, 1)
                dist.recv(buf, 1)
            else:
                dist.recv(buf, 0)
                dist.send(buf, 0)
            if i:
                times.append((time.perf_counter() - t0) / 2)
                cpus.append(time.process_time() - c0)
        out[str(size)] = median(times)
        cpu[str(size)] = median(cpus)
    return {"one_way_s": out, "cpu_s_per_round_trip": cpu}
