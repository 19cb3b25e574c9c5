"""PyTorch modules to network specs, by tracing with torch.fx on the meta device (issue 10).

The module is traced symbolically (``torch.fx.symbolic_trace``), then run once on a meta-device input
with meta copies of its weights (``torch.func.functional_call``), so every operation gets its real
output shape and no weight memory is allocated: a 2-billion-weight model imports in milliseconds. The
module itself is never changed. Supported operations and how they map: docs/importing.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import SpecError
from ._build import Shape, SpecBuilder, as_pair, pair_or_int

if TYPE_CHECKING:  # pragma: no cover - types only
    import torch

    from ..specs import Network


@dataclass
class _Op:
    """One traced operation: where it comes from, its constant arguments and its per-sample shapes."""

    name: str  # module path ("features.0") or fx node name ("flatten")
    origin: str  # for error messages: "features.3 (torch.nn.LSTM)"
    in_shape: Shape
    out_shape: Shape
    module: Any = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def arg(self, index: int, key: str, default: Any = None) -> Any:
        """A call argument by position (counting the data tensor as 0) or keyword."""
        if key in self.kwargs:
            return self.kwargs[key]
        return self.args[index] if index < len(self.args) else default


def _fail(op: _Op, text: str) -> SpecError:
    return SpecError.plain(op.origin, text)


# ---- handlers: one per operation family (a registry, not an if-chain; style guide 6) ------------------

def _conv2d(b: SpecBuilder, op: _Op) -> None:
    m = op.module
    if m.groups != 1:
        raise _fail(op, f"has groups={m.groups}; dnnbench conv2d layers are dense (groups=1)")
    if tuple(m.dilation) != (1, 1):
        raise _fail(op, f"has dilation={tuple(m.dilation)}; dnnbench conv2d layers have dilation 1")
    padding = m.padding
    if isinstance(padding, str):  # 'valid' or 'same' (stride 1): symmetric only for odd kernels
        if padding == "valid":
            padding = (0, 0)
        else:
            if any(k % 2 == 0 for k in m.kernel_size):
                raise _fail(op, f"has padding='same' with the even kernel {tuple(m.kernel_size)}, which pads "
                            "asymmetrically; dnnbench padding is symmetric")
            padding = tuple((k - 1) // 2 for k in m.kernel_size)
    b.add({"kind": "conv2d", "out_channels": int(m.out_channels), "kernel": pair_or_int(m.kernel_size),
           "stride": pair_or_int(m.stride), "padding": pair_or_int(padding), "bias": m.bias is not None},
          op.out_shape, op.name, op.origin)


def _linear(b: SpecBuilder, op: _Op) -> None:
    if len(op.in_shape) != 1:
        raise _fail(op, f"gets a per-sample input of shape {list(op.in_shape)}; dnnbench fc layers take a vector "
                    "(flatten before it)")
    b.add({"kind": "fc", "out_features": int(op.module.out_features), "bias": op.module.bias is not None},
          op.out_shape, op.name, op.origin)


def _pool_module(mode: str) -> Callable[[SpecBuilder, _Op], None]:
    def handle(b: SpecBuilder, op: _Op) -> None:
        m = op.module
        if mode == "max" and as_pair(m.dilation) != (1, 1):
            raise _fail(op, f"has dilation={m.dilation}; dnnbench pooling has dilation 1")
        window = as_pair(m.kernel_size)
        stride = as_pair(m.stride if m.stride is not None else m.kernel_size)
        b.pool(mode, window, stride, as_pair(m.padding), op.out_shape, op.name, op.origin)
    return handle


def _pool_function(mode: str) -> Callable[[SpecBuilder, _Op], None]:
    def handle(b: SpecBuilder, op: _Op) -> None:
        window = op.arg(1, "kernel_size")
        stride = op.arg(2, "stride") or window  # F.max_pool2d's stride defaults to the kernel
        if mode == "max" and as_pair(op.arg(4, "dilation", 1)) != (1, 1):
            raise _fail(op, "has dilation > 1; dnnbench pooling has dilation 1")
        b.pool(mode, as_pair(window), as_pair(stride), as_pair(op.arg(3, "padding", 0)), op.out_shape, op.name,
               op.origin)
    return handle


def _adaptive(mode: str) -> Callable[[SpecBuilder, _Op], None]:
    return lambda b, op: b.adaptive_pool(mode, op.in_shape, op.out_shape, op.name, op.origin)


def _activation(function: str) -> Callable[[SpecBuilder, _Op], None]:
    return lambda b, op: b.activation(function, op.out_shape, op.name, op.origin)


def _dropout(b: SpecBuilder, op: _Op) -> None:
    p = op.module.p if op.module is not None else op.arg(1, "p", 0.5)
    b.add({"kind": "dropout", "p": float(p)}, op.out_shape, op.name, op.origin)


def _lrn(b: SpecBuilder, op: _Op) -> None:
    size = op.module.size if op.module is not None else op.arg(1, "size")
    b.add({"kind": "lrn", "size": int(size)}, op.out_shape, op.name, op.origin)


def _batchnorm(b: SpecBuilder, op: _Op) -> None:
    b.add({"kind": "batchnorm"}, op.out_shape, op.name, op.origin)


def _flatten(b: SpecBuilder, op: _Op) -> None:
    b.flatten(op.in_shape, op.out_shape, op.name, op.origin)


def _softmax(b: SpecBuilder, op: _Op) -> None:
    b.add({"kind": "softmax"}, op.out_shape, op.name, op.origin)


def _identity(b: SpecBuilder, op: _Op) -> None:
    if op.in_shape != op.out_shape:  # pragma: no cover - identities keep the shape
        raise _fail(op, f"changes the shape {list(op.in_shape)} to {list(op.out_shape)}")


def _registries() -> tuple[dict[type, Any], dict[Any, Any], dict[str, Any]]:
    """(module types, functions, tensor methods) -> handler; built on first use (torch loads lazily)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    modules: dict[type, Any] = {
        nn.Conv2d: _conv2d, nn.Linear: _linear,
        nn.MaxPool2d: _pool_module("max"), nn.AvgPool2d: _pool_module("avg"),
        nn.AdaptiveAvgPool2d: _adaptive("avg"), nn.AdaptiveMaxPool2d: _adaptive("max"),
        nn.ReLU: _activation("relu"), nn.Tanh: _activation("tanh"), nn.Sigmoid: _activation("sigmoid"),
        nn.Dropout: _dropout, nn.Dropout1d: _dropout, nn.Dropout2d: _dropout,
        nn.LocalResponseNorm: _lrn, nn.BatchNorm2d: _batchnorm, nn.BatchNorm1d: _batchnorm,
        nn.Flatten: _flatten, nn.Softmax: _softmax, nn.LogSoftmax: _softmax, nn.Identity: _identity,
    }
    functions: dict[Any, Any] = {
        torch.flatten: _flatten,
        torch.relu: _activation("relu"), F.relu: _activation("relu"),
        torch.tanh: _activation("tanh"), F.tanh: _activation("tanh"),
        torch.sigmoid: _activation("sigmoid"), F.sigmoid: _activation("sigmoid"),
        F.max_pool2d: _pool_function("max"), F.avg_pool2d: _pool_function("avg"),
        F.adaptive_avg_pool2d: _adaptive("avg"), F.adaptive_max_pool2d: _adaptive("max"),
        F.dropout: _dropout, F.local_response_norm: _lrn,
        torch.softmax: _softmax, F.softmax: _softmax, torch.log_softmax: _softmax, F.log_softmax: _softmax,
    }
    methods: dict[str, Any] = {
        "flatten": _flatten, "view": _flatten, "reshape": _flatten,
        "relu": _activation("relu"), "relu_": _activation("relu"), "tanh": _activation("tanh"),
        "sigmoid": _activation("sigmoid"), "softmax": _softmax, "log_softmax": _softmax,
        "contiguous": _identity,
    }
    return modules, functions, methods


# ---- tracing -------------------------------------------------------------------------------------

def _meta(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor) and value.device.type != "meta":
        return torch.empty_like(value, device="meta")
    return value


def _trace(module: torch.nn.Module, input_shape: Shape) -> tuple[Any, dict[Any, Any]]:
    """The fx graph module and the meta value of every node (weights are meta copies: no memory)."""
    import torch
    from torch import fx
    from torch.func import functional_call

    try:
        gm = fx.symbolic_trace(module)
    except Exception as exc:  # fx raises many types for data-dependent control flow and the like
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise SpecError.plain(type(module).__name__, f"cannot be traced with torch.fx ({type(exc).__name__}: "
                              f"{first[:160]}); dnnbench imports chains of supported layers") from None

    values: dict[Any, Any] = {}

    class MetaRun(fx.Interpreter):
        def run_node(self, n: fx.Node) -> Any:
            out = super().run_node(n)
            values[n] = out
            return out

        def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
            sub = self.fetch_attr(target)
            state = {k: _meta(v) for k, v in (*sub.named_parameters(), *sub.named_buffers())}
            return functional_call(sub, state, args, kwargs)

        def get_attr(self, target: Any, args: Any, kwargs: Any) -> Any:
            return _meta(super().get_attr(target, args, kwargs))

    x = torch.empty((1, *input_shape), device="meta")
    try:
        with torch.no_grad():
            MetaRun(gm).run(x)
    except SpecError:
        raise
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise SpecError(f"{type(module).__name__} input_shape", list(input_shape),
                        f"does not fit the module ({type(exc).__name__}: {first[:200]})") from None
    return gm, values


def _type_name(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    mod = cls.__module__
    if mod.startswith("torch.nn.modules"):
        mod = "torch.nn"
    return f"{mod}.{cls.__qualname__}"


def _target_name(node: Any) -> str:
    target = node.target
    if isinstance(target, str):
        return f"Tensor.{target}" if node.op == "call_method" else target
    mod = getattr(target, "__module__", None) or "torch"
    return f"{mod}.{getattr(target, '__name__', repr(target))}"


def from_torch(module: torch.nn.Module, input_shape: tuple[int, ...] | list[int], name: str | None = None,
               description: str | None = None) -> Network:
    """A network spec from a PyTorch module, by tracing it (docs/importing.md).

    ``input_shape`` is one sample's shape, ``(C, H, W)`` or ``(N,)``. Layer names are module paths
    (``features.0``); ``name`` defaults to the class name in lower case. An unsupported layer, a branch
    (skip connection) or an option dnnbench does not model is a :class:`SpecError` naming the module path
    and its type. The module is not modified and no weight memory is allocated (meta device).
    """
    import torch

    if not isinstance(module, torch.nn.Module):
        raise SpecError("module", type(module).__name__, "is not a torch.nn.Module")
    shape = tuple(int(d) for d in input_shape)
    builder = SpecBuilder(shape)
    gm, values = _trace(module, shape)
    modules, functions, methods = _registries()

    def per_sample(node: Any) -> Shape:
        t = values[node]
        if t.dim() == 0 or t.shape[0] != 1:
            raise SpecError.plain(describe(node), f"changes the batch dimension (output shape {list(t.shape)})")
        return tuple(int(d) for d in t.shape[1:])

    def describe(node: Any) -> str:
        if node.op == "call_module":
            return f"{node.target} ({_type_name(gm.get_submodule(node.target))})"
        return f"{node.name} ({_target_name(node)})"

    current = None
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            if current is not None:
                raise SpecError.plain(describe(node), "is a second input; dnnbench networks have one input")
            current = node
            continue
        if node.op == "get_attr":
            continue
        data_in = [a for a in node.all_input_nodes if a.op != "get_attr" and isinstance(values.get(a), torch.Tensor)]
        if node.op == "output":
            if data_in != [current]:
                raise SpecError.plain("output", f"{type(module).__name__} must return the single tensor of its "
                                      "last layer")
            break
        is_module = node.op == "call_module"
        if not data_in or (not is_module and not isinstance(values.get(node), torch.Tensor)):
            continue  # x.size(0), x.dim(), constants: no layer
        if data_in != [current]:
            others = ", ".join(a.name for a in data_in if a is not current) or current.name
            raise SpecError.plain(describe(node), f"combines or reuses earlier tensors ({others}): a branch or "
                                  "skip connection; dnnbench networks are chains of layers")
        if is_module:
            handler = modules.get(type(gm.get_submodule(node.target)))
        elif node.op == "call_function":
            handler = functions.get(node.target)
        else:
            handler = methods.get(node.target)
        if handler is None:
            raise SpecError.plain(describe(node), "is not supported by dnnbench's importer; supported: Conv2d, Linear, "
                                  "MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, ReLU, Tanh, Sigmoid, Dropout, "
                                  "LocalResponseNorm, BatchNorm2d, Flatten, Softmax (docs/importing.md)")
        if not isinstance(values.get(node), torch.Tensor):  # pragma: no cover - supported ops return tensors
            raise SpecError.plain(describe(node), "does not return a single tensor")
        op = _Op(name=node.target if is_module else node.name, origin=describe(node), in_shape=per_sample(current),
                 out_shape=per_sample(node), module=gm.get_submodule(node.target) if is_module else None,
                 args=tuple(node.args), kwargs=dict(node.kwargs))
        handler(builder, op)
        current = node

    cls = type(module)
    qual = f"{cls.__module__}.{cls.__qualname__}"
    return builder.build(
        name or cls.__name__.lower(),
        description if description is not None else f"Imported from the PyTorch module {qual}.",
        f"Imported by dnnbench.from_torch from {qual} (torch.fx trace on the meta device, "
        f"input {list(shape)}).",
    )


def load_module(path: str) -> torch.nn.Module:
    """The module made by ``package.module:factory`` (a function or a class), built on the meta device.

    Building under ``torch.device("meta")`` allocates no weights, so the 2-billion-weight study network
    costs nothing; a factory that loads weights from a file does not work this way (and need not: counts
    only need the shapes).
    """
    import torch

    if path.count(":") != 1 or not all(path.split(":")):
        raise SpecError("source", path, "is not a module path of the form package.module:factory")
    mod_name, attr = path.split(":")
    try:
        obj: Any = importlib.import_module(mod_name)
    except ImportError as exc:
        raise SpecError("source", path, f"cannot be imported: {exc}") from None
    except Exception as exc:
        raise SpecError("source", path, f"fails when imported: {type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise SpecError("source", path, f"has no attribute {part!r} in {mod_name}")
        obj = getattr(obj, part)
    if not isinstance(obj, torch.nn.Module):
        if not callable(obj):
            raise SpecError("source", path, "is neither a torch.nn.Module nor a callable that makes one")
        try:
            with torch.device("meta"):
                obj = obj()
        except Exception as exc:
            raise SpecError("source", path, f"fails when called: {type(exc).__name__}: {exc}") from None
    if not isinstance(obj, torch.nn.Module):
        raise SpecError("source", path, f"made a {type(obj).__name__}, not a torch.nn.Module")
    return obj


__all__ = ["from_torch", "load_module"]
