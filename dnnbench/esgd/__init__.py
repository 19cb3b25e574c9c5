"""ESGD and gradient-compression baselines, a simulated edge cluster that trains, and the study.

ESGD is Tao and Li, "eSGD: Communication Efficient Distributed Deep Learning on the Edge" (USENIX
HotEdge 2018). Only its abstract is available: the algorithm here is *reconstructed* (see
docs/esgd.md §2). Everything is numpy; torch is imported only by the DDP hook, inside its functions.

- compressors: :func:`make_compressor` (``METHODS``), :class:`Compressor`, :class:`SparseUpdate`;
  quantisers :class:`SignSGD`, :class:`QSGD` (:class:`QuantisedUpdate`);
- PyTorch DDP: :func:`esgd_hook`, :class:`ESGDHookState` (torch is imported only when used);
- wire cost: :mod:`dnnbench.esgd.wire` (``bits_per_element``, ``union_density``,
  ``selection_ops_per_element``, ``ENCODINGS``);
- training: :class:`ClusterConfig`, :func:`simulate`, :class:`TrainingRun`;
- edge timing: :class:`EdgeLink`, :func:`time_to_accuracy_s`;
- the study: :class:`StudyConfig`, :func:`run_study`, :mod:`dnnbench.esgd.analysis`.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# Names load on first use: specs validate compression names through the light `methods` and `wire`
# modules without importing the training code.
_LAZY: dict[str, str] = {
    "wire": ".wire",
    "DenseSGD": ".baselines",
    "RandomK": ".baselines",
    "ThresholdSGD": ".baselines",
    "TopKEF": ".baselines",
    "ClusterConfig": ".cluster",
    "TrainingRun": ".cluster",
    "simulate": ".cluster",
    "Compressor": ".compressor",
    "Dataset": ".data",
    "load_dataset": ".data",
    "DGCLite": ".dgc",
    "EdgeLink": ".edge",
    "round_times_s": ".edge",
    "rounds_to_accuracy": ".edge",
    "time_to_accuracy_s": ".edge",
    "ESGDCompressor": ".esgd",
    "ESGDNoResidual": ".esgd",
    "TopKESGDResidual": ".esgd",
    "METHODS": ".methods",
    "MLP": ".models",
    "SmallCNN": ".models",
    "PAPER_MNIST_ACCURACY": ".paper",
    "compare_with_paper": ".paper",
    "make_compressor": ".registry",
    "SparseUpdate": ".sparse",
    "average": ".sparse",
    "decompress": ".sparse",
    "StudyConfig": ".study",
    "StudyResult": ".study",
    "run_study": ".study",
    "study_runs": ".study",
    "ENCODINGS": ".wire",
    "bits_per_element": ".wire",
    "selection_ops_per_element": ".wire",
    "union_density": ".wire",
    "update_bits": ".wire",
    "method_bits_per_element": ".wire",
    "pull_bits_per_element": ".wire",
    "QSGD": ".quantise",
    "SignSGD": ".quantise",
    "QuantisedUpdate": ".sparse",
    "ESGDHookState": ".torch_hook",
    "esgd_hook": ".torch_hook",
}

__all__ = [
    "ENCODINGS", "METHODS", "MLP", "PAPER_MNIST_ACCURACY", "QSGD", "ClusterConfig", "Compressor", "DGCLite",
    "Dataset", "DenseSGD", "ESGDCompressor", "ESGDHookState", "ESGDNoResidual", "EdgeLink", "QuantisedUpdate",
    "RandomK", "SignSGD", "SmallCNN", "SparseUpdate", "StudyConfig", "StudyResult", "ThresholdSGD", "TopKEF",
    "TopKESGDResidual", "TrainingRun", "average", "bits_per_element", "compare_with_paper", "decompress",
    "esgd_hook", "load_dataset", "make_compressor", "method_bits_per_element", "pull_bits_per_element",
    "round_times_s", "rounds_to_accuracy", "run_study", "selection_ops_per_element", "simulate",
    "study_runs", "time_to_accuracy_s", "union_density", "update_bits", "wire",
]


def __getattr__(name: str) -> Any:
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'dnnbench.esgd' has no attribute {name!r}") from None
    mod = import_module(module, __name__)
    value = mod if name == "wire" else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
