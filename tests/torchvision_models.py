"""torchvision's model definitions, for counting and importing without weights.

The torchvision wheels on PyPI are CUDA builds: beside the CPU build of torch their compiled operators
(``torchvision::nms`` and friends) cannot load, and ``import torchvision`` fails while registering them.
The model definitions use none of those operators, so when the normal import fails this imports
``torchvision.models`` under a bare package object (without ``torchvision/__init__``). Where torchvision
imports normally (a matching CPU build), the normal import is used. torchvision itself must be
installed (it is in the ``test`` extra): a missing torchvision is an error, not a skip.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any


def models() -> Any:
    try:
        import torchvision.models as tm

        return tm
    except RuntimeError:  # the compiled operators of a CUDA build beside a CPU torch
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
    spec = importlib.util.find_spec("torchvision")
    assert spec is not None and spec.submodule_search_locations, "torchvision is not installed (test extra)"
    package = types.ModuleType("torchvision")
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    sys.modules["torchvision"] = package
    return importlib.import_module("torchvision.models")
