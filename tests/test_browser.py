"""Browser check of the built book: every page loads in headless Chromium, figures are not
broken, math renders, widgets render, no JavaScript error is logged, no request fails
(every resource must be served by the book itself), internal links resolve, and a screenshot of each page is saved.  Every chapter page has
Binder and Colab launch links and a download button for its own notebook (checked in the
HTML without following them, and by opening the menus in the browser).

Run by ``make test`` after the quick-scale book build (``pytest -m browser``).  The HTML
folder is ``FEDBANDIT_BOOK_HTML`` (default ``_build/quick/_build/html``).  That build is
pointed at MathJax and the ipywidgets manager installed from the npm registry at test time
(``FEDBANDIT_NPM_MODULES``, see ``fedbandit.book.sphinx_ext``), because this machine cannot
reach the CDNs the published book uses; every external request is blocked, so a page
that still needs the internet fails here.  Pages with saved widget state must show every
widget rendered (a slider or other control with its saved value, and its output).
Without Chromium the check is skipped with the reason printed, unless
``FEDBANDIT_REQUIRE_BROWSER=1`` (set by ``.ci/run``), in which case it fails.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
HTML = Path(os.environ.get("FEDBANDIT_BOOK_HTML", ROOT / "_build" / "quick" / "_build" / "html"))
REQUIRED = os.environ.get("FEDBANDIT_REQUIRE_BROWSER", "") == "1"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _pages() -> list[Path]:
    if not HTML.is_dir():
        return []
    skip = {"_static", "_sources", "_images"}
    return sorted(p for p in HTML.rglob("*.html") if not skip & set(p.relative_to(HTML).parts))


def _unavailable(reason: str):
    if REQUIRED:
        pytest.fail(f"browser check required (FEDBANDIT_REQUIRE_BROWSER=1) but {reason}")
    print(f"SKIPPED browser check: {reason}")
    pytest.skip(reason)


class _LinkParser(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])


@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> _LinkParser:
    parser = _LinkParser()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser


def _broken_internal_links(page: Path) -> list[str]:
    broken = []
    for href in _parse(page).hrefs:
        parts = urlsplit(href)
        if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
            continue
        target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
        if target.is_dir():
            target = target / "index.html"
        if not target.exists():
            broken.append(f"{href} (no file {target.relative_to(HTML.resolve()) if HTML.resolve() in target.parents else target})")
            continue
        fragment = unquote(parts.fragment)
        if fragment and target.suffix == ".html" and fragment not in _parse(target).ids:
            broken.append(f"{href} (no anchor #{fragment})")
    return broken


@pytest.fixture(scope="module")
def browser_env():
    if not _pages():
        _unavailable(f"no built book at {HTML} (run the quick-scale book build first)")
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        _unavailable("Chromium is not installed (Debian package 'chromium')")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the Python package 'playwright' is not installed")
    if not (HTML / "_static" / "mathjax" / "tex-mml-chtml.js").exists():
        _unavailable(f"the build at {HTML} does not serve MathJax itself (build it with FEDBANDIT_NPM_MODULES set)")

    handler = functools.partial(_QuietHandler, directory=str(HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    shots = HTML.parent / "screenshots"
    shots.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        yield {"browser": browser, "base": base, "shots": shots}
        browser.close()
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _route(base: str):
    def handle(route):
        url = route.request.url
        if url.startswith(base) or url.startswith("data:"):
            route.continue_()
            return
        route.abort()  # the build machine has no internet; never wait on it

    return handle


@pytest.mark.parametrize("page", _pages() or [None], ids=lambda p: str(p.relative_to(HTML)) if p else "no-book")
def test_page(browser_env, page):
    rel = page.relative_to(HTML).as_posix()
    if 'http-equiv="Refresh"' in page.read_text(encoding="utf-8", errors="replace")[:2000]:
        # a redirect stub (index.html -> the root chapter): its target must exist
        target = page.read_text(encoding="utf-8").split("url=", 1)[1].split('"', 1)[0]
        assert (page.parent / target).exists(), f"{rel} redirects to a missing page {target}"
        return
    context = browser_env["browser"].new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    js_errors: list[str] = []
    tab.on("pageerror", lambda exc: js_errors.append(str(exc)))
    tab.on("console", lambda msg: js_errors.append(f"console.{msg.type}: {msg.text}") if msg.type == "error" else None)
    tab.on("requestfailed", lambda req: js_errors.append(f"request failed: {req.url}"))
    tab.route("**/*", _route(browser_env["base"]))
    response = tab.goto(browser_env["base"] + rel, wait_until="load")
    assert response is not None and response.ok, f"{rel} did not load: {response and response.status}"

    n_math = tab.evaluate("document.querySelectorAll('.math').length")
    if n_math:
        tab.wait_for_function(
            "[...document.querySelectorAll('.math')].every(e => e.querySelector('mjx-container'))",
            timeout=30_000,
        )
    n_views = tab.evaluate("document.querySelectorAll('script[type=\"application/vnd.jupyter.widget-view+json\"]').length")
    if n_views:
        # every saved widget view is replaced by a rendered widget tree
        tab.wait_for_function(
            "document.querySelectorAll('.widget-subarea').length >= document.querySelectorAll("
            "'script[type=\"application/vnd.jupyter.widget-view+json\"]').length",
            timeout=30_000,
        )
        controls = tab.evaluate(
            """() => [...document.querySelectorAll('.widget-subarea')].map(area => ({
                controls: area.querySelectorAll('.widget-slider, .widget-dropdown, .widget-toggle-buttons, '
                    + '.widget-radio, .widget-checkbox, .widget-text, .widget-int-text, .widget-float-text, '
                    + '.widget-button, .widget-select').length,
                readouts: [...area.querySelectorAll('.widget-readout, select, input')].map(e => e.value ?? e.textContent),
                outputs: area.querySelectorAll('.widget-output img, .widget-output pre, .widget-output table, .widget-html-content').length,
            }))"""
        )
        for i, widget in enumerate(controls):
            assert widget["controls"] > 0, f"{rel}: widget view {i} rendered no control: {widget}"
            assert widget["outputs"] > 0, f"{rel}: widget view {i} shows no saved output: {widget}"
    broken_images = tab.evaluate(
        """async () => {
            const imgs = [...document.images];
            await Promise.all(imgs.map(i => i.complete ? null :
                new Promise(r => { i.addEventListener('load', r); i.addEventListener('error', r); })));
            return imgs.filter(i => i.naturalWidth === 0).map(i => i.getAttribute('src'));
        }"""
    )
    tab.screenshot(path=str(browser_env["shots"] / (rel.replace("/", "__") + ".png")), full_page=True)
    context.close()

    assert not broken_images, f"{rel}: broken images {broken_images}"
    assert not js_errors, f"{rel}: JavaScript errors or failed requests {js_errors}"
    assert not _broken_internal_links(page), f"{rel}: broken internal links {_broken_internal_links(page)}"


def test_search_finds_a_chapter_term(browser_env):
    """The search page finds a term that occurs in the introduction chapter."""
    term = "popcount"
    intro = HTML / "chapters" / "intro.html"
    assert term in intro.read_text(encoding="utf-8"), f"{term!r} no longer occurs in the introduction"
    context = browser_env["browser"].new_context()
    tab = context.new_page()
    tab.route("**/*", _route(browser_env["base"]))
    tab.goto(browser_env["base"] + f"search.html?q={term}", wait_until="load")
    tab.wait_for_function(
        "document.querySelectorAll('#search-results li a, ul.search li a').length > 0", timeout=30_000
    )
    hrefs = tab.evaluate("[...document.querySelectorAll('#search-results li a, ul.search li a')].map(a => a.getAttribute('href'))")
    tab.screenshot(path=str(browser_env["shots"] / "search-results.png"), full_page=True)
    context.close()
    assert any("chapters/intro" in h for h in hrefs), hrefs


# ------------------------------------------------------------ launch and download buttons


def _book_config() -> dict:
    import yaml

    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def _notebook_docnames() -> list[str]:
    """The chapters built from notebooks (those get launch and download buttons), from _toc.yml."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                yield node["file"]
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key, []) or []:
                    yield from walk(child)

    entries = [toc["root"], *walk(toc)]
    return [e for e in entries if (ROOT / f"{e}.ipynb").exists()]


class _AnchorParser(HTMLParser):
    def __init__(self):
        super().__init__()
        self.anchors: list[dict] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.anchors.append(dict(attrs))


def _expected_launch(docname: str) -> dict:
    config = _book_config()
    repo, launch = config["repository"], config["launch_buttons"]
    org, name = urlsplit(repo["url"]).path.strip("/").split("/")[:2]
    branch = repo.get("branch", "main")
    prefix = (repo.get("path_to_book") or "").strip("/")
    path = f"{prefix}/{docname}.ipynb" if prefix else f"{docname}.ipynb"
    return {
        "binder_host": urlsplit(launch["binderhub_url"]).netloc,
        "binder_path": f"/v2/gh/{org}/{name}/{branch}",
        "notebook": path,
        "colab": f"{launch['colab_url'].rstrip('/')}/github/{org}/{name}/blob/{branch}/{path}",
    }


def _launch_problems(docname: str) -> list[str]:
    from urllib.parse import parse_qs

    page = HTML / f"{docname}.html"
    if not page.exists():
        return [f"{docname}: no built page {page}"]
    want = _expected_launch(docname)
    parser = _AnchorParser()
    parser.feed(page.read_text(encoding="utf-8", errors="replace"))
    hrefs = [a.get("href", "") for a in parser.anchors]
    problems = []
    binder = [h for h in hrefs if urlsplit(h).netloc == want["binder_host"]]
    ok = [
        h for h in binder
        if urlsplit(h).path == want["binder_path"]
        and any(v.endswith("tree/" + want["notebook"]) for v in parse_qs(urlsplit(h).query).get("urlpath", []))
    ]
    if not ok:
        problems.append(f"{docname}: no Binder link to {want['binder_path']} ...tree/{want['notebook']} (found {binder})")
    if want["colab"] not in hrefs:
        colab = [h for h in hrefs if "colab" in h]
        problems.append(f"{docname}: no Colab link {want['colab']} (found {colab})")
    downloads = [a["href"] for a in parser.anchors if "btn-download-source-button" in a.get("class", "")]
    source = (HTML / "_sources" / f"{docname}.ipynb").resolve()
    if not any((page.parent / unquote(h)).resolve() == source for h in downloads):
        problems.append(f"{docname}: no download button for _sources/{docname}.ipynb (found {downloads})")
    elif not source.exists():
        problems.append(f"{docname}: the download button's file {source} is missing")
    else:
        import nbformat

        served = [c.source for c in nbformat.read(source, as_version=4).cells if c.cell_type == "code"]
        stored = [c.source for c in nbformat.read(ROOT / f"{docname}.ipynb", as_version=4).cells if c.cell_type == "code"]
        if served != stored:
            problems.append(f"{docname}: the downloadable notebook differs from {docname}.ipynb")
        elif not served or "importlib.util.find_spec(\"fedbandit\")" not in served[0]:
            problems.append(f"{docname}: the downloadable notebook does not start with the install cell")
    return problems


@pytest.mark.parametrize("docname", _notebook_docnames())
def test_launch_and_download_links(docname):
    """Every chapter page links Binder and Colab to its own notebook on the repository's
    branch, and its download button serves the chapter's notebook (read from the built
    HTML; external links are never followed)."""
    if not _pages():
        _unavailable(f"no built book at {HTML} (run the quick-scale book build first)")
    problems = _launch_problems(docname)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("docname", _notebook_docnames())
def test_launch_and_download_menus_open(browser_env, docname):
    """In the browser, the rocket and download menus open and show their links."""
    want = _expected_launch(docname)
    context = browser_env["browser"].new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.route("**/*", _route(browser_env["base"]))
    tab.goto(browser_env["base"] + f"{docname}.html", wait_until="load")
    tab.click(".dropdown-launch-buttons > button")
    binder = tab.locator(f'.dropdown-launch-buttons a[href^="https://{want["binder_host"]}{want["binder_path"]}"]')
    colab = tab.locator(f'.dropdown-launch-buttons a[href="{want["colab"]}"]')
    binder.first.wait_for(state="visible", timeout=5_000)
    colab.first.wait_for(state="visible", timeout=5_000)
    tab.keyboard.press("Escape")
    tab.click(".dropdown-download-buttons > button")
    download = tab.locator(".dropdown-download-buttons a.btn-download-source-button")
    download.first.wait_for(state="visible", timeout=5_000)
    href = download.first.get_attribute("href")
    context.close()
    assert href and href.endswith(f"_sources/{docname}.ipynb"), href


def test_result_tables_render():
    """Markdown tables that chapters display from code render as tables, not as raw pipes
    (``nb_render_markdown_format: myst`` in ``_config.yml``)."""
    import re

    if not _pages():
        _unavailable(f"no built book at {HTML} (run the quick-scale book build first)")
    raw = re.compile(r"<p>\|[^<]*\|\s*(?:---|—|–)")
    bad = [p.relative_to(HTML).as_posix() for p in _pages() if raw.search(p.read_text(encoding="utf-8", errors="replace"))]
    assert not bad, f"pages showing a Markdown table as raw text: {bad}"
