"""The device presets' data files (``dnnbench/presets/devices/*.json``), read by name: a cluster's
``worker`` or ``ps`` may name one instead of spelling the machine out (``"worker": "a100-80gb"``)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


def _folder() -> Any:
    return resources.files("dnnbench") / "presets" / "devices"


@cache
def device_names() -> tuple[str, ...]:
    """Names of the device presets, sorted."""
    return tuple(sorted(p.name[: -len(".json")] for p in _folder().iterdir() if p.name.endswith(".json")))


def device_data(name: str) -> dict[str, Any] | None:
    """The device preset ``name`` as a mapping (a fresh copy), or None when there is none."""
    if name not in device_names():
        return None
    data: dict[str, Any] = json.loads((_folder() / f"{name}.json").read_text(encoding="utf-8"))
    return data
