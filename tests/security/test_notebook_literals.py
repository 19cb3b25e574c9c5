"""Nothing the user did not write as code becomes code: file names and study parameters reach a notebook
only as literals (docs/security.md, "What is never executed")."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from papermill.translators import PythonTranslator

from dnnbench import presets
from dnnbench.errors import SpecError
from dnnbench.face import labext
from dnnbench.studies import params, registry

NETWORK = json.dumps(presets.network("lenet5").to_dict())
EVIL = 'x\n__import__("os").system("id")\n#.dnn.json'


def _only_literal_assignments(source: str) -> dict[str, object]:
    """The names a cell assigns, if the cell is nothing but ``name = <literal>`` lines; fails otherwise."""
    tree = ast.parse(source)
    out: dict[str, object] = {}
    for stmt in tree.body:
        assert isinstance(stmt, ast.Assign), ast.dump(stmt)
        assert len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
        out[stmt.targets[0].id] = ast.literal_eval(stmt.value)
    return out


def _injected(nb: dict) -> str:
    cell = next(c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", []))
    return "".join(cell["source"])


@pytest.mark.parametrize("name", [EVIL, "a\rb.dnn.json", "a\x00b.dnn.json", "a\u2028b.dnn.json", "sub\n/x.dnn.json"])
def test_a_name_with_a_control_character_is_refused(name: str) -> None:
    # On the code before this fix, EVIL gave a notebook whose second line ran os.system("id").
    with pytest.raises(SpecError, match="control character") as err:
        labext.spec_notebook(name, NETWORK)
    assert "\n" not in str(err.value) and "\r" not in str(err.value)


def test_even_an_unchecked_name_stays_one_literal() -> None:
    nb = labext.workbench_notebook({"network": EVIL}, source=EVIL)
    assert _only_literal_assignments(_injected(nb)) == {"network": EVIL}


@pytest.mark.parametrize("name", ["résumé 😀.dnn.json", "a'b\"c.dnn.json", "a\\b.dnn.json", "#x.dnn.json"])
def test_names_with_quotes_emoji_and_backslashes_open(name: str) -> None:
    path, nb, kind = labext.spec_notebook(f"dir/{name}", NETWORK)
    assert kind == "network" and path.startswith("dir/")
    assert _only_literal_assignments(_injected(nb)) == {"network": name}
    json.dumps(nb, ensure_ascii=False).encode("utf-8")  # the notebook can be saved as UTF-8


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_any_accepted_name_is_a_literal_of_itself(stem: str) -> None:
    name = f"{stem}.dnn.json".replace("/", "_")
    try:
        _, nb, _ = labext.spec_notebook(name, NETWORK)
    except SpecError as err:
        assert "control character" in str(err) and "\n" not in str(err)
        return
    assert _only_literal_assignments(_injected(nb)) == {"network": name}


def test_a_spec_over_the_size_limit_and_a_deep_one_are_refused() -> None:
    from dnnbench.specs.io import MAX_SPEC_BYTES

    with pytest.raises(SpecError, match="limit"):
        labext.spec_notebook("big.dnn.json", " " * (MAX_SPEC_BYTES + 1))
    with pytest.raises(SpecError, match="deeper"):
        labext.spec_notebook("deep.dnn.json", "[" * 100_000 + "]" * 100_000)


# ---- study parameters ------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_papermill_writes_every_accepted_value_as_a_literal_of_itself(value: object) -> None:
    checked = params.check("any", {"x": params.Parameter("x", "None", "None", "")}, {"x": value})
    source = PythonTranslator.translate(checked["x"])
    tree = ast.parse(source, mode="eval")
    assert ast.literal_eval(tree) == value or value != value  # (-0.0 == 0.0; NaN is refused upstream)


@pytest.mark.parametrize("text", [
    '{name: x, layers: !!binary aGVsbG8=}', "!!set {a: null}", "{a: 2024-01-01}", "{1: 2}", "{a: .nan}",
    "{a: !!python/object/apply:os.system [id]}",
])
def test_yaml_values_that_are_not_json_are_refused(text: str) -> None:
    declared = params.declared(registry.find("mnist")[1])
    with pytest.raises(SpecError) as err:
        params.check("mnist", declared, {"configuration": params.parse_cli_value("mnist", declared, "configuration",
                                                                                  text)})
    assert "\n" not in str(err.value)
    with pytest.raises(SpecError):  # the same values in a -y mapping
        params.check("mnist", declared, params.read_yaml(f"configuration: {text}"))


def test_cli_refuses_a_binary_tag_before_any_kernel(tmp_path) -> None:  # type: ignore[no-untyped-def]
    run = subprocess.run([sys.executable, "-m", "dnnbench.cli", "study", "mnist", "-p", "network",
                          "{name: x, layers: !!binary aGVsbG8=}", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert not list(tmp_path.iterdir())  # nothing ran, nothing was written


def test_an_inline_mapping_longer_than_a_file_name_is_read_as_yaml() -> None:
    """``-y "cluster: {...}"``: text too long to be a file name is YAML, not an OSError."""
    cluster = presets.cluster("adam-2014").to_dict()
    text = "cluster: " + json.dumps(cluster)
    assert len(text) > 1000
    declared = params.declared(registry.find("mnist")[1])
    values = params.check("mnist", declared, params.read_yaml(text))
    assert values["cluster"] == cluster
    assert params.check_specs(values)["cluster"] == cluster
