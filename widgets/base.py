"""What every panel shares: observers that are removed on close, quiet programmatic updates,
error messages shown next to the field that caused them, and small parsing helpers for text fields.

Widgets are made with :func:`control`: a control shares its layout and style models with every
control of the same look (one model in the browser instead of one per control) and carries its CSS
classes from the start (no update message after it is made). The workbench's first display sends
each model's state over the kernel's IOPub socket, whose queues hold about a thousand messages: a
burst beyond that can lose models on a busy machine, so the whole workbench stays well under it
(tests/widgets/test_widget_messages.py).

Panels observe and never compute: an edit builds a new spec with ``Spec.build``; a
:class:`~dnnbench.errors.SpecError` is shown next to its field and the last valid spec stays in use
(docs/workbench.md, "Behaviour").
"""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import ipywidgets as w

log = logging.getLogger("dnnbench.widgets")

#: Receives the workbench fields a panel changed, e.g. ``emit(network=net, dataset=ds)``.
Emit = Callable[..., None]

ERROR_STYLE = "color:#b00020;font-size:12px;line-height:1.3"


_SHARED: dict[tuple[Any, ...], w.Widget] = {}


def shared(cls: type[w.Widget], **attrs: Any) -> Any:
    """The one model of ``cls`` (a ``Layout`` or a style) with ``attrs``, shared by every control that
    uses it. A shared model is never changed: a widget whose layout changes (shown, hidden) gets its own
    ``w.Layout``. A model closed since (``Widget.close_all``) is made anew."""
    key = (cls, tuple(sorted(attrs.items())))
    model = _SHARED.get(key)
    if model is None or model.comm is None:
        model = _SHARED[key] = cls(**attrs)
    return model


def layout(**css: str) -> w.Layout:
    """A shared, never-changed ``Layout`` with these CSS properties (see :func:`shared`)."""
    return shared(w.Layout, **css)


def control(cls: type[Any], *, css: str | Sequence[str] = (), width: str | None = None,
            layout: w.Layout | None = None, style: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    """``cls(**kwargs)`` with a shared layout (``width`` or ``layout``) and a shared style (``style``: its
    attributes), and the CSS class(es) ``css`` set as it is made."""
    kwargs["layout"] = layout if layout is not None else shared(w.Layout, **({"width": width} if width else {}))
    trait = cls.class_traits().get("style")
    if trait is not None:
        kwargs["style"] = shared(trait.klass, **(style or {}))
    if css:
        kwargs["_dom_classes"] = (css,) if isinstance(css, str) else tuple(css)
    return cls(**kwargs)


def error_html(message: str | None) -> str:
    return "" if not message else f"<div class='dnnbench-error' style='{ERROR_STYLE}'>{html.escape(message)}</div>"


class Panel(w.VBox):
    """A VBox whose observers are tracked (and removed by :meth:`close`), with a panel-level error."""

    def __init__(self, emit: Emit | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._emit_to = emit
        self._observers: list[tuple[w.Widget, Callable[..., None], str]] = []
        self._quiet_depth = 0
        self.error = control(w.HTML, value="", layout=layout(margin="0 0 4px 0"), css="dnnbench-panel-error")

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


class ErrorLine:
    """An error line at the end of ``self.box``, made when it first has a message (most never do)."""

    box: w.Box
    _error: w.HTML | None = None

    @property
    def error(self) -> w.HTML:
        """The error line (made and added to the box when first asked for)."""
        if self._error is None:
            self._error = control(w.HTML, value="")
            self.box.children = (*self.box.children, self._error)
        return self._error

    def show(self, message: str | None) -> None:
        if message or self._error is not None:
            self.error.value = error_html(message)


class Field(ErrorLine):
    """A labelled control with its unit and an error line underneath (made when first needed).

    ``css`` is the control's CSS class: pass it to :func:`control` when making the control, or here.
    """

    def __init__(self, label: str, widget: w.Widget, unit: str = "", *, css: str = "",
                 label_width: str = "150px") -> None:
        self.widget = widget
        if css and css not in widget._dom_classes:
            widget.add_class(css)
        parts: list[w.Widget] = [control(w.Label, value=label, width=label_width), widget]
        if unit:
            parts.append(control(w.Label, value=unit, layout=layout(margin="0 0 0 4px")))
        self.box = w.VBox([w.HBox(parts, layout=layout())], layout=layout(margin="0"))
        self._error: w.HTML | None = None

    @property
    def visible(self) -> bool:
        return bool(self.box.layout.display != "none")

    @visible.setter
    def visible(self, visible: bool) -> None:
        if visible == self.visible:
            return
        if self.box.layout is layout(margin="0"):  # first hidden: a layout of its own (the shared one stays)
            self.box.layout = w.Layout(margin="0")
        self.box.layout.display = None if visible else "none"



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
