"""Start R ranks as processes joined by torch.distributed (gloo), collect their JSON results.

Each rank is ``python -m dnnbench.measure.proc JOB.json`` (optionally under ``ip netns exec NS``);
rank 0 listens on ``addr:port`` (``init_method=tcp://``). The same entry point runs on real machines
under torchrun (see docs/validation.md §"Runs"). Processes are always reaped: on a timeout
or an error every started process is killed by its own id.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .alloc import steady_environment


def free_port() -> int:
    """A free TCP port on loopback (bind port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def first_failure(failed: list[tuple[int, int, str]]) -> tuple[int, int, str]:
    """Of the ranks that left no result, (rank, exit code, last line of its errors), the one that failed
    first: not one whose last line says only that another rank went away (gloo's closed connection)."""
    def peer_lost(line: str) -> bool:
        return "Connection closed by peer" in line or "Connection reset by peer" in line

    return next((f for f in failed if not peer_lost(f[2])), failed[0])


def run_ranks(target: str, world: int, args: dict[str, Any], *, addrs: list[str] | None = None,
              namespaces: list[str] | None = None, port: int | None = None,
              timeout_s: float = 120.0, background: list[float] | None = None,
              pollers: bool = False) -> list[dict[str, Any]]:
    """Run ``target`` ("module:function", called as ``f(rank, world, args)``) on ``world`` ranks.

    ``addrs[0]`` is rank 0's address (loopback by default); ``namespaces[i]`` runs rank i inside
    that network namespace (with ``GLOO_SOCKET_IFNAME=eth0``). Returns each rank's result dict.
    ``background``: while the ranks run, other programs' runnable threads are sampled into it every
    20 ms (:func:`.hostload.background_now`). ``pollers``: the ranks run beside one idle poller per
    CPU (:func:`.pollers.idle_pollers`, off by default), which the background count leaves out.
    """
    from .hostload import background_now
    from .pollers import idle_pollers

    addr = addrs[0] if addrs else "127.0.0.1"
    port = port or (free_port() if not namespaces else 29500)
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="dnnbench-run-") as tmp, idle_pollers(pollers) as poller_pids:
        try:
            for rank in range(world):
                job = {"target": target, "rank": rank, "world": world, "addr": addr, "port": port,
                       "args": args, "out": str(Path(tmp) / f"rank{rank}.json")}
                path = Path(tmp) / f"job{rank}.json"
                path.write_text(json.dumps(job))
                cmd = [sys.executable, "-m", "dnnbench.measure.proc", str(path)]
                env = steady_environment(dict(os.environ, OMP_NUM_THREADS="1"))  # a steady heap from the start
                if namespaces:
                    cmd = ["ip", "netns", "exec", namespaces[rank], *cmd]
                    env["GLOO_SOCKET_IFNAME"] = "eth0"
                else:
                    env["GLOO_SOCKET_IFNAME"] = "lo"
                with open(Path(tmp) / f"rank{rank}.err", "wb") as err_file:  # the child keeps its own copy
                    procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err_file))
            deadline = time.monotonic() + timeout_s
            pids = [p.pid for p in procs] + poller_pids
            while background is not None and any(p.poll() is None for p in procs):
                if time.monotonic() > deadline:
                    raise subprocess.TimeoutExpired(cmd, timeout_s)
                n = background_now(pids)
                if n is not None:
                    background.append(n)
                time.sleep(0.02)
            for p in procs:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            failed = []  # (rank, exit code, its last line), for the ranks that left no result
            for rank, p in enumerate(procs):
                if p.returncode != 0 or not (Path(tmp) / f"rank{rank}.json").exists():
                    err = (Path(tmp) / f"rank{rank}.err").read_text(errors="replace").strip().splitlines()
                    failed.append((rank, p.returncode, err[-1] if err else "no message"))
            if failed:
                # the rank that failed first, not one its peers' lost connection stopped
                rank, code, line = first_failure(failed)
                raise SpecError.plain(f"rank {rank}", f"failed (exit {code}): {line}")
            return [json.loads((Path(tmp) / f"rank{rank}.json").read_text()) for rank in range(len(procs))]
        except subprocess.TimeoutExpired:
            raise SpecError.plain("run", f"did not finish within {timeout_s:.0f} s") from None
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
