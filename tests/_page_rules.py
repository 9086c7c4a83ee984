"""What a reader must not see on a built page: the rules of the page check (issue 26).

Used by ``tests/test_browser.py`` on every page of the built book and by
``tests/test_pages.py``, which shows that every rule catches what readers saw and passes what
they should see.  Each rule reads the page's *visible* text: the article's prose, tables,
captions and the outputs of its code cells, but not the code itself and not the TeX that
MathJax typesets.

Rules (``RULES``):

* ``stray-repr``: numpy reprs in the page (``np.float64(0.5)``, ``array([...])``), typically a
  printed dict of results;
* ``timing``: wall-clock lines ("53 configurations in 184.8 s wall", "took 12 s", "(paper
  scale, 40 s)"): they describe the build machine, not the result;
* ``running-at-scale``: the "running at scale: ..." line every chapter prints for the
  execution-status page (hide its output with the cell tag ``remove-output``);
* ``ascii-math``: math spelled in ASCII outside MathJax ("M^(3/4)", "sqrt(T/ε)", "Õ(...)");
* ``internal-wording``: the project's own history ("an earlier version of this package",
  "has to fit in", "commit cb66a23", "``make bench`` ... when its results file exists");
* ``typed-citation``: hand-typed citation labels ("[BS16]", "FMT22") instead of ``{cite}``;
* ``figure-unchecked``: a figure (a notebook output image, or an explorer's frame) that was not
  made by :func:`fedbandit.book.finish` (no provenance chunk) or whose text check failed.
"""

from __future__ import annotations

import base64
import html as html_lib
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

RULES = ("stray-repr", "timing", "running-at-scale", "ascii-math", "internal-wording", "typed-citation",
         "figure-unchecked")

PATTERNS = {
    "stray-repr": re.compile(r"\bnp\.(?:float|int|uint|bool|str|complex)\w*\(|\bnp\.(?:True|False)_|\barray\(\["),
    "timing": re.compile(
        r"\b\d[\d.,]*\s*s(?:econds)? wall\b|\bwall[- ]clock\b|\btook\s+\d[\d.,]*\s*(?:s|sec|seconds|min|minutes)\b"
        r"|\b(?:quick|paper) scale,\s*\d[\d.,]*\s*s\)|\bconfigurations? in \d[\d.,]*\s*s\b|\belapsed\b[^.\n]{0,40}\d\s*s\b",
        re.I),
    "running-at-scale": re.compile(r"running at scale", re.I),
    "ascii-math": re.compile(r"\^\(|\bsqrt\(|(?<![\w.])[OÕΘΩ]\(|\blog\^|\beps(?:ilon)?\s*=\s*\d"),
    "internal-wording": re.compile(
        r"an earlier version of this package|version of this package accepted|has to fit in|\bcommit\s+[0-9a-f]{7,40}\b"
        r"|make bench\b[^.]{0,200}\bresults file exists", re.I),
    "typed-citation": re.compile(r"\[(?:[A-Z][A-Za-z]*\d{2}[a-z]?)(?:\s*[,;]\s*[A-Z][A-Za-z]*\d{2}[a-z]?)*\]"
                                 r"|\b(?!DP20\b)[A-Z]{2,6}\d{2}[a-z]?\b"),
}

#: Not citation labels: the book's own name for Dubey & Pentland (2020), defined where it is first
#: used, and numpy's bit generators.
DEFINED_ABBREVIATIONS = frozenset({"DP20", "PCG64", "SFC64"})

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
_BLOCKS = {"p", "li", "td", "th", "dt", "dd", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "figcaption", "caption",
           "div", "tr", "table", "blockquote", "section", "article"}


class _VisibleText(HTMLParser):
    """Visible text of a page's article, one line per block; code inputs, math and scripts skipped."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool, bool]] = []  # (tag, skipped, in a table)
        self.lines: list[tuple[str, str]] = []  # (where, text)
        self.current: list[str] = []
        self.in_article = False
        self.article_depth = None
        self.images: list[dict] = []

    def _flush(self):
        text = " ".join("".join(self.current).split())
        if text:
            where = "table" if self.stack and self.stack[-1][2] else "text"
            self.lines.append((where, text))
        self.current = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = set((attrs.get("class") or "").split())
        if tag == "article" and "bd-article" in classes:
            self.in_article = True
            self.article_depth = len(self.stack)
        if tag == "img" and self.in_article:
            self.images.append(attrs)
        if tag in _VOID:
            return
        parent_skip = self.stack[-1][1] if self.stack else False
        skip = parent_skip or tag in {"script", "style", "noscript", "textarea"} or bool(
            classes & {"cell_input", "math", "headerlink", "toggle-details__summary"})
        in_table = (self.stack[-1][2] if self.stack else False) or tag == "table"
        if tag in _BLOCKS:
            self._flush()
        self.stack.append((tag, skip, in_table))

    def handle_endtag(self, tag):
        if tag in _VOID:
            return
        # close up to the matching tag (tolerates unclosed elements)
        for k in range(len(self.stack) - 1, -1, -1):
            if self.stack[k][0] == tag:
                if tag in _BLOCKS:
                    self._flush()
                del self.stack[k:]
                if self.article_depth is not None and len(self.stack) <= self.article_depth:
                    self.in_article = False
                    self.article_depth = None
                return

    def handle_data(self, data):
        if self.in_article and not (self.stack and self.stack[-1][1]):
            self.current.append(data)


def visible_lines(page_html: str) -> list[tuple[str, str]]:
    """``(where, text)`` for every block of the page's article: ``where`` is "table" or "text"."""
    parser = _VisibleText()
    parser.feed(page_html)
    parser._flush()
    return parser.lines


def text_violations(lines: list[tuple[str, str]]) -> dict[str, list[str]]:
    """The text rules' findings (rule -> short quotes) in ``lines`` (see :func:`visible_lines`)."""
    found: dict[str, list[str]] = {}
    for where, text in lines:
        for rule, pattern in PATTERNS.items():
            for m in pattern.finditer(text):
                if rule == "typed-citation" and m.group(0) in DEFINED_ABBREVIATIONS:
                    continue
                start = max(0, m.start() - 40)
                quote = ("…" if start else "") + text[start:m.end() + 40].strip() + ("…" if m.end() + 40 < len(text) else "")
                found.setdefault(rule, []).append(f"{where}: {quote}")
    return found


# ------------------------------------------------------------------ figures


def png_text_chunks(png: bytes) -> dict[str, str]:
    """The ``tEXt``/``iTXt`` chunks of a PNG (what :func:`fedbandit.book.plotting.figure_png` writes)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        return dict(getattr(img, "text", {}) or {})


_EXPLORER_IMG = re.compile(r'<img class="fedbandit-explorer-image"[^>]*>')


def figure_violations(page: Path, page_html: str, html_root: Path) -> list[str]:
    """Figures of ``page`` not made through the book's figure style, or made but failing its check.

    Notebook output images (``_images/*.png``) must carry the provenance chunk
    :data:`fedbandit.book.plotting.PROVENANCE_KEY`; every explorer frame saved in the page's
    widget state must say ``data-fedbandit-figure="checked"``.
    """
    from fedbandit.book.plotting import PROVENANCE_KEY

    parser = _VisibleText()
    parser.feed(page_html)
    problems = []
    for attrs in parser.images:
        src = attrs.get("src") or ""
        if "_images/" not in src or not src.endswith(".png"):
            continue
        path = (page.parent / src).resolve()
        if not path.is_file():
            problems.append(f"{src}: missing file")
        elif PROVENANCE_KEY not in png_text_chunks(path.read_bytes()):
            problems.append(f"{src}: not finished by fedbandit.book.finish (no text check, no book width)")
    match = re.search(r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>', page_html, re.S)
    if match:
        state = json.loads(match.group(1)).get("state", {})
        unchecked = failed = 0
        for model in state.values():
            value = model.get("state", {}).get("value")
            if not isinstance(value, str):
                continue
            for tag in _EXPLORER_IMG.findall(value):
                if 'data-fedbandit-figure="checked"' in tag:
                    continue
                if "data-fedbandit-figure-problems" in tag:
                    failed += 1
                else:
                    unchecked += 1
        if failed:
            problems.append(f"{failed} explorer frame(s) fail the figure text check")
        if unchecked:
            problems.append(f"{unchecked} explorer frame(s) not checked by the book's figure style")
    return problems


def explorer_frame_problems(page_html: str) -> list[str]:
    """The text-check problems recorded in the page's explorer frames (for the inventory)."""
    out = []
    for m in re.finditer(r'data-fedbandit-figure-problems="([^"]*)"', page_html.replace('\\"', '"')):
        out.append(html_lib.unescape(m.group(1)))
    return out


def decode_data_png(src: str) -> bytes:
    return base64.b64decode(src.split("base64,", 1)[1])
