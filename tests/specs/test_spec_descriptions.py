"""Every spec explains itself: a docstring on every spec, a description on every field, shown by
``dnnbench schema`` and as the workbench's tooltips."""

from __future__ import annotations

import inspect
import json

import pytest

import dnnbench.specs.cluster as cluster_specs
import dnnbench.specs.config as config_specs
import dnnbench.specs.layers as layer_specs
import dnnbench.specs.network as network_specs
import dnnbench.state as state_specs
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
