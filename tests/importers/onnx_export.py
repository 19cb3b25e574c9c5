"""Export helper for the ONNX tests: torch's TorchScript-based exporter, offline, on the CPU.

torch 2.13's default exporter (dynamo=True) needs the ``onnxscript`` package, which is not a dependency;
the legacy exporter (``dynamo=False``) needs nothing more and warns that it (and its ``training``
option) is deprecated: those warnings are silenced here, narrowly.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn


def export(module: nn.Module, input_shape: tuple[int, ...] | list[tuple[int, ...]], path: Path, training: bool = True,
           dtype: torch.dtype = torch.float32, input_names: list[str] | None = None) -> Path:
    """Write ``module`` as ONNX; ``training=True`` keeps Dropout nodes (an eval export drops them);
    ``dtype`` torch.long for token ids. A list of shapes: one input per shape (``input_names``)."""
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    with warnings.catch_warnings():
        # torch.onnx: "You are using the legacy TorchScript-based ONNX export..." and its helper's
        # "The feature will be removed..." (both DeprecationWarning; the dynamo exporter needs onnxscript).
        warnings.filterwarnings("ignore", message="You are using the legacy TorchScript-based ONNX export",
                                category=DeprecationWarning)
        warnings.filterwarnings("ignore", message="The feature will be removed", category=DeprecationWarning)
        # "Setting `training` to something other than default is deprecated": TRAINING keeps Dropout nodes.
        warnings.filterwarnings("ignore", message="Setting `training` to something other than default",
                                category=DeprecationWarning)
        # The TorchScript tracer warns that a size becomes a constant (F.local_response_norm's `numel() == 0`
        # check, a GPT's length `assert`, its `1 / math.sqrt(k.size(-1))`): true of any trace of one input
        # shape, which is what the importer reads.
        warnings.filterwarnings("ignore", message="Converting a tensor to a Python",
                                category=torch.jit.TracerWarning)
        # LocalResponseNorm exports as Pad/Slice/AveragePool ops whose strided Slice cannot be folded.
        warnings.filterwarnings("ignore", message="Constant folding - Only steps=1", category=UserWarning)
        # A training export of batch norm drops the update of its count of batches seen (a buffer).
        warnings.filterwarnings("ignore", message="ONNX Preprocess - Removing mutation", category=UserWarning)
        # Recurrent layers: a warning about batch sizes other than 1, written whatever the batch (it is 1 here).
        warnings.filterwarnings("ignore", message="Exporting a model to ONNX with a batch_size other than 1",
                                category=UserWarning)
        shapes = input_shape if isinstance(input_shape, list) else [input_shape]
        torch.onnx.export(module, tuple(torch.zeros(1, *s, dtype=dtype) for s in shapes), str(path), dynamo=False,
                          training=mode, do_constant_folding=False,  # it warns in training mode and on LRN's slices
                          input_names=input_names)
    return path
