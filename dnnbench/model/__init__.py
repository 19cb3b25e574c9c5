"""The performance model (docs/model.md): pure functions of specs, vectorised over configurations."""

from .evaluate import evaluate, predict
from .prediction import BOTTLENECKS, INFEASIBLE_REASONS, Breakdown, Prediction

__all__ = ["BOTTLENECKS", "INFEASIBLE_REASONS", "Breakdown", "Prediction", "evaluate", "predict"]
