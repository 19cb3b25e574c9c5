"""Wake-up delay d of this host (``SharedHost.wakeup_delay_s``, docs/model.md §9, docs/validation.md
§"Shared host").

When a host's processes outnumber its cores, a rank woken by a message can find its CPU taken by
another rank's compute and wait for it. d is measured, not fitted: a gloo ping-pong of 4 kB messages
between two ranks over loopback, alone and beside ``cores − 1`` busy threads (pure-Python loops at
normal priority, unpinned: one process more than cores, as in a run with one rank too many), in
alternating launches; d = mean one-way time beside − mean alone over the launches (each launch's time
the median of its round trips), floored at 0. The mean, not the median, of the launches: where the
scheduler puts the busy threads decides a whole launch (on one host 2 ms in one launch of three, 0.04 ms
in the others), and a training run's ranks land either way, so d is the expected wait. One CPU: d = 0
(every rank shares it; κ carries that).
"""

from __future__ import annotations

import subprocess
from typing import Any

import numpy as np

from .corun import _spin, _stop

#: The ping-pong's default message: latency-bound, so the difference is the wait, not the copies.
SIZE_BYTES = 4096


def _busy(n: int) -> list[subprocess.Popen[bytes]]:
    """``n`` unpinned busy loops at normal priority (stopped by :func:`.corun._stop`)."""
    return _spin([None] * n)


def measure_wakeup_delay(launches: int = 3, repeats: int = 200, topology: Any = None,
                         size_bytes: int = SIZE_BYTES) -> dict[str, Any]:
    """d of this host (module docstring): ``{"host_wakeup_delay_s", "alone_s", "beside_s",
    "busy_threads"}``, one-way seconds per launch (medians of ``repeats`` round trips). ``topology``
    (:func:`.netns.emulated`): over that emulated link instead of loopback; ``size_bytes``: the
    message (a run's own PS message: a message that a rate-limited link paces arrives from the link's
    timer after its sender has gone to sleep, and finds a CPU free)."""
    from .hostload import host_cores
    from .launch import run_ranks

    cores = host_cores()
    out: dict[str, Any] = {"host_wakeup_delay_s": 0.0, "alone_s": [], "beside_s": [],
                           "busy_threads": max(0, cores - 1), "size_bytes": int(size_bytes)}
    if cores < 2:
        return out
    args = {"sizes_bytes": [int(size_bytes)], "repeats": repeats}
    for _ in range(max(1, launches)):
        for key, n in (("alone_s", 0), ("beside_s", cores - 1)):
            busy = _busy(n)
            try:
                where = {} if topology is None else {"addrs": topology.addrs, "namespaces": topology.namespaces}
                res = run_ranks("dnnbench.measure.transfer:pingpong_main", 2, args, timeout_s=90, **where)
            finally:
                _stop(busy)
            out[key].append(float(res[0]["one_way_s"][str(int(size_bytes))]))
    out["host_wakeup_delay_s"] = max(0.0, float(np.mean(out["beside_s"]) - np.mean(out["alone_s"])))
    return out
