"""Specs: validation with field paths, unknown keys, JSON round trips, atomic saves, schemas."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dnnbench import presets
from dnnbench.errors import SpecError
from dnnbench.specs import Cluster, Configuration, Network, SharedHost
from dnnbench.specs.io import MAX_SPEC_BYTES, json_schema, load, save


def net(*layers: dict) -> dict:
    return {"name": "t", "layers": [{"kind": "input", "shape": [1, 5, 5]}, *layers]}


@pytest.mark.parametrize(
    ("data", "field", "needle"),
    [
        (net({"kind": "conv2d", "out_channels": 3, "kernel": 7}), "layers[1].kernel", "larger than the input"),
        (net({"kind": "conv2d", "out_channels": 3, "kernal": 3}), "layers[1].kernal", "unknown field"),
        (net({"kind": "conv2d", "out_channels": 0, "kernel": 3}), "layers[1].out_channels", "greater than 0"),
        (net({"kind": "conv2d", "out_channels": 2, "kernel": 3, "padding": -1}), "layers[1].padding", ">= 0"),
        (net({"kind": "cnv", "out_channels": 2}), "layers[1].kind", "did you mean conv"),
        (net({"kind": "qqqq"}), "layers[1].kind", "expected one of the"),
        (net({"kind": "gelu"}), "layers[1].kind", "gelu is a function of the activation kind"),
        (net({"kind": "pool", "window": 9}), "layers[1].window", "larger than the input"),
        (net({"kind": "fc", "out_features": "ten"}), "layers[1].out_features", "integer"),
        ({"name": "t", "layers": [{"kind": "fc", "out_features": 3}, {"kind": "fc", "out_features": 3}]},
         "layers[0].kind", "must be 'input'"),
        (net({"kind": "fc", "out_features": 3, "name": "a"}, {"kind": "fc", "out_features": 3, "name": "a"}),
         "layers[2].name", "unique"),
    ],
)
def test_invalid_network_names_the_field(data: dict, field: str, needle: str) -> None:
    with pytest.raises(SpecError) as info:
        Network.build(data)
    assert info.value.field == field
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_cluster_errors_name_the_field() -> None:
    base = presets.cluster("adam-2014").to_dict()
    base["worker_nic"]["upload_bits_per_s"] = 0
    with pytest.raises(SpecError) as info:
        Cluster.build(base)
    assert info.value.field == "worker_nic.upload_bits_per_s"
    base = presets.cluster("adam-2014").to_dict()
    base["worker_nic"]["bandwith_bits_per_s"] = 1e9
    with pytest.raises(SpecError, match=r"worker_nic\.bandwith_bits_per_s: unknown field .*allowed: "):
        Cluster.build(base)
    base = presets.cluster("adam-2014").to_dict()
    base["machines"] = -4
    with pytest.raises(SpecError, match=r"^machines: -4 "):
        Cluster.build(base)


def test_configuration_rules() -> None:
    with pytest.raises(SpecError, match="ps_machines"):
        Configuration(replicas=2, ps_machines=0)
    with pytest.raises(SpecError, match="workers_per_replica"):
        Configuration.build({"workers_per_replica": -1})


def test_specs_are_frozen_and_evolve_validates() -> None:
    cfg = Configuration()
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen-instance error
        cfg.replicas = 3  # type: ignore[misc]
    assert cfg.evolve(replicas=3, ps_machines=1).replicas == 3
    with pytest.raises(SpecError):
        cfg.evolve(replicas=3)  # no PS for three replicas


@pytest.mark.parametrize("name", presets.names("networks"))
def test_presets_round_trip_through_json(name: str, tmp_path: Path) -> None:
    spec = presets.network(name)
    path = save(spec, tmp_path / f"{name}.dnn.json")
    assert load(Network, path) == spec
    assert json.loads(path.read_text())["name"] == name


def test_every_preset_names_its_source() -> None:
    for kind, loader in (("networks", presets.network), ("clusters", presets.cluster), ("datasets", presets.dataset),
                         ("devices", presets.device)):
        for name in presets.names(kind):
            spec = loader(name)
            assert len(spec.source) > 20, f"{kind}/{name} has no source"
            if getattr(spec, "reconstructed", False):
                assert "reconstructed" in spec.source.lower()


def test_save_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "net.json"
    save(presets.network("lenet5"), path)
    before = path.read_text()

    def crash(*_args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(SpecError, match="cannot be written .disk full."):  # one line, never a traceback
        save(presets.network("alexnet"), path)
    assert path.read_text() == before  # the old file is whole
    assert [p.name for p in tmp_path.iterdir()] == ["net.json"]  # no temporary left behind


def test_file_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "layers": [')
    with pytest.raises(SpecError, match="not valid JSON"):
        load(Network, bad)
    with pytest.raises(SpecError, match="does not exist"):
        load(Network, tmp_path / "missing.json")
    huge = tmp_path / "huge.json"
    with huge.open("wb") as fh:  # a sparse 10 GB file: nothing is read
        fh.seek(10 * 2**30)
        fh.write(b"\0")
    with pytest.raises(SpecError, match="larger than the") as info:
        load(Network, huge)
    assert str(MAX_SPEC_BYTES // 2**20) in str(info.value)
    typo = tmp_path / "typo.yaml"
    typo.write_text("name: x\nlayers:\n  - {kind: input, shape: [1, 8, 8]}\n  - {kind: fc, out_featurs: 3}\n")
    with pytest.raises(SpecError, match=r"typo.yaml: layers\[1\]\.out_featurs: unknown field"):
        load(Network, typo)


def test_json_schema_is_exported() -> None:
    schema = json_schema(Network)
    assert schema["type"] == "object"
    assert "layers" in schema["properties"]
    assert json_schema(Cluster)["additionalProperties"] is False


def test_docs_list_every_preset_with_its_source() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "presets.md").read_text()
    for kind, loader in (("networks", presets.network), ("clusters", presets.cluster), ("datasets", presets.dataset),
                         ("devices", presets.device)):
        for name in presets.names(kind):
            assert f"`{name}`" in text and loader(name).source in text, f"docs/presets.md misses {kind}/{name}"


def test_older_files_with_flat_host_fields_read_into_shared_host() -> None:
    data = presets.cluster("modern-2025").to_dict()
    del data["shared_host"]
    old = {**data, "host_cores": 4, "host_background_threads": 0.5, "host_corun_slowdown": 0.1,
           "host_wakeup_delay_s": 1e-3}
    assert Cluster.build(old).shared_host == SharedHost(cores=4, background_threads=0.5, corun_slowdown=0.1,
                                                        wakeup_delay_s=1e-3)
    # Without host_cores the others never had an effect: separate machines, as before.
    assert Cluster.build({**data, "host_cores": None, "host_corun_slowdown": 0.3}).shared_host is None
    with pytest.raises(SpecError, match="shared_host"):
        Cluster.build({**old, "shared_host": {"cores": 2}})
    with pytest.raises(SpecError, match="shared_host.cores"):
        Cluster.build({**data, "host_cores": 0})
