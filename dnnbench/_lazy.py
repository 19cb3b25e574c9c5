"""Lazy package exports (PEP 562): names load from their modules on first use.

Keeps ``import dnnbench`` (and its subpackages) light: heavy modules load only when a name is used.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any

#: name -> (module, attribute); attribute None exports the module itself.
Exports = dict[str, tuple[str, str | None]]


def lazy_exports(package: str, exports: Exports) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` serving ``exports`` (each loaded once, then cached)."""

    def __getattr__(name: str) -> Any:
        try:
            module, attr = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        mod = import_module(module)
        value = mod if attr is None else getattr(mod, attr)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
