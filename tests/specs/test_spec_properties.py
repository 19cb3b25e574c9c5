"""Property-based tests of specs and counts (Hypothesis)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from strategies import network_dicts

from dnnbench.counts import COUNT_FIELDS, totals
from dnnbench.errors import SpecError
from dnnbench.specs import Cluster, Configuration, Network


@given(network_dicts())
def test_counts_are_non_negative_and_sum_to_the_totals(data: dict[str, Any]) -> None:
    net = Network.build(data)
    t = totals(net)
    for field in COUNT_FIELDS:
        values = [getattr(c, field) for c in net.layer_counts]
        assert all(v >= 0 for v in values)
        assert sum(values) == getattr(t, field)
    # The first conv or fc layer sends its error down only for the input's own gradient, if asked for.
    first = next(c for c in net.layer_counts if c.macs_forward)
    assert (first.macs_backprop == 0) != net.layers[0].needs_gradient


@given(network_dicts())
def test_json_spec_json_is_the_identity(data: dict[str, Any]) -> None:
    net = Network.build(data)
    text = json.dumps(net.to_dict())
    again = Network.build(json.loads(text))
    assert again == net
    assert json.dumps(again.to_dict()) == text


def _mutate(draw: Any, value: Any) -> Any:
    """A random wrong value: wrong type, out of range, or an unknown key."""
    return draw(st.one_of(st.none(), st.text(max_size=5), st.integers(-10**6, 0), st.floats(allow_nan=True),
                          st.lists(st.integers(-3, 3), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(),
                                                                                   max_size=2)))


@st.composite
def broken_networks(draw: Any) -> dict[str, Any]:
    data = draw(network_dicts())
    layers = data["layers"]
    i = draw(st.integers(0, len(layers) - 1))
    layer = dict(layers[i])
    how = draw(st.sampled_from(["value", "unknown-key", "drop-kind", "top-level"]))
    if how == "value" and len(layer) > 1:
        key = draw(st.sampled_from(sorted(k for k in layer if k != "kind")))
        layer[key] = _mutate(draw, layer[key])
    elif how == "unknown-key":
        layer[draw(st.sampled_from(["kernal", "stride_", "outchannels", "Kind"]))] = 3
    elif how == "drop-kind":
        layer.pop("kind")
    else:
        data = {**data, draw(st.sampled_from(["layer", "nmae", "input"])): 1}
    layers = [*layers[:i], layer, *layers[i + 1:]]
    return {**data, "layers": layers}


@given(broken_networks())
def test_invalid_networks_raise_a_spec_error_naming_a_field(data: dict[str, Any]) -> None:
    try:
        Network.build(data)
    except SpecError as err:
        assert err.field and err.field != "<root>"
        assert "\n" not in str(err)
    # Some mutations stay valid (a kernel of 0 padding replaced by another valid value): fine.


@given(st.dictionaries(st.sampled_from(["workers_per_replica", "replicas", "ps_machines", "overlap", "mode",
                                        "threads", "push_interval_samples", "partitioning", "typo"]),
                       st.one_of(st.integers(-5, 5), st.floats(-1, 2), st.text(max_size=6), st.none()), max_size=4))
def test_configurations_either_build_or_name_the_field(data: dict[str, Any]) -> None:
    try:
        Configuration.build(data)
    except SpecError as err:
        assert err.field.split(".")[0] in set(data) | {"ps_machines"}


@given(st.floats(-1e12, 1e12), st.sampled_from(["upload_bits_per_s", "latency_s", "goodput_factor"]))
def test_cluster_nic_values_are_checked(value: float, field: str) -> None:
    from dnnbench import presets

    data = presets.cluster("adam-2014").to_dict()
    data["worker_nic"][field] = value
    try:
        Cluster.build(data)
    except SpecError as err:
        assert err.field == f"worker_nic.{field}"
