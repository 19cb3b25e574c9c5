"""A busy loop or poller whose parent is killed ends by itself (a killed measurement leaves none)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from dnnbench.measure.corun import _BUSY
from dnnbench.measure.pollers import _POLLER, available


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes; read its state.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("body", ["busy", "poller"])
def test_a_loop_ends_when_its_parent_is_killed(body: str) -> None:
    if body == "poller" and not available():
        pytest.skip("SCHED_IDLE pollers need Linux")
    code, cpu = (_BUSY, "any") if body == "busy" else (_POLLER, str(sorted(os.sched_getaffinity(0))[0]))
    parent = ("import os,subprocess,sys,time\n"
              f"p = subprocess.Popen([sys.executable, '-c', {code!r}, {cpu!r}, str(os.getpid())],"
              " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
              "print(p.pid, flush=True)\ntime.sleep(60)\n")
    with subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        child = int(proc.stdout.readline())
        time.sleep(0.5)
        assert _alive(child)  # spinning while its parent lives
        proc.kill()
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(child):
        os.kill(child, 9)
        pytest.fail("the loop outlived its parent")
