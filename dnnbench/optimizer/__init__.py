"""The scalability optimizer (docs/model.md §7): the fastest W, R, P for a machine budget."""

from .brute import brute_force
from .curves import best_by_budget, data_parallel_curve, model_parallel_curve, pareto_front
from .exact import OptimizeResult, optimize
from .hetero import Placement, optimize_heterogeneous, place
from .sweep import sweep

__all__ = ["OptimizeResult", "Placement", "optimize_heterogeneous", "place", "sweep",
            "best_by_budget", "brute_force", "data_parallel_curve",
           "model_parallel_curve", "optimize", "pareto_front"]
