"""Waiting out a busy host before a multi-thread timing (docs/validation.md §"Runs").

On a shared machine other tenants now and then hold one of its cores for tens of seconds at a time.
A timing on one thread does not see it (the calibration times one thread by the thread's CPU time),
but a timing on several threads waits for the slowest of them at every parallel region: on a 2-vCPU
host a small matrix product on two threads ran three times its usual time for 16 s in a row, then
went back. One calibration that ran through such a window gave every small two-thread case of its
own 2–3 times the time of the next calibration's.

:class:`QuietGate` times a reference (a small FC layer's weight gradient, a few microseconds of
work split over the threads, where a lost core shows most) before each multi-thread timing. While the
reference runs more than ``factor`` times its quickest, it waits (polling) within a budget for the
whole measurement; a timing taken while the host is still busy is marked disturbed, and its caller
prefers the undisturbed ones. A machine of one's own never waits.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

K = TypeVar("K")


def _reference(threads: int) -> Callable[[], Any]:
    """One call of the reference at ``threads`` threads: the weight gradient of an FC layer of 1500
    inputs and 100 outputs at a mini-batch of 8."""
    import torch

    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 1500, generator=g)
    w = torch.randn(100, 1500, generator=g, requires_grad=True)
    y = x @ w.t()
    e = torch.ones_like(y)

    def call() -> Any:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return torch.autograd.grad(y, [w], e, retain_graph=True)
        finally:
            torch.set_num_threads(before)

    return call


#: The reference's times seen in this process, per thread count, by every gate: a gate made for a short
#: measurement (one network's profile) that begins in a busy spell knows the quiet time from the others.
_SEEN: dict[int, list[float]] = {}


class QuietGate:
    """Times a reference before each multi-thread timing and waits while the host is busy.

    ``factor``: the reference's time over its quickest (the second-best time seen at that thread count
    in this process, so that one lucky call does not set it) above which the host counts as busy.
    ``budget_s``: the longest this gate waits in all, over every timing. ``poll_s``: the pause between
    checks. ``seen``: where the reference's times are kept (default: shared by the process's gates)."""

    def __init__(self, factor: float = 2.0, budget_s: float = 30.0, poll_s: float = 0.25, reps: int = 5,
                 reference: Callable[[int], Callable[[], Any]] = _reference,
                 clock: Callable[[], float] = time.perf_counter, sleep: Callable[[float], None] = time.sleep,
                 seen: dict[int, list[float]] | None = None) -> None:
        self.factor, self.budget_s, self.poll_s, self.reps = factor, budget_s, poll_s, reps
        self._make, self._clock, self._sleep = reference, clock, sleep
        self._calls: dict[int, Callable[[], Any]] = {}
        self._seen = _SEEN if seen is None and reference is _reference else ({} if seen is None else seen)
        self.waited_s = 0.0
        self.checks = 0
        self.disturbed = 0
        self.worst = 1.0  # the largest reference time over its quickest seen at a check

    def _time(self, threads: int) -> float:
        call = self._calls.get(threads)
        if call is None:
            call = self._calls[threads] = self._make(threads)
            for _ in range(self.reps):  # warm-up
                call()
        best = float("inf")
        for _ in range(self.reps):
            t = self._clock()
            call()
            best = min(best, self._clock() - t)
        seen = self._seen.setdefault(threads, [])
        seen.append(best)
        if len(seen) > 4096:  # keep the quickest and the recent ones
            seen[:] = sorted(seen)[:16] + seen[-1024:]
        return best

    def quickest(self, threads: int) -> float:
        """The reference's quickest time at ``threads`` threads so far (its second best)."""
        seen = sorted(self._seen.get(threads, ()))
        return seen[1] if len(seen) > 1 else (seen[0] if seen else float("nan"))

    def busy_ratio(self, threads: int) -> float:
        """The reference's time now over its quickest, at ``threads`` threads."""
        now = self._time(threads)
        if len(self._seen[threads]) < 2:
            now = self._time(threads)
        return now / self.quickest(threads)

    def last(self, threads: int) -> float:
        """The reference's latest time at ``threads`` threads."""
        return self._seen[threads][-1]

    def wait(self, threads: int) -> float:
        """Before a timing at ``threads`` threads: wait while the host is busy, within the budget; the
        reference's last time (NaN on one thread, which never waits). Keep it with the timing:
        :meth:`is_busy` says later, against the quickest seen by then, whether the host was busy."""
        if threads <= 1:
            return float("nan")
        self.checks += 1
        ratio = self.busy_ratio(threads)
        self.worst = max(self.worst, ratio)
        while ratio > self.factor:
            if self.waited_s >= self.budget_s:
                self.disturbed += 1
                break
            start = self._clock()
            self._sleep(self.poll_s)
            ratio = self.busy_ratio(threads)
            self.waited_s += self._clock() - start
        return self.last(threads)

    def after(self, threads: int) -> float:
        """After a long timing at ``threads`` threads: the reference's time now, without waiting (NaN on
        one thread). With :meth:`wait`'s, it brackets the timing: a busy spell that began while it ran
        shows here; keep the larger of the two (:func:`bracket`)."""
        if threads <= 1:
            return float("nan")
        self.checks += 1
        ratio = self.busy_ratio(threads)
        self.worst = max(self.worst, ratio)
        return self.last(threads)

    def is_busy(self, reference_s: float, threads: int) -> bool:
        """Whether a timing whose reference took ``reference_s`` ran on a busy host (against the quickest
        seen now, which a measurement that began in a busy spell learns only later)."""
        return bool(reference_s == reference_s and reference_s > self.factor * self.quickest(threads))

    def report(self) -> dict[str, float]:
        """What the gate saw: checks, seconds waited, timings taken on a busy host, the worst ratio."""
        return {"checks": float(self.checks), "waited_s": float(self.waited_s), "disturbed": float(self.disturbed),
                "worst_ratio": float(self.worst)}


def bracket(gate: QuietGate, threads: int, timing: Callable[[], Any]) -> tuple[Any, float]:
    """Run ``timing`` between the gate's wait before it and its check after it: (its result, the larger
    reference time of the two, for :meth:`QuietGate.is_busy` and :func:`quiet_median`)."""
    before = gate.wait(threads)
    result = timing()
    after = gate.after(threads)
    return result, (max(before, after) if before == before else before)


def launch_again(keys: Sequence[K], quiet_count: Callable[[K], int], launch: Callable[[K], None], want: int,
                 rounds: int) -> None:
    """Launch every key with fewer than ``want`` quiet launches once more, in turn, for up to ``rounds``
    rounds (a measurement's runs the host was busy for)."""
    for _ in range(rounds):
        again = [k for k in keys if quiet_count(k) < want]
        if not again:
            return
        for key in again:
            launch(key)


def quiet_median(values: list[float], references: list[float], threads: int, gate: QuietGate) -> float:
    """The median of ``values`` timed on a quiet host (of all of them where none was), each timed after
    the gate's check that gave its ``references`` entry."""
    quiet = [v for v, r in zip(values, references, strict=True) if not gate.is_busy(r, threads)]
    return float(statistics.median(quiet or values))
