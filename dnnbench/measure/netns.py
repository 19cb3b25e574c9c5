"""Emulated network on one machine: network namespaces, veth pairs, a bridge and tbf-shaped links.

Topology (docs/validation.md §"Network emulation"): one "switch" namespace holds a bridge; each rank
gets its own namespace with ``eth0`` = 10.231.0.(i+1)/24 joined to the bridge by a veth pair. A tbf
qdisc shapes both ends of each pair: the host's egress is its upload, the switch port's egress its
download, so a PS's NIC is shared by its workers as on a real PS. Only addresses inside these
namespaces are used. Everything is deleted on exit (and stale namespaces of dead runs on start).
Latency is not emulated (no netem in this kernel); tbf adds none by itself.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..errors import SpecError

SUBNET = "10.231.0"
_PREFIX = "dnbv"


class NetnsUnavailable(RuntimeError):
    """Namespaces or tbf cannot be used here (not root, no ``ip``/``tc``, or the kernel refuses)."""


def _run(*cmd: str) -> None:
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise NetnsUnavailable(f"{' '.join(cmd)}: {res.stderr.strip() or 'failed'}")


def available() -> str | None:
    """None when namespaces can be used, else the reason (one line)."""
    if os.name != "posix" or os.geteuid() != 0:
        return "network emulation needs root (ip netns, tc); falling back to loopback"
    for tool in ("ip", "tc"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            return f"'{tool}' is not installed; falling back to loopback"
    return None


def cleanup_stale() -> list[str]:
    """Delete namespaces left by dnnbench runs whose process is gone; returns their names."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    gone = []
    for line in out.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.fullmatch(rf"{_PREFIX}(\d+)(sw|h\d+)", name)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
            gone.append(name)
    return gone


@dataclass(frozen=True)
class Topology:
    namespaces: list[str]  # one per rank
    addrs: list[str]  # eth0 address of each rank
    rate_bits_per_s: float
    burst_bytes: int


#: TCP payload over a tbf-shaped link at MTU 1500: a 1448-byte payload in a 1514-byte frame.
TBF_GOODPUT = 0.956

#: tbf bucket in seconds of the link rate (docs/validation.md §"Network emulation").
BURST_S = 1e-3


def burst_for(rate_bits_per_s: float, burst_s: float = BURST_S) -> int:
    """tbf bucket: ``burst_s`` worth of bytes, at least 64 kB + one frame (a GSO packet on a veth is
    up to 64 kB; tbf segments larger packets than its bucket). Measured at 1 Gbit/s on a loaded
    2-core host (docs/validation.md): buckets of 50-400 µs (6-50 kB) never reached the rate
    (1.2-9x the link time, 4-6x the CPU); 1 ms (125 kB) reached 0.98-0.99 of it for 4-13 MB and
    followed ``max(0, S - burst)·8/(0.956·R)`` for 64 kB-13 MB, which the validation models
    (:func:`dnnbench.measure.mapping.bucket_rate_factor`)."""
    return int(max(65536 + 1514, rate_bits_per_s / 8 * burst_s))


@contextmanager
def emulated(ranks: int, rate_bits_per_s: float, burst_s: float = BURST_S) -> Iterator[Topology]:
    """Namespaces for ``ranks`` processes on a star of tbf-shaped links; always torn down."""
    why = available()
    if why is not None:
        raise NetnsUnavailable(why)
    if ranks < 1 or ranks > 200:
        raise SpecError("ranks", ranks, "must be between 1 and 200")
    cleanup_stale()
    tag = f"{_PREFIX}{os.getpid()}"
    sw = f"{tag}sw"
    hosts = [f"{tag}h{i}" for i in range(ranks)]
    made: list[str] = []
    burst = burst_for(rate_bits_per_s, burst_s)
    rate = f"{int(rate_bits_per_s)}bit"
    try:
        for ns in (sw, *hosts):
            _run("ip", "netns", "add", ns)
            made.append(ns)
        _run("ip", "-n", sw, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", sw, "link", "set", "br0", "up")
        addrs = []
        for i, ns in enumerate(hosts):
            port = f"p{i}"
            _run("ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", sw)
            addr = f"{SUBNET}.{i + 1}"
            _run("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", sw, "link", "set", port, "master", "br0")
            _run("ip", "-n", sw, "link", "set", port, "up")
            for where, dev in ((ns, "eth0"), (sw, port)):
                _run("ip", "netns", "exec", where, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
                     "rate", rate, "burst", str(burst), "latency", "200ms")
            addrs.append(addr)
        yield Topology(hosts, addrs, rate_bits_per_s, burst)
    finally:
        for ns in reversed(made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
