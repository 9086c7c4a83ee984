"""Explorers that work in the static book: outputs precomputed on a grid, switched in the browser.

A chapter's explorer is "a function of the controls + a grid of control values".
:func:`make_explorer` turns the two into a widget that works in the rendered HTML, where
no kernel runs:

* **static** (the book build): the function is called once for every combination of
  control values; each figure is rendered to a small PNG and each distinct output becomes
  one ``ipywidgets.HTML`` leaf.  The leaves sit in nested ``ipywidgets.Stack`` containers,
  one nesting level per control, and every control (a ``SelectionSlider``, ``Dropdown`` or
  ``ToggleButtons``) is ``jslink``-ed from its ``index`` to the ``selected_index`` of every
  stack of its level.  The executed notebook saves the state of all these widgets, so in
  the browser the widget manager rebuilds them and the links switch the displayed output
  with no kernel and no network request.
* **live** (Jupyter, Binder, Colab, the notebook tests): the same controls drive
  ``ipywidgets.interactive``, which calls the function on demand.

The mode comes from the environment variable ``FEDBANDIT_EXPLORER`` (``static`` or
``live``).  The book's Sphinx extension (:mod:`fedbandit.book.sphinx_ext`) sets it to
``static`` in the build process before any notebook runs, so every kernel the build
starts inherits it; anywhere else it is unset and the explorer is live.

:func:`decode_explorer` reads an explorer back from saved widget state (the JSON a built
page embeds): its controls and, for every combination of control indices, the leaf that
the links display.  The unit tests use it on the widgets :func:`make_explorer` builds and
the browser check uses it on the built pages, so the page is checked against what its
saved state says, not against this module's intentions.
"""

from __future__ import annotations

import base64
import hashlib
import html
import inspect
import io
import itertools
import math
import numbers
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fedbandit.book.plotting import CSS_PX_PER_IN, FigureTextError, figure_problems, to_book_width

__all__ = ["Control", "make_explorer", "explorer_mode", "decode_explorer", "DecodedExplorer"]

MODE_VARIABLE = "FEDBANDIT_EXPLORER"
MODES = ("static", "live")
KINDS = ("slider", "dropdown", "toggle")
CHECKS = ("mark", "raise")
EXPLORER_CLASS = "fedbandit-explorer"
_NAME = re.compile(r"[a-z][a-z0-9\-]*")


def explorer_mode() -> str:
    """The explorers' mode: ``"static"`` in the book build, ``"live"`` elsewhere.

    Returns
    -------
    str
        The value of ``FEDBANDIT_EXPLORER`` (``"static"`` or ``"live"``), ``"live"`` when unset
        or empty.

    Raises
    ------
    ValueError
        If the variable holds any other value.
    """
    raw = os.environ.get(MODE_VARIABLE, "").strip().lower()
    mode = raw or "live"
    if mode not in MODES:
        raise ValueError(f"{MODE_VARIABLE} must be one of {MODES!r} (or unset for 'live'), got {os.environ.get(MODE_VARIABLE)!r}")
    return mode


def _format_value(value: Any) -> str:
    return f"{value:g}" if _is_number(value) else str(value)


@dataclass(frozen=True)
class Control:
    """One control of an explorer: the grid of values it can take and how it is shown.

    Parameters
    ----------
    values : sequence
        The grid of values, in display order (at least one; no duplicates).  The function
        receives these values themselves.
    default : optional
        The value shown first (one of ``values``; default the first).
    description : str, optional
        The control's label (default: the keyword name).
    labels : sequence of str, optional
        What the control displays for each value (default ``f"{v:g}"`` for numbers,
        ``str(v)`` otherwise).
    kind : {"slider", "dropdown", "toggle"}, optional
        The widget: a ``SelectionSlider`` (default when every value is a number), a
        ``Dropdown`` (default otherwise) or ``ToggleButtons``.
    """

    values: Sequence[Any]
    default: Any = None
    description: str | None = None
    labels: Sequence[str] | None = None
    kind: str | None = None
    _index: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self):
        if isinstance(self.values, (str, bytes)) or not isinstance(self.values, Sequence):
            raise TypeError(f"values must be a sequence of control values, got {type(self.values).__name__} {self.values!r}")
        values = tuple(self.values)
        if not values:
            raise ValueError("values must hold at least one control value, got an empty sequence")
        for i, a in enumerate(values):
            if any(_same(a, b) for b in values[:i]):
                raise ValueError(f"values must not repeat a value, got {a!r} twice in {values!r}")
        object.__setattr__(self, "values", values)
        default = values[0] if self.default is None else self.default
        matches = [i for i, v in enumerate(values) if _same(v, default)]
        if not matches:
            raise ValueError(f"default must be one of values {values!r}, got {default!r}")
        object.__setattr__(self, "default", values[matches[0]])
        object.__setattr__(self, "_index", matches[0])
        if self.labels is None:
            labels = tuple(_format_value(v) for v in values)
        else:
            if isinstance(self.labels, str) or not isinstance(self.labels, Sequence):
                raise TypeError(f"labels must be a sequence of str, got {type(self.labels).__name__}")
            labels = tuple(self.labels)
            if len(labels) != len(values) or not all(isinstance(s, str) for s in labels):
                raise ValueError(f"labels must be {len(values)} strings, one per value, got {labels!r}")
        if len(set(labels)) != len(labels):
            raise ValueError(f"labels must be distinct (the control shows them), got {labels!r}")
        object.__setattr__(self, "labels", labels)
        if self.description is not None and not isinstance(self.description, str):
            raise TypeError(f"description must be a str, got {type(self.description).__name__}")
        kind = self.kind
        if kind is None:
            kind = "slider" if all(_is_number(v) for v in values) else "dropdown"
        if not isinstance(kind, str) or kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS!r}, got {kind!r:.80}")
        object.__setattr__(self, "kind", kind)

    def widget(self, name: str):
        """A new selection widget for this control (its ``index`` is the position in ``values``)."""
        import ipywidgets as widgets  # widgets and pyplot load only when an explorer is built

        options = list(zip(self.labels, self.values))
        kwargs = dict(options=options, index=self._index, description=self.description or name)
        if self.kind == "slider":
            return widgets.SelectionSlider(continuous_update=True, readout=True, **kwargs)
        if self.kind == "toggle":
            return widgets.ToggleButtons(**kwargs)
        return widgets.Dropdown(**kwargs)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _same(a: Any, b: Any) -> bool:
    if _is_number(a) and _is_number(b):
        return a == b
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except Exception:  # e.g. arrays: compare by identity
        return a is b


def _as_control(name: str, spec: Any) -> Control:
    if isinstance(spec, Control):
        return spec
    if isinstance(spec, (str, bytes)) or not isinstance(spec, Sequence):
        raise TypeError(
            f"controls[{name!r}] must be a Control or a sequence of values, got {type(spec).__name__} {spec!r}"
        )
    return Control(spec)


# ------------------------------------------------------------------ rendering one output


def _render(output: Any, *, dpi: float | None, alt: str, check: str = "mark") -> str:
    """The HTML of one precomputed output: a PNG (from a matplotlib figure) or a note (from a str).

    ``dpi=None`` renders the figure the book's way (:mod:`fedbandit.book.plotting`): at the book's
    width, :data:`~fedbandit.book.plotting.CONTENT_WIDTH_PX` pixels wide, shown at most that
    wide and scaled down with the column on narrow screens.  Every figure's text is checked
    (:func:`~fedbandit.book.plotting.figure_problems`, judged at the width the page shows it):
    the image records the result (``data-fedbandit-figure="checked"``, or the problems in
    ``data-fedbandit-figure-problems``), which the browser check reads; ``check="raise"``
    raises :class:`~fedbandit.book.plotting.FigureTextError` instead.
    """
    if isinstance(output, str):
        return f'<p class="{EXPLORER_CLASS}-note">{html.escape(output)}</p>'
    from matplotlib.figure import Figure  # matplotlib loads only when an explorer renders

    if not isinstance(output, Figure):
        raise TypeError(
            f"func must return a matplotlib Figure (or a str note), got {type(output).__name__}: "
            "build the figure with plt.subplots() and return it, without plt.show()"
        )
    import matplotlib.pyplot as plt

    try:
        if dpi is None:
            to_book_width(output)
            dpi = CSS_PX_PER_IN
        width, height = (int(round(x * dpi)) for x in output.get_size_inches())
        problems = figure_problems(output, shown_px=width)
        if problems and check == "raise":
            raise FigureTextError(f"explorer frame ({alt}) has {len(problems)} text problem(s):\n  " + "\n  ".join(problems))
        buf = io.BytesIO()
        output.savefig(buf, format="png", dpi=dpi)
    finally:
        plt.close(output)
    png = _quantize(buf.getvalue())
    data = base64.b64encode(png).decode("ascii")
    mark = ('data-fedbandit-figure="checked"' if not problems else
            f'data-fedbandit-figure-problems="{html.escape("; ".join(problems), quote=True)}"')
    return (
        f'<img class="{EXPLORER_CLASS}-image" {mark} src="data:image/png;base64,{data}" '
        f'width="{width}" height="{height}" style="max-width: 100%; height: auto" '
        f'alt="{html.escape(alt, quote=True)}">'
    )


def _quantize(png: bytes) -> bytes:
    """Re-encode a PNG with an adaptive 256-colour palette (plots have few colours: 2-4x smaller)."""
    from PIL import Image  # Pillow (matplotlib's dependency) loads only when a figure is saved

    with Image.open(io.BytesIO(png)) as img:
        rgb = img.convert("RGB")
        pal = rgb.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
        out = io.BytesIO()
        pal.save(out, format="PNG", optimize=True)
    data = out.getvalue()
    return data if len(data) < len(png) else png


def _call(func: Callable, kwargs: dict[str, Any]):
    import matplotlib.pyplot as plt

    before = set(plt.get_fignums())
    try:
        out = func(**kwargs)
    finally:
        # a figure the function opened but did not return would be shown by the inline
        # backend at the end of the cell: close everything it left open except its output
        for num in set(plt.get_fignums()) - before:
            fig = plt.figure(num)
            if fig is not out:
                plt.close(fig)
    return out


# ------------------------------------------------------------------ the explorer


def make_explorer(
    func: Callable[..., Any],
    controls: Mapping[str, Control | Sequence[Any]],
    *,
    name: str,
    mode: str | None = None,
    dpi: float | None = None,
    max_outputs: int = 200,
    check: str = "mark",
):
    """An explorer of ``func`` over a grid of control values that works in the static book.

    Parameters
    ----------
    func : callable
        ``func(**values)`` returns a matplotlib ``Figure`` (built with ``plt.subplots()``
        and returned, not shown; the explorer closes it) or a ``str`` (shown as a note, e.g.
        "not computed for this combination").  It receives one keyword per control.
    controls : mapping of str to Control or sequence
        The controls, in display order; a plain sequence of values is ``Control(values)``.
    name : str
        The explorer's name, unique within its page (lower-case letters, digits and ``-``):
        its root widget carries the CSS classes ``fedbandit-explorer`` and
        ``fedbandit-explorer-<name>``, by which the browser check finds it.
    mode : {"static", "live"}, optional
        Default :func:`explorer_mode` (``static`` in the book build, ``live`` elsewhere).
    dpi : float, optional
        Resolution of the precomputed PNGs (static mode; the saved state grows with it).  By
        default every figure is given the book's width (:mod:`fedbandit.book.plotting`) and
        rendered :data:`~fedbandit.book.plotting.CONTENT_WIDTH_PX` pixels wide, so its text is
        shown at the size the figure gives it; a number renders the figure at its own size.
    max_outputs : int, default 200
        Refuse a grid with more combinations than this (each is an output in the page).
    check : {"mark", "raise"}, default "mark"
        What a figure whose text overlaps, is cut or too small does (static mode;
        :func:`fedbandit.book.plotting.figure_problems`): ``"mark"`` records the problems in
        the page, where the browser check finds them; ``"raise"`` fails the notebook.

    Returns
    -------
    ipywidgets.VBox or ipywidgets.interactive
        Static: a ``VBox`` of the controls and the nested stacks, with an attribute
        ``explorer_info`` (``n_combinations``, ``n_outputs`` (distinct), ``bytes`` (of the
        outputs' HTML), ``seconds``).  Live: ``ipywidgets.interactive`` of ``func``.

    Raises
    ------
    TypeError, ValueError
        For bad arguments, before ``func`` is called.
    """
    if not callable(func):
        raise TypeError(f"func must be callable, got {type(func).__name__}")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"name must be lower-case letters, digits and '-', starting with a letter, got {name!r}")
    if not isinstance(controls, Mapping) or not controls:
        raise ValueError(f"controls must be a non-empty mapping of keyword to Control, got {controls!r}")
    specs = {}
    for key, spec in controls.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"controls keys must be keyword names of func, got {key!r}")
        specs[key] = _as_control(key, spec)
    try:
        inspect.signature(func).bind(**{key: None for key in specs})
    except TypeError as exc:
        raise TypeError(f"func cannot be called with the controls {list(specs)} as keywords: {exc}") from None
    except ValueError:  # no signature (a builtin): found out on the first call
        pass
    mode = explorer_mode() if mode is None else mode
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"mode must be one of {MODES!r}, got {mode!r:.80}")
    if dpi is not None and (isinstance(dpi, bool) or not isinstance(dpi, numbers.Real) or not math.isfinite(dpi)
                            or not 10 <= dpi <= 400):
        raise ValueError(f"dpi must be None (the book's width) or a number in [10, 400], got {dpi!r}")
    if not isinstance(check, str) or check not in CHECKS:
        raise ValueError(f"check must be one of {CHECKS!r}, got {check!r:.80}")
    if isinstance(max_outputs, bool) or not isinstance(max_outputs, numbers.Integral) or max_outputs < 1:
        raise ValueError(f"max_outputs must be a positive int, got {max_outputs!r}")
    n_comb = math.prod(len(c.values) for c in specs.values())
    if mode == "static" and n_comb > max_outputs:
        raise ValueError(
            f"the grid has {n_comb} combinations ({' x '.join(str(len(c.values)) for c in specs.values())}), "
            f"more than max_outputs={max_outputs}: every combination is an image in the page, use a coarser grid"
        )
    if mode == "live":
        return _live(func, specs, name)
    return _static(func, specs, name, None if dpi is None else float(dpi), check)


def _classes(widget, name: str, *extra: str):
    for cls in (EXPLORER_CLASS, f"{EXPLORER_CLASS}-{name}", *extra):
        widget.add_class(cls)
    return widget


def _live(func, specs: dict[str, Control], name: str):
    # the notebook front end (widgets, pyplot, IPython) loads only when an explorer is built
    import ipywidgets as widgets
    import matplotlib.pyplot as plt
    from IPython.display import HTML, display

    def show(**kwargs):
        out = _call(func, kwargs)
        if isinstance(out, str):
            display(HTML(f"<p>{html.escape(out)}</p>"))
            return
        display(out)
        plt.close(out)

    live = widgets.interactive(show, **{key: c.widget(key) for key, c in specs.items()})
    return _classes(live, name, f"{EXPLORER_CLASS}-live")


def _static(func, specs: dict[str, Control], name: str, dpi: float | None, check: str = "mark"):
    import ipywidgets as widgets

    keys = list(specs)
    start = time.perf_counter()
    leaves: dict[str, Any] = {}  # html digest -> HTML widget (a leaf shared by equal outputs)
    by_index: dict[tuple[int, ...], Any] = {}
    total_bytes = 0
    for idx in itertools.product(*(range(len(specs[k].values)) for k in keys)):
        kwargs = {k: specs[k].values[i] for k, i in zip(keys, idx)}
        alt = ", ".join(f"{specs[k].description or k} = {specs[k].labels[i]}" for k, i in zip(keys, idx))
        text = _render(_call(func, kwargs), dpi=dpi, alt=alt, check=check)
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest not in leaves:
            leaves[digest] = widgets.HTML(value=text)
            total_bytes += len(text)
        by_index[idx] = leaves[digest]

    controls = [specs[k].widget(k) for k in keys]
    stacks_by_level: list[list[Any]] = [[] for _ in keys]

    def build(level: int, prefix: tuple[int, ...]):
        n = len(specs[keys[level]].values)
        if level == len(keys) - 1:
            children = [by_index[prefix + (i,)] for i in range(n)]
        else:
            children = [build(level + 1, prefix + (i,)) for i in range(n)]
        stack = widgets.Stack(children=children, selected_index=specs[keys[level]]._index)
        stacks_by_level[level].append(stack)
        return stack

    root = build(0, ())
    links = [
        widgets.jslink((control, "index"), (stack, "selected_index"))
        for control, stacks in zip(controls, stacks_by_level)
        for stack in stacks
    ]
    box = _classes(widgets.VBox([widgets.HBox(controls, layout=widgets.Layout(flex_flow="row wrap")), root]), name)
    box.explorer_links = links  # keep the link objects alive with the widget
    box.explorer_info = {
        "n_combinations": len(by_index),
        "n_outputs": len(leaves),
        "bytes": total_bytes,
        "seconds": time.perf_counter() - start,
    }
    return box


# ------------------------------------------------------------------ reading saved state


@dataclass
class DecodedExplorer:
    """An explorer read back from saved widget state (see :func:`decode_explorer`).

    Attributes
    ----------
    name : str
        The explorer's name (its CSS class ``fedbandit-explorer-<name>``).
    controls : list of dict
        In display order: ``model_id``, ``model_name``, ``description``, ``labels`` and the
        saved ``index``.
    root : str
        Model id of the outermost stack.
    """

    name: str
    controls: list[dict]
    root: str
    _state: dict = field(repr=False)
    _control_of: dict = field(repr=False)

    def leaf(self, indices: Sequence[int]) -> str:
        """Model id of the leaf the links display when control ``c`` is at ``indices[c]``."""
        if len(indices) != len(self.controls):
            raise ValueError(f"indices must give one index per control ({len(self.controls)}), got {indices!r}")
        node = self.root
        seen = set()
        while self._state[node]["model_name"] == "StackModel":
            if node in seen:
                raise ValueError(f"the stacks of explorer {self.name!r} contain a cycle at {node}")
            seen.add(node)
            control = self._control_of.get(node)
            if control is None:
                raise ValueError(f"stack {node} of explorer {self.name!r} is linked to no control")
            children = self._state[node]["state"].get("children", [])
            i = indices[control]
            if not 0 <= i < len(children):
                raise ValueError(f"stack {node} has {len(children)} children, control {control} is at {i}")
            node = _ref(children[i])
        return node

    def html(self, indices: Sequence[int]) -> str:
        """The saved HTML of the leaf displayed at ``indices``."""
        return self._state[self.leaf(indices)]["state"].get("value", "")

    def combinations(self):
        """Every combination of control indices."""
        return itertools.product(*(range(len(c["labels"])) for c in self.controls))

    @property
    def default(self) -> tuple[int, ...]:
        """The control indices saved in the state (what the page shows first)."""
        return tuple(c["index"] for c in self.controls)


def _ref(value: Any) -> str:
    if not isinstance(value, str) or not value.startswith("IPY_MODEL_"):
        raise ValueError(f"expected a widget reference 'IPY_MODEL_<id>', got {value!r}")
    return value[len("IPY_MODEL_"):]


def decode_explorer(state: Mapping[str, Any], name: str) -> DecodedExplorer:
    """Read the explorer named ``name`` from saved widget state.

    Parameters
    ----------
    state : mapping
        Saved widget state: either the document ``{"version_major": 2, ..., "state": {...}}``
        a page embeds (``application/vnd.jupyter.widget-state+json``) or its ``state`` part,
        ``{model_id: {"model_name": ..., "state": {...}}}``.
    name : str
        The explorer's name.

    Returns
    -------
    DecodedExplorer
        Its controls (from the root box's first child, in order), and, through the
        ``jslink`` models of the state, which control selects each stack's child.

    Raises
    ------
    ValueError
        If no (or more than one) explorer of that name is in the state, or its structure is
        not controls + linked stacks.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str (the explorer's name), got {name!r:.80} of type {type(name).__name__}")
    models = state.get("state", state) if isinstance(state, Mapping) else None
    if not isinstance(models, Mapping):
        raise ValueError("state must be saved widget state (a mapping of model ids to models)")
    try:
        return _decode(models, name)
    except (AttributeError, KeyError, TypeError, IndexError) as exc:  # a malformed saved document
        raise ValueError(f"state is not well-formed saved widget state ({type(exc).__name__}: {exc})") from exc


def _decode(models: Mapping[str, Any], name: str) -> DecodedExplorer:
    cls = f"{EXPLORER_CLASS}-{name}"
    roots = [
        mid for mid, m in models.items()
        if cls in (m.get("state", {}).get("_dom_classes") or []) and m.get("model_name") == "VBoxModel"
    ]
    if len(roots) != 1:
        raise ValueError(f"expected one static explorer {name!r} (a VBox with class {cls}), found {len(roots)} "
                         "with that name")
    box = models[roots[0]]["state"]
    children = [_ref(c) for c in box.get("children", [])]
    if len(children) != 2 or models[children[1]]["model_name"] != "StackModel":
        raise ValueError(f"explorer {name!r}: expected children [controls box, stack], got {children}")
    control_ids = [_ref(c) for c in models[children[0]]["state"].get("children", [])]
    controls = []
    for mid in control_ids:
        s = models[mid]["state"]
        controls.append({
            "model_id": mid,
            "model_name": models[mid]["model_name"],
            "description": s.get("description", ""),
            "labels": list(s.get("_options_labels", [])),
            "index": s.get("index"),
        })
    position = {mid: i for i, mid in enumerate(control_ids)}
    control_of: dict[str, int] = {}
    for m in models.values():
        if m.get("model_name") not in ("LinkModel", "DirectionalLinkModel"):
            continue
        src, tgt = m["state"].get("source"), m["state"].get("target")
        if not (src and tgt):
            continue
        pairs = [(src, tgt)] + ([(tgt, src)] if m["model_name"] == "LinkModel" else [])
        for (a, a_attr), (b, b_attr) in pairs:
            a, b = _ref(a), _ref(b)
            if a in position and a_attr == "index" and b_attr == "selected_index":
                if b in control_of and control_of[b] != position[a]:
                    raise ValueError(f"explorer {name!r}: stack {b} is linked to two controls")
                control_of[b] = position[a]
    return DecodedExplorer(name=name, controls=controls, root=children[1], _state=dict(models), _control_of=control_of)
