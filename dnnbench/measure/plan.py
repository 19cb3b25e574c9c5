"""The runs of a validation, and the order their launches take (docs/validation.md §"Validation",
§"Interleaved launches")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import SpecError

if TYPE_CHECKING:
    from ..specs import Network

SMOKE_BOUND = 2.5  # CI: measured / predicted must lie within a factor 2.5 either way


SMOKE_LINK_BITS_PER_S = 1e9  # the smoke runs' emulated link (tbf), when root


@dataclass(frozen=True)
class Run:
    kind: str  # single | dp | mp
    mode: str = "sync"  # dp: sync | async
    ranks: int = 1  # dp: R workers; mp: W partitions
    link_bits_per_s: float | None = None  # None: loopback; else a tbf-shaped emulated link

    @property
    def label(self) -> str:
        link = "loopback" if self.link_bits_per_s is None else f"tbf {self.link_bits_per_s / 1e6:g} Mbit/s"
        what = {"single": "1 process", "dp": f"PS {self.mode} R={self.ranks}", "mp": f"model-parallel W={self.ranks}"}
        return f"{what[self.kind]}, {link}"


def plan(smoke: bool, rates_bits_per_s: tuple[float, ...] = ()) -> list[Run]:
    """The runs: the single-process run first (calibration), then the validation set.

    Smoke: PS sync with 1 and 2 workers on an emulated 1 Gbit/s tbf link (loopback when emulation
    is unavailable, see :func:`validate`)."""
    if smoke:
        return [Run("single"), Run("dp", "sync", 1, SMOKE_LINK_BITS_PER_S), Run("dp", "sync", 2, SMOKE_LINK_BITS_PER_S)]
    runs = [Run("single")]
    for link in (None, *rates_bits_per_s):
        runs += [Run("dp", "sync", 1, link), Run("dp", "sync", 2, link), Run("dp", "async", 2, link)]
        runs += [Run("mp", "sync", 2, link)]
    return runs


def runnable(runs: list[Run], smoke: bool, emulate: bool = True, net: Network | None = None
             ) -> tuple[list[Run], str | None]:
    """The runs this host can do on ``net``, and why the others cannot: without network emulation (not
    root, no ``ip``/``tc``, or ``emulate`` off) the tbf runs are dropped, or in a smoke validation moved
    to loopback; model-parallel runs of a network a partitioned run cannot split
    (:func:`.partition.check`) are dropped, the reason naming its layer."""
    from . import netns
    from .partition import check

    reasons = []
    if net is not None and any(r.kind == "mp" for r in runs):
        try:
            for ranks in sorted({r.ranks for r in runs if r.kind == "mp"}):
                check(net, ranks)
        except SpecError as err:
            runs = [r for r in runs if r.kind != "mp"]
            reasons.append(f"model-parallel runs left out: {err}")
    if any(r.link_bits_per_s for r in runs):
        why = netns.available() if emulate else "network emulation switched off; loopback only"
        if why is not None:
            reasons.append(why)
            if smoke:  # the smoke runs fall back to loopback rather than vanish
                runs = [Run(r.kind, r.mode, r.ranks, None) for r in runs]
            else:
                runs = [r for r in runs if r.link_bits_per_s is None]
    return runs, "; ".join(reasons) or None


def progress_steps(runs: list[Run], launches: int) -> int:
    """How many times :func:`validate` reports progress: transfers, σ_h, each link's latency, each PS
    path's wake-up delay, and every launch of every run."""
    links = {r.link_bits_per_s for r in runs if r.link_bits_per_s is not None}
    paths = {r.link_bits_per_s for r in runs if r.kind == "dp"}
    return 2 + len(links) + len(paths) + len(runs) * max(1, launches)


def processes(run: Run) -> int:
    """Processes (model "machines") of a run: the PS and R workers, W partitions, or one."""
    return run.ranks + 1 if run.kind == "dp" else run.ranks if run.kind == "mp" else 1


def launch_order(runs: int, launches: int) -> list[tuple[int, int]]:
    """(run index, launch index) in the order the launches happen: every run's k-th launch before any
    run's (k+1)-th, the rounds alternately forwards and backwards (A B C C B A A B C ...). The host's speed
    drifts over minutes (docs/validation.md §"Interleaved launches"); in this order each run's launches
    spread over the whole sweep, and a linear drift reaches every run's median alike."""
    order = []
    for k in range(max(1, launches)):
        idx = range(runs) if k % 2 == 0 else range(runs - 1, -1, -1)
        order += [(i, k) for i in idx]
    return order
