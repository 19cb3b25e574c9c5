"""Gradient compression: the methods, their implementations and their exact wire costs.

The core model prices a configuration's compression from :mod:`.methods` (names) and :mod:`.wire`
(bits per element on the wire, selection work); the compressors themselves (:func:`make_compressor`
in :mod:`.registry`, ESGD in :mod:`.esgd`, the baselines and quantisers) train for real in the
edge simulator and the study of :mod:`dnnbench.esgd`, and in PyTorch DDP (:mod:`.torch_hook`).
"""
