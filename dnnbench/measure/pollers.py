"""Idle pollers: the ranks sharing this host are woken without waiting for another rank's time slice
(docs/validation.md §"Shared host").

The ranks of a run on one host stand for machines of their own, but they share its CPUs. A rank woken
by a message (a push, a reply, a model-parallel exchange) while another rank computes was measured to
be queued behind that rank's compute, in some launches for the whole launch: a gloo ping-pong of 4 and
256 kB beside one busy thread on 2 CPUs took 1.8–2.0 ms one way in 6 launches of 7, against
0.06–0.25 ms alone. That is about half the scheduler's tick here (4 ms at 250 Hz): the woken thread
appears to wait for the running one to be preempted at a tick. On a real cluster the woken rank has
its machine to itself.

One busy loop per CPU at ``SCHED_IDLE`` priority removes the wait: the scheduler counts a CPU that
runs only ``SCHED_IDLE`` work as idle, places a woken thread there and preempts the loop at once,
and such a loop gets a CPU only when no rank wants it (weight 3 against a rank's 1024). The same
ping-pong beside one busy thread and the pollers took 0.05–0.11 ms. A poller that cannot lower its
own priority exits at once rather than compete.

Opt-in (``dnnbench validate --pollers``): in real runs they shortened LeNet-5's two-worker loopback
runs but left a tail of waits, and by default the model carries the wait instead
(``SharedHost.wakeup_delay_s``, :mod:`.wakeup`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from .corun import SPIN, _stop

#: One poller: lower its priority first (or fail and exit), then stay on one CPU and spin.
_POLLER = ("import os,sys\n"
           "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
           "os.sched_setaffinity(0, {int(sys.argv[1])})\n" + SPIN)


def available() -> bool:
    """Whether this platform has the ``SCHED_IDLE`` policy and CPU affinity (Linux)."""
    return hasattr(os, "SCHED_IDLE") and hasattr(os, "sched_getaffinity")


@contextmanager
def idle_pollers(enabled: bool = True) -> Iterator[list[int]]:
    """Run one ``SCHED_IDLE`` poller per CPU of this process's affinity for the ``with`` block; yields
    their pids (empty when switched off, unavailable, or on one CPU, where every rank shares the CPU
    anyway). The pollers are killed by their own pids on exit, always."""
    cpus = sorted(os.sched_getaffinity(0)) if enabled and available() else []
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for c in cpus if len(cpus) > 1 else []:
            procs.append(subprocess.Popen([sys.executable, "-c", _POLLER, str(c), str(os.getpid())],
                                          stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        yield [p.pid for p in procs]
    finally:
        _stop(procs)
