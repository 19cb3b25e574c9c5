"""The public Python API raises only the project's error for bad arguments, and spec mutations never
raise anything else: a bad value is a one-line SpecError, a valid one predicts without a warning."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import corpus
import numpy as np
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import dnnbench
from dnnbench import presets
from dnnbench.errors import SpecError
from dnnbench.face.state import WorkbenchState
from dnnbench.fileio import json_ready
from dnnbench.optimizer import best_by_budget, data_parallel_curve, model_parallel_curve
from dnnbench.specs import Cluster, Configuration, Dataset, Network

anything = st.one_of(
    st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30), st.binary(max_size=8), st.lists(st.integers(-5, 5), max_size=3),
    st.dictionaries(st.text(max_size=6), st.integers(-5, 5), max_size=3), st.just(object()),
    st.builds(lambda n: np.full(n, -1.0), st.integers(0, 3)), st.just(np.array([1.0, np.nan])),
)

CALLS: dict[str, Callable[[Any], Any]] = {
    "predict network": lambda v: dnnbench.predict(v, "adam-2014"),
    "predict cluster": lambda v: dnnbench.predict("lenet5", v),
    "predict dataset": lambda v: dnnbench.predict("lenet5", "adam-2014", v),
    "predict config": lambda v: dnnbench.predict("lenet5", "adam-2014", None, v),
    "evaluate W": lambda v: dnnbench.evaluate("lenet5", "adam-2014", workers_per_replica=v),
    "evaluate R": lambda v: dnnbench.evaluate("lenet5", "adam-2014", replicas=v),
    "evaluate P": lambda v: dnnbench.evaluate("lenet5", "adam-2014", ps_machines=v),
    "evaluate k_push": lambda v: dnnbench.evaluate("lenet5", "adam-2014", push_interval_samples=v),
    "evaluate k_pull": lambda v: dnnbench.evaluate("lenet5", "adam-2014", pull_interval_samples=v),
    "evaluate threads": lambda v: dnnbench.evaluate("lenet5", "adam-2014", threads=v),
    "evaluate overlap": lambda v: dnnbench.evaluate("lenet5", "adam-2014", overlap=v),
    "optimize budget": lambda v: dnnbench.optimize("lenet5", "adam-2014", None, v),
    "optimize top_k": lambda v: dnnbench.optimize("lenet5", "adam-2014", None, 8, top_k=v),
    "optimize w_max": lambda v: dnnbench.optimize("lenet5", "adam-2014", None, 8, w_max=v),
    "optimize network": lambda v: dnnbench.optimize(v, "adam-2014", None, 8),
    "model-parallel curve": lambda v: model_parallel_curve("lenet5", "adam-2014", None, v),
    "data-parallel curve": lambda v: data_parallel_curve("lenet5", "adam-2014", None, v),
    "Network.build": lambda v: Network.build(v),
    "Cluster.build": lambda v: Cluster.build(v),
    "Configuration.build": lambda v: Configuration.build(v),
    "load_network": lambda v: dnnbench.load_network(v),
    "load_cluster": lambda v: dnnbench.load_cluster(v),
    "load_dataset": lambda v: dnnbench.load_dataset(v),
    "describe": lambda v: dnnbench.describe(v),
    "totals": lambda v: dnnbench.totals(v),
}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(CALLS)), anything)
def test_bad_arguments_raise_only_spec_error(call: str, value: Any) -> None:
    if call == "data-parallel curve":
        assume(not (isinstance(value, int) and 64 < value <= 1024))  # valid, and slow to compute
    try:
        CALLS[call](value)
    except SpecError as err:
        assert "\n" not in str(err) and len(str(err)) < 500


def test_best_by_budget_states_its_limit() -> None:
    for bad in (0, 10**6, 1.5, "8"):
        try:
            best_by_budget("lenet5", "adam-2014", None, bad)
        except SpecError as err:
            assert "max_machines" in str(err)
        else:
            raise AssertionError(f"{bad!r} was accepted")


# ---- spec mutations ------------------------------------------------------------------------------

DOCUMENTS = {
    "network lenet5": (Network, presets.network("lenet5").to_dict()),
    "network alexnet": (Network, presets.network("alexnet").to_dict()),
    "cluster adam-2014": (Cluster, presets.cluster("adam-2014").to_dict()),
    "cluster edge-wifi": (Cluster, presets.cluster("edge-wifi").to_dict()),
    "dataset": (Dataset, presets.dataset("mnist").to_dict()),
    "configuration": (Configuration, Configuration(mode="sync", replicas=2, ps_machines=1).to_dict()),
    "workbench": (WorkbenchState, WorkbenchState.from_presets("lenet5", "edge-wifi").to_dict()),
}
values = st.one_of(st.sampled_from(corpus.MUTATIONS), anything.filter(lambda v: not isinstance(v, np.ndarray)),
                   st.floats(-1e12, 1e12), st.integers(-2**70, 2**70),
                   # the edges of what a spec holds (dnnbench.specs.io.MIN_MAGNITUDE, MAX_MAGNITUDE)
                   st.sampled_from([1e-30, 1e30, 2e-30, 9.9e29, 1e-15, 1e15, 2**62, 1]))


@st.composite
def mutation(draw: Any) -> tuple[str, Any]:
    name = draw(st.sampled_from(sorted(DOCUMENTS)))
    doc = DOCUMENTS[name][1]
    leaves = corpus._leaves(doc)
    branches = sorted({p[:i] for p in leaves for i in range(1, len(p))}, key=str)
    path = draw(st.sampled_from(leaves + branches))
    value = draw(values)
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        value = repr(value)
    return name, corpus._set(doc, path, value)


@st.composite
def numeric_mutation(draw: Any) -> tuple[str, Any]:
    """One numeric leaf set to another number of its kind, anywhere in the range a spec holds: most
    of these are valid specs, which then go through the model."""
    name = draw(st.sampled_from(sorted(DOCUMENTS)))
    doc = DOCUMENTS[name][1]
    numeric = [p for p in corpus._leaves(doc) if isinstance(_get(doc, p), int | float)
               and not isinstance(_get(doc, p), bool)]
    path = draw(st.sampled_from(numeric))
    if isinstance(_get(doc, path), int):
        value: Any = draw(st.integers(0, 2**40) | st.integers(0, 64))
    else:
        value = draw(st.just(0.0) | st.floats(-30.0, 30.0).map(lambda e: 10.0**e) | st.floats(0.0, 1.0))
    return name, corpus._set(doc, path, value)


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _use(spec: Any) -> None:
    """A valid spec in the model: a prediction and a small optimization, with no warning."""
    net, cl, ds, cfg = presets.network("lenet5"), presets.cluster("adam-2014"), None, None
    if isinstance(spec, Network):
        net = spec
    elif isinstance(spec, Cluster):
        cl = spec
    elif isinstance(spec, Dataset):
        ds = spec
    elif isinstance(spec, Configuration):
        cfg = spec
    else:
        net, cl, ds, cfg = spec.network, spec.cluster, spec.dataset, spec.configuration
    pred = dnnbench.predict(net, cl, ds, cfg)
    json.dumps(json_ready(pred.item()), allow_nan=False)
    dnnbench.optimize(net, cl, ds, 6, cfg, top_k=2)


def _builds(cls: Any, data: Any) -> bool:
    try:
        cls.build(data)
    except SpecError:
        return False
    return True


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutation() | numeric_mutation())
def test_spec_mutations_raise_only_spec_error(case: tuple[str, Any]) -> None:
    name, data = case
    cls = DOCUMENTS[name][0]
    event("built" if _builds(cls, data) else "refused")
    try:
        spec = cls.build(data)
        _use(spec)  # a mutation that is still valid: the model takes it without a warning
    except SpecError as err:  # refused when built, or e.g. no configuration fits the budget: one line
        assert "\n" not in str(err) and len(str(err)) < 500


def test_unbounded_and_extreme_results_print(tmp_path: Any) -> None:
    """A cluster at the edge of what the spec allows gives huge, tiny or unbounded numbers: the text
    output prints them (on the code before, an infinite result was a TypeError)."""
    from dnnbench import cli, fmt

    assert (fmt.count(float("inf")), fmt.nbytes(float("inf")), fmt.seconds(float("inf"))) == ("inf", "inf B", "inf")
    cl = presets.cluster("adam-2014")
    fast_nic = cl.worker_nic.evolve(upload_bits_per_s=1e30, download_bits_per_s=1e30, latency_s=0.0)
    fast = cl.evolve(worker=cl.worker.evolve(elem_time_s=1e-30, peak={"macs_per_s_per_core": 1e30,
                                                                        "efficiency_conv": 1.0,
                                                                        "efficiency_fc": 1.0}),
                     worker_nic=fast_nic, ps_nic=fast_nic)
    item = dnnbench.predict("lenet5", fast).item()
    assert item["samples_per_s"] > 1e20
    from dnnbench.specs.io import save

    path = str(save(fast, tmp_path / "fast.json"))
    assert cli.main(["predict", "--network", "lenet5", "--cluster", path]) == 0
    assert cli.main(["predict", "--network", "lenet5", "--cluster", path, "--json"]) == 0
