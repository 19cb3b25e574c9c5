"""What every panel shares: observers that are removed on close, quiet programmatic updates,
error messages shown next to the field that caused them, and small parsing helpers for text fields.

Panels observe and never compute: an edit builds a new spec with ``Spec.build``; a
:class:`~dnnbench.errors.SpecError` is shown next to its field and the last valid spec stays in use
(docs/workbench.md, "Behaviour").
"""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import ipywidgets as w

log = logging.getLogger("dnnbench.widgets")

#: Receives the workbench fields a panel changed, e.g. ``emit(network=net, dataset=ds)``.
Emit = Callable[..., None]

ERROR_STYLE = "color:#b00020;font-size:12px;line-height:1.3"


def error_html(message: str | None) -> str:
    return "" if not message else f"<div class='dnnbench-error' style='{ERROR_STYLE}'>{html.escape(message)}</div>"


class Panel(w.VBox):
    """A VBox whose observers are tracked (and removed by :meth:`close`), with a panel-level error."""

    def __init__(self, emit: Emit | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._emit_to = emit
        self._observers: list[tuple[w.Widget, Callable[..., None], str]] = []
        self._quiet_depth = 0
        self.error = w.HTML("", layout=w.Layout(margin="0 0 4px 0"))
        self.error.add_class("dnnbench-panel-error")

    # -- observers ---------------------------------------------------------------------------------
    def observe_widget(self, widget: w.Widget, handler: Callable[[dict[str, Any]], None],
                       names: str = "value") -> None:
        """``widget.observe`` that skips quiet (programmatic) changes and never raises into the front end."""

        def guarded(change: dict[str, Any]) -> None:
            if self._quiet_depth:
                return
            try:
                handler(change)
            except Exception as exc:  # the widget must survive anything: show it, log it
                log.exception("dnnbench workbench: %s", exc)
                self.error.value = error_html(f"{type(exc).__name__}: {exc}")

        widget.observe(guarded, names=names)
        self._observers.append((widget, guarded, names))

    def on_click(self, button: w.Button, handler: Callable[[], None]) -> None:
        def clicked(_: w.Button) -> None:
            try:
                handler()
            except Exception as exc:
                log.exception("dnnbench workbench: %s", exc)
                self.error.value = error_html(f"{type(exc).__name__}: {exc}")

        button.on_click(clicked)
        self._observers.append((button, clicked, "__click__"))

    def forget(self, widgets: list[w.Widget]) -> None:
        """Remove this panel's observers of ``widgets`` (rows and fields that are going away)."""
        mine = {id(x) for x in widgets}
        keep = []
        for widget, handler, names in self._observers:
            if id(widget) in mine:
                if names == "__click__":
                    widget.on_click(handler, remove=True)
                else:
                    widget.unobserve(handler, names=names)
            else:
                keep.append((widget, handler, names))
        self._observers = keep

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """Set widget values without their observers firing (loading a preset, a saved state)."""
        self._quiet_depth += 1
        try:
            with self.hold_sync():
                yield
        finally:
            self._quiet_depth -= 1

    def emit(self, **changes: Any) -> None:
        if self._emit_to is not None:
            self._emit_to(**changes)

    def close(self) -> None:
        self.forget([widget for widget, _, _ in self._observers])
        super().close()


class Field:
    """A labelled control with its unit and an error line underneath."""

    def __init__(self, label: str, widget: w.Widget, unit: str = "", *, css: str = "",
                 label_width: str = "150px") -> None:
        self.widget = widget
        self.error = w.HTML("")
        if css:
            widget.add_class(css)
        parts: list[w.Widget] = [w.Label(label, layout=w.Layout(width=label_width)), widget]
        if unit:
            parts.append(w.Label(unit, layout=w.Layout(margin="0 0 0 4px")))
        self.box = w.VBox([w.HBox(parts), self.error], layout=w.Layout(margin="0"))

    def show(self, message: str | None) -> None:
        self.error.value = error_html(message)


def parse_text(text: str) -> Any:
    """A text field's value as spec data: '' -> None, '3' -> 3, '0.5' -> 0.5, '3,3' or '3x3' -> [3, 3].

    Anything else is returned as the string, so the spec's own validation names the problem.
    """
    t = text.strip()
    if t == "":
        return None
    if t.lower() in ("none", "default"):
        return None
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    for sep in (",", "x", "×", " "):
        if sep in t:
            parts = [p for p in t.strip("[]()").replace(sep, ",").split(",") if p.strip()]
            values = [parse_text(p) for p in parts]
            return values if all(isinstance(v, (int, float)) for v in values) else t
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        pass
    try:
        return json.loads(t)
    except ValueError:
        return t


def format_value(value: Any) -> str:
    """The text a field shows for a spec value (inverse of :func:`parse_text`)."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ",".join(format_value(v) for v in value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return repr(value)
    return str(value)
