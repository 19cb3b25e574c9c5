"""The HTML report and the notebooks' committed form, without a kernel."""

from __future__ import annotations

import json
import re

import pytest

from dnnbench.studies import build_notebooks, registry
from dnnbench.studies.display import BOKEH_MIME
from dnnbench.studies.report import export_html, markdown_to_html


def test_markdown_equations_become_mathml():
    html = markdown_to_html("Cost $N_\\text{in} N_\\text{out}$ per sample:\n\n$$R^\\ast = \\frac{N c}{a + W c}$$\n\n"
                            "| a | b |\n|---|---|\n| 1 | 2 |")
    assert html.count("<math") == 2 and 'display="block"' in html
    assert "<table>" in html and "$" not in html


def test_dollars_that_are_not_math_stay_text():
    assert "<math" not in markdown_to_html("costs 5 $ or 6 $ each")


def _notebook(tmp_path, outputs):  # type: ignore[no-untyped-def]
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    nb = new_notebook(cells=[new_markdown_cell("# A title\n\nText with $x^2$."),
                             new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                             new_code_cell("secret_code()", outputs=outputs)])
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    return path


def test_export_embeds_figures_inline_and_drops_scripts(tmp_path):  # type: ignore[no-untyped-def]
    from bokeh.embed import json_item
    from bokeh.plotting import figure
    from nbformat.v4 import new_output

    fig = figure(name="f")
    fig.line([1, 2], [3, 4])
    outputs = [
        new_output("display_data", data={"application/javascript": "alert('NOPE-42')",
                                         "text/html": "<div>LIVE-COPY-42</div>"}),
        new_output("display_data", data={BOKEH_MIME: {"item": json.dumps(json_item(fig))},
                                         "text/markdown": "Figure 1. *A line.*"}),
        new_output("display_data", data={"text/html": '<p>table</p><script src="https://cdn.example/x.js"></script>'}),
        new_output("stream", name="stdout", text="printed\n"),
    ]
    html = export_html(_notebook(tmp_path, outputs), tmp_path / "r.html").read_text()
    assert "<title>A title</title>" in html
    assert 'id="figure-0"' in html and "Bokeh.embed.embed_item" in html
    assert "<em>A line.</em>" in html and "printed" in html and "<p>table</p>" in html
    body = html.split("</head>", 1)[1]
    assert "secret_code" not in body and "NOPE-42" not in body and "LIVE-COPY-42" not in body
    assert "x = 1" in html  # the parameters are shown
    assert not re.search(r"<script[^>]+src=", html)  # every script is inline
    assert not re.search(r"<link[^>]+href=\"https?:", html)


def test_export_without_figures_has_no_bokehjs(tmp_path):  # type: ignore[no-untyped-def]
    html = export_html(_notebook(tmp_path, []), tmp_path / "r.html").read_text()
    assert "Bokeh.embed" not in html and len(html) < 20_000


@pytest.mark.parametrize("name", sorted(build_notebooks.STUDIES))
def test_committed_notebooks_are_stripped_and_up_to_date(name):  # type: ignore[no-untyped-def]
    path = registry.available()[name]
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert path.read_text() == build_notebooks.text(name), "run: python -m dnnbench.studies.build_notebooks"


@pytest.mark.parametrize("name", sorted(build_notebooks.STUDIES))
def test_notebooks_teach_every_section(name):  # type: ignore[no-untyped-def]
    nb = json.loads(registry.available()[name].read_text())
    md = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    for heading in ("## 1. Per-layer counts", "## 2. Model parallelism", "## 3. Data parallelism",
                    "## 4. The optimizer", "## 5. Sensitivity", "## 6. Limitations"):
        assert heading in md
    assert "reconstructed" in md and md.count("$$") >= 10
