"""What the built pages must not show, checked on the sources (fast; the browser check sees the pages).

* Inline math that continues onto a line starting with a Markdown block marker ("+ ", "- ",
  "* ", "> ", "#", "1. "): Markdown turns that line into a list item or a quote and the math
  is shown as raw TeX (the introduction's reward formula did: "• \\eta_{t,i}$.").
* References to documents readers do not have (the developers' notes): chapters cite the
  papers, the package's docstrings name them.
* Explorers that need a kernel: chapters build their explorers with
  :func:`fedbandit.book.make_explorer`, never with ``ipywidgets.interactive`` directly.
* Progress bars: ``run_grid`` honours ``TQDM_DISABLE`` even when ``tqdm.auto`` is the
  notebook bar (which overrides the variable by passing ``disable=False``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
PAGES = sorted((ROOT / "chapters").glob("*.md"))

# a Markdown block marker at the start of a line: it interrupts the paragraph
BLOCK_START = re.compile(r"^\s{0,3}([+\-*]\s|>|#{1,6}\s|\d{1,9}[.)]\s)")
INTERNAL_DOCS = re.compile(r"paper[-_ ]facts|DESIGN\.md|\.dev/|briefs/", re.I)


def _markdown_cells(path: Path) -> list[tuple[int, str]]:
    if path.suffix == ".md":
        return [(0, path.read_text(encoding="utf-8"))]
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [(i, "".join(c["source"])) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"]


def broken_inline_math(markdown: str) -> list[str]:
    """Inline ``$...$`` spans that continue onto a line Markdown reads as a new block."""
    text = re.sub(r"^(```|:::).*?^(```|:::)[^\n]*$", lambda m: m.group(0) if "{admonition}" in m.group(0) else "",
                  markdown, flags=re.S | re.M)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    bad = []
    for m in re.finditer(r"(?<![\\$])\$[^$]+\$", text):
        lines = m.group(0).split("\n")
        bad += [m.group(0)[:80] for line in lines[1:] if BLOCK_START.match(line)]
    return bad


def test_the_old_introduction_paragraph_is_caught():
    old = ("vector $x_{t,i}\\in\\mathbb{R}^d$ and observes a reward $y_{t,i} = \\langle \\theta^*, x_{t,i}\\rangle\n"
           "+ \\eta_{t,i}$. The agents want a small **group regret**")
    assert broken_inline_math(old)
    fixed = old.replace("\\rangle\n+", "\\rangle +")
    assert not broken_inline_math(fixed)


@pytest.mark.parametrize("path", CHAPTERS + PAGES, ids=lambda p: p.name)
def test_no_inline_math_broken_by_a_block_marker(path):
    bad = [(i, s) for i, md in _markdown_cells(path) for s in broken_inline_math(md)]
    assert not bad, f"{path.name}: inline math continued on a line Markdown reads as a list or quote: {bad}"


def _sources() -> list[Path]:
    return sorted((ROOT / "fedbandit").rglob("*.py")) + CHAPTERS + PAGES + [ROOT / "README.md"]


def test_no_reference_to_internal_documents():
    hits = []
    for path in _sources():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if INTERNAL_DOCS.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert not hits, "references to documents readers do not have (cite the paper instead):\n" + "\n".join(hits)


def test_the_internal_document_check_can_fail():
    assert INTERNAL_DOCS.search("DP20's algorithm box is not in the book's sources; paper-facts section 1 gives")
    assert INTERNAL_DOCS.search("following ``paper-facts`` section 1")
    assert not INTERNAL_DOCS.search("Zhou & Chowdhury {cite}`zhou2023federated` (Section 4)")


def kernel_widgets(source: str) -> list[str]:
    """Calls that make a widget needing a kernel to respond (``interactive``, ``interact``)."""
    return re.findall(r"\b(?:widgets\.|ipywidgets\.)?(?:interactive|interact(?:_manual)?)\s*\(", source)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_explorers_are_static(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    calls = [(i, kernel_widgets("".join(c["source"]))) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"]
    bad = [(i, c) for i, c in calls if c]
    assert not bad, f"{path.name}: explorers that need a kernel (use fedbandit.book.make_explorer): {bad}"


def test_the_static_explorer_check_can_fail():
    old = 'widgets.interactive(\n    show_schedule,\n    D=widgets.FloatLogSlider(value=1))'
    assert kernel_widgets(old)
    assert not kernel_widgets('make_explorer(show_schedule, {"D": Control([1, 2])}, name="x")')


class _RecordingBar:
    """Stands in for tqdm.auto.tqdm (the notebook bar), recording how it was asked to behave."""

    calls: list[dict] = []

    def __init__(self, **kwargs):
        type(self).calls.append(kwargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        pass


def _square(config, rng):
    return config["x"] ** 2


@pytest.mark.parametrize("env, disabled", [("1", True), ("", False)])
def test_run_grid_honours_tqdm_disable(monkeypatch, tmp_path, env, disabled):
    import tqdm.auto

    from fedbandit.experiments import run_grid

    monkeypatch.setattr(tqdm.auto, "tqdm", _RecordingBar)
    _RecordingBar.calls = []
    monkeypatch.setenv("TQDM_DISABLE", env)
    out = run_grid(_square, [{"x": 2}, {"x": 3}], seeds=1, cache_dir=tmp_path, backend="serial")
    assert [r[0] for r in out] == [4, 9]
    assert len(_RecordingBar.calls) == 1
    assert bool(_RecordingBar.calls[0].get("disable", False)) is disabled


def test_the_notebook_bar_ignores_tqdm_disable(monkeypatch):
    """Why run_grid reads TQDM_DISABLE itself: tqdm's notebook bar passes disable=False."""
    pytest.importorskip("ipywidgets")
    from tqdm.notebook import tqdm as notebook_tqdm

    monkeypatch.setenv("TQDM_DISABLE", "1")
    bar = notebook_tqdm(total=1, display=False)
    try:
        if bar.disable:
            pytest.skip("this tqdm honours TQDM_DISABLE in notebooks: the workaround is no longer needed")
        assert not bar.disable
    finally:
        bar.close()
