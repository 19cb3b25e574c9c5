"""Notebook-side display helpers: Bokeh figures and computed prose that the HTML report can reuse.

``show(fig, caption)`` displays a figure twice over: the live Bokeh output for JupyterLab, and a
second output carrying the figure as a Bokeh JSON item (mime type :data:`BOKEH_MIME`) with its
caption as Markdown. The report (``report.py``) embeds the JSON items into one static page with
inline BokehJS, and skips the live copies, so the report needs nothing from a CDN.
"""

from __future__ import annotations

import json
from typing import Any

#: Mime type of a figure's Bokeh JSON item inside a notebook output: ``{"item": "<json_item as text>"}``.
BOKEH_MIME = "application/vnd.dnnbench.bokeh+json"

_loaded = False


def setup() -> None:
    """Load BokehJS inline into the notebook once (offline: no CDN)."""
    global _loaded
    if _loaded:
        return
    from bokeh.io import output_notebook
    from bokeh.resources import INLINE

    output_notebook(resources=INLINE, hide_banner=True)
    _loaded = True


def show(fig: Any, caption: str = "") -> None:
    """Display a Bokeh figure (or layout) live, plus its JSON item and caption for the report."""
    from bokeh.document import Document
    from bokeh.embed import json_item
    from bokeh.io import show as bokeh_show
    from IPython.display import display

    setup()
    # Serialise in a document of its own, then detach: the notebook's shared document (which show()
    # uses) must not be involved, or the item refers to models it does not define.
    doc = Document()
    doc.add_root(fig)
    item = json_item(fig)
    doc.remove_root(fig)
    bokeh_show(fig)
    # Kept as text: notebooks store JSON with sorted keys, and BokehJS needs each model defined before
    # it is referenced, in Bokeh's own order.
    display({BOKEH_MIME: {"item": json.dumps(item)}, "text/markdown": caption}, raw=True)


def markdown(text: str) -> None:
    """Display computed prose (numbers from the results) as Markdown, rendered in the report too."""
    from IPython.display import Markdown, display

    display(Markdown(text))


def table(rows: list[dict[str, Any]], columns: dict[str, str] | None = None) -> None:
    """Display rows as a Markdown table; ``columns`` maps keys to headers (default: all keys)."""
    if not rows:
        return
    cols = columns or {k: k for k in rows[0]}
    head = "| " + " | ".join(cols.values()) + " |"
    rule = "|" + "|".join("---:" if isinstance(rows[0].get(k), (int, float)) else "---" for k in cols) + "|"
    body = ["| " + " | ".join(_cell(r.get(k)) for k in cols) + " |" for r in rows]
    markdown("\n".join([head, rule, *body]))


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v).replace("|", "\\|")


def write_results(path: str, results: dict[str, Any]) -> None:
    """Write the study's results JSON atomically (numpy values converted, infinities as null)."""
    from ..specs.io import write_json_atomic
    from .analysis import json_ready

    write_json_atomic(path, json_ready(results))
