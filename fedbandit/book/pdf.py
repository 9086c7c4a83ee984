"""The whole book as one PDF: the single-page HTML build, printed by Chromium (``make pdf``).

``make pdf`` builds the book with Sphinx's ``singlehtml`` builder (every chapter on one page,
reusing ``make book``'s execution cache) and then runs ``python -m fedbandit.book.pdf
<index.html> <book.pdf>``: :func:`print_pdf` serves the page's folder on localhost, opens it
in headless Chromium through playwright (Debian's ``chromium``, or the ``CHROMIUM`` variable),
waits for MathJax to typeset every formula, and prints it with the document outline (one
bookmark per heading), so a reader navigates the PDF by chapter.  Requests outside the served
folder are blocked: build the page with ``FEDBANDIT_NPM_MODULES`` (as ``make pdf`` does) so
MathJax is served locally.

:func:`pdf_outline_titles` reads the bookmarks back; the browser check uses it to assert that
the PDF holds every chapter's title.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import sys
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

__all__ = ["print_pdf", "pdf_outline_titles"]

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _chromium() -> str:
    found = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise FileNotFoundError("Chromium is not installed (Debian package 'chromium', or set CHROMIUM)")
    return found


def _resolve_page(html_file: Path) -> tuple[Path, str]:
    """(folder to serve, page to open in it): ``index.html`` redirect stubs are followed.

    jupyter-book's ``index.html`` only redirects to the root document (``chapters/intro.html``),
    which the single-page build writes in a subfolder next to the shared ``_static``.
    """
    root = html_file.parent
    page = html_file.name
    for _ in range(3):
        match = re.search(r'http-equiv="Refresh"\s+content="\d+;\s*url=([^"]+)"',
                          (root / page).read_text(encoding="utf-8", errors="replace")[:2000], re.I)
        if not match:
            break
        page = (Path(page).parent / match.group(1)).as_posix()
        if not (root / page).is_file():
            raise FileNotFoundError(f"{html_file} redirects to a missing page {page}")
    return root, page


def print_pdf(html_file: str | Path, pdf_file: str | Path, *, timeout_s: float = 600.0) -> Path:
    """Print ``html_file`` (and everything it loads from its folder) to ``pdf_file`` with headless Chromium.

    Parameters
    ----------
    html_file : path
        The page to print (``_build/singlehtml/index.html``; a redirect stub is followed).
    pdf_file : path
        Where to write the PDF (its folder is created).
    timeout_s : float, default 600
        Longest wait, in seconds, for the page to load and MathJax to typeset.

    Returns
    -------
    pathlib.Path
        ``pdf_file``.

    Raises
    ------
    FileNotFoundError
        If ``html_file`` or Chromium is missing.
    """
    html_file, pdf_file = Path(html_file).resolve(), Path(pdf_file).resolve()
    if not html_file.is_file():
        raise FileNotFoundError(f"html_file {str(html_file)!r} does not exist (build the single-page book first)")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s < 1e5:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    chromium = _chromium()
    pdf_file.parent.mkdir(parents=True, exist_ok=True)
    # playwright's sync API refuses to run where an asyncio loop runs (Jupyter, a test that holds a
    # browser): print from a thread of its own
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(_print, *_resolve_page(html_file), pdf_file, chromium, timeout_s).result()
    return pdf_file


def _print(root: Path, page_path: str, pdf_file: Path, chromium: str, timeout_s: float) -> None:
    # Sphinx's singlehtml builder writes the root document in its subfolder (``chapters/intro.html``)
    # but every link in it relative to the output root (``_static/...``, ``_images/...``): printed
    # from where it lies, the page would load no style sheet, no image and no MathJax.  Print a copy
    # at the root instead (in-page anchors keep working, unlike with a ``<base>`` element).
    printed = page_path
    if "/" in page_path:
        printed = "_fedbandit_print.html"
        shutil.copyfile(root / page_path, root / printed)
    try:
        _print_served(root, printed, pdf_file, chromium, timeout_s)
    finally:
        if printed != page_path:
            (root / printed).unlink(missing_ok=True)


def _print_served(root: Path, page_path: str, pdf_file: Path, chromium: str, timeout_s: float) -> None:
    from playwright.sync_api import sync_playwright  # a test dependency: only make pdf needs it

    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1280, "height": 900})

            def local_only(route):
                url = route.request.url
                return route.continue_() if url.startswith(base) or url.startswith("data:") else route.abort()

            page.route("**/*", local_only)
            # every local file the page asks for must exist (the singlehtml builder writes no search
            # index, which the printed page does not need)
            missing: list[str] = []
            page.on("response", lambda r: missing.append(f"{r.status} {r.url[len(base):]}")
                    if r.url.startswith(base) and r.status >= 400 and "searchindex.js" not in r.url else None)
            page.goto(base + page_path, wait_until="load", timeout=timeout_s * 1000)
            if missing:
                raise FileNotFoundError(f"{page_path} loads {len(missing)} missing file(s) from {root}: "
                                        + ", ".join(sorted(set(missing))[:10]))
            page.wait_for_function(
                "() => !window.MathJax || !window.MathJax.startup || !!window.MathJax.startup.promise",
                timeout=timeout_s * 1000)
            page.evaluate("() => window.MathJax && window.MathJax.startup && window.MathJax.startup.promise"
                          " ? window.MathJax.startup.promise.then(() => window.MathJax.typesetPromise()) : null")
            page.emulate_media(media="print")
            headings = page.evaluate(_HEADINGS_JS)
            page.pdf(path=str(pdf_file), format="A4", print_background=True, outline=True, tagged=True,
                     margin={"top": "15mm", "bottom": "15mm", "left": "12mm", "right": "12mm"})
            browser.close()
    finally:
        server.shutdown()
    _retitle_outline(pdf_file, headings)


#: The text of every visible heading of the printed page (the toctree captions are headings by their ARIA
#: role), in document order: what a bookmark should say.
#: A formula counts by its assistive MathML text (MathJax's CHTML glyphs are CSS, not text); the "#"
#: permalink does not count.
_HEADINGS_JS = """() => [...document.querySelectorAll('h1, h2, h3, h4, h5, h6, [role=heading]')]
    .filter(h => h.checkVisibility())
    .map(h => {
        const copy = h.cloneNode(true);
        copy.querySelectorAll('a.headerlink').forEach(a => a.remove());
        copy.querySelectorAll('mjx-container').forEach(m => {
            const mml = m.querySelector('mjx-assistive-mml');
            m.replaceWith(document.createTextNode(mml ? mml.textContent : m.textContent));
        });
        return copy.textContent.replace(/\\s+/g, ' ').trim();
    })"""


def _retitle_outline(pdf_file: str | Path, headings: list[str]) -> int:
    """Give the bookmarks of ``pdf_file`` the text of ``headings`` (one per bookmark, in document order).

    Chromium builds a tagged PDF's outline from the headings but takes their text from the laid-out
    lines: a wrapped heading loses its spaces at the line breaks and repeats its last line
    ("... continual release ofprefix sumsprefix sums"), and a formula's text is lost.  The outline's
    order and targets are right, so the titles are replaced in document order, when the counts agree.

    Parameters
    ----------
    pdf_file : path
        The PDF (rewritten in place).
    headings : list of str
        The headings' text in document order.

    Returns
    -------
    int
        The number of bookmarks retitled.

    Raises
    ------
    ValueError
        If the PDF's outline does not have exactly one bookmark per heading.
    """
    from pypdf import PdfWriter
    from pypdf.generic import NameObject, TextStringObject

    writer = PdfWriter(clone_from=str(pdf_file))
    items = []

    def walk(node):
        while node is not None:
            node = node.get_object()
            items.append(node)
            walk(node.get("/First"))
            node = node.get("/Next")

    outlines = writer._root_object.get("/Outlines")
    if outlines is not None:
        walk(outlines.get_object().get("/First"))
    if len(items) != len(headings):
        raise ValueError(f"the PDF has {len(items)} bookmarks for {len(headings)} headings: cannot retitle them")
    for item, text in zip(items, headings):
        item[NameObject("/Title")] = TextStringObject(text)
    with open(pdf_file, "wb") as fh:
        writer.write(fh)
    return len(items)


# ------------------------------------------------------------------ reading the PDF's bookmarks

_TITLE = re.compile(rb"/Title\s*")


def _pdf_string(data: bytes, i: int) -> tuple[bytes, int] | None:
    """The PDF string object starting at ``data[i]`` (literal ``(...)`` or hex ``<...>``) and the index after it."""
    if data[i:i + 1] == b"<":
        end = data.index(b">", i)
        digits = re.sub(rb"\s", b"", data[i + 1:end])
        return bytes.fromhex((digits + b"0" * (len(digits) % 2)).decode("ascii")), end + 1
    if data[i:i + 1] != b"(":
        return None
    out, depth, k = bytearray(), 1, i + 1
    escapes = {ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t", ord("b"): b"\b", ord("f"): b"\f"}
    while k < len(data):
        c = data[k]
        if c == ord("\\"):
            nxt = data[k + 1]
            if nxt in escapes:
                out += escapes[nxt]
                k += 2
            elif ord("0") <= nxt <= ord("7"):
                m = re.match(rb"[0-7]{1,3}", data[k + 1:k + 4])
                out.append(int(m.group(0), 8) & 0xFF)
                k += 1 + len(m.group(0))
            elif nxt in (ord("\n"), ord("\r")):
                k += 2
            else:
                out.append(nxt)
                k += 2
            continue
        if c == ord("("):
            depth += 1
        elif c == ord(")"):
            depth -= 1
            if depth == 0:
                return bytes(out), k + 1
        out.append(c)
        k += 1
    return None


#: PDFDocEncoding where it differs from Latin-1 (PDF 1.7, Annex D.2): bytes 0x18-0x1F and 0x80-0xA0.
_PDFDOC = {0x18: "\u02d8", 0x19: "\u02c7", 0x1A: "\u02c6", 0x1B: "\u02d9", 0x1C: "\u02dd", 0x1D: "\u02db",
           0x1E: "\u02da", 0x1F: "\u02dc", 0x80: "\u2022", 0x81: "\u2020", 0x82: "\u2021", 0x83: "\u2026",
           0x84: "\u2014", 0x85: "\u2013", 0x86: "\u0192", 0x87: "\u2044", 0x88: "\u2039", 0x89: "\u203a",
           0x8A: "\u2212", 0x8B: "\u2030", 0x8C: "\u201e", 0x8D: "\u201c", 0x8E: "\u201d", 0x8F: "\u2018",
           0x90: "\u2019", 0x91: "\u201a", 0x92: "\u2122", 0x93: "\ufb01", 0x94: "\ufb02", 0x95: "\u0141",
           0x96: "\u0152", 0x97: "\u0160", 0x98: "\u0178", 0x99: "\u017d", 0x9A: "\u0131", 0x9B: "\u0142",
           0x9C: "\u0153", 0x9D: "\u0161", 0x9E: "\u017e", 0xA0: "\u20ac"}


def _decode(raw: bytes) -> str:
    """A PDF text string: UTF-16BE or UTF-8 after their byte-order marks, else PDFDocEncoding."""
    if raw.startswith(b"\xfe\xff"):
        return raw[2:].decode("utf-16-be", errors="replace")
    if raw.startswith(b"\xef\xbb\xbf"):
        return raw[3:].decode("utf-8", errors="replace")
    return "".join(_PDFDOC.get(b, chr(b)) for b in raw)


def pdf_outline_titles(pdf: bytes) -> list[str]:
    """Every ``/Title`` string of a PDF: its bookmarks (outline items) and its document title.

    Reads plain objects and the contents of Flate-compressed streams (object streams), which
    is enough for the PDFs Chromium writes; no PDF library is needed.

    Parameters
    ----------
    pdf : bytes
        The PDF file's bytes.

    Returns
    -------
    list of str
        The titles, in file order.
    """
    if not isinstance(pdf, (bytes, bytearray)):
        raise TypeError(f"pdf must be the PDF file's bytes, got {type(pdf).__name__}")
    chunks = [bytes(pdf)]
    for m in re.finditer(rb"stream\r?\n", pdf):
        end = pdf.find(b"endstream", m.end())
        if end < 0:
            continue
        try:
            chunks.append(zlib.decompress(pdf[m.end():end]))
        except zlib.error:
            continue
    titles = []
    for data in chunks:
        for m in _TITLE.finditer(data):
            parsed = _pdf_string(data, m.end())
            if parsed is not None:
                titles.append(" ".join(_decode(parsed[0]).split()))
    return titles


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - exercised through make pdf
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit("usage: python -m fedbandit.book.pdf <single-page index.html> <output.pdf>")
    out = print_pdf(args[0], args[1])
    titles = pdf_outline_titles(out.read_bytes())
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {len(titles)} bookmarks)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
