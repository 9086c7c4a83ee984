"""The static explorers (fedbandit.book.explorer): precomputed outputs switched by linked controls.

The widget tree is checked through :func:`decode_explorer` on the saved state, the same
reading the browser check applies to the built pages; the browser check then asserts that
the page displays what the state says.
"""

from __future__ import annotations

import base64
import io
import os

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

ipywidgets = pytest.importorskip("ipywidgets")
from ipywidgets.embed import dependency_state  # noqa: E402

from fedbandit.book import Control, make_explorer  # noqa: E402
from fedbandit.book import explorer as explorer_module  # noqa: E402
from fedbandit.book.explorer import decode_explorer, explorer_mode  # noqa: E402


def _figure(a, kind, z="p"):
    """A figure that encodes its arguments: one bar per argument, heights from the values."""
    fig, ax = plt.subplots(figsize=(2.0, 1.5))
    ax.bar([0, 1, 2], [a, {"sin": 1, "cos": 2}[kind], {"p": 1, "q": 3}[z]])
    ax.set_ylim(0, 4)
    ax.set_axis_off()
    return fig


CONTROLS = {"a": Control([1, 2, 3], default=2), "kind": Control(["sin", "cos"], kind="toggle"), "z": ["p", "q"]}


def _state(widget) -> dict:
    # what a page saves for this widget: its state and its dependencies' (links included)
    state = dependency_state(widget, drop_defaults=False)
    for link in getattr(widget, "explorer_links", []):
        state.update(dependency_state(link, drop_defaults=False))
    return {"version_major": 2, "version_minor": 0, "state": state}


def _png(html: str) -> bytes:
    start = html.index("base64,") + len("base64,")
    return base64.b64decode(html[start:html.index('"', start)])


def _pixels(png: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def _expected(**kw) -> np.ndarray:
    fig = _figure(**kw)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=40)
    plt.close(fig)
    return _pixels(buf.getvalue())


def _check_table(state, name="demo", controls=CONTROLS):
    """Every combination of control indices shows the precomputed output of those values."""
    decoded = decode_explorer(state, name)
    specs = {k: v if isinstance(v, Control) else Control(v) for k, v in controls.items()}
    assert [c["labels"] for c in decoded.controls] == [list(s.labels) for s in specs.values()]
    for idx in decoded.combinations():
        values = {k: s.values[i] for (k, s), i in zip(specs.items(), idx)}
        shown = _pixels(_png(decoded.html(idx)))
        want = _expected(**values)
        assert shown.shape == want.shape
        # the palette re-encoding changes colours by a few levels at most
        assert np.abs(shown.astype(int) - want.astype(int)).max() <= 16, (idx, values)
    return decoded


def test_static_explorer_shows_the_output_of_every_combination():
    before = set(plt.get_fignums())
    w = make_explorer(_figure, CONTROLS, name="demo", mode="static", dpi=40)
    assert set(plt.get_fignums()) == before, "the explorer left figures open (the inline backend would show them)"
    decoded = _check_table(_state(w))
    assert decoded.default == (1, 0, 0)  # a = 2 is the default
    assert w.explorer_info["n_combinations"] == 12 and w.explorer_info["n_outputs"] == 12
    assert "fedbandit-explorer" in w._dom_classes and "fedbandit-explorer-demo" in w._dom_classes
    kinds = [c["model_name"] for c in decoded.controls]
    assert kinds == ["SelectionSliderModel", "ToggleButtonsModel", "DropdownModel"]


def test_the_table_check_catches_swapped_links():
    """A deliberately broken explorer (the links of two controls swapped) fails the table check."""
    w = make_explorer(_figure, CONTROLS, name="demo", mode="static", dpi=40)
    state = _state(w)
    _check_table(state)
    kind, z = (c["model_id"] for c in decode_explorer(state, "demo").controls[1:])
    swap = {f"IPY_MODEL_{kind}": f"IPY_MODEL_{z}", f"IPY_MODEL_{z}": f"IPY_MODEL_{kind}"}
    for model in state["state"].values():
        if model["model_name"] == "LinkModel":
            source = model["state"]["source"]
            source[0] = swap.get(source[0], source[0])
    with pytest.raises(AssertionError):
        _check_table(state)


def test_the_table_check_catches_a_wrong_output():
    """A deliberately broken function (one combination drawn with the wrong value) fails."""

    def off_by_one(a, kind, z="p"):
        return _figure(a + (1 if (a, kind, z) == (3, "cos", "q") else 0), kind, z)

    w = make_explorer(off_by_one, CONTROLS, name="demo", mode="static", dpi=40)
    with pytest.raises(AssertionError):
        _check_table(_state(w))


def test_equal_outputs_share_one_leaf_and_notes_render():
    def f(x, y):
        if y == "none":
            return "not computed for this combination"
        fig, ax = plt.subplots(figsize=(1, 1))
        ax.plot([0, x])
        return fig

    w = make_explorer(f, {"x": [1, 2], "y": ["none", "plot"]}, name="notes", mode="static", dpi=30)
    info = w.explorer_info
    assert info["n_combinations"] == 4 and info["n_outputs"] == 3
    decoded = decode_explorer(_state(w), "notes")
    assert decoded.leaf((0, 0)) == decoded.leaf((1, 0))
    assert "not computed for this combination" in decoded.html((0, 0))
    assert decoded.html((0, 1)) != decoded.html((1, 1))


def test_live_explorer_is_interactive():
    w = make_explorer(_figure, CONTROLS, name="demo", mode="live")
    assert isinstance(w, ipywidgets.interactive)
    assert "fedbandit-explorer-live" in w._dom_classes
    assert [c.description for c in w.children[:-1]] == ["a", "kind", "z"]
    assert w.children[0].value == 2  # the default


def test_mode_from_environment(monkeypatch):
    monkeypatch.delenv("FEDBANDIT_EXPLORER", raising=False)
    assert explorer_mode() == "live"
    monkeypatch.setenv("FEDBANDIT_EXPLORER", "static")
    assert explorer_mode() == "static"
    monkeypatch.setenv("FEDBANDIT_EXPLORER", "kernel")
    with pytest.raises(ValueError, match="FEDBANDIT_EXPLORER"):
        explorer_mode()


def test_the_book_build_sets_static_mode(monkeypatch):
    """The Sphinx extension switches the explorers to static before any notebook runs."""
    from fedbandit.book import sphinx_ext

    monkeypatch.delenv("FEDBANDIT_EXPLORER", raising=False)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    sphinx_ext._static_build_environment(None, None)
    assert os.environ["FEDBANDIT_EXPLORER"] == "static" and os.environ["TQDM_DISABLE"] == "1"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(controls={}), "controls"),
        (dict(controls={"a": 3}), "controls\\['a'\\]"),
        (dict(controls={"a": "abc"}), "controls\\['a'\\]"),
        (dict(controls={"b": [1]}), "func cannot be called"),
        (dict(name="Bad Name"), "name"),
        (dict(mode="kernel"), "mode"),
        (dict(dpi=0), "dpi"),
        (dict(dpi=float("nan")), "dpi"),
        (dict(max_outputs=0), "max_outputs"),
        (dict(max_outputs=5, mode="static"), "max_outputs=5"),
        (dict(func=3), "func"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(kwargs, match):
    calls = []

    def f(a, kind="sin", z="p"):
        calls.append(a)
        return _figure(a, kind, z)

    args = dict(func=f, controls=CONTROLS, name="demo", mode="static")
    args.update(kwargs)
    with pytest.raises((TypeError, ValueError), match=match):
        make_explorer(args.pop("func"), args.pop("controls"), **args)
    assert not calls


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(values=[]), "values"),
        (dict(values=5), "values"),
        (dict(values=[1, 1]), "repeat"),
        (dict(values=[1, 2], default=3), "default"),
        (dict(values=[1, 2], labels=["x"]), "labels"),
        (dict(values=[1, 2], labels=["x", "x"]), "distinct"),
        (dict(values=[1, 2], kind="knob"), "kind"),
    ],
)
def test_bad_controls_are_refused(kwargs, match):
    with pytest.raises((TypeError, ValueError), match=match):
        Control(**kwargs)


def test_func_must_return_a_figure_or_a_note():
    with pytest.raises(TypeError, match="matplotlib Figure"):
        make_explorer(lambda a: 42, {"a": [1]}, name="x", mode="static")


def test_stray_figures_are_closed():
    def f(a):
        plt.figure()  # a figure the function forgets
        fig, ax = plt.subplots()
        ax.plot([0, a])
        return fig

    before = set(plt.get_fignums())
    make_explorer(f, {"a": [1, 2]}, name="x", mode="static", dpi=20)
    assert set(plt.get_fignums()) == before


def test_decode_refuses_what_is_not_an_explorer():
    w = make_explorer(_figure, CONTROLS, name="demo", mode="static", dpi=20)
    state = _state(w)
    with pytest.raises(ValueError, match="expected one static explorer 'other'"):
        decode_explorer(state, "other")
    with pytest.raises(ValueError, match="saved widget state"):
        decode_explorer([], "demo")
    decoded = decode_explorer(state, "demo")
    with pytest.raises(ValueError, match="one index per control"):
        decoded.leaf((0,))
    # a state whose links were dropped: the stacks are linked to no control
    models = {k: v for k, v in state["state"].items() if v["model_name"] != "LinkModel"}
    with pytest.raises(ValueError, match="linked to no control"):
        decode_explorer(models, "demo").leaf((0, 0, 0))


def test_palette_png_is_smaller():
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    x = np.linspace(0, 1, 500)
    for k in range(5):
        ax.plot(x, np.sin(6 * x + k), label=str(k))
    ax.legend()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    plt.close(fig)
    raw = buf.getvalue()
    assert len(explorer_module._quantize(raw)) < 0.7 * len(raw)


# ------------------------------------------------------------------ the book's figure style in explorers


def _line(x, overlap=False):
    fig, ax = plt.subplots(figsize=(8, 3))
    ax.plot([1, 2, 3], [x, 2 * x, 3 * x], label="measured")
    ax.set(xlabel=r"$\varepsilon$", ylabel="regret")
    if overlap:  # the title runs into the text placed over it
        ax.set_title("Privacy cost against the number of agents")
        ax.text(0.5, 1.02, "a label written over the title", transform=ax.transAxes, ha="center")
    ax.legend(loc="upper left")
    return fig


def _leaf_html(widget) -> list[str]:
    state = {"version_major": 2, "version_minor": 0, "state": dependency_state(widget, drop_defaults=False)}
    return [m["state"]["value"] for m in state["state"].values() if m["model_name"] == "HTMLModel"]


def test_explorer_frames_have_the_book_width_and_record_their_text_check():
    from fedbandit.book.plotting import CONTENT_WIDTH_PX

    w = make_explorer(_line, {"x": [1, 2]}, name="style", mode="static")
    for leaf in _leaf_html(w):
        assert f'width="{CONTENT_WIDTH_PX}"' in leaf and "max-width: 100%" in leaf
        assert 'data-fedbandit-figure="checked"' in leaf
        png = base64.b64decode(leaf.split("base64,", 1)[1].split('"', 1)[0])
        from PIL import Image

        assert Image.open(io.BytesIO(png)).size[0] == CONTENT_WIDTH_PX


def test_explorer_marks_or_raises_on_overlapping_text():
    from fedbandit.book.plotting import FigureTextError

    before = set(plt.get_fignums())
    w = make_explorer(lambda x: _line(x, overlap=True), {"x": [1]}, name="bad", mode="static")
    (leaf,) = _leaf_html(w)
    assert "data-fedbandit-figure-problems" in leaf and "overlaps" in leaf
    with pytest.raises(FigureTextError, match="overlaps"):
        make_explorer(lambda x: _line(x, overlap=True), {"x": [1]}, name="bad", mode="static", check="raise")
    assert set(plt.get_fignums()) == before, "a refused frame must not leave its figure open"
    with pytest.raises(ValueError, match="check"):
        make_explorer(_line, {"x": [1]}, name="bad", mode="static", check="warn")
