"""The model's numbers are frozen: the golden table (tests/golden_table.py) and a saved
validation report replayed (``dnnbench validate --replay``) give what they gave when they were written.

A refactor of the model must keep every number to 1e-12 (relative); a deliberate change to the model
regenerates the table (``python3 tests/golden_table.py --write``) in the same commit and says why.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import golden_table
import pytest

from dnnbench.measure.report import replay

REL = 1e-12
REPORT = Path(__file__).with_name("data") / "replay-report.json"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if a == b:
        return True
    return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=REL, abs_tol=0.0)


def test_the_table_covers_every_preset_and_the_shared_host() -> None:
    keys = golden_table.load().keys()
    from dnnbench import presets

    assert {k.split("|")[0] for k in keys} == set(presets.names("networks"))
    assert {k.split("|")[1] for k in keys} == set(presets.names("clusters")) | {"shared-host"}
    devices = sum(presets.cluster(c).worker.accelerator is not None for c in presets.names("clusters"))
    assert devices >= 5
    assert len(keys) == len(presets.names("networks")) * ((len(presets.names("clusters")) + 1) * len(
        golden_table.CHOICES) + devices * len(golden_table.DEVICE_CHOICES))


def test_every_prediction_equals_the_golden_table() -> None:
    frozen, now = golden_table.load(), golden_table.table()
    assert frozen.keys() == now.keys()
    wrong = []
    for block, cols in frozen.items():
        assert cols.keys() == now[block].keys(), block
        for name, values in cols.items():
            for j, (a, b) in enumerate(zip(values, now[block][name], strict=True)):
                if not _same(a, b):
                    wrong.append(f"{block} {name} point {golden_table.POINTS[j]}: {a!r} -> {b!r}")
    assert not wrong, f"{len(wrong)} numbers changed, first: " + "; ".join(wrong[:5])


def test_the_table_is_not_degenerate() -> None:
    # Every bottleneck and both infeasibility reasons occur, so the table pins every branch's output.
    cols = list(golden_table.load().values())
    codes = {c for col in cols for c in col["bottleneck_code"]}
    assert codes == set(range(7))
    assert {c for col in cols for c in col["infeasible_code"]} >= {0, 1}


@pytest.mark.parametrize("row", range(16))
def test_replaying_a_saved_report_gives_its_predictions(row: int) -> None:
    report = json.loads(REPORT.read_text())
    saved, again = report["rows"][row], replay(report).rows[row]
    assert again["predicted_samples_per_s"] == pytest.approx(saved["predicted_samples_per_s"], rel=REL)
    assert again["predicted_phase_range_samples_per_s"] == pytest.approx(
        saved["predicted_phase_range_samples_per_s"], rel=REL)
    assert again["bottleneck"] == saved["bottleneck"]
