"""The validation's launch schedule: every run's launches interleaved with the others' (docs/validation.md
§"Interleaved launches"), so that the host's drift over a sweep reaches the calibration run and the runs it
predicts alike."""

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dnnbench import presets
from dnnbench.measure import runs as v
from dnnbench.measure.plan import Run, launch_order, plan, progress_steps, runnable
from dnnbench.measure.quiet import QuietGate
from dnnbench.measure.runs import median_launch


class Host:
    """A host whose reference call takes 1 ms, or 3 ms for the next ``busy_calls`` calls (a busy spell
    that a fake launch starts and the gate's check after it sees)."""

    def __init__(self) -> None:
        self.now, self.busy_calls = 0.0, 0

    def gate(self) -> QuietGate:
        def reference(threads: int) -> Any:
            def call() -> None:
                self.now += 3e-3 if self.busy_calls > 0 else 1e-3
                self.busy_calls = max(0, self.busy_calls - 1)
            return call

        def sleep(s: float) -> None:
            self.now += s

        return QuietGate(reference=reference, clock=lambda: self.now, sleep=sleep, budget_s=0.0)


@given(st.integers(1, 12), st.integers(1, 9))
def test_every_launch_once_and_rounds_in_turn(runs: int, launches: int) -> None:
    order = launch_order(runs, launches)
    assert sorted(order) == [(i, k) for i in range(runs) for k in range(launches)]
    rounds = [k for _, k in order]
    assert rounds == sorted(rounds)  # every run's k-th launch before any run's (k+1)-th
    for k in range(launches):  # forwards, then backwards
        idx = [i for i, kk in order if kk == k]
        assert idx == (list(range(runs)) if k % 2 == 0 else list(range(runs))[::-1])


@given(st.integers(2, 12), st.integers(1, 5))
def test_a_linear_drift_reaches_every_run_alike(runs: int, pairs: int) -> None:
    """With an even number of rounds every run's mean launch time is the same: a host slowing down
    linearly over the sweep biases no run's mean against another's."""
    order = launch_order(runs, 2 * pairs)
    mean_slot = [np.mean([t for t, (i, _) in enumerate(order) if i == r]) for r in range(runs)]
    assert np.ptp(mean_slot) == pytest.approx(0.0, abs=1e-9)


def test_measure_interleaved_keeps_each_runs_median_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner sees the launches in launch_order and returns each run's median launch, in run order;
    the measurements themselves are stand-ins here (the smoke validation launches real ones)."""
    seen: list[Run] = []
    speed = iter([10.0, 20.0, 30.0, 31.0, 21.0, 11.0, 12.0, 22.0, 32.0])

    def fake(net: Any, run: Run, *args: Any, **kw: Any) -> dict[str, Any]:
        seen.append(run)
        x = next(speed)
        return {"samples_per_s": x, "cpu_view_samples_per_s": x + 1, "launch": len(seen)}

    monkeypatch.setattr(v, "measure", fake)
    runs = [Run("single"), Run("dp", "sync", 1), Run("dp", "sync", 2)]
    steps: list[str] = []
    rounds: list[tuple[int, int]] = []  # (round, launches done before it)
    monkeypatch.setattr(v.os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    out = v.measure_interleaved(presets.network("lenet5"), runs, 32, 5, 3, say=steps.append,
                                each_round=lambda k: rounds.append((k, len(seen))), gate=Host().gate())
    assert seen == [runs[i] for i, _ in launch_order(3, 3)]
    assert rounds == [(0, 0), (1, 3), (2, 6)]  # before each round's first launch
    assert [m["samples_per_s"] for m in out] == [11.0, 21.0, 31.0]
    assert out[0]["launches_samples_per_s"] == [10.0, 11.0, 12.0]
    assert out[2]["cpu_view_samples_per_s"] == 32.0
    assert len(steps) == 9 and steps[0] == "1 process, loopback, launch 1/3"


def test_a_launch_on_a_busy_host_is_left_out_and_its_run_launched_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another tenant holds a core during the calibration run's second and third launches: they are
    listed apart, not in its median, and the run is launched once more (two quiet launches at least)."""
    host = Host()
    speed = iter([10.0, 20.0, 21.0, 5.0, 6.0, 22.0, 12.0])
    count = [0]

    def fake(net: Any, run: Run, *args: Any, **kw: Any) -> dict[str, Any]:
        count[0] += 1
        if count[0] in (4, 5):  # the schedule's 4th and 5th: the single run's 2nd and 3rd launches
            host.busy_calls = 5  # the check after the launch (best of 5 calls) sees it
        x = next(speed)
        host.now += 1.0
        return {"samples_per_s": x, "cpu_view_samples_per_s": None}

    monkeypatch.setattr(v, "measure", fake)
    monkeypatch.setattr(v.os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    runs = [Run("single"), Run("dp", "sync", 1)]
    gate = host.gate()
    out = v.measure_interleaved(presets.network("lenet5"), runs, 32, 5, 3, gate=gate)
    assert count[0] == 7  # 2 runs × 3 launches, and the single run once more
    assert out[0]["busy_launches_samples_per_s"] == [5.0, 6.0]
    assert out[0]["launches_samples_per_s"] == [10.0, 12.0] and out[0]["samples_per_s"] == 10.0
    assert out[1]["launches_samples_per_s"] == [20.0, 21.0, 22.0] and out[1]["busy_launches_samples_per_s"] == []


def test_median_launch_of_an_even_count_is_the_lower_middle() -> None:
    out = median_launch([{"samples_per_s": s, "cpu_view_samples_per_s": None} for s in (4.0, 1.0, 3.0, 2.0)])
    assert out["samples_per_s"] == 2.0 and out["cpu_view_samples_per_s"] is None


def test_progress_steps_count_every_report() -> None:
    runs = plan(False, (1e9,))  # 1 + 4 loopback + 4 tbf runs, two paths for the PS runs, one link
    assert progress_steps(runs, 5) == 2 + 1 + 2 + 9 * 5
    assert progress_steps(plan(False), 1) == 2 + 0 + 1 + 5


def test_without_emulation_tbf_runs_are_dropped_or_moved_to_loopback() -> None:
    runs, why = runnable(plan(False, (1e9,)), smoke=False, emulate=False)
    assert why is not None and "switched off" in why
    assert runs == plan(False)
    smoke, why = runnable(plan(True), smoke=True, emulate=False)
    assert why is not None and [r.link_bits_per_s for r in smoke] == [None, None, None]
    assert runnable(plan(False), smoke=False) == (plan(False), None)  # nothing to emulate, nothing to say


def test_corun_pairs_pooled_over_rounds() -> None:
    """σ_h from pairs measured in different rounds: the median ratio over all of them, so one noisy
    round (a ratio of 1.4) does not make the host's σ_h."""
    from dnnbench.measure.corun import merge_corun

    def part(ratio: float, cv: float) -> dict[str, Any]:
        return {"host_corun_slowdown": max(0.0, ratio - 1), "ratios": [ratio], "alone_cpu_s": [4e-3],
                "beside_cpu_s": [4e-3 * ratio], "cpus": 2, "batch_size": 32, "steps": 10, "alone_step_cv": cv}

    out = merge_corun([part(1.02, 0.05), part(1.4, 0.3), part(0.98, 0.04), part(1.03, 0.06), part(1.01, 0.05)])
    assert out["host_corun_slowdown"] == pytest.approx(0.02)
    assert out["ratios"] == [1.02, 1.4, 0.98, 1.03, 1.01] and out["parts"] == 5
    assert out["alone_step_cv"] == pytest.approx(0.05)
    assert merge_corun([part(0.9, 0.1)])["host_corun_slowdown"] == 0.0  # floored at 0


def test_the_progress_bar_grows_for_launches_run_again_instead_of_passing_its_total() -> None:
    import io

    from tqdm import tqdm

    from dnnbench.measure.cli import _advance

    with tqdm(total=2, file=io.StringIO()) as bar:
        for name in ("1 process, launch 1/1", "2 workers, launch 1/1"):
            _advance(bar, name)
        assert (bar.n, bar.total) == (2, 2)
        _advance(bar, "1 process, launched again (the host was busy)")
        assert (bar.n, bar.total) == (3, 3)


def test_a_failed_run_names_the_rank_that_failed_first() -> None:
    """Rank 0 stops because rank 2 went away: the error names rank 2 and its own last line; where every
    rank only lost its peers, the first."""
    from dnnbench.measure.launch import first_failure

    lost = "[rank0]: RuntimeError: [../gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:60653"
    own = "[rank2]: IndexError: index 0 is out of bounds for axis 0 with size 0"
    assert first_failure([(0, 1, lost), (2, 1, own)]) == (2, 1, own)
    reset = "[rank1]: RuntimeError: Connection reset by peer"
    assert first_failure([(0, 1, lost), (1, 1, reset)]) == (0, 1, lost)


@pytest.mark.parametrize("busy", [[False, False], [True, True], [False, False, False], [True, False, False]])
def test_the_calibration_anchor_is_the_statistic_its_in_sample_row_compares(busy: list[bool]) -> None:
    """A relaunch on a busy host keeps two or more launches of the calibration run, whose CPU views
    differ from its median-wall launch's: the fit is anchored to the kept launches' median CPU view, the
    value the single row's in-sample error divides by, so that error is zero by construction."""
    launches = [{"samples_per_s": w, "cpu_view_samples_per_s": c, "raw": {"step_mean": {"cpu_s": 64 / c}}}
                for w, c in [(900.0, 1000.0), (1100.0, 1400.0), (1000.0, 1150.0)][:len(busy)]]
    single = median_launch(launches, busy)
    anchor = v.calibration_step_samples_per_s(single, 64)
    assert anchor == single["cpu_view_samples_per_s"]
    kept = [c["cpu_view_samples_per_s"] for c, b in zip(launches, busy, strict=True) if not b] or \
        [c["cpu_view_samples_per_s"] for c in launches]
    assert anchor == pytest.approx(float(np.median(kept)))
    assert v.calibration_step_samples_per_s({**single, "cpu_view_samples_per_s": None}, 64) == \
        pytest.approx(64 / single["raw"]["step_mean"]["cpu_s"])
