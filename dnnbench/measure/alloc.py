"""A steady heap for measurement processes (docs/validation.md §"Runs").

glibc's malloc serves blocks above a dynamic threshold (128 kB at start) with ``mmap`` and gives
them back with ``munmap`` when freed, and trims the heap's top when it is free. A training step
allocates and frees its activations and gradients every time, so in such a process every step
page-faults the same memory back in (the kernel zeroes each page): 95–586 minor faults and
0.1–1.1 ms of system CPU per LeNet-5 step (batch 32) here, with a different amount in each process
because the threshold moves with the order of frees. That made one process's step 30 % slower than
the next one's. Fixing the thresholds (as deployments do by preloading jemalloc or tcmalloc) keeps
freed memory in the heap: no faults in the steady state, and the same step time in every process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache

#: mallopt parameters (glibc malloc.h).
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

#: Largest mmap threshold glibc accepts on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX): blocks up to 32 MiB
#: come from the heap and are reused.
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
    return bool(ok)
