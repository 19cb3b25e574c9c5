"""ESGD and gradient-compression baselines, a simulated edge cluster that trains, and the study.

ESGD is Tao and Li, "eSGD: Communication Efficient Distributed Deep Learning on the Edge" (USENIX
HotEdge 2018). Only its abstract is available: the algorithm here is *reconstructed* (see
docs/esgd.md §2). Everything is numpy; torch is imported only by the DDP hook, inside its functions.

- compressors: :func:`make_compressor` (``METHODS``), :class:`Compressor`, :class:`SparseUpdate`;
  quantisers :class:`SignSGD`, :class:`QSGD` (:class:`QuantisedUpdate`);
- PyTorch DDP: :func:`esgd_hook`, :class:`ESGDHookState` (torch is imported only when used);
- wire cost: :mod:`dnnbench.compression.wire` (``bits_per_element``, ``union_density``,
  ``selection_ops_per_element``, ``ENCODINGS``);
- training: :class:`ClusterConfig`, :func:`simulate`, :class:`TrainingRun`;
- edge timing: :class:`EdgeLink`, :func:`time_to_accuracy_s`;
- the study: :class:`StudyConfig`, :func:`run_study`, :mod:`dnnbench.esgd.analysis`.
"""

from __future__ import annotations

from dnnbench._lazy import lazy_exports

# Names load on first use: specs validate compression names through the light `methods` and `wire`
# modules without importing the training code.
_LAZY: dict[str, tuple[str, str | None]] = {
    "wire": ("dnnbench.compression.wire", None),
    "DenseSGD": ("dnnbench.compression.baselines", "DenseSGD"),
    "RandomK": ("dnnbench.compression.baselines", "RandomK"),
    "ThresholdSGD": ("dnnbench.compression.baselines", "ThresholdSGD"),
    "TopKEF": ("dnnbench.compression.baselines", "TopKEF"),
    "ClusterConfig": ("dnnbench.esgd.cluster", "ClusterConfig"),
    "TrainingRun": ("dnnbench.esgd.cluster", "TrainingRun"),
    "simulate": ("dnnbench.esgd.cluster", "simulate"),
    "Compressor": ("dnnbench.compression.compressor", "Compressor"),
    "Dataset": ("dnnbench.esgd.data", "Dataset"),
    "load_dataset": ("dnnbench.esgd.data", "load_dataset"),
    "DGCLite": ("dnnbench.compression.dgc", "DGCLite"),
    "EdgeLink": ("dnnbench.esgd.edge", "EdgeLink"),
    "round_times_s": ("dnnbench.esgd.edge", "round_times_s"),
    "rounds_to_accuracy": ("dnnbench.esgd.edge", "rounds_to_accuracy"),
    "time_to_accuracy_s": ("dnnbench.esgd.edge", "time_to_accuracy_s"),
    "ESGDCompressor": ("dnnbench.compression.esgd", "ESGDCompressor"),
    "ESGDNoResidual": ("dnnbench.compression.esgd", "ESGDNoResidual"),
    "TopKESGDResidual": ("dnnbench.compression.esgd", "TopKESGDResidual"),
    "METHODS": ("dnnbench.compression.methods", "METHODS"),
    "MLP": ("dnnbench.esgd.models", "MLP"),
    "SmallCNN": ("dnnbench.esgd.models", "SmallCNN"),
    "PAPER_MNIST_ACCURACY": ("dnnbench.esgd.paper", "PAPER_MNIST_ACCURACY"),
    "compare_with_paper": ("dnnbench.esgd.paper", "compare_with_paper"),
    "make_compressor": ("dnnbench.compression.registry", "make_compressor"),
    "SparseUpdate": ("dnnbench.compression.sparse", "SparseUpdate"),
    "average": ("dnnbench.compression.sparse", "average"),
    "decompress": ("dnnbench.compression.sparse", "decompress"),
    "StudyConfig": ("dnnbench.esgd.study", "StudyConfig"),
    "StudyResult": ("dnnbench.esgd.study", "StudyResult"),
    "run_study": ("dnnbench.esgd.study", "run_study"),
    "study_runs": ("dnnbench.esgd.study", "study_runs"),
    "ENCODINGS": ("dnnbench.compression.wire", "ENCODINGS"),
    "bits_per_element": ("dnnbench.compression.wire", "bits_per_element"),
    "selection_ops_per_element": ("dnnbench.compression.wire", "selection_ops_per_element"),
    "union_density": ("dnnbench.compression.wire", "union_density"),
    "update_bits": ("dnnbench.compression.wire", "update_bits"),
    "method_bits_per_element": ("dnnbench.compression.wire", "method_bits_per_element"),
    "pull_bits_per_element": ("dnnbench.compression.wire", "pull_bits_per_element"),
    "QSGD": ("dnnbench.compression.quantise", "QSGD"),
    "SignSGD": ("dnnbench.compression.quantise", "SignSGD"),
    "QuantisedUpdate": ("dnnbench.compression.sparse", "QuantisedUpdate"),
    "ESGDHookState": ("dnnbench.compression.torch_hook", "ESGDHookState"),
    "esgd_hook": ("dnnbench.compression.torch_hook", "esgd_hook"),
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

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
