"""A self-contained HTML report from an executed study notebook: it opens offline.

nbconvert's default templates load require.js and MathJax from a CDN, so the report is built here
instead, from the notebook itself:

- Markdown cells and Markdown outputs become HTML (mistune); ``$...$`` and ``$$...$$`` equations
  become MathML (latex2mathml), which browsers render natively, with no script;
- each figure shown with ``display.show`` is embedded from its Bokeh JSON item, with BokehJS inline
  in the page; the notebook's live Bokeh outputs are skipped;
- code is hidden (``include_code=True`` shows it folded), except the parameters of the run;
- text, tables, images and errors are kept as they are; scripts in HTML outputs are dropped.
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from typing import Any

from .display import BOKEH_MIME

#: Output mime types that belong to the live notebook only (BokehJS loading and live plots).
_LIVE_ONLY = ("application/vnd.bokehjs_load.v0+json", "application/vnd.bokehjs_exec.v0+json",
              "application/javascript", "application/vnd.holoviews_load.v0+json")

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; line-height: 1.55;
       max-width: 980px; margin: 2em auto; padding: 0 1.2em; color: #1d1d1f; }
h1, h2, h3 { line-height: 1.25; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 2em; }
pre { background: #f6f8fa; padding: .7em 1em; overflow-x: auto; border-radius: 4px; font-size: .88em; }
pre.error { background: #fff0f0; color: #8b0000; }
code { background: #f6f8fa; padding: .1em .3em; border-radius: 3px; font-size: .92em; }
pre code { background: none; padding: 0; }
table { border-collapse: collapse; margin: 1em 0; font-size: .92em; }
th, td { border: 1px solid #ddd; padding: .3em .6em; } th { background: #f0f3f6; }
figure { margin: 1.5em 0; } figcaption { color: #555; font-size: .92em; margin-top: .4em; }
math[display="block"] { margin: .8em 0; font-size: 1.08em; }
details { margin: .6em 0; } summary { cursor: pointer; color: #555; }
.params { border-left: 3px solid #4c78a8; padding-left: .8em; }
footer { color: #777; font-size: .85em; margin-top: 3em; border-top: 1px solid #ddd; padding-top: .8em; }
"""

_DISPLAY_MATH = re.compile(r"\$\$(.+?)\$\$", re.S)
_INLINE_MATH = re.compile(r"(?<![\\$\w])\$(?=\S)([^$\n]+?)(?<=\S)\$(?![\w$])")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_SCRIPT = re.compile(r"<script\b.*?</script\s*>", re.S | re.I)


def math_to_mathml(tex: str, display: bool) -> str:
    """LaTeX to MathML; if the converter cannot read it, the TeX source as code."""
    try:
        from latex2mathml.converter import convert

        return convert(tex.strip(), display="block" if display else "inline")
    except Exception:  # any converter failure falls back to showing the TeX source
        return f"<code>{html.escape(tex)}</code>"


def markdown_to_html(text: str) -> str:
    """Markdown with TeX equations to HTML (equations protected from the Markdown parser)."""
    import mistune

    saved: list[str] = []

    def keep(fragment: str) -> str:
        saved.append(fragment)
        return f"MATHTOKEN{len(saved) - 1}END"

    text = _DISPLAY_MATH.sub(lambda m: "\n\n" + keep(math_to_mathml(m.group(1), True)) + "\n\n", text)
    text = _INLINE_MATH.sub(lambda m: keep(math_to_mathml(m.group(1), False)), text)
    md = mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])
    out = str(md(text))
    out = re.sub(r"<p>\s*(MATHTOKEN\d+END)\s*</p>", r"\1", out)
    return re.sub(r"MATHTOKEN(\d+)END", lambda m: saved[int(m.group(1))], out)


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


class _Page:
    def __init__(self, include_code: bool) -> None:
        self.include_code = include_code
        self.parts: list[str] = []
        self.figures: list[tuple[str, Any]] = []

    def cell(self, cell: dict[str, Any]) -> None:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if "remove-cell" in tags:
            return
        kind = cell.get("cell_type")
        if kind == "markdown":
            self.parts.append(markdown_to_html(_text(cell.get("source", ""))))
            return
        if kind != "code":
            return
        source = _text(cell.get("source", "")).strip()
        if "parameters" in tags or "injected-parameters" in tags:
            title = "Parameters of this run" if "injected-parameters" in tags else "Default parameters"
            self.parts.append(f'<details class="params"{" open" if "injected-parameters" in tags else ""}>'
                              f"<summary>{title}</summary><pre><code>{html.escape(source)}</code></pre></details>")
        elif self.include_code and source and "remove-input" not in tags:
            self.parts.append(f"<details><summary>code</summary><pre><code>{html.escape(source)}</code></pre></details>")
        for output in cell.get("outputs", []):
            self.output(output)

    def output(self, output: Any) -> None:
        kind = output.get("output_type")
        if kind == "stream":
            if output.get("name") == "stdout":
                self.parts.append(f"<pre>{html.escape(_ANSI.sub('', _text(output.get('text', ''))))}</pre>")
            return
        if kind == "error":
            tb = _ANSI.sub("", "\n".join(output.get("traceback", [])))
            self.parts.append(f'<pre class="error">{html.escape(tb or output.get("ename", "error"))}</pre>')
            return
        data = output.get("data", {})
        if BOKEH_MIME in data:
            item = data[BOKEH_MIME]
            if isinstance(item, dict) and isinstance(item.get("item"), str):
                item = item["item"]  # Bokeh's own key order, kept as text (display.show)
            if isinstance(item, str):
                item = json.loads(item)
            div = f"figure-{len(self.figures)}"
            self.figures.append((div, item))
            caption = _text(data.get("text/markdown", "")).strip()
            cap = f"<figcaption>{markdown_to_html(caption)}</figcaption>" if caption else ""
            self.parts.append(f'<figure><div id="{div}" class="bokeh-figure"></div>{cap}</figure>')
        elif any(m in data for m in _LIVE_ONLY):
            return
        elif "text/markdown" in data:
            self.parts.append(markdown_to_html(_text(data["text/markdown"])))
        elif "text/html" in data:
            self.parts.append(_SCRIPT.sub("", _text(data["text/html"])))
        elif "image/svg+xml" in data:
            self.parts.append(_SCRIPT.sub("", _text(data["image/svg+xml"])))
        elif "image/png" in data:
            self.parts.append(f'<img alt="figure" src="data:image/png;base64,{_text(data["image/png"]).strip()}">')
        elif "text/plain" in data:
            self.parts.append(f"<pre>{html.escape(_ANSI.sub('', _text(data['text/plain'])))}</pre>")


def _title(nb: dict[str, Any]) -> str:
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for line in _text(cell.get("source", "")).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return "dnnbench study"


def bokeh_resources() -> str:
    """BokehJS (and its CSS) inline, as HTML tags: the page loads nothing else."""
    from bokeh.resources import Resources

    return Resources(mode="inline", components=["bokeh", "bokeh-gl", "bokeh-widgets", "bokeh-tables"]).render()


def render_page(title: str, body: str, figures: list[tuple[str, Any]], footer: str = "") -> str:
    """A complete HTML page: inline BokehJS when there are figures, the body, and the embedding script."""
    head_js = bokeh_resources() if figures else ""
    embed = ""
    if figures:
        items = json.dumps({div: item for div, item in figures}).replace("</", "<\\/")
        embed = ("<script>\n(function() {\n  const items = " + items + ";\n"
                 "  for (const [id, item] of Object.entries(items)) { Bokeh.embed.embed_item(item, id); }\n"
                 "})();\n</script>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n{head_js}\n</head>\n<body>\n"
            f"{body}\n{f'<footer>{footer}</footer>' if footer else ''}\n{embed}\n</body>\n</html>\n")


def export_html(notebook: str | os.PathLike[str], html_path: str | os.PathLike[str], *,
                include_code: bool = False) -> Path:
    """Write the report of an executed notebook to ``html_path`` (atomically) and return the path."""
    from .. import __version__

    # Plain JSON (nbformat 4) is all this needs; importing nbformat costs seconds (jsonschema).
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    if not isinstance(nb, dict) or nb.get("nbformat") != 4:
        raise ValueError(f"{notebook}: not a Jupyter notebook in format 4")
    page = _Page(include_code)
    for cell in nb.get("cells", []):
        page.cell(cell)
    footer = (f"Generated by dnnbench {__version__} from {html.escape(Path(notebook).name)}. "
              "Self-contained: BokehJS is inline and equations are MathML; nothing is loaded from the network.")
    text = render_page(_title(nb), "\n".join(page.parts), page.figures, footer)
    return _write_text_atomic(Path(html_path), text)


def _write_text_atomic(path: Path, text: str) -> Path:
    from ..fileio import atomic_write

    return atomic_write(path, text)
