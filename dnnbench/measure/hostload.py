"""This host's cores and other programs' load on it (docs/validation.md §"Mapping"): the validation host is shared,
so its wall-time comparison counts the runnable threads of other programs as busy threads
(``SharedHost.background_threads``, in the model's κ, docs/model.md §9).
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def host_cores() -> int:
    """Cores this process may run on (its CPU affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load_average() -> float:
    """The 1-minute load average (runnable processes, all users), NaN where unknown."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return float("nan")


def runnable_threads() -> int | None:
    """Threads runnable on this host right now (``procs_running`` of /proc/stat), None if unknown."""
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("procs_running"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def background_threads(samples: int = 25, interval_s: float = 0.02) -> float:
    """Mean runnable threads of other programs over ``samples`` readings (``interval_s`` apart),
    taken while this process only reads (it counts itself once, which is subtracted); 0 if unknown."""
    seen = []
    for i in range(samples):
        n = runnable_threads()
        if n is None:
            return 0.0
        seen.append(max(0, n - 1))
        if i + 1 < samples:
            time.sleep(interval_s)
    return float(sum(seen) / len(seen))


def own_runnable(pids: list[int]) -> int:
    """Threads of the processes ``pids`` in state R (running or runnable) right now."""
    n = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            except OSError:
                continue
            if stat[stat.rindex(")") + 2:].startswith("R"):
                n += 1
    return n


def background_now(pids: list[int]) -> float | None:
    """Runnable threads of other programs right now: all runnable threads, minus those of ``pids``
    and this reader itself; None where /proc/stat is not readable."""
    total = runnable_threads()
    return None if total is None else float(max(0, total - own_runnable(pids) - 1))

