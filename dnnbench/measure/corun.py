"""Co-run slowdown σ_h of this host (``SharedHost.corun_slowdown``, docs/model.md §9, docs/validation.md).

Two threads that each have a core still slow each other down on the shared last-level cache and
memory bandwidth (and, in a VM, on the hypervisor). σ_h is measured, not fitted: one training step of
the network, pinned to the first CPU of this process's affinity, is timed alone (CPU time per step,
median of ``steps``), then again while a busy loop spins on every other CPU; σ_h = median over
``repeats`` (alone, beside) pairs of the ratio − 1, floored at 0. Alone and beside alternate so a slow
drift of the host does not bias the ratio. One CPU: σ_h = 0 (nothing can co-run).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

from ..specs import Network

#: The body of every busy loop: a pure-Python spin that ends itself once its parent is gone (checked
#: every 10^5 iterations, a few milliseconds), so a measurement that is killed leaves no loop behind.
#: The parent's pid is the loop's last argument (read before the parent could be gone).
SPIN = "parent = int(sys.argv[-1])\nwhile os.getppid() == parent:\n    for _ in range(100000):\n        pass\n"
#: A busy loop, pinned to one CPU unless told "any" (a pure-Python spin: the co-runner the model's σ_h
#: stands for is "another busy thread", docs/model.md §9).
_BUSY = "import os,sys\nif sys.argv[1] != 'any':\n    os.sched_setaffinity(0,{int(sys.argv[1])})\n" + SPIN


def _spin(cpus: list[int | None]) -> list[subprocess.Popen[bytes]]:
    """One busy loop per entry: pinned to that CPU, or free to run anywhere (None). If starting them
    is interrupted, the ones started are stopped before the interruption goes on."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for c in cpus:
            procs.append(subprocess.Popen([sys.executable, "-c", _BUSY, "any" if c is None else str(c),
                                           str(os.getpid())]))
        time.sleep(0.2)  # let them start and settle on their CPUs
    except BaseException:
        _stop(procs)
        raise
    return procs


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:  # by their own ids, always
        if p.poll() is None:
            p.kill()
        p.wait()


def corun_slowdown(net: Network, batch_size: int = 32, steps: int = 10, repeats: int = 3,
                   warmup: int = 3) -> dict[str, Any]:
    """σ_h of this host for ``net`` (module docstring): ``{"host_corun_slowdown", "ratios",
    "alone_cpu_s", "beside_cpu_s", "cpus", "alone_step_cv"}``; CPU seconds are per step (medians);
    ``alone_step_cv`` is the median over the repeats of the alone steps' wall-time coefficient of
    variation (``Machine.step_time_cv``, the jitter a synchronous round waits for)."""
    import torch

    from .timing import Samples, Stopwatch, coefficient_of_variation, median
    from .torchnet import batch, build_model, loss_fn

    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = [0]
    out: dict[str, Any] = {"host_corun_slowdown": 0.0, "ratios": [], "alone_cpu_s": [], "beside_cpu_s": [],
                           "cpus": len(cpus), "batch_size": batch_size, "steps": steps,
                           "alone_step_cv": 0.0}
    if len(cpus) < 2:
        return out
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model, crit = build_model(net), loss_fn(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = batch(net, batch_size)

    alone_cv: list[float] = []

    def step_cpu_s(n: int, cv: list[float] | None = None) -> float:
        s = Samples()
        for _ in range(n):
            with Stopwatch() as sw:
                opt.zero_grad(set_to_none=False)
                crit(model(x), y).backward()
                opt.step()
            s.add(sw.wall_s, sw.cpu_s)
        if cv is not None:
            cv.append(coefficient_of_variation(s.wall_s))
        return s.median()["cpu_s"]

    os.sched_setaffinity(0, {cpus[0]})
    try:
        step_cpu_s(warmup)
        for _ in range(repeats):
            alone = step_cpu_s(steps, alone_cv)
            spinners = _spin(cpus[1:])
            try:
                beside = step_cpu_s(steps)
            finally:
                _stop(spinners)
            out["alone_cpu_s"].append(alone)
            out["beside_cpu_s"].append(beside)
            out["ratios"].append(beside / alone)
    finally:
        os.sched_setaffinity(0, set(cpus))
        torch.set_num_threads(threads)
    out["alone_step_cv"] = median(alone_cv)
    out["host_corun_slowdown"] = max(0.0, median(out["ratios"]) - 1.0)
    return out


def merge_corun(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Several :func:`corun_slowdown` measurements taken at different times (one per round of a
    validation's launches, docs/validation.md §"Shared host") as one: every (alone, beside) pair
    pooled, σ_h = median ratio − 1 over all of them, the alone steps' jitter the median of the parts'."""
    from .timing import median

    out: dict[str, Any] = {**parts[0], "ratios": [], "alone_cpu_s": [], "beside_cpu_s": [], "parts": len(parts)}
    for part in parts:
        for key in ("ratios", "alone_cpu_s", "beside_cpu_s"):
            out[key] += part[key]
    out["alone_step_cv"] = median([part["alone_step_cv"] for part in parts])
    out["host_corun_slowdown"] = max(0.0, median(out["ratios"]) - 1.0) if out["ratios"] else 0.0
    return out
