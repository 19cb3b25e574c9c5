"""Parameter checking before any kernel starts: names, types, spec values (docs/studies.md)."""

from __future__ import annotations

import ast
import json

import pytest

from dnnbench.errors import SpecError
from dnnbench.studies import params, registry
from dnnbench.studies.runner import prepare

SHIPPED = ("mnist", "imagenet22k", "allreduce")


@pytest.mark.parametrize(("value", "type_name", "ok"), [
    (3, "int", True), (3.0, "int", False), (True, "int", False), (3, "float", True), ("x", "float", False),
    ([8, 16], "list[int]", True), ([8, "a"], "list[int]", False), (8, "list[int]", False),
    ([0.5, 1], "list[float]", True), ("adam-2014", "Union[str, dict]", True), ({"a": 1}, "Union[str, dict]", True),
    (3, "Union[str, dict]", False), (None, "Optional[int]", True), (2, "Optional[int]", True),
    ("s", "str", True), (1, "str", False), ({}, "dict", True), ("anything", "None", True),
])
def test_matches(value, type_name, ok):  # type: ignore[no-untyped-def]
    assert params.matches(value, type_name) is ok


def test_shipped_studies_are_found():
    found = registry.available()
    for name in SHIPPED:
        assert found[name].name == f"{name}_study.ipynb"
    assert registry.find("mnist")[0] == "mnist"
    with pytest.raises(SpecError, match="is not a study; expected one of"):
        registry.find("nosuch")


@pytest.mark.parametrize("name", SHIPPED)
def test_every_parameter_is_declared_typed_and_its_default_fits(name):  # type: ignore[no-untyped-def]
    nb_path = registry.available()[name]
    nb = json.loads(nb_path.read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))
    source = "".join(cell["source"])
    assigned = [line.split(":")[0] for line in source.splitlines() if line and line[0].isalpha()
                and ("=" in line) and not line.startswith(("from ", "import "))]
    declared = params.declared(nb_path)
    assert list(declared) == assigned  # papermill parsed every line (a second "=" would drop one)
    for p in declared.values():
        assert p.type_name != "None", f"{p.name} has no annotation"
        assert p.help, f"{p.name} has no comment"
        assert params.matches(ast.literal_eval(p.default), p.type_name), p.describe()
    assert params.RESULTS_PARAMETER in declared and "seed" in declared


def test_parse_cli_values():
    d = params.declared(registry.available()["mnist"])
    parse = lambda k, t: params.parse_cli_value("mnist", d, k, t)  # noqa: E731
    assert parse("budgets", "8,16,32") == [8, 16, 32]
    assert parse("budgets", "[8, 16]") == [8, 16]
    assert parse("budgets", "16") == [16]
    assert parse("max_workers", "12") == 12
    assert parse("nic_factors", "0.5,1,2") == [0.5, 1, 2]
    assert parse("cluster", "adam-2014") == "adam-2014"
    assert parse("cluster", "my cluster.yaml") == "my cluster.yaml"
    assert parse("cluster", "{name: x}") == {"name": "x"}
    assert parse("configuration", "{overlap: 0.5}") == {"overlap": 0.5}


@pytest.mark.parametrize(("values", "message"), [
    ({"foo": 1}, "parameter foo: 1 is not a parameter of study mnist; expected one of network, cluster"),
    ({"max_workers": 2.5}, "parameter max_workers: 2.5 is not valid: expected int"),
    ({"budgets": [8, "x"]}, "parameter budgets: [8, 'x'] is not valid: expected list[int]"),
    ({"results_path": "x.json"}, "is set by the study runner"),
    ({"cluster": "nope"}, "parameter cluster: 'nope' is neither a preset"),
    ({"cluster": {"name": "x"}}, "parameter cluster.worker: is missing"),
    ({"configuration": {"replicas": 0}}, "parameter configuration.replicas: 0 is not valid"),
])
def test_wrong_parameters_fail_before_a_kernel(values, message):  # type: ignore[no-untyped-def]
    with pytest.raises(SpecError) as err:
        prepare("mnist", values)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_relative_spec_path_is_made_absolute(tmp_path):  # type: ignore[no-untyped-def]
    from dnnbench import presets
    from dnnbench.specs.io import save

    save(presets.cluster("adam-2014").evolve(name="mine"), tmp_path / "mine.json")
    values = params.check_specs({"cluster": "mine.json"}, base_dir=tmp_path)
    assert values["cluster"] == str((tmp_path / "mine.json").resolve())


def test_cli_bad_parameter_is_one_line_and_exit_2(capsys, monkeypatch):  # type: ignore[no-untyped-def]
    import papermill

    from dnnbench.cli import main

    def no_kernel(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("a notebook was executed for a bad parameter")

    monkeypatch.setattr(papermill, "execute_notebook", no_kernel)
    assert main(["study", "mnist", "-p", "max_workers", "many"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dnnbench study: parameter max_workers: 'many' is not valid: expected int")
    assert "\n" not in err
    assert main(["study", "mnist", "-p", "nope", "1"]) == 2
    assert "is not a parameter of study mnist" in capsys.readouterr().err
    assert main(["report", "mnist", "--grid", "cluster"]) == 2
    assert "expected KEY=V1,V2" in capsys.readouterr().err


def test_cli_lists_parameters(capsys):  # type: ignore[no-untyped-def]
    from dnnbench.cli import main

    assert main(["study", "mnist", "--parameters"]) == 0
    out = capsys.readouterr().out
    assert 'network: Union[str, dict] = "mnist-adam"' in out and "results_path" not in out
