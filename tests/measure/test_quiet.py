"""Waiting out a busy host before multi-thread timings (dnnbench.measure.quiet)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from dnnbench.measure.quiet import QuietGate, bracket, quiet_median


class FakeHost:
    """A clock, a sleep and a reference whose call takes ``slow`` × 1 ms while the host is busy (from
    ``busy_from`` to ``busy_until`` on the fake clock) and 1 ms otherwise."""

    def __init__(self, busy_from: float, busy_until: float, slow: float = 3.0) -> None:
        self.now, self.busy_from, self.busy_until, self.slow = 0.0, busy_from, busy_until, slow

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s

    def reference(self, threads: int) -> Callable[[], Any]:
        def call() -> None:
            busy = self.busy_from <= self.now < self.busy_until
            self.now += 1e-3 * (self.slow if busy else 1.0)
        return call


def gate(host: FakeHost, **kw: Any) -> QuietGate:
    return QuietGate(reference=host.reference, clock=host.clock, sleep=host.sleep, **kw)


def test_one_thread_never_waits_nor_counts() -> None:
    host = FakeHost(0.0, 1e9)
    g = gate(host)
    assert g.wait(1) != g.wait(1)  # NaN: no reference on one thread
    assert host.now == 0.0 and g.report()["checks"] == 0


def test_it_waits_out_a_busy_spell_and_marks_nothing_disturbed() -> None:
    host = FakeHost(busy_from=0.5, busy_until=4.0)
    g = gate(host, poll_s=0.25, budget_s=30.0)
    ref = g.wait(2)  # quiet: learns the quickest, 1 ms
    assert ref == pytest.approx(1e-3) and not g.is_busy(ref, 2)
    host.now = 1.0  # into the busy spell
    ref = g.wait(2)
    assert host.now >= 4.0 and not g.is_busy(ref, 2)  # it returned once the spell was over
    r = g.report()
    assert r["disturbed"] == 0 and 2.9 < r["waited_s"] < 3.5 and r["worst_ratio"] == pytest.approx(3.0)


def test_the_budget_bounds_the_wait_and_the_timing_counts_as_busy() -> None:
    host = FakeHost(busy_from=0.5, busy_until=1e9)
    g = gate(host, poll_s=0.25, budget_s=2.0)
    g.wait(2)
    host.now = 1.0
    ref = g.wait(2)
    assert g.is_busy(ref, 2)
    assert 2.0 <= g.report()["waited_s"] < 2.5 and g.report()["disturbed"] == 1
    before = host.now
    assert g.is_busy(g.wait(2), 2) and host.now - before < 0.1  # the budget is spent: no more waiting


def test_a_measurement_that_begins_busy_learns_it_later() -> None:
    """Begun in a busy spell, the gate takes the slow reference for the quickest; once the host is
    quiet, the early timings are found busy after the fact and :func:`quiet_median` leaves them out."""
    host = FakeHost(busy_from=0.0, busy_until=1.0)
    g = gate(host)
    early = [g.wait(2) for _ in range(2)]
    host.now = 2.0
    late = [g.wait(2) for _ in range(2)]
    assert all(g.is_busy(r, 2) for r in early) and not any(g.is_busy(r, 2) for r in late)
    values = [30.0, 31.0, 10.0, 11.0]
    assert quiet_median(values, early + late, 2, g) == pytest.approx(10.5)
    assert quiet_median(values[:2], early, 2, g) == pytest.approx(30.5)  # all busy: all kept


def test_time_cases_leaves_busy_rounds_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A multi-thread case's rounds timed on a busy host are left out of its median and it is timed
    again; one-thread cases are not gated."""
    from dnnbench.measure import shapes

    fcs = [c for c in shapes.shape_cases(40, seed=5, threads=(1, 2)) if c.layer.get("kind") == "fc"]
    cases = [next(c for c in fcs if c.threads == t) for t in (1, 2)]

    class Scripted(QuietGate):
        """Busy at the second check of the two-thread case, quiet otherwise."""

        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def wait(self, threads: int) -> float:
            if threads <= 1:
                return float("nan")
            self.n += 1
            return 1.0 if self.n == 2 else 0.1

        def is_busy(self, reference_s: float, threads: int) -> bool:
            return reference_s == 1.0

    g = Scripted()
    rows = shapes.time_cases(cases, rounds=3, gate=g)
    two = rows[[c.threads for c in cases].index(2)]
    one = rows[[c.threads for c in cases].index(1)]
    assert two["busy_rounds"] == 1.0 and two["rounds_timed"] >= 3.0
    assert one["busy_rounds"] == 0.0
    assert all(rows[i][p] > 0 for i in range(2) for p in ("forward", "weight_grad"))


def _pin_every_thread(cpus: set[int]) -> None:
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:  # a thread that has ended
            pass


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two cores to take one away (Linux CPU affinity)")
def test_on_this_host_it_waits_while_a_core_is_taken_away() -> None:
    """Real: with this process's threads held to one core (as when another tenant holds the rest), the
    reference on two threads runs many times its quickest, so the gate waits, and goes on once the
    cores come back (after 2 s)."""
    import time

    cores = os.sched_getaffinity(0)
    g = QuietGate(factor=2.0, budget_s=60.0, poll_s=0.1)
    for _ in range(5):
        g.wait(2)  # the quickest, with every core
    _pin_every_thread({min(cores)})
    back = threading.Timer(2.0, _pin_every_thread, args=(cores,))
    try:
        back.start()
        start = time.perf_counter()
        ref = g.wait(2)
        took = time.perf_counter() - start
    finally:
        back.cancel()
        _pin_every_thread(cores)
    report = g.report()
    assert report["worst_ratio"] > 2.0, report
    assert 1.5 < took < 30.0 and report["waited_s"] > 1.5, (took, report)
    assert not g.is_busy(ref, 2) and report["disturbed"] == 0


def test_a_bracket_catches_a_spell_that_began_during_the_timing() -> None:
    host = FakeHost(busy_from=10.0, busy_until=1e9)
    g = gate(host, budget_s=0.0)
    g.wait(2), g.wait(2)  # quiet: learns the quickest

    def timing() -> str:  # a long launch, into the spell
        host.now = 11.0
        return "done"

    result, ref = bracket(g, 2, timing)
    assert result == "done" and g.is_busy(ref, 2)  # quiet before, busy after: the larger counts
    result, ref = bracket(g, 1, timing)  # one thread: no reference, never busy
    assert ref != ref and not g.is_busy(ref, 1)


def test_launches_are_repeated_until_two_ran_on_a_quiet_host_and_only_those_make_the_median() -> None:
    from dnnbench.measure.ddp import _gated_runs

    host = FakeHost(busy_from=1.0, busy_until=3.0)
    g = gate(host, budget_s=0.0)  # never waits: the busy launches are taken, then left out
    g.wait(2), g.wait(2)
    values = iter([100.0, 10.0, 11.0, 50.0, 12.0])

    def timing() -> float:
        host.now += 0.9  # the 2nd and 3rd launches fall in the spell
        return next(values)

    results, refs = _gated_runs(g, 2, 3, timing)
    # quiet; into the spell; in it; still in it when it starts (launched again: one quiet so far); quiet
    assert results == [100.0, 10.0, 11.0, 50.0, 12.0]
    assert [g.is_busy(r, 2) for r in refs] == [False, True, True, True, False]
    assert quiet_median(results, refs, 2, g) == pytest.approx(56.0)  # of the two quiet launches alone
