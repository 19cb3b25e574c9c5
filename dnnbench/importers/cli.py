"""``dnnbench import SOURCE -o OUT.dnn.json``: an ONNX file or a PyTorch module path to a network spec.

A plugin of :mod:`dnnbench.cli` (``register(subparsers)``). Bad input is a :class:`SpecError`: one line
on stderr, exit code 2.
"""

from __future__ import annotations

import argparse
import os
import re

from ..cliargs import whole_number_at_least
from ..errors import SpecError

_shape_part = whole_number_at_least(1)


def _shape_dims(text: str) -> list[int]:
    """One ``--input-shape`` argument: a dimension (``224``) or several at once, as the workbench takes
    them (``3,224,224``, ``3x224x224``); ``()`` is one number per sample (a class id, a diffusion step)."""
    if text.strip() in ("()", "[]"):
        return []
    parts = re.split(r"[,x×]", text.strip().strip("[]()"))
    if len(parts) > 1 and not all(p.strip() for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape: whole numbers >= 1, e.g. 3 224 224 or 3,224,224")
    return [_shape_part(p.strip()) for p in parts]


def cmd_import(args: argparse.Namespace) -> int:
    from .. import counts, fmt
    from ..fileio import check_output_file
    from ..specs.io import save

    check_output_file(args.output, "-o")
    source: str = args.source
    # One shape per --input-shape (repeated for a forward of several inputs).
    shapes = [tuple(d for dims in given for d in dims) for given in args.input_shape] if args.input_shape else []
    shape = shapes[0] if len(shapes) == 1 else None
    label_shape = tuple(d for dims in args.label_shape for d in dims) if args.label_shape else None
    if source.lower().endswith(".onnx") or os.path.isfile(source):  # (isfile never raises)
        from .onnx_import import from_onnx

        if args.labels is not None or label_shape is not None:
            raise SpecError.plain("--labels", "is for a PyTorch module whose forward takes the labels (an ONNX "
                                  "file's graph is what it exported)")
        if args.batch_axis:
            raise SpecError.plain("--batch-axis", "is for a PyTorch module (an ONNX file's inputs hold the batch "
                                  "first)")

        net = from_onnx(source, input_shape=shape if len(shapes) <= 1 else [list(x) for x in shapes], name=args.name)
    elif ":" in source:
        from .torch_import import from_torch, load_module

        if not shapes:
            raise SpecError.plain("--input-shape", "is required for a PyTorch module (one sample: C H W, C L or N; "
                                  "once per input for a forward of several)")
        if label_shape is not None and args.labels is None:
            raise SpecError.plain("--label-shape", "needs --labels (the forward parameter that takes the labels)")
        net = from_torch(load_module(source), shape if shape is not None else [list(x) for x in shapes],
                         name=args.name, labels=args.labels, label_shape=label_shape, batch_axis=args.batch_axis)
    else:
        raise SpecError("source", source, "is neither an .onnx file nor a PyTorch module path package.module:factory")
    out = save(net, args.output)
    t = counts.totals(net)
    inputs = len(net.input_layers)
    print(f"wrote {out}: {net.name}, {len(net.layers) - inputs} layers"
          + (f" after {inputs} inputs" if inputs > 1 else "") + f", {fmt.count(t.weights)} weights, "
          f"{fmt.count(t.macs_training)} MACs per training sample")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``dnnbench import`` to the ``dnnbench`` command."""
    p = subparsers.add_parser(
        "import", help="turn an ONNX file or a PyTorch module into a network spec file",
        description="Import SOURCE (an .onnx file, or a PyTorch module path package.module:factory built on the "
                    "meta device) as a dnnbench network spec (docs/importing.md).")
    p.add_argument("source", help="model.onnx, or package.module:factory (a function or nn.Module class)")
    p.add_argument("-o", "--output", required=True, help="the network spec file to write (JSON)")
    p.add_argument("--input-shape", nargs="+", type=_shape_dims, metavar="DIM", action="append",
                   help="one sample's input shape, C H W or C,H,W (C L: a 1-D signal; required for a PyTorch module; "
                        "overrides an ONNX input); once per input, in the forward's order, for a module of several "
                        "inputs; () for an input of one number per sample (a class id, a diffusion step)")
    p.add_argument("--name", help="the network's name (default: the class name or the file name)")
    p.add_argument("--labels", metavar="PARAMETER",
                   help="the forward's parameter that takes the training labels (nanoGPT's targets): the module is "
                        "traced with them, so its training branch and its loss are imported")
    p.add_argument("--label-shape", nargs="+", type=_shape_dims, metavar="DIM",
                   help="one sample's labels (default: one per token for token ids, one per sample otherwise)")
    p.add_argument("--batch-axis", type=int, choices=(0, 1), default=0,
                   help="the axis of the forward's inputs that holds the batch: 0 (N, ...), or 1 for a forward that "
                        "takes sequences first, (S, N) token ids or (S, N, D), as batch_first=False layers do")
    p.set_defaults(func=cmd_import)
