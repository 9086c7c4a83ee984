"""The book's figure style, and the one call every chapter finishes a figure with.

Every figure of the book is drawn in one style and finished by :func:`finish`, which

* gives it the book's one width, :data:`FIGURE_WIDTH_IN` (the page's content column,
  :data:`CONTENT_WIDTH_PX` CSS pixels, in CSS inches of 96 px): a point of text in the
  figure is then a point of text on the page, whatever the figure, and neighbouring
  figures show text at the same size;
* checks its text, after a draw (without rasterizing), from matplotlib's own text extents
  (:func:`figure_problems`): no two texts overlap (tick labels, axis labels, titles,
  legend entries, annotations), no text is cut by the figure's edge, no text is smaller
  than :data:`MIN_FONT_PT` points as rendered in the column, no legend entry lies on
  data (a line, a marker, a bar), and no figure text spells math or code in ASCII
  ("epsilon", "sqrt(", "M^(", "erdos_renyi"; write mathtext, ``r"$\\varepsilon$"``);
  any problem raises :class:`FigureTextError`, so the notebook (and the book build) fails;
* saves it as a PNG of :data:`SAVED_WIDTH_PX` pixels (twice the column, for sharp text on
  high-density screens) carrying the provenance text chunk :data:`PROVENANCE_KEY`, which the
  browser check of the built book reads back from every figure of every page, and
  displays it at the column's width.

The explorers (:mod:`fedbandit.book.explorer`) render their frames at the same width and run
the same check (they mark each frame with its result instead of raising).
"""

from __future__ import annotations

import functools
import inspect
import io
import re
from collections.abc import Iterator
from contextlib import contextmanager

import matplotlib as mpl
import numpy as np

__all__ = [
    "use_book_style",
    "band",
    "log_ticks",
    "log_ticks_within",
    "to_book_width",
    "finish",
    "check_figure",
    "figure_problems",
    "figure_png",
    "FigureTextError",
    "CONTENT_WIDTH_PX",
    "FIGURE_WIDTH_IN",
    "SAVED_WIDTH_PX",
    "MIN_FONT_PT",
    "PROVENANCE_KEY",
]

#: Width of the page's content column in the sphinx-book-theme at a desktop viewport (CSS px).
CONTENT_WIDTH_PX = 688
#: CSS pixels per CSS inch.
CSS_PX_PER_IN = 96
#: Every figure's width: the content column, in inches, so figure points are page points.
FIGURE_WIDTH_IN = CONTENT_WIDTH_PX / CSS_PX_PER_IN
#: Saved pixels per CSS pixel (2: sharp on high-density screens).
SAVE_SCALE = 2
#: Resolution of the saved PNG (dots per figure inch).
SAVE_DPI = CSS_PX_PER_IN * SAVE_SCALE
#: Width of every saved figure, in pixels.
SAVED_WIDTH_PX = CONTENT_WIDTH_PX * SAVE_SCALE
#: Smallest text allowed, in points as rendered in the content column.
MIN_FONT_PT = 9.0
#: Key of the PNG text chunk that records that :func:`finish` checked the figure.
PROVENANCE_KEY = "fedbandit-figure"
#: Overlaps and overhangs smaller than this (points) are not problems (antialiasing, rounding).
TOLERANCE_PT = 0.5

BOOK_STYLE = {
    "figure.figsize": (FIGURE_WIDTH_IN, 3.6),
    # What a notebook's inline backend shows for a figure not finished by finish() (it crops with
    # bbox_inches="tight"); finish() saves at SAVE_DPI with nothing cropped, whatever these say.
    "figure.dpi": 110,
    "savefig.dpi": 110,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "legend.loc": "best",
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "legend.title_fontsize": 9,
    "figure.titlesize": 11,
    "mathtext.fontset": "dejavusans",  # math in the text's own face
    "axes.formatter.use_mathtext": True,
}


class FigureTextError(ValueError):
    """A figure's text overlaps, is cut, is too small, lies on data, or spells math in ASCII."""


def use_book_style() -> None:
    """Apply the book's matplotlib style and share math-text layouts across figures (idempotent)."""
    mpl.rcParams.update(BOOK_STYLE)
    share_mathtext_layouts()


#: How many math-text layouts :func:`share_mathtext_layouts` keeps (matplotlib keeps 50 per parser).
MATHTEXT_LAYOUTS_KEPT = 2048
#: The rcParams a math-text layout reads besides its arguments (font choice, hinting, kerning).
_MATHTEXT_RC_PREFIXES = ("mathtext.", "text.hinting", "text.kerning_factor")
_MATHTEXT_PARSE_ARGS = ["self", "s", "dpi", "prop", "antialiased", "load_glyph_flags"]


def share_mathtext_layouts() -> bool:
    """Let every figure reuse the math-text layouts any figure has computed, with the same pixels.

    Matplotlib (3.9-3.11) caches a parsed math text (a tick label such as ``$10^{3}$``, an
    ``$\\varepsilon$`` in a title) in an ``lru_cache(50)`` on
    ``MathTextParser._parse_cached``, keyed by the parser instance among the text's arguments.
    Every Agg renderer makes its own parser, and every figure (and every ``savefig``) its own
    renderer, so a page of many similar figures, an explorer's frames above all, parses the
    same labels again in every frame: a quarter of an explorer frame's time.  This replaces the
    method by one cache that keys a layout by the parser's output type instead of the parser,
    the only attribute of the instance the layout reads, plus the rcParams the layout reads
    (``mathtext.*``, hinting, kerning; matplotlib's cache omits them).  The layout is the same
    object the original method returns for those arguments, so figures are the same to the
    byte (``tests/test_plotting.py``).

    Returns
    -------
    bool
        True if the shared cache is installed; False (and nothing changed) on a matplotlib
        whose ``_parse_cached`` is not the method described above.
    """
    from matplotlib import mathtext

    current = mathtext.MathTextParser.__dict__.get("_parse_cached")
    if getattr(current, "_fedbandit_shared", False):
        return True
    original = getattr(current, "__wrapped__", None)
    if original is None or list(inspect.signature(original).parameters) != _MATHTEXT_PARSE_ARGS:
        return False
    rc_keys = tuple(k for k in mpl.rcParams if k.startswith(_MATHTEXT_RC_PREFIXES))
    parsers: dict[str, object] = {}

    @functools.lru_cache(maxsize=MATHTEXT_LAYOUTS_KEPT)
    def layout(output_type, rc, s, dpi, prop, antialiased, load_glyph_flags):
        return original(parsers[output_type], s, dpi, prop, antialiased, load_glyph_flags)

    def _parse_cached(self, s, dpi, prop, antialiased, load_glyph_flags):
        parsers.setdefault(self._output_type, self)
        rc = tuple(mpl.rcParams[k] for k in rc_keys)
        return layout(self._output_type, rc, s, dpi, prop, antialiased, load_glyph_flags)

    _parse_cached._fedbandit_shared = True  # type: ignore[attr-defined]
    _parse_cached.__wrapped__ = original  # type: ignore[attr-defined]
    mathtext.MathTextParser._parse_cached = _parse_cached
    return True


def band(ax, x, mean, se, *, label=None, color=None, alpha=0.25, **line_kwargs):
    """Plot ``mean`` with a shaded ±1 standard-error band; returns the line."""
    (line,) = ax.plot(x, mean, label=label, color=color, **line_kwargs)
    ax.fill_between(x, np.asarray(mean) - se, np.asarray(mean) + se, color=line.get_color(), alpha=alpha, lw=0)
    return line


def log_ticks(ax, ticks, *, axis: str = "x", fmt: str = "g") -> None:
    """Log-scale ``axis`` of ``ax`` with exactly ``ticks``, labelled as plain numbers, and no minor labels.

    A log axis spanning less than a decade or two labels its minor ticks too
    ("6×10⁻¹" next to a major "0.5"), and those labels overlap; this is the one place the
    book fixes that.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The axes.
    ticks : sequence of float
        Positive tick positions.
    axis : {"x", "y"}, default "x"
        Which axis.
    fmt : str, default "g"
        Format of the labels.
    """
    from matplotlib.ticker import NullFormatter

    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', got {axis!r}")
    ticks = [float(t) for t in ticks]
    if not ticks or any(not np.isfinite(t) or t <= 0 for t in ticks):
        raise ValueError(f"ticks must be positive finite numbers, got {ticks!r}")
    which = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    which.set_ticks(ticks, [format(t, fmt) for t in ticks])
    which.set_minor_formatter(NullFormatter())


#: Tick mantissas per decade for :func:`log_ticks_within`, from sparse to dense.
_LOG_TICK_MANTISSAS = ((1.0,), (1.0, 3.0), (1.0, 2.0, 5.0), (1.0, 1.5, 2.0, 3.0, 5.0, 7.0),
                       (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0))


def _plain_number(t: float) -> str:
    """A tick label: thousands separated below a million (``"20,000"``), ``g`` format otherwise."""
    if 1 <= t < 1e6 and float(t).is_integer():
        return f"{t:,.0f}"
    return format(t, "g")


def log_ticks_within(ax, *, axis: str = "y", max_ticks: int = 5) -> list[float]:
    """Log-scale ``axis`` of ``ax`` with at most ``max_ticks`` round ticks inside its current limits.

    For an axis whose range depends on the data (regret, error), where fixed tick positions
    might fall outside the data: call it after plotting.  The ticks are the densest of the
    mantissa sets (1,), (1, 3), (1, 2, 5), ... per decade (or every second, third, ... decade)
    that gives at most ``max_ticks`` ticks inside the autoscaled limits; they are set through
    :func:`log_ticks` (no minor labels) with plain-number labels, and the limits are kept.
    (A range narrower than a decade gets the finer mantissas 1, 1.2, 1.5, 2, 2.5, ...)

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The axes, with its data drawn.
    axis : {"x", "y"}, default "y"
        Which axis.
    max_ticks : int, default 5
        Most ticks allowed (at least 2).

    Returns
    -------
    list of float
        The ticks set (empty if no round number lies inside the limits, which are then left
        with matplotlib's own log ticks).
    """
    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', got {axis!r}")
    if isinstance(max_ticks, bool) or not isinstance(max_ticks, int) or max_ticks < 2:
        raise ValueError(f"max_ticks must be an integer >= 2, got {max_ticks!r}")
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo < hi):
        raise ValueError(f"the {axis} limits of ax must be positive and finite on a log axis, got {(lo, hi)!r}")
    decades = range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
    chosen: list[float] = []
    for subs in _LOG_TICK_MANTISSAS:  # sparse to dense: the densest that fits wins
        ticks = [float(f"{m * 10.0 ** d:.12g}") for d in decades for m in subs]
        ticks = [t for t in ticks if lo <= t <= hi]
        if len(ticks) > max_ticks:
            break
        chosen = ticks
    if not chosen:  # even one tick per decade is too many: every n-th decade
        ticks = [10.0 ** d for d in decades if lo <= 10.0 ** d <= hi]
        chosen = ticks[::int(np.ceil(len(ticks) / max_ticks))]
    if not chosen:
        return []
    log_ticks(ax, chosen, axis=axis)
    which = ax.xaxis if axis == "x" else ax.yaxis
    which.set_ticks(chosen, [_plain_number(t) for t in chosen])
    (ax.set_xlim if axis == "x" else ax.set_ylim)(lo, hi)
    return chosen


# ------------------------------------------------------------------ what was drawn


def _check_fig(fig):
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__} {fig!r:.80}")
    return fig


@contextmanager
def _recording_texts() -> Iterator[list]:
    """Record every text artist drawn (visible, non-empty) while the context is open."""
    from matplotlib.text import Text

    drawn: list = []
    original = Text.draw

    def draw(self, renderer):
        if self.get_visible() and self.get_text() != "":
            drawn.append(self)
        return original(self, renderer)

    Text.draw = draw
    try:
        yield drawn
    finally:
        Text.draw = original


def _drawn_texts(fig) -> tuple[list, object]:
    """Draw ``fig`` without rasterizing it and return (the texts really drawn, in drawing order, the renderer).

    ``Figure.draw_without_rendering`` runs the layout engine and every artist's ``draw`` at the
    figure's dpi, as ``fig.canvas.draw()`` does, with the renderer's drawing methods disabled:
    the same layout and text extents, without the pixels, which nothing here reads (the PNG
    is rendered afterwards by ``savefig``).
    """
    with _recording_texts() as drawn:
        fig.draw_without_rendering()
    unique, seen = [], set()
    for text in drawn:
        if id(text) not in seen:
            seen.add(id(text))
            unique.append(text)
    return unique, fig.canvas.get_renderer()


def _describe(text, fig) -> str:
    """What a text is, for the error message: ``x tick label '10^2' (axes 1)``."""
    label = re.sub(r"\\mathdefault\{(.*)\}", r"\1", text.get_text().replace("\n", " "))
    label = label if len(label) <= 40 else label[:37] + "..."
    for n, ax in enumerate(fig.axes, 1):
        where = f" (axes {n})" if len(fig.axes) > 1 else ""
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if text is axis.label:
                return f"{name} label {label!r}{where}"
            if text is axis.get_offset_text():
                return f"{name} offset text {label!r}{where}"
            ticks = axis.get_major_ticks() + axis.get_minor_ticks()
            if any(text is t.label1 or text is t.label2 for t in ticks):
                return f"{name} tick label {label!r}{where}"
        if text is ax.title or text in (getattr(ax, "_left_title", None), getattr(ax, "_right_title", None)):
            return f"title {label!r}{where}"
        legend = ax.get_legend()
        if legend is not None and (text in legend.get_texts() or text is legend.get_title()):
            return f"legend entry {label!r}{where}"
        if text in ax.texts:
            return f"annotation {label!r}{where}"
    for legend in fig.legends:
        if text in legend.get_texts() or text is legend.get_title():
            return f"figure legend entry {label!r}"
    return f"text {label!r}"


def _legend_texts(fig) -> list[tuple[object, list]]:
    """(legend text, the axes whose data it must not cover) for every legend of the figure."""
    out = []
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            out += [(t, [ax]) for t in legend.get_texts()]
    for legend in fig.legends:
        if legend.get_visible():
            out += [(t, list(fig.axes)) for t in legend.get_texts()]
    return out


def _any_inside(box, xy: np.ndarray) -> bool:
    """Whether any of the points ``xy`` (display coordinates, shape (n, 2)) lies in ``box``."""
    return bool(np.any((xy[:, 0] >= box.x0) & (xy[:, 0] <= box.x1) & (xy[:, 1] >= box.y0) & (xy[:, 1] <= box.y1)))


def _data_hits(ax, box, renderer) -> list[str]:
    """The data artists of ``ax`` (lines, markers, bars, line collections) that cross ``box``."""
    from matplotlib.collections import LineCollection, PathCollection
    from matplotlib.patches import Rectangle
    from matplotlib.transforms import Bbox

    clip = Bbox.intersection(box, ax.bbox)
    if clip is None or clip.width <= 0 or clip.height <= 0:
        return []
    hits = []
    for line in ax.lines:
        if not line.get_visible():
            continue
        xy = line.get_transform().transform(np.column_stack(line.get_data(orig=False)).astype(float))
        xy = xy[np.all(np.isfinite(xy), axis=1)]
        if len(xy) == 0:
            continue
        name = line.get_label() if not str(line.get_label()).startswith("_") else "a line"
        if line.get_linestyle() not in ("None", "none", "", " ") and len(xy) > 1:
            from matplotlib.path import Path

            if Path(xy).intersects_bbox(clip, filled=False):
                hits.append(f"{name!r}" if name != "a line" else name)
                continue
        if line.get_marker() not in (None, "None", "none", "", " "):
            if _any_inside(clip, xy):
                hits.append(f"markers of {name!r}" if name != "a line" else "markers")
    for coll in ax.collections:
        if not coll.get_visible():
            continue
        if isinstance(coll, PathCollection) and len(coll.get_offsets()):
            xy = coll.get_offset_transform().transform(np.asarray(coll.get_offsets(), dtype=float))
            xy = xy[np.all(np.isfinite(xy), axis=1)]
            if len(xy) and _any_inside(clip, xy):
                hits.append("scatter markers")
        elif isinstance(coll, LineCollection):
            from matplotlib.path import Path

            transform = coll.get_transform()
            for seg in coll.get_segments():
                seg = transform.transform(np.asarray(seg, dtype=float))
                seg = seg[np.all(np.isfinite(seg), axis=1)]
                if len(seg) > 1 and Path(seg).intersects_bbox(clip, filled=False):
                    hits.append("a line collection")
                    break
    for patch in ax.patches:
        if not (patch.get_visible() and isinstance(patch, Rectangle)):
            continue
        ext = patch.get_window_extent(renderer)
        # spans over the whole axes (axvspan, axhspan) shade a region: they are not data points
        if ext.width >= ax.bbox.width - 1 or ext.height >= ax.bbox.height - 1:
            continue
        if ext.width > 0 and ext.height > 0 and ext.overlaps(clip):
            hits.append("a bar")
    return hits


# mathtext segments are math; outside them, these spell math or code in ASCII
_MATH_SEGMENT = re.compile(r"(?<!\\)\$.*?(?<!\\)\$")
_ASCII_MATH = re.compile(
    r"sqrt\(|\^\(|\b(?:epsilon|varepsilon|delta|sigma|rho|kappa|lambda|theta)\b|\b[a-z][a-z0-9]*_[a-z0-9_]+\b"
)


def _overlap(a, b, tol: float) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > tol and min(a.y1, b.y1) - max(a.y0, b.y0) > tol


def _line_boxes(text, box, renderer) -> list:
    """The boxes of a horizontal multi-line text's lines (the whole box for one line or rotated text).

    The extent of a multi-line text is the box around all its lines: a short second line
    leaves empty corners that other texts may occupy without overlapping any letter.
    """
    from matplotlib.transforms import Bbox

    content = text.get_text()
    if "\n" not in content or text.get_rotation() % 360 != 0:
        return [box]
    parts = content.split("\n")
    height = box.height / len(parts)
    align = text.get_horizontalalignment()  # the lines are aligned as the text (matplotlib's default)
    out = []
    for k, part in enumerate(parts):
        ismath = "TeX" if text.get_usetex() else (part.count("$") - part.count("\\$")) >= 2
        width = renderer.get_text_width_height_descent(part, text.get_fontproperties(), ismath=ismath)[0] if part else 0.0
        width = min(width, box.width)
        x0 = {"left": box.x0, "right": box.x1 - width}.get(align, box.x0 + (box.width - width) / 2)
        y1 = box.y1 - k * height
        out.append(Bbox([[x0, y1 - height], [x0 + width, y1]]))
    return out


def figure_problems(fig, *, shown_px: float = CONTENT_WIDTH_PX) -> list[str]:
    """Everything wrong with ``fig``'s text, drawn at the book's width (empty: the figure is fine).

    Draws the figure (``fig.draw_without_rendering()``) and reads matplotlib's extent of every text it
    drew (``Text.get_window_extent``): tick labels, axis labels and offsets, titles, legend
    entries, annotations, figure texts.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure, at the size it will be saved at (:func:`finish` sets the book's width first).
    shown_px : float, default :data:`CONTENT_WIDTH_PX`
        The width the page shows the figure at, in CSS pixels (text sizes are judged there).

    Returns
    -------
    list of str
        One sentence per problem: two texts that overlap, a text cut by the figure's edge, a
        text smaller than :data:`MIN_FONT_PT` points as rendered in the content column, a
        legend entry lying on data, a text spelling math or code in ASCII.
    """
    _check_fig(fig)
    if isinstance(shown_px, bool) or not isinstance(shown_px, (int, float)) or not np.isfinite(shown_px) or shown_px <= 0:
        raise ValueError(f"shown_px must be a positive number of CSS pixels, got {shown_px!r}")
    texts, renderer = _drawn_texts(fig)
    to_px = fig.dpi / 72.0
    tol = TOLERANCE_PT * to_px
    scale = rendered_points_per_point(fig.get_size_inches()[0], shown_px)
    boxes = [(t, t.get_window_extent(renderer)) for t in texts]
    lines = {id(t): _line_boxes(t, box, renderer) for t, box in boxes}
    problems = []
    for i, (a, box_a) in enumerate(boxes):
        size = a.get_fontsize() * scale
        if size < MIN_FONT_PT - 1e-9:
            problems.append(f"{_describe(a, fig)} is {size:.1f} pt in the page's column, below {MIN_FONT_PT:g} pt")
        plain = _MATH_SEGMENT.sub(" ", a.get_text())
        ascii_math = _ASCII_MATH.search(plain)
        if ascii_math:
            problems.append(f"{_describe(a, fig)} spells math or code in ASCII ({ascii_math.group(0)!r}): "
                            "write it as mathtext or words")
        fb = fig.bbox
        if (box_a.x0 < fb.x0 - tol or box_a.x1 > fb.x1 + tol or box_a.y0 < fb.y0 - tol or box_a.y1 > fb.y1 + tol):
            problems.append(f"{_describe(a, fig)} is cut by the figure's edge")
        for b, box_b in boxes[i + 1:]:
            if _overlap(box_a, box_b, tol) and any(
                    _overlap(la, lb, tol) for la in lines[id(a)] for lb in lines[id(b)]):
                problems.append(f"{_describe(a, fig)} overlaps {_describe(b, fig)}")
    drawn = {id(t) for t in texts}
    for text, axes in _legend_texts(fig):
        if id(text) not in drawn:
            continue
        box = text.get_window_extent(renderer)
        for ax in axes:
            hits = _data_hits(ax, box, renderer)
            if hits:
                problems.append(f"{_describe(text, fig)} lies on data ({', '.join(sorted(set(hits)))}): "
                                "place the legend clear of the data (loc=..., or outside the axes)")
                break
    return problems


def rendered_points_per_point(width_in: float, shown_px: float = CONTENT_WIDTH_PX) -> float:
    """Points on the page per point of a figure ``width_in`` inches wide shown ``shown_px`` CSS pixels wide.

    A CSS inch is :data:`CSS_PX_PER_IN` CSS pixels; at :data:`FIGURE_WIDTH_IN` shown in the
    content column this is exactly 1.
    """
    return shown_px / (width_in * CSS_PX_PER_IN)


def check_figure(fig) -> None:
    """Raise :class:`FigureTextError` listing :func:`figure_problems` of ``fig``, if any.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure to check, at its saved size.

    Raises
    ------
    FigureTextError
        If the figure has any problem; the message lists them all.
    """
    problems = figure_problems(fig)
    if problems:
        title = next((ax.get_title() for ax in fig.axes if ax.get_title()), "") or "untitled"
        raise FigureTextError(f"figure {title!r} has {len(problems)} text problem(s):\n  " + "\n  ".join(problems))


def to_book_width(fig):
    """Give ``fig`` the book's width :data:`FIGURE_WIDTH_IN` (its height is kept) and a layout engine.

    A figure without a layout engine gets matplotlib's constrained layout, which makes room
    for titles, labels and legends placed outside the axes (``fig.legend(loc="outside
    lower center")``); a figure that has one (``layout="tight"``) keeps it.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure (changed in place).

    Returns
    -------
    matplotlib.figure.Figure
        ``fig``.
    """
    _check_fig(fig)
    fig.set_size_inches(FIGURE_WIDTH_IN, fig.get_size_inches()[1])
    if fig.get_layout_engine() is None:
        fig.set_layout_engine("constrained")
    return fig


def _provenance(fig) -> str:
    return (f"checked by fedbandit.book.finish: {fig.get_size_inches()[0] * SAVE_DPI:.0f} px wide, shown at "
            f"{CONTENT_WIDTH_PX} px; no overlapping or cut text; text >= {MIN_FONT_PT:g} pt; legends clear of data")


def figure_png(fig, *, dpi: float = SAVE_DPI, checked: bool = True) -> bytes:
    """The PNG of ``fig`` at ``dpi``, with the provenance chunk :data:`PROVENANCE_KEY` when ``checked``.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure (not resized: :func:`finish` sets the width first).
    dpi : float, default :data:`SAVE_DPI`
        Resolution.
    checked : bool, default True
        Whether the figure passed :func:`check_figure` (only then does the PNG say so).

    Returns
    -------
    bytes
        The PNG file's bytes.
    """
    _check_fig(fig)
    if isinstance(dpi, bool) or not isinstance(dpi, (int, float)) or not np.isfinite(dpi) or not 10 <= dpi <= 600:
        raise ValueError(f"dpi must be a number in [10, 600], got {dpi!r}")
    if not isinstance(checked, bool):
        raise TypeError(f"checked must be a bool, got {type(checked).__name__}")
    metadata = {PROVENANCE_KEY: _provenance(fig)} if checked else {}
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches=None, metadata=metadata)
    return buf.getvalue()


def finish(fig=None, *, alt: str | None = None) -> None:
    """Finish a figure the book's way: the book's width, the text check, a PNG, shown; then close it.

    Sets the figure's width to :data:`FIGURE_WIDTH_IN` (its height is kept; :func:`to_book_width`), raises
    :class:`FigureTextError` if :func:`figure_problems` finds anything, and displays the
    PNG (:data:`SAVED_WIDTH_PX` wide, shown :data:`CONTENT_WIDTH_PX` wide, with the
    provenance chunk :data:`PROVENANCE_KEY`).  Outside IPython it calls ``plt.show()``
    after the check instead.  The figure is closed either way, so the notebook's inline
    backend does not show it a second time (or, after an error, at all).

    Parameters
    ----------
    fig : matplotlib.figure.Figure, optional
        Default: the current figure.
    alt : str, optional
        Alternative text of the image (for screen readers).

    Raises
    ------
    FigureTextError
        If the figure's text overlaps, is cut, too small, on data, or ASCII math.
    """
    import matplotlib.pyplot as plt

    fig = plt.gcf() if fig is None else _check_fig(fig)
    if alt is not None and not isinstance(alt, str):
        raise TypeError(f"alt must be a str, got {type(alt).__name__}")
    try:
        to_book_width(fig)
        check_figure(fig)
        shell = _ipython()
        if shell is None:
            plt.show()
            return
        png = figure_png(fig)
    finally:
        plt.close(fig)
    import base64

    from IPython.display import display

    metadata = {"width": CONTENT_WIDTH_PX}
    if alt:
        metadata["alt"] = alt
    display({"image/png": base64.b64encode(png).decode("ascii"), "text/plain": f"<figure: {alt or 'book figure'}>"},
            raw=True, metadata={"image/png": metadata})


def _ipython():
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency of the book extra
        return None
    return get_ipython()
