"""tests/security/ on sys.path: the fuzz test imports its corpus (corpus.py) and runs fuzz_driver.py."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
