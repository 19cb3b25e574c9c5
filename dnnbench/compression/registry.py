"""Build a compressor by method name (one of :data:`METHODS`)."""

from __future__ import annotations

from typing import Any

from .. import checks as v
from .baselines import DenseSGD, RandomK, ThresholdSGD, TopKEF
from .compressor import Compressor
from .dgc import DGCLite
from .esgd import ESGDCompressor, ESGDNoResidual, TopKESGDResidual
from .methods import METHODS, NO_DROP_RATIO_METHODS
from .quantise import QSGD, SignSGD

_CLASSES: dict[str, type[Compressor]] = {
    cls.method: cls
    for cls in (DenseSGD, TopKEF, RandomK, ThresholdSGD, DGCLite, ESGDCompressor, ESGDNoResidual,
                TopKESGDResidual, SignSGD, QSGD)
}
if tuple(_CLASSES) != METHODS:  # keep the name list and the implementations in step
    raise ImportError(f"dnnbench.esgd: METHODS {METHODS} and implementations {tuple(_CLASSES)} differ")


def make_compressor(method: str, drop_ratio: float | None = None, **options: Any) -> Compressor:
    """A fresh compressor for ``method``; ``options`` are the class's keyword arguments.

    ``drop_ratio`` (the fraction of coordinates not sent, k = ceil((1 - drop) d)) is required by
    every method except "dense", "threshold" (whose density follows ``tau``) and the quantisers
    "signsgd" and "qsgd" (which send every coordinate).
    """
    v.choice("method", method, METHODS)
    cls = _CLASSES[method]
    if drop_ratio is None and method not in NO_DROP_RATIO_METHODS:
        raise v.fail("drop_ratio", None, f"is required by method {method!r}: a number in [0, 1)")
    try:
        return cls(drop_ratio, **options)  # type: ignore[call-arg]
    except TypeError as exc:  # an unknown option: name it
        raise v.fail("options", sorted(options), f"are not all accepted by {cls.__name__}: {exc}") from None


def compressor_class(method: str) -> type[Compressor]:
    """The class implementing ``method``."""
    return _CLASSES[v.choice("method", method, METHODS)]


__all__ = ["compressor_class", "make_compressor"]
