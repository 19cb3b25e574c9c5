"""ESGD and gradient-compression baselines, a simulated edge cluster that trains, and the study.

ESGD is Tao and Li, "eSGD: Communication Efficient Distributed Deep Learning on the Edge" (USENIX
HotEdge 2018). Only its abstract is available: the algorithm here is *reconstructed* (see
docs/esgd.md §2). Everything is numpy; no deep-learning framework is imported.

- compressors: :func:`make_compressor` (``METHODS``), :class:`Compressor`, :class:`SparseUpdate`;
- wire cost: :mod:`dnnbench.esgd.wire` (``bits_per_element``, ``union_density``,
  ``selection_ops_per_element``, ``ENCODINGS``);
- training: :class:`ClusterConfig`, :func:`simulate`, :class:`TrainingRun`;
- edge timing: :class:`EdgeLink`, :func:`time_to_accuracy_s`;
- the study: :class:`StudyConfig`, :func:`run_study`, :mod:`dnnbench.esgd.analysis`.
"""

from __future__ import annotations

from . import wire
from .baselines import DenseSGD, RandomK, ThresholdSGD, TopKEF
from .cluster import ClusterConfig, TrainingRun, simulate
from .compressor import Compressor
from .data import Dataset, load_dataset
from .dgc import DGCLite
from .edge import EdgeLink, round_times_s, rounds_to_accuracy, time_to_accuracy_s
from .esgd import ESGDCompressor, ESGDNoResidual, TopKESGDResidual
from .methods import METHODS
from .models import MLP, SmallCNN
from .paper import PAPER_MNIST_ACCURACY, compare_with_paper
from .registry import make_compressor
from .sparse import SparseUpdate, average, decompress
from .study import StudyConfig, StudyResult, run_study, study_runs
from .wire import ENCODINGS, bits_per_element, selection_ops_per_element, union_density, update_bits

__all__ = [
    "ENCODINGS", "METHODS", "MLP", "PAPER_MNIST_ACCURACY", "ClusterConfig", "Compressor", "DGCLite", "Dataset",
    "DenseSGD", "ESGDCompressor", "ESGDNoResidual", "EdgeLink", "RandomK", "SmallCNN", "SparseUpdate",
    "StudyConfig", "StudyResult", "ThresholdSGD", "TopKEF", "TopKESGDResidual", "TrainingRun", "average",
    "bits_per_element", "compare_with_paper", "decompress", "load_dataset", "make_compressor",
    "round_times_s", "rounds_to_accuracy", "run_study", "selection_ops_per_element", "simulate",
    "study_runs", "time_to_accuracy_s", "union_density", "update_bits", "wire",
]
