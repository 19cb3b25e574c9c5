"""A steady heap for measurement processes (docs/validation.md §"Runs").

glibc's malloc serves blocks above a dynamic threshold (128 kB at start) with ``mmap`` and gives
them back with ``munmap`` when freed, and trims the heap's top when it is free. A training step
allocates and frees its activations and gradients every time, so in such a process every step
page-faults the same memory back in (the kernel zeroes each page): 95–586 minor faults and
0.1–1.1 ms of system CPU per LeNet-5 step (batch 32) here, with a different amount in each process
because the threshold moves with the order of frees. That made one process's step 30 % slower than
the next one's. Fixing the thresholds (as deployments do by preloading jemalloc or tcmalloc) keeps
freed memory in the heap: no faults in the steady state, and the same step time in every process.

glibc will not raise the mmap threshold above 32 MiB, so blocks of 32 MiB and more (a convolution's
output at a large mini-batch) would still be mapped anew and faulted in on every call (8192 faults
per 32 MiB block), and how long that takes varied by a factor of 3 between two timings of the same
layer. ``M_MMAP_MAX`` = 0 serves them from the heap as well. One more thing keeps such a block from
being reused there: the small pieces PyTorch's 64-byte-aligned requests split off are kept in glibc's
per-thread cache (tcache), where they count as in use, so a freed large block next to one cannot
merge with its neighbours and the next request is carved from fresh memory at the heap's top. The
tcache can only be switched off when a process starts (``GLIBC_TUNABLES``): measuring commands
restart themselves with it off (:func:`restart_with_steady_heap`) and start their ranks so
(:func:`steady_environment`). With both, a step of 32 MiB outputs takes no faults in the steady state
(a test checks the median step).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Mapping, Sequence
from functools import cache

#: mallopt parameters (glibc malloc.h).
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3
#: How many blocks may be mapped at once; 0: none, every block comes from the heap.
M_MMAP_MAX = -4

#: Largest mmap threshold glibc accepts on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX): blocks up to 32 MiB
#: come from the heap and are reused; larger ones too, with M_MMAP_MAX = 0 (no block is mapped).
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
#: Freed memory at the heap's top is kept up to this much (never trimmed during a run).
TRIM_THRESHOLD_BYTES = 1024 * 1024 * 1024
#: The heap grows in steps of at least this much (fewer brk calls).
TOP_PAD_BYTES = 64 * 1024 * 1024


@cache
def steady_allocator() -> bool:
    """Fix glibc malloc's mmap and trim thresholds for this process; False where the C library is
    not glibc (nothing changed). Idempotent."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    ok &= mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    ok &= mallopt(M_TOP_PAD, TOP_PAD_BYTES)
    ok &= mallopt(M_MMAP_MAX, 0)
    return bool(ok)


#: glibc tunables a process must start with for a steady heap: no per-thread cache of small blocks.
STEADY_TUNABLE = "glibc.malloc.tcache_count=0"


def _is_glibc() -> bool:
    import platform

    return platform.libc_ver()[0] == "glibc"


def has_steady_tunables(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` sets glibc's tcache count (to anything: the user's own choice is kept)."""
    return "glibc.malloc.tcache_count=" in environ.get("GLIBC_TUNABLES", "")


def steady_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) with :data:`STEADY_TUNABLE` added to ``GLIBC_TUNABLES``,
    for a process started with it; other tunables are kept, and a tcache count already set wins."""
    env = dict(os.environ if environ is None else environ)
    if not has_steady_tunables(env):
        current = env.get("GLIBC_TUNABLES", "")
        env["GLIBC_TUNABLES"] = f"{current}:{STEADY_TUNABLE}" if current else STEADY_TUNABLE
    return env


def restart_with_steady_heap(argv: Sequence[str]) -> None:
    """Replace this process by ``python argv...`` started with the steady tunables, unless it already
    has them or the C library is not glibc (then it returns and nothing changes). Call it first thing
    in a measuring command, before anything is computed: the process is replaced, not forked."""
    if has_steady_tunables(os.environ) or not _is_glibc() or not sys.executable:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, [sys.executable, *argv], steady_environment())
    except OSError:  # no interpreter to start again (an embedded one): go on with the heap as it is
        return
