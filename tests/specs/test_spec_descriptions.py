"""Every spec explains itself: a docstring on every spec, a description on every field, shown by
``dnnbench schema`` and as the workbench's tooltips."""

from __future__ import annotations

import inspect
import json

import pytest

import dnnbench.face.state as state_specs
import dnnbench.specs.cluster as cluster_specs
import dnnbench.specs.config as config_specs
import dnnbench.specs.layers as layer_specs
import dnnbench.specs.network as network_specs
from dnnbench import cli
from dnnbench.specs import Configuration, Machine
from dnnbench.specs.base import Spec

SPECS = sorted({cls for mod in (cluster_specs, config_specs, layer_specs, network_specs, state_specs)
                for cls in vars(mod).values()
                if inspect.isclass(cls) and issubclass(cls, Spec) and cls is not Spec}, key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", SPECS, ids=lambda c: c.__name__)
def test_every_spec_and_field_is_described(cls: type[Spec]) -> None:
    if not cls.__name__.startswith("_"):
        assert (cls.__doc__ or "").strip(), f"{cls.__name__} has no docstring"
    for name, info in cls.model_fields.items():
        assert info.description and info.description[-1] == ".", f"{cls.__name__}.{name}"


@pytest.mark.parametrize("kind", ["network", "cluster", "dataset", "configuration"])
def test_the_schema_carries_the_descriptions(kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["schema", kind]) == 0
    schema = json.loads(capsys.readouterr().out)
    described = [p for d in [schema, *schema.get("$defs", {}).values()] for p in d.get("properties", {}).values()
                 if "description" in p]
    total = [p for d in [schema, *schema.get("$defs", {}).values()] for p in d.get("properties", {}).values()]
    assert total and len(described) == len(total)


def test_nested_field_descriptions_and_tooltips() -> None:
    from dnnbench.widgets import Workbench

    assert Machine.field_description("peak.macs_per_s_per_core") == \
        cluster_specs.PeakRate.model_fields["macs_per_s_per_core"].description
    wb = Workbench(network="lenet5", cluster="adam-2014")
    try:
        assert wb.cluster_panel.worker.fields["memory_bytes"].widget.tooltip == \
            Machine.model_fields["memory_bytes"].description
        assert wb.config_panel.fields["replicas"].widget.tooltip == Configuration.model_fields["replicas"].description
    finally:
        wb.close()


#: Fields that name or describe a spec for people, and the cluster's four parts (each a Machine or Nic
#: whose own fields are in the table): not symbols of the model.
NOT_SYMBOLS = {"name", "description", "source", "reconstructed", "worker", "worker_nic", "ps", "ps_nic"}
MODEL_SPECS = ("Machine", "Nic", "Cluster", "SharedHost", "Configuration", "Compression", "Dataset", "Network",
               "Accelerator", "PeakFlops", "Node", "IntraLink")


def _symbol_table() -> dict[str, set[str]]:
    """Spec fields named in docs/model.md §2: ``Class.field``, or a bare ``field`` after one in a cell."""
    import re
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "model.md").read_text()
    section = text[text.index("## 2. Symbols"):text.index("## 3.")]
    named: dict[str, set[str]] = {}
    for row in section.splitlines():
        if not row.startswith("|") or row.startswith("|---"):
            continue
        current = None
        for token in re.findall(r"`([A-Za-z0-9_.]+)`", row.rstrip("|").rsplit("|", 1)[-1]):
            if "." in token:
                current, _, field = token.partition(".")
            elif current is None:
                continue
            else:
                field = token
            named.setdefault(current, set()).add(field)
    return named


def test_the_docs_symbol_table_matches_the_specs() -> None:
    import dnnbench.specs as specs

    named = _symbol_table()
    for cls_name, fields in named.items():
        cls = getattr(specs, cls_name)
        assert fields <= set(cls.model_fields), f"docs/model.md §2 names {cls_name}.{fields - set(cls.model_fields)}"
    for cls_name in MODEL_SPECS:
        fields = set(getattr(specs, cls_name).model_fields) - NOT_SYMBOLS
        missing = fields - named.get(cls_name, set())
        assert not missing, f"docs/model.md §2 has no row for {cls_name}.{sorted(missing)}"
