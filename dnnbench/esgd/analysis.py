"""Tables of the ESGD study, as plain rows (lists of dicts) for the notebook, JSON and plots.

Every function is pure: a :class:`~dnnbench.esgd.study.StudyResult` in, numbers out. Accuracy is
the test accuracy after the last round unless said otherwise; bytes are per worker.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dnnbench.units import BITS_PER_BYTE

from .. import checks as v
from ..compression.wire import ENCODINGS, bits_per_element, union_density
from .edge import EdgeLink, rounds_to_accuracy, time_to_accuracy_s
from .paper import PAPER_CITATION, PAPER_MNIST_ACCURACY, compare_with_paper
from .study import StudyResult

#: The groups compared at equal byte budgets, in table order.
BUDGET_GROUPS: tuple[str, ...] = ("esgd", "topk_ef", "threshold", "randk", "dgc", "dense")


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def esgd_accuracy_by_drop(result: StudyResult) -> dict[float, float]:
    """Final accuracy of the ESGD runs (variant A) by drop ratio; drop 0 is the dense run."""
    out = {0.0: result.group("dense")[0][1].final_accuracy} if 0.0 in result.config.drop_ratios else {}
    out.update({s.config.drop_ratio: r.final_accuracy for s, r in result.group("esgd")})
    return dict(sorted(out.items()))


def accuracy_vs_drop(result: StudyResult) -> list[dict[str, Any]]:
    """Per drop ratio: ESGD's and top-k EF's final accuracy, the paper's where it gave one."""
    topk = {s.config.drop_ratio: r for s, r in result.group("topk_ef")}
    esgd = {s.config.drop_ratio: r for s, r in result.group("esgd")}
    dense = result.group("dense")[0][1]
    rows = []
    for drop in result.config.drop_ratios:
        run = dense if drop == 0 else esgd[drop]
        rows.append({
            "drop_ratio": drop,
            "esgd_accuracy": run.final_accuracy,
            "esgd_best_accuracy": float(run.test_accuracy.max()),
            "topk_ef_accuracy": dense.final_accuracy if drop == 0 else topk[drop].final_accuracy,
            "paper_accuracy": PAPER_MNIST_ACCURACY.get(drop),
            "density_up": float(run.density_up.mean()),
            "density_down": float(run.density_down.mean()),
        })
    return rows


def paper_comparison(result: StudyResult, tolerance_points: float = 0.5) -> list[dict[str, Any]]:
    """Our ESGD accuracy beside the paper's abstract numbers, with a computed sentence each."""
    return [{"drop_ratio": c.drop_ratio, "paper_accuracy": c.paper_accuracy, "our_accuracy": c.our_accuracy,
             "difference_points": c.difference_points, "verdict": c.verdict, "sentence": c.sentence()}
            for c in compare_with_paper(esgd_accuracy_by_drop(result), tolerance_points)]


def wire_table(result: StudyResult) -> list[dict[str, Any]]:
    """Bits per worker per round for each encoding, measured, beside the esgd.md §4 formula.

    Rows: the dense run, the ESGD runs and the random-k runs (the only ones "values_only" fits).
    ``formula_up_bits_per_round`` is bits_per_element(encoding, mean density) x d.
    """
    rows = []
    for group in ("dense", "esgd", "randk"):
        for spec, run in result.group(group):
            rho_up = float(run.density_up.mean())
            rho_down = float(run.density_down.mean())
            d = run.n_params
            rows.append({
                "label": spec.label, "method": spec.config.method, "drop_ratio": spec.config.drop_ratio,
                "n_params": d, "density_up": rho_up, "density_down": rho_down,
                "density_down_independent": float(union_density(rho_up, run.config.n_workers)),
                "up_bits_per_round": {e: float(run.bits_up(e).mean()) for e in run.encodings},
                "down_bits_per_round": {e: float(run.bits_down(e).mean()) for e in run.encodings},
                "formula_up_bits_per_round": {e: float(bits_per_element(e, rho_up)) * d for e in run.encodings},
            })
    return rows


def accuracy_vs_bytes(result: StudyResult, encoding: str = "best_lossless") -> list[dict[str, Any]]:
    """Per run: bytes one worker had uploaded at each evaluation, and the accuracy there."""
    rows = []
    for spec, run in zip(result.specs, result.runs, strict=True):
        sent = run.cumulative_bits_up_at_evals(encoding) / BITS_PER_BYTE
        rows.append({"label": spec.label, "group": spec.group, "method": spec.config.method,
                     "drop_ratio": spec.config.drop_ratio, "rounds": run.eval_rounds.tolist(),
                     "bytes_up": sent.tolist(), "accuracy": run.test_accuracy.tolist()})
    return rows


def accuracy_at_budget(bytes_up: np.ndarray, accuracy: np.ndarray, budget_bytes: float) -> float | None:
    """Accuracy at the last evaluation taken with at most ``budget_bytes`` uploaded; None if none."""
    within = np.flatnonzero(np.asarray(bytes_up) <= budget_bytes)
    return float(np.asarray(accuracy)[within[-1]]) if within.size else None


def equal_budget(result: StudyResult, budget_fractions: tuple[float, ...] = (0.02, 0.05, 0.1, 0.25),
                 encoding: str = "best_lossless") -> list[dict[str, Any]]:
    """Best accuracy each method reaches within a byte budget, over its runs (drop ratios or taus).

    Budgets are fractions of what one worker uploads in the dense run over all rounds. The "best
    over its runs" picks the drop ratio in hindsight, for every method alike.
    """
    for i, f in enumerate(budget_fractions):
        v.number(f"budget_fractions[{i}]", f, low=0.0, low_open=True)
    dense_total = float(result.group("dense")[0][1].bits_up("dense").mean(axis=1).sum()) / BITS_PER_BYTE
    curves = accuracy_vs_bytes(result, encoding)
    rows = []
    for fraction in budget_fractions:
        budget = fraction * dense_total
        row: dict[str, Any] = {"budget_fraction": fraction, "budget_bytes": budget}
        for group in BUDGET_GROUPS:
            best: tuple[float, str] | None = None
            for c in curves:
                if c["group"] != group:
                    continue
                acc = accuracy_at_budget(np.array(c["bytes_up"]), np.array(c["accuracy"]), budget)
                if acc is not None and (best is None or acc > best[0]):
                    best = (acc, c["label"])
            row[group] = None if best is None else {"accuracy": best[0], "run": best[1]}
        rows.append(row)
    return rows


def time_to_target(result: StudyResult, link: EdgeLink, target_accuracy: float,
                   encoding: str = "best_lossless") -> list[dict[str, Any]]:
    """Per run: seconds and rounds to ``target_accuracy`` over ``link`` (None: not reached)."""
    dense_s = time_to_accuracy_s(result.group("dense")[0][1], target_accuracy, link, encoding)
    rows = []
    for spec, run in zip(result.specs, result.runs, strict=True):
        seconds = time_to_accuracy_s(run, target_accuracy, link, encoding)
        rows.append({"label": spec.label, "group": spec.group, "method": spec.config.method,
                     "drop_ratio": spec.config.drop_ratio, "seconds": _finite(seconds),
                     "rounds": rounds_to_accuracy(run, target_accuracy),
                     "speedup_vs_dense": _finite(dense_s / seconds) if math.isfinite(seconds) else None})
    return rows


def ablation_table(result: StudyResult) -> list[dict[str, Any]]:
    """Each ablation beside the plain ESGD (variant A) run at the same drop ratio."""
    reference = {s.config.drop_ratio: r for s, r in result.group("esgd")}
    reference.update({s.config.drop_ratio: r for s, r in result.group("ablation")
                      if s.ablation.startswith("reference")})
    rows = []
    for spec, run in result.group("ablation"):
        if spec.ablation.startswith("reference"):
            continue
        ref = reference[spec.config.drop_ratio]
        rows.append({"ablation": spec.ablation, "label": spec.label, "drop_ratio": spec.config.drop_ratio,
                     "accuracy": run.final_accuracy, "esgd_accuracy": ref.final_accuracy,
                     "difference_points": 100.0 * (run.final_accuracy - ref.final_accuracy),
                     "final_train_loss": float(np.mean(run.train_loss[-10:])),
                     "stats": run.extra.get("compressor_stats", {})})
    return rows


def run_table(result: StudyResult) -> list[dict[str, Any]]:
    """One row per run: what it was and how it ended."""
    return [{"label": s.label, "group": s.group, "method": s.config.method, "drop_ratio": s.config.drop_ratio,
             "options": {k: val for k, val in s.config.options}, "final_accuracy": r.final_accuracy,
             "best_accuracy": float(r.test_accuracy.max()), "final_train_loss": float(np.mean(r.train_loss[-10:])),
             "density_up": float(r.density_up.mean()), "density_down": float(r.density_down.mean()),
             "upload_bytes_per_worker": float(r.bits_up("best_lossless").mean(axis=1).sum()) / BITS_PER_BYTE,
             "download_bytes": float(r.bits_down("best_lossless").sum()) / BITS_PER_BYTE,
             "diverged": r.diverged, "wall_time_s": r.wall_time_s, "compress_time_s": r.compress_time_s,
             "stats": r.extra.get("compressor_stats", {})}
            for s, r in zip(result.specs, result.runs, strict=True)]


def summarize(result: StudyResult, link: EdgeLink, target_accuracy: float,
              encoding: str = "best_lossless",
              budget_fractions: tuple[float, ...] = (0.02, 0.05, 0.1, 0.25)) -> dict[str, Any]:
    """Everything the study reports, as JSON-ready data (no inf/NaN: None instead)."""
    c = result.config
    return {
        "schema": "dnnbench.esgd.study/1",
        "study": {k: (list(val) if isinstance(val, tuple) else val) for k, val in vars(c).items()},
        "link": {k: _finite(val) if isinstance(val, float) else val for k, val in vars(link).items()},
        "target_accuracy": target_accuracy,
        "encoding": encoding,
        "encodings": list(ENCODINGS),
        "wall_time_s": result.wall_time_s,
        "n_jobs": result.n_jobs,
        "paper": {"source": PAPER_CITATION,
                  "mnist_accuracy_by_drop_ratio": {str(k): a for k, a in PAPER_MNIST_ACCURACY.items()},
                  "note": "the paper's numbers; its model, data size and training length are unknown to us"},
        "reconstructed": "ESGD as reconstructed in docs/esgd.md (only the paper's abstract is available)",
        "runs": run_table(result),
        "accuracy_vs_drop": accuracy_vs_drop(result),
        "paper_comparison": paper_comparison(result),
        "wire": wire_table(result),
        "equal_budget": equal_budget(result, budget_fractions, encoding),
        "time_to_target": time_to_target(result, link, target_accuracy, encoding),
        "ablations": ablation_table(result),
        "accuracy_vs_bytes": accuracy_vs_bytes(result, encoding),
    }


__all__ = ["BUDGET_GROUPS", "ablation_table", "accuracy_at_budget", "accuracy_vs_bytes", "accuracy_vs_drop",
           "equal_budget", "esgd_accuracy_by_drop", "paper_comparison", "run_table", "summarize",
           "time_to_target", "wire_table", "write_json"]


def write_json(summary: dict[str, Any], path: str) -> str:
    """Write ``summary`` as strict JSON (no NaN or inf) to ``path``, atomically; returns the path."""
    import json

    from ..fileio import atomic_write

    atomic_write(path, json.dumps(summary, indent=1, allow_nan=False) + "\n")
    return path
