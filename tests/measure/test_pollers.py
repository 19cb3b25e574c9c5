"""Idle pollers (docs/validation.md §"Shared host"): one SCHED_IDLE loop per CPU, gone afterwards, and
never counted as other programs' load."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from dnnbench.cli import main
from dnnbench.measure import hostload
from dnnbench.measure.launch import run_ranks
from dnnbench.measure.pollers import available, idle_pollers

pytestmark = pytest.mark.skipif(not available(), reason="SCHED_IDLE and CPU affinity are Linux-only")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_one_idle_priority_poller_per_cpu_and_none_left() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    with idle_pollers() as pids:
        if len(cpus) < 2:  # one CPU: every rank shares it anyway, nothing to poll
            assert pids == []
            return
        assert len(pids) == len(cpus)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
                os.sched_getscheduler(p) == os.SCHED_IDLE and len(os.sched_getaffinity(p)) == 1 for p in pids):
            time.sleep(0.02)  # each poller lowers its priority and pins itself as its first statements
        assert [os.sched_getscheduler(p) for p in pids] == [os.SCHED_IDLE] * len(cpus)
        assert sorted(next(iter(os.sched_getaffinity(p))) for p in pids) == cpus
        assert all(_alive(p) for p in pids)
    assert not any(_alive(p) for p in pids)


def test_switched_off_starts_nothing() -> None:
    with idle_pollers(False) as pids:
        assert pids == []


def test_runs_beside_pollers_do_not_count_them_as_other_programs() -> None:
    """The pollers are always runnable (2 threads in state R on a 2-CPU host): counted, they would
    add about one busy thread per CPU to κ."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: no pollers to leave out")
    before = hostload.background_threads(samples=10)
    seen: list[float] = []
    run_ranks("dnnbench.measure.transfer:pingpong_main", 2, {"sizes_bytes": [4096], "repeats": 400},
              timeout_s=60, background=seen, pollers=True)
    assert seen, "the launcher sampled the host's load while the ranks ran"
    assert sum(seen) / len(seen) < before + 0.75


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_validate_with_pollers_neither_measures_nor_applies_the_corun_slowdown(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``dnnbench validate --pollers``: the calibration run already ran beside a busy thread on every
    other CPU, so σ_h is 0 and says why; the report records the condition."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: no pollers run")
    assert main(["validate", "--network", "lenet5", "--smoke", "--no-emulation", "--pollers",
                 "--batch-size", "16", "--iterations", "10", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["conditions"]["idle_pollers"] is True
    assert report["conditions"]["host_corun_slowdown"] == 0.0
    assert "not_measured" in report["calibration"]["corun"]
    assert [r["kind"] for r in report["rows"]] == ["single", "dp", "dp"]
    assert all(r["background_threads"] < 1.5 for r in report["rows"][1:]), "the pollers are not other programs"
