"""Import networks written in other frameworks as dnnbench network specs (issue 10).

- :func:`dnnbench.importers.torch_import.from_torch`: a PyTorch ``nn.Module``, traced with torch.fx on
  the meta device (no weight memory is allocated).
- :func:`dnnbench.importers.onnx_import.from_onnx`: an ONNX file, read with the ``onnx`` package and its
  shape inference.

Both map the supported layers onto the spec's layer kinds (docs/importing.md) and check every layer's
shape against the traced or inferred one. This package imports neither torch nor onnx at import time.
"""
