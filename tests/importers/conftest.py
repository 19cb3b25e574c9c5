"""The importer tests use tests/torch_nets.py (the presets in PyTorch) and this folder's helper modules."""

from __future__ import annotations

import sys
from pathlib import Path

for _folder in (Path(__file__).resolve().parents[1], Path(__file__).resolve().parent):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))
