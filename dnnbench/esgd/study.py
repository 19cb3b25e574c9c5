"""The ESGD study: which runs, run them (optionally on several processes), keep the results.

:class:`StudyConfig` holds the study's knobs (the notebook's parameters); :func:`study_runs`
enumerates the runs; :func:`run_study` trains them all on the simulated cluster. The analyses
are in :mod:`dnnbench.esgd.analysis`.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .. import checks as v
from ..compression.methods import drop_ratio as checked_drop_ratio
from .cluster import ClusterConfig, TrainingRun, simulate
from .data import DATASETS, SPLITS
from .models import MODELS

#: The ablations run at each of ``StudyConfig.ablation_drop_ratios``: (label, method, options).
ABLATIONS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("no residual (loss-gated selection only)", "esgd_no_residual", {}),
    ("top-k |g| + ESGD residual", "topk_esgd_residual", {}),
    ("variant B (refresh C = top-k |g| on a fall)", "esgd", {"variant": "B"}),
    ("variant C (sample C from softmax(h/T))", "esgd", {"variant": "C"}),
    ("loss EMA 0.9", "esgd", {"loss_ema": 0.9}),
    ("beta = 1 (plain error feedback)", "esgd", {"beta": 1.0}),
)


def _ratios(name: str, values: Sequence[float]) -> tuple[float, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise v.fail(name, values, "is not a list of drop ratios in [0, 1)")
    return tuple(checked_drop_ratio(x, f"{name}[{i}]") for i, x in enumerate(values))


@dataclass(frozen=True)
class StudyConfig:
    """The study's parameters; the defaults are the full study (4 workers, 5,000 MNIST digits)."""

    dataset: str = "mnist"
    workers: int = 4
    rounds: int = 300
    drop_ratios: tuple[float, ...] = (0.0, 0.5, 0.75, 0.875, 0.95, 0.99)
    batch_size: int = 32  # per worker per round
    learning_rate: float = 0.05
    momentum: float = 0.9  # PS heavy-ball momentum (DGC keeps it on the workers instead)
    hidden_units: int = 128
    model: str = "mlp"
    split: str = "iid"
    eval_every: int = 10
    seed: int = 0
    esgd_tau: float = 0.01  # swap-in threshold of every ESGD run (reconstructed, our default)
    threshold_taus: tuple[float, ...] = (0.005, 0.01, 0.02)  # Strom's tau, one run each
    randk_drop_ratios: tuple[float, ...] = (0.5, 0.875)
    dgc_drop_ratios: tuple[float, ...] = (0.875, 0.99)
    ablation_drop_ratios: tuple[float, ...] = (0.875, 0.99)

    def __post_init__(self) -> None:
        v.choice("dataset", self.dataset, DATASETS)
        v.integer("workers", self.workers, low=1, high=1024)
        v.integer("rounds", self.rounds, low=1)
        for name in ("drop_ratios", "randk_drop_ratios", "dgc_drop_ratios", "ablation_drop_ratios"):
            object.__setattr__(self, name, _ratios(name, getattr(self, name)))
        if not self.drop_ratios:
            raise v.fail("drop_ratios", self.drop_ratios, "is empty; expected at least one drop ratio")
        taus = self.threshold_taus
        if isinstance(taus, (str, bytes)) or not isinstance(taus, Sequence):
            raise v.fail("threshold_taus", taus, "is not a list of positive numbers")
        object.__setattr__(self, "threshold_taus", tuple(
            v.number(f"threshold_taus[{i}]", t, low=0.0, low_open=True) for i, t in enumerate(taus)))
        v.integer("batch_size", self.batch_size, low=1)
        v.number("learning_rate", self.learning_rate, low=0.0, low_open=True)
        v.number("momentum", self.momentum, low=0.0, high=1.0, high_open=True)
        v.integer("hidden_units", self.hidden_units, low=1)
        v.choice("model", self.model, MODELS)
        v.choice("split", self.split, SPLITS)
        v.integer("eval_every", self.eval_every, low=1)
        v.integer("seed", self.seed, low=0)
        v.number("esgd_tau", self.esgd_tau, low=0.0)

    def cluster(self, method: str, drop_ratio: float | None, **options: Any) -> ClusterConfig:
        """The cluster config of one run of this study."""
        if method.startswith("esgd") or method == "topk_esgd_residual":
            options = {"tau": self.esgd_tau, **options}
        if method == "dgc":  # momentum correction: the workers hold the momentum, the PS plain SGD
            options = {"momentum": self.momentum, "warmup_steps": max(1, self.rounds // 10), **options}
        return ClusterConfig(method=method, drop_ratio=drop_ratio, options=options, dataset=self.dataset,
                             n_workers=self.workers, rounds=self.rounds, batch_size=self.batch_size,
                             learning_rate=self.learning_rate,
                             server_momentum=0.0 if method == "dgc" else self.momentum,
                             model=self.model, hidden_units=self.hidden_units, split=self.split,
                             eval_every=self.eval_every, seed=self.seed)


@dataclass(frozen=True)
class RunSpec:
    """One run of the study: a label for tables, its group, and the cluster config."""

    label: str
    group: str  # "dense", "esgd", "topk_ef", "threshold", "randk", "dgc" or "ablation"
    config: ClusterConfig
    ablation: str = ""  # the ablation's description (group "ablation")


def _pct(drop: float) -> str:
    return f"{100 * drop:g} %"


def study_runs(config: StudyConfig) -> tuple[RunSpec, ...]:
    """Every run of the study, in a fixed order. ESGD at drop 0 sends everything: it is dense SGD."""
    specs = [RunSpec("dense SGD", "dense", config.cluster("dense", None))]
    nonzero = [d for d in config.drop_ratios if d > 0]
    specs += [RunSpec(f"ESGD {_pct(d)}", "esgd", config.cluster("esgd", d)) for d in nonzero]
    specs += [RunSpec(f"top-k EF {_pct(d)}", "topk_ef", config.cluster("topk_ef", d)) for d in nonzero]
    specs += [RunSpec(f"threshold tau={t:g}", "threshold", config.cluster("threshold", None, tau=t))
              for t in config.threshold_taus]
    specs += [RunSpec(f"random-k {_pct(d)}", "randk", config.cluster("randk", d)) for d in config.randk_drop_ratios]
    specs += [RunSpec(f"DGC-lite {_pct(d)}", "dgc", config.cluster("dgc", d)) for d in config.dgc_drop_ratios]
    for d in config.ablation_drop_ratios:
        if d not in nonzero:  # the reference ESGD run of this ablation drop ratio
            specs.append(RunSpec(f"ESGD {_pct(d)}", "ablation", config.cluster("esgd", d), "reference (variant A)"))
        for text, method, options in ABLATIONS:
            specs.append(RunSpec(f"{text} {_pct(d)}", "ablation", config.cluster(method, d, **options), text))
    return tuple(specs)


@dataclass(frozen=True, eq=False)
class StudyResult:
    """The runs of a study, in :func:`study_runs` order."""

    config: StudyConfig
    specs: tuple[RunSpec, ...]
    runs: tuple[TrainingRun, ...]
    wall_time_s: float
    n_jobs: int = 1
    notes: dict[str, Any] = field(default_factory=dict)

    def group(self, group: str) -> list[tuple[RunSpec, TrainingRun]]:
        return [(s, r) for s, r in zip(self.specs, self.runs, strict=True) if s.group == group]

    def run(self, label: str) -> TrainingRun:
        """The run labelled ``label``."""
        for spec, run in zip(self.specs, self.runs, strict=True):
            if spec.label == label:
                return run
        raise v.fail("label", label, f"is not a run of this study; expected one of {[s.label for s in self.specs]}")


def run_study(config: StudyConfig, n_jobs: int = 1) -> StudyResult:
    """Train every run of :func:`study_runs`; ``n_jobs`` > 1 spreads them over processes.

    Each run is seeded on its own, so the results do not depend on ``n_jobs``.
    """
    n_jobs = v.integer("n_jobs", n_jobs, low=1, high=64)
    specs = study_runs(config)
    start = time.perf_counter()
    configs = [s.config for s in specs]
    if n_jobs == 1:
        runs = [simulate(c) for c in configs]
    else:
        # "spawn": forking a process that holds BLAS or kernel threads is not safe
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(n_jobs, mp_context=context) as pool:
            runs = list(pool.map(simulate, configs))
    return StudyResult(config, specs, tuple(runs), time.perf_counter() - start, n_jobs)


__all__ = ["ABLATIONS", "RunSpec", "StudyConfig", "StudyResult", "run_study", "study_runs"]
