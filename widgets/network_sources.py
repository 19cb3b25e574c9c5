"""Where the network panel gets a whole network from: a preset name, a spec file (JSON or YAML), an ONNX
file, a PyTorch module path ``package.module:factory``, or an uploaded file (spec or ONNX).

ONNX goes through :func:`dnnbench.from_onnx`, PyTorch through
:func:`dnnbench.importers.torch_import.load_module` and :func:`dnnbench.from_torch` (docs/importing.md);
both are imported on first use only. Every failure is one :class:`~dnnbench.errors.SpecError` line,
which the panel shows next to the field that caused it (docs/workbench.md, "Panels").
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from dnnbench import presets
from dnnbench.errors import SpecError
from dnnbench.specs import Network
from dnnbench.specs.io import parse_text as parse_document

from .base import parse_text
from .confine import check_torch_allowed, confine

SPEC_SUFFIXES = (".json", ".yaml", ".yml")
ONNX_SUFFIX = ".onnx"
#: What the upload widget accepts.
UPLOAD_ACCEPT = ",".join((*SPEC_SUFFIXES, ONNX_SUFFIX))
#: The input-shape field's field name in error messages.
SHAPE_FIELD = "input shape"
#: The labels field's field name in error messages.
LABELS_FIELD = "labels"
#: The batch-axis field's field name in error messages.
BATCH_AXIS_FIELD = "batch axis"


def parse_shape(text: str) -> tuple[int, ...] | list[tuple[int, ...]] | None:
    """One sample's input shape from ``3,224,224`` / ``3x224x224`` / ``3 224 224`` (``''``: none given);
    a forward of several inputs takes one shape per input, separated by ``;`` (``64; 48``): a list;
    ``()`` is an input of one number per sample (``100; ()``: a conditional generator's class id)."""
    if text.strip() in ("()", "[]"):
        return ()
    if ";" in text:
        shapes = [parse_shape(part) for part in text.split(";")]
        if any(s is None for s in shapes):
            raise SpecError(SHAPE_FIELD, text.strip(), "has an empty shape between ';' (one shape per input, "
                                                       "e.g. 3,32,32; 3,32,32)")
        return [s for s in shapes if isinstance(s, tuple)]
    value = parse_text(text)
    if value is None:
        return None
    dims = value if isinstance(value, list) else [value]
    if not dims or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims):
        raise SpecError(SHAPE_FIELD, text.strip(), "is not one sample's shape in whole numbers >= 1, "
                                                   "e.g. 3,224,224 (C,H,W) or 784")
    return tuple(dims)


def kind_of(source: str) -> str:
    """``"onnx"``, ``"torch"`` or ``"spec"`` (a preset name or a spec file) for a source text."""
    s = source.strip()
    low = s.lower()
    if low.endswith(ONNX_SUFFIX):
        return "onnx"
    if low.endswith(SPEC_SUFFIXES) or s in presets.names("networks"):
        return "spec"
    if ":" in s and not os.path.exists(s):  # (never raises, even for text too long to be a file name)
        return "torch"
    return "spec"


def network_from_source(source: str, input_shape: tuple[int, ...] | list[tuple[int, ...]] | None = None,
                        labels: str = "", batch_axis: int = 0) -> Network:
    """The network named by ``source`` (see the module doc). ``input_shape`` is required for PyTorch and
    overrides an ONNX file's own input shape; a spec file has its own. ``labels`` names a PyTorch
    forward's parameter that takes the training labels (``targets``: its training branch and loss are
    imported); empty: none. ``batch_axis`` is the axis of a PyTorch forward's inputs that holds the
    batch (1: sequences first, ``(S, N, ...)``)."""
    s = source.strip()
    if not s:
        raise SpecError.plain("source", "is empty: give a preset, a spec file, an .onnx file or "
                                        "package.module:factory")
    kind = kind_of(s)
    if batch_axis and kind != "torch":
        raise SpecError.plain(BATCH_AXIS_FIELD, "is for a PyTorch module whose forward takes sequences first; set it "
                                                "to 0 for a preset, a spec file or an ONNX file")
    if kind == "onnx":
        from dnnbench.importers.onnx_import import from_onnx

        return from_onnx(confine(s, "source"), input_shape=input_shape)
    if kind == "torch":
        check_torch_allowed(s)
        if input_shape is None:
            raise SpecError.plain(SHAPE_FIELD, "is required for a PyTorch module (one sample: C,H,W or N)")
        from dnnbench.importers.torch_import import from_torch, load_module

        module = load_module(s)
        try:
            return from_torch(module, input_shape, labels=labels.strip() or None, batch_axis=batch_axis)
        except SpecError as err:
            if err.field == "labels":
                raise SpecError.plain(LABELS_FIELD, str(err).split(": ", 1)[1]) from None
            if err.field == "batch_axis":
                raise SpecError.plain(BATCH_AXIS_FIELD, str(err).split(": ", 1)[1]) from None
            raise
    if labels.strip():
        raise SpecError.plain(LABELS_FIELD, "is for a PyTorch module whose forward takes the labels; clear it "
                                            "for a preset, a spec file or an ONNX file")
    return presets.network(s if s in presets.names("networks") else confine(s, "source"))


def network_from_upload(name: str, content: bytes, input_shape: tuple[int, ...] | list[tuple[int, ...]] | None = None
                        ) -> Network:
    """The network in an uploaded file: a spec (JSON/YAML) or an ONNX model (written to a temporary file
    of the same name, so the importer's checks and its messages apply; the name is the file's stem)."""
    low = name.lower()
    if low.endswith(ONNX_SUFFIX):
        from dnnbench.importers.onnx_import import from_onnx


        with tempfile.TemporaryDirectory(prefix="dnnbench-upload-") as tmp:
            path = Path(tmp) / Path(name).name
            path.write_bytes(content)
            try:
                return from_onnx(path, input_shape=input_shape)
            except SpecError as err:
                raise _renamed(err, str(path), name) from None
    if not low.endswith(SPEC_SUFFIXES):
        raise SpecError("upload", name, f"is neither a spec file ({', '.join(SPEC_SUFFIXES)}) nor an ONNX file")
    text = content.decode("utf-8", errors="replace")
    return Network.build(parse_document(text, yaml_syntax=low.endswith((".yaml", ".yml")), where=name))


def _renamed(err: SpecError, temp_path: str, name: str) -> SpecError:
    """``err`` with the temporary file's path replaced by the uploaded file's name."""
    value: Any = err.value
    if isinstance(value, str):
        value = value.replace(temp_path, name)
    out = SpecError.plain(err.field, str(err).split(": ", 1)[1].replace(temp_path, name))
    out.value = value
    return out


__all__ = ["LABELS_FIELD", "UPLOAD_ACCEPT", "kind_of", "network_from_source", "network_from_upload", "parse_shape"]
