"""The book's figure style and its text check (``fedbandit.book.plotting``).

The check must catch what readers saw in the built book (issue 26): overlapping log-axis tick
labels, a title running into the neighbouring panel's y-label, a legend over a reference
line and over that line's label, legends too small to read, text cut by the figure's edge,
ASCII math ("epsilon", "erdos_renyi"); and it must pass clean figures of the kinds the
chapters draw.  Every planted figure is also shown to be fixable, so a check that flags
everything would fail here too.
"""

from __future__ import annotations

import functools
import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from PIL import Image  # noqa: E402

from fedbandit.book import plotting  # noqa: E402
from fedbandit.book.plotting import (  # noqa: E402
    CONTENT_WIDTH_PX,
    FIGURE_WIDTH_IN,
    MIN_FONT_PT,
    PROVENANCE_KEY,
    SAVED_WIDTH_PX,
    FigureTextError,
    check_figure,
    figure_png,
    figure_problems,
    finish,
    log_ticks,
    log_ticks_within,
    to_book_width,
    use_book_style,
)


@pytest.fixture(autouse=True)
def book_style():
    with matplotlib.rc_context():
        use_book_style()
        yield
    plt.close("all")


# ------------------------------------------------------------------ planted problems


def overlapping_log_ticks(fixed=False):
    """Chapter 2's "Regret vs ε": a log axis over less than two decades with its own major
    labels; matplotlib also labels the minor ticks, on top of them."""
    fig, axes = plt.subplots(1, 2)
    eps = [0.5, 1, 2, 4, 8]
    for ax in axes:
        ax.plot(eps, eps)
        if fixed:
            log_ticks(ax, eps)
        else:
            ax.set_xscale("log")
            ax.set_xticks(eps, [f"{e:g}" for e in eps])
    return fig


def title_into_ylabel(fixed=False):
    """Chapter 2's "Privacy cost vs M": the left panel's long title runs into the right panel's y-label."""
    fig, axes = plt.subplots(1, 2, layout="constrained" if fixed else "none")
    title = "Privacy cost against the number of agents M,\nwith its fitted exponent" if fixed else \
        "Privacy cost against the number of agents M, with its fitted exponent"
    axes[0].set_title(title)
    axes[1].set_ylabel("regret of the\nfixed-batch algorithm" if fixed else
                       "a y-label that spans the whole height of the axes, top to bottom")
    return fig


def legend_over_reference_label(fixed=False):
    """Chapters 3-5: a reference line's label written where the legend sits."""
    fig, ax = plt.subplots()
    x = np.linspace(0, 1, 50)
    ax.plot(x, 0.5 * x, label="measured")
    ax.set_ylim(0, 1)
    ax.axhline(0.8, color="k", ls=":")
    ax.legend(loc="upper left")
    fig.canvas.draw()
    box = ax.get_legend().get_texts()[0].get_window_extent().transformed(ax.transAxes.inverted())
    where = (0.6, 0.82) if fixed else (box.x0, box.y0)
    ax.text(*where, r"bound $\tilde O(\sqrt{T})$", transform=ax.transAxes)
    return fig


def legend_over_reference_line(fixed=False):
    """Chapters 3-5: a reference line drawn through the legend's text."""
    fig, ax = plt.subplots()
    x = np.linspace(0, 1, 50)
    ax.plot(x, 0.5 * x, label="measured")
    ax.set_ylim(0, 1)
    ax.axhline(0.95, color="k", ls=":")
    ax.legend(loc="lower right" if fixed else "upper left")
    return fig


def legend_over_bars(fixed=False):
    fig, ax = plt.subplots()
    ax.bar(np.arange(6), [0.9, 0.95, 0.9, 0.95, 0.9, 0.95], label="fraction of trials")
    ax.set_ylim(0, 1.4 if fixed else 1.0)
    ax.legend(loc="upper center")
    return fig


def legend_over_markers(fixed=False):
    """Markers alone (no line) and scatter points under the legend's text."""
    fig, ax = plt.subplots()
    x = np.linspace(0, 1, 40)
    ax.plot(x, np.full_like(x, 0.9), "o", ls="none", label="measured points")
    ax.scatter(x, np.full_like(x, 0.85), s=10, label="scatter")
    ax.set_ylim(0, 1.4 if fixed else 1.0)
    ax.legend(loc="upper center")
    return fig


def tiny_legend(fixed=False):
    """Chapter 1's communication figure: a legend at 7 pt in a figure shown at 0.7x (≈ 5 pt)."""
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2], label="M=16, DP20 noise")
    ax.legend(fontsize=None if fixed else 7, loc="upper left")
    return fig


def legend_cut_by_edge(fixed=False):
    """A figure legend anchored below the figure (bbox_inches='tight' used to save it)."""
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2], label="no noise")
    ax.plot([1, 2], [2, 1], label="DP20 noise")
    if fixed:
        fig.legend(loc="outside lower center", ncol=2)
    else:
        fig.legend(loc="lower center", ncol=2, bbox_to_anchor=(0.5, -0.12))
    return fig


def ascii_math_labels(fixed=False):
    """Chapter 3's axes said "epsilon" and "erdos_renyi"."""
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2])
    ax.set_xlabel(r"$\varepsilon$" if fixed else "epsilon")
    ax.set_title("Erdős–Rényi graph" if fixed else "erdos_renyi graph")
    return fig


PLANTED = {
    "overlapping log-axis tick labels": (overlapping_log_ticks, "overlaps"),
    "title into the y-label": (title_into_ylabel, "overlaps y label"),
    "legend over a reference line's label": (legend_over_reference_label, "overlaps legend entry"),
    "legend over a reference line": (legend_over_reference_line, "lies on data"),
    "legend over bars": (legend_over_bars, "lies on data (a bar)"),
    "legend over markers": (legend_over_markers, "lies on data (markers"),
    "legend at 7 pt": (tiny_legend, "below 9 pt"),
    "legend cut by the figure's edge": (legend_cut_by_edge, "cut by the figure's edge"),
    "ASCII math": (ascii_math_labels, "spells math or code in ASCII"),
}


@pytest.mark.parametrize("name", PLANTED)
def test_planted_problem_is_caught(name):
    make, words = PLANTED[name]
    fig = make()
    to_book_width(fig)
    problems = figure_problems(fig)
    assert any(words in p for p in problems), problems
    with pytest.raises(FigureTextError, match="text problem"):
        check_figure(fig)


@pytest.mark.parametrize("name", PLANTED)
def test_the_planted_figure_once_fixed_passes(name):
    make, _ = PLANTED[name]
    fig = make(fixed=True)
    to_book_width(fig)
    assert figure_problems(fig) == []


def test_clean_figures_of_the_chapters_kinds_pass():
    x = np.arange(1, 65)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))  # finish() gives it the book's width
    plotting.band(axes[0], x, np.sqrt(x), 0.1 * np.sqrt(x), label=r"measured, $\pm 1$ s.e.")
    axes[0].plot(x, 1.1 * np.sqrt(x), "k:", label=r"theory $\sqrt{k}$")
    axes[0].set(xlabel="step $k$", ylabel="RMS error", title="Tree mechanism")
    log_ticks(axes[0], [1, 4, 16, 64])
    axes[0].legend(loc="upper left")
    axes[1].bar(np.arange(5), [0.2, 0.4, 0.1, 0.2, 0.1])
    axes[1].set(xlabel="arm", ylabel="fraction of trials", ylim=(0, 0.6))
    fig.suptitle(r"Continual release at $(\varepsilon, \delta) = (1, 10^{-5})$")
    to_book_width(fig)
    assert figure_problems(fig) == []


def test_text_size_is_judged_at_the_rendered_width():
    assert plotting.rendered_points_per_point(FIGURE_WIDTH_IN) == pytest.approx(1.0)
    # a figure twice as wide, shown in the same column, shows its text at half size
    assert plotting.rendered_points_per_point(2 * FIGURE_WIDTH_IN) == pytest.approx(0.5)
    fig, ax = plt.subplots(figsize=(2 * FIGURE_WIDTH_IN, 3))
    ax.plot([1, 2], [1, 2])
    problems = figure_problems(fig)
    assert any(f"below {MIN_FONT_PT:g} pt" in p for p in problems), problems
    assert figure_problems(fig, shown_px=2 * CONTENT_WIDTH_PX) == []


def test_the_check_leaves_matplotlib_as_it_found_it():
    draw = Text.draw
    fig = overlapping_log_ticks()
    with pytest.raises(FigureTextError):
        check_figure(fig)
    assert Text.draw is draw



def _ticks_follow_the_layout():
    """Three axes whose automatic ticks depend on their size: constrained layout is not idempotent here."""
    fig, axes = plt.subplots(1, 3, figsize=(10, 2.6))
    for k, ax in enumerate(axes):
        ax.plot(np.linspace(0, 123456.0 * (k + 1), 50), np.linspace(0, 0.000123 * (k + 2), 50), label="a line")
        ax.set(xlabel="round", ylabel="regret")
    fig.legend(loc="outside right upper")
    fig.suptitle("a suptitle")
    return to_book_width(fig)


def test_the_check_lays_the_figure_out_as_a_draw_does_without_rasterizing(monkeypatch):
    """The saved PNG after the check is the PNG after ``fig.canvas.draw()``, and the check paints nothing.

    This figure's saved bytes depend on whether it was laid out before ``savefig`` (its ticks
    follow the axes' size), so a check that skipped the layout would change the book's images.
    """
    from matplotlib.backends.backend_agg import RendererAgg

    def saved(prepare):
        fig = _ticks_follow_the_layout()
        prepare(fig)
        return _png(fig)

    after_draw = saved(lambda fig: fig.canvas.draw())
    assert saved(lambda fig: None) != after_draw  # the figure can tell a laid-out figure from a fresh one
    painted = []
    for name in ("draw_path", "draw_text", "draw_markers", "draw_path_collection"):
        original = getattr(RendererAgg, name)
        monkeypatch.setattr(RendererAgg, name,
                            lambda self, *a, _o=original, _n=name, **k: (painted.append(_n), _o(self, *a, **k))[1])
    assert saved(figure_problems) == after_draw
    assert painted.count("draw_text") > 0  # savefig paints through the counters
    painted.clear()
    fig = _ticks_follow_the_layout()
    figure_problems(fig)
    plt.close(fig)
    assert painted == []

def test_bad_figure_argument_is_refused_by_name():
    for func in (figure_problems, check_figure, figure_png):
        with pytest.raises(TypeError, match="fig"):
            func("not a figure")
    with pytest.raises(ValueError, match="shown_px"):
        figure_problems(plt.figure(), shown_px=-1)
    with pytest.raises(ValueError, match="ticks"):
        log_ticks(plt.gca(), [0, 1])


@pytest.mark.parametrize("lo, hi, max_ticks", [(950, 1900, 5), (0.3, 12, 5), (2, 50_000, 5), (1e-6, 1e6, 4), (3, 7, 3)])
def test_log_ticks_within_puts_round_ticks_inside_data_dependent_limits(lo, hi, max_ticks):
    # an axis whose range depends on the data (regret at quick or paper scale): ticks inside it, at most
    # max_ticks of them, at least two where the range holds two round numbers, labels that do not overlap
    fig, ax = plt.subplots()
    ax.plot([lo, hi], [lo, hi], label="data")
    ticks = log_ticks_within(ax, axis="y", max_ticks=max_ticks)
    y0, y1 = ax.get_ylim()
    assert ticks and len(ticks) <= max_ticks
    assert all(y0 <= t <= y1 for t in ticks)
    assert len(ticks) >= 2 or hi / lo < 1.5
    assert list(ax.get_yticks()) == ticks  # the labels are exactly these (set_ticks did not widen the view)
    plain = [f"{t:,.0f}" if 1 <= t < 1e6 and float(t).is_integer() else format(t, "g") for t in ticks]
    assert [t.get_text() for t in ax.get_yticklabels()] == plain
    to_book_width(fig)
    assert figure_problems(fig) == []


def test_log_ticks_within_refuses_bad_arguments_by_name():
    fig, ax = plt.subplots()
    ax.plot([1, 10], [1, 10])
    with pytest.raises(ValueError, match="axis"):
        log_ticks_within(ax, axis="z")
    with pytest.raises(ValueError, match="max_ticks"):
        log_ticks_within(ax, max_ticks=1)


# ------------------------------------------------------------------ finish and provenance


def _png_text(png: bytes) -> dict:
    with Image.open(io.BytesIO(png)) as img:
        return dict(img.text)


def test_png_records_that_it_was_checked():
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2])
    png = figure_png(fig)
    assert PROVENANCE_KEY in _png_text(png)
    assert PROVENANCE_KEY not in _png_text(figure_png(fig, checked=False))


class _Shell:
    pass


def test_finish_shows_the_checked_png_at_the_book_width(monkeypatch):
    shown = []
    monkeypatch.setattr(plotting, "_ipython", lambda: _Shell())
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda *a, **kw: shown.append((a, kw)))
    fig, ax = plt.subplots(figsize=(10, 3))
    ax.plot([1, 2], [1, 2])
    finish(fig, alt="a line")
    assert not plt.fignum_exists(fig.number), "finish must close the figure (the inline backend would show it again)"
    (args, kwargs), = shown
    data = args[0]
    import base64

    png = base64.b64decode(data["image/png"])
    with Image.open(io.BytesIO(png)) as img:
        assert img.size[0] == SAVED_WIDTH_PX
    assert PROVENANCE_KEY in _png_text(png)
    assert kwargs["metadata"]["image/png"]["width"] == CONTENT_WIDTH_PX


def test_finish_refuses_a_figure_with_overlapping_text_and_shows_nothing(monkeypatch):
    shown = []
    monkeypatch.setattr(plotting, "_ipython", lambda: _Shell())
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda *a, **kw: shown.append(a))
    fig = overlapping_log_ticks()
    with pytest.raises(FigureTextError, match="overlaps"):
        finish(fig)
    assert not shown and not plt.fignum_exists(fig.number)


# ---------------------------------------------------------------- shared math-text layouts


def _math_figure():
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 3.0), layout="constrained")
    ax.loglog([1e3, 1e5, 1e7], [2.0, 30.0, 400.0], label=r"$\varepsilon = 1$, $\sqrt{n}$")
    ax.set_title(r"error at $\hat S_t - S_t$")
    ax.set_xlabel(r"$n$")
    ax.legend(loc="upper left")
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


@pytest.fixture
def counted_mathtext(monkeypatch):
    """Matplotlib's own ``_parse_cached`` (an lru_cache(50) keyed by the parser), counting its layouts."""
    from matplotlib import mathtext

    current = mathtext.MathTextParser.__dict__["_parse_cached"]
    original = current.__wrapped__
    calls = []

    def counting(self, s, dpi, prop, antialiased, load_glyph_flags):
        calls.append(s)
        return original(self, s, dpi, prop, antialiased, load_glyph_flags)

    counting_cached = functools.lru_cache(50)(counting)
    monkeypatch.setattr(mathtext.MathTextParser, "_parse_cached", counting_cached)
    return mathtext.MathTextParser, counting_cached, calls


def test_mathtext_layouts_are_shared_across_figures_with_the_same_bytes(counted_mathtext):
    """A second figure parses no math text again, and every figure is the same PNG as matplotlib's own."""
    parser_class, own, calls = counted_mathtext
    matplotlib.rcParams.update(plotting.BOOK_STYLE)  # the style without the sharing

    def parses_per_figure(n):
        counts, pngs = [], []
        for _ in range(n):
            before = len(calls)
            pngs.append(_png(_math_figure()))
            counts.append(len(calls) - before)
        return counts, pngs

    own_counts, own_pngs = parses_per_figure(2)
    # matplotlib's cache is per parser, and every figure has its own renderers and parsers
    assert own_counts[0] > 0 and own_counts[1] > 0
    assert plotting.share_mathtext_layouts()
    assert parser_class.__dict__["_parse_cached"] is not own and plotting.share_mathtext_layouts()  # idempotent
    shared_counts, shared_pngs = parses_per_figure(3)
    assert shared_counts[0] > 0 and shared_counts[1:] == [0, 0]  # nothing parsed again
    assert own_pngs[0] == own_pngs[1] and shared_pngs == [own_pngs[0]] * 3


def test_mathtext_layouts_follow_the_mathtext_rcparams(counted_mathtext):
    """A layout depends on rcParams outside its arguments: the shared cache keys them, so a change is honoured."""
    parser_class, own, calls = counted_mathtext
    matplotlib.rcParams.update(plotting.BOOK_STYLE)
    with matplotlib.rc_context({"mathtext.default": "it"}):
        own_italic = _png(_math_figure())
    assert plotting.share_mathtext_layouts()
    plain = _png(_math_figure())
    with matplotlib.rc_context({"mathtext.default": "it"}):
        shared_italic = _png(_math_figure())
    assert shared_italic == own_italic and shared_italic != plain


def test_mathtext_sharing_leaves_an_unknown_matplotlib_alone(monkeypatch):
    """A ``_parse_cached`` of another shape (a future matplotlib) is not replaced."""
    from matplotlib import mathtext

    def other(self, s, dpi, prop, antialiased):
        raise AssertionError("not called")

    other_cached = functools.lru_cache(50)(other)
    monkeypatch.setattr(mathtext.MathTextParser, "_parse_cached", other_cached)
    assert plotting.share_mathtext_layouts() is False
    assert mathtext.MathTextParser.__dict__["_parse_cached"] is other_cached
