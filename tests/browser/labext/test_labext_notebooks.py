"""dnnbench.face.labext without a server: templates, spec kinds, names (fast; no browser, no Jupyter server)."""

from __future__ import annotations

import json

import pytest

from dnnbench import presets
from dnnbench.errors import SpecError
from dnnbench.face import labext
from dnnbench.face.state import WorkbenchState


def _parameters(nb: dict) -> dict[str, object]:
    """Run the template's parameters cell and the injected one, as the kernel would."""
    env: dict[str, object] = {}
    for cell in nb["cells"]:
        tags = cell["metadata"].get("tags", [])
        if "parameters" in tags or "injected-parameters" in tags:
            exec("".join(cell["source"]), env)  # noqa: S102 - our own template's assignments
    return env


@pytest.mark.parametrize("kind, doc, parameter", [
    ("network", lambda: presets.network("lenet5").model_dump(mode="json"), "network"),
    ("cluster", lambda: presets.cluster("edge-wifi").model_dump(mode="json"), "cluster"),
    ("state", lambda: WorkbenchState.from_presets("lenet5", "edge-wifi").model_dump(mode="json"), "state_file"),
])
def test_spec_notebook_points_the_right_parameter_at_the_file(kind: str, doc, parameter: str) -> None:
    path, nb, found = labext.spec_notebook("sub/my.dnn.json", json.dumps(doc()))
    assert (path, found) == ("sub/my.workbench.ipynb", kind)
    assert _parameters(nb)[parameter] == "my.dnn.json"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"


def test_bad_spec_is_one_line_with_the_field() -> None:
    doc = {"name": "x", "layers": [{"kind": "input", "shape": [1, 8, 8]}, {"kind": "fc", "out_features": 0}]}
    with pytest.raises(SpecError, match=r"layers\[1\]\.out_features") as err:
        labext.spec_notebook("x.dnn.json", json.dumps(doc))
    assert "\n" not in str(err.value)
    with pytest.raises(SpecError, match="neither a network"):
        labext.spec_notebook("x.dnn.json", "{}")
    with pytest.raises(SpecError, match=r"\*\.dnn\.json"):
        labext.spec_notebook("x.json", "{}")


def test_new_workbench_is_the_template_and_names_do_not_collide() -> None:
    nb = labext.workbench_notebook()
    assert _parameters(nb)["network"] == "imagenet22k-adam"
    assert all(c.get("outputs", []) == [] for c in nb["cells"])
    taken = {"d/workbench.ipynb", "d/workbench-1.ipynb"}
    assert labext.free_name("d", "workbench", taken.__contains__) == "d/workbench-2.ipynb"


def test_study_notebooks_and_names() -> None:
    names = [nb["name"] for nb in labext.study_notebooks()]
    assert "mnist_study" in names and "workbench" not in names
    for bad in ("../x", "a/b", ""):
        with pytest.raises(SpecError):
            labext.read_packaged(bad)


def test_kernel_falls_back_to_the_servers_default() -> None:
    nb = labext.set_kernel(labext.workbench_notebook(), {"py311": "Python 3.11"}, "py311")
    assert nb["metadata"]["kernelspec"]["name"] == "py311"
